"""Keeps TensorFlow's start-up noise off a tool's console, unless --verbosity asks for it.

TF_CPP_MIN_LOG_LEVEL=2 hides TensorFlow's C++ INFO and WARNING lines only once absl's C++
logging is initialised; the lines its libraries print while they load come before that and
ignore the variable (TF 2.21 on a CPU-only machine, measured: 7 lines per process, twice
"WARNING: All log messages before absl::InitializeLog() is called are written to STDERR",
the oneDNN notice and "Could not find cuda drivers", then "failed call to cuInit" at the
first look for devices). No variable turns them off: level 3 hides the cuInit line but no
line printed while loading, and CUDA_VISIBLE_DEVICES or TF_ENABLE_ONEDNN_OPTS change nothing
but the oneDNN notice.

So `install` makes the first `import tensorflow` run with file descriptor 2 (what C++ writes
to) captured, together with TensorFlow's first look for devices; afterwards every captured
line that is not noise is written to stderr. Noise is a C++ INFO or WARNING line (what
level 2 hides later anyway), absl's banner, and "failed call to cuInit" when TensorFlow found
no CUDA driver at all (a machine without a GPU; with a driver, the error is real and shown),
in glog's format (TF 2.21) or TensorFlow's own (TF 2.20, which prints only this line at level
2). An import that fails shows everything it printed.

Example (bert_tf/cli/__init__.py, before any tool imports TensorFlow):
    quiet_tensorflow.install(verbosity_in(sys.argv))
"""

import importlib.abc
import importlib.util
import os
import re
import sys

from bert_tf.captured_stderr import CapturedStderr

_NOISE = re.compile(
    r"WARNING: All log messages before absl::InitializeLog\(\) is called are written to STDERR"
    r"|[IW]\d{4} [\d:.]+ +\d+ [\w.]+:\d+\] ")  # glog format: I0000 00:00:17.0 941 port.cc:153]
# TensorFlow's CUDA stub answers error 303 (CUDA_ERROR_SHARED_OBJECT_INIT_FAILED) when it cannot
# load the driver library; TF 2.20 prints "2026-11-29 05:02:51.721743: E external/.../".
_CUINIT_WITHOUT_DRIVER = re.compile(r"(?:E\d{4} [\d:.]+ +\d+ |[\d-]+ [\d:.]+: E \S*/)"
                                    r"cuda_platform\.cc:\d+\] failed call to cuInit: .*\(303\)$")


def verbosity_in(argv):
    """The value of absl's --verbosity (or -v) on a command line not parsed yet; 0 if absent.

    Example:
        >>> verbosity_in(["run_classifier", "--verbosity=1"]), verbosity_in(["x", "-v", "2"])
        (1, 2)
    """
    verbosity = 0
    for index, argument in enumerate(argv[1:], 1):
        name, equals, value = argument.partition("=")
        # absl takes -v, --v, -verbosity and --verbosity.
        if not name.startswith("-") or name.lstrip("-") not in ("v", "verbosity"):
            continue
        if not equals:
            value = argv[index + 1] if index + 1 < len(argv) else ""
        try:
            verbosity = int(value)
        except ValueError:
            pass  # absl reports the bad value when it parses the flags
    return verbosity


def shown_lines(captured):
    """The lines of `captured` (what TensorFlow's import printed) that are not noise."""
    return [line for line in captured.splitlines(keepends=True)
            if not _NOISE.match(line) and not _CUINIT_WITHOUT_DRIVER.match(line)]


class _QuietLoader(importlib.abc.Loader):
    """TensorFlow's own loader, run with stderr captured; shows what is not noise."""

    def __init__(self, loader):
        self.loader = loader

    def create_module(self, spec):
        return self.loader.create_module(spec)

    def exec_module(self, module):
        sys.meta_path[:] = [finder for finder in sys.meta_path
                            if not isinstance(finder, _QuietFinder)]
        # The module keeps TensorFlow's own loader, as if it had been imported without this one.
        module.__loader__ = module.__spec__.loader = self.loader
        captured = CapturedStderr()
        try:
            with captured:
                self.loader.exec_module(module)
                # The CUDA probe ("failed call to cuInit") runs at the first look for devices.
                module.config.list_physical_devices()
        except BaseException:
            sys.stderr.write(captured.text)  # all of it: the cause may be among the lines
            raise
        sys.stderr.write("".join(shown_lines(captured.text)))
        sys.stderr.flush()


class _QuietFinder(importlib.abc.MetaPathFinder):
    """Gives `import tensorflow` the `_QuietLoader`, which removes this finder: a look-up that
    imports nothing (`importlib.util.find_spec("tensorflow")`, as etils' epath under TFDS asks
    whether TensorFlow is installed) leaves it in place for the import that follows."""

    _looking = False  # while finding TensorFlow's own spec, through the other finders

    def find_spec(self, name, path, target=None):
        if name != "tensorflow" or self._looking:
            return None
        self._looking = True
        try:
            spec = importlib.util.find_spec(name)
        finally:
            self._looking = False
        if spec is not None and spec.loader is not None:
            spec.loader = _QuietLoader(spec.loader)
        return spec


def install(verbosity):
    """Quiets TensorFlow's C++ logging from now on, unless `verbosity` >= 1 or the user's
    TF_CPP_MIN_LOG_LEVEL is below 2 (then TensorFlow prints everything it would). Does nothing
    to a TensorFlow already imported."""
    if verbosity >= 1:
        return
    if not os.environ.get("TF_CPP_MIN_LOG_LEVEL"):  # unset or empty (TensorFlow: 0)
        os.environ["TF_CPP_MIN_LOG_LEVEL"] = "2"
    if os.environ["TF_CPP_MIN_LOG_LEVEL"] in ("0", "1"):
        return
    if "tensorflow" not in sys.modules and not any(
            isinstance(finder, _QuietFinder) for finder in sys.meta_path):
        sys.meta_path.insert(0, _QuietFinder())
