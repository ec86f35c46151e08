"""The entry point of every command-line tool: absl flags, help that lists the tool's flags,
and errors in one line.

`run_tool(main, define_flags)` defines the tool's flags, makes every flag of the `bert_tf.cli`
modules a key flag of the program (absl's `--help` / `--helpshort` list only the key flags of
`sys.argv[0]`, which the flags of a library module never are), shows the tool module's
docstring as its usage, and runs `main()` under `absl.app.run` (no tool takes positional
arguments). An exception from `main` ends the program with one line on stderr and exit
status 1:

    run_classifier: error: glue/SST-2/dev.tsv:4: expected 2 columns, got 3

with the traceback before it when --verbosity is 1 or more; a usage error (`app.UsageError`)
the same line, instead of absl's docstring and flag list. A command line absl cannot parse
(an unknown flag, a bad value, a failed validator, a positional argument) gives the same line
with a pointer to --helpshort, instead of absl's two lines ("FATAL Flags parsing error: ..."):

    run_classifier: error: Unknown command line flag 'bogus' (--helpshort lists the flags)

Example (the end of bert_tf/cli/serve.py):
    def run():
        run_tool(main, define_flags)
"""

import logging
import os
import signal
import sys
import traceback
import warnings

from absl import app, flags
from absl import logging as absl_logging

from bert_tf.op_errors import bare_message

FLAGS = flags.FLAGS

# Errors about the user's input, files or environment: their message says it all. Anything
# else (KeyError, TypeError, ...) is a bug and keeps its type name.
_USER_ERRORS = (ValueError, OSError, RuntimeError)
# TensorFlow's errors that its file systems and record and checkpoint readers raise about the
# user's files: missing, existing, forbidden, corrupted ("x; No such file or directory").
_TF_FILE_ERRORS = ("NotFoundError", "AlreadyExistsError", "PermissionDeniedError", "DataLossError")
# These two are about the user's paths when TensorFlow's file API raises them ("x; Is a
# directory", "x is not a directory"), but in graph execution they mostly report a program's
# mistake (a shape that does not fit, an uninitialised table or variable): a bug, whose type and
# traceback must stay.
_TF_FILE_API_ERRORS = ("FailedPreconditionError", "InvalidArgumentError")
_TF_FILE_API = os.path.join("tensorflow", "python", "lib", "io", "")  # tf.io.gfile, TFRecordWriter


def error_line(tool, error, traceback_hint=True):
    """`<tool>: error: <message>` of `error`, on one line; for an error that is not about the
    user's input (a bug), with its type and, if `traceback_hint`, how to see where it arose.

    Example:
        >>> error_line("run_ner", KeyError("B-XYZ"))
        "run_ner: error: KeyError: 'B-XYZ' (--verbosity=1 prints the traceback)"
    """
    # tf.errors.OpError keeps the bare message apart from the op's context.
    message = getattr(error, "message", None)
    message = message if isinstance(message, str) else str(error)
    user_error = _is_user_error(error)
    if user_error and hasattr(error, "op"):  # a tf.errors.OpError
        message = bare_message(error)
    message = " ".join(message.split())
    if user_error and message:
        return f"{tool}: error: {message}"
    detail = f"{type(error).__name__}: {message}" if message else type(error).__name__
    hint = " (--verbosity=1 prints the traceback)" if traceback_hint else ""
    return f"{tool}: error: {detail}{hint}"


def usage_error_line(tool, message):
    """`<tool>: error: <message>` of a command line that does not parse, on one line,
    pointing to the tool's flags.

    Example:
        >>> usage_error_line("serve", "flag --port=-5: not in [0, 65535]")
        'serve: error: flag --port=-5: not in [0, 65535] (--helpshort lists the flags)'
    """
    message = "; ".join(line.strip() for line in str(message).splitlines() if line.strip())
    return f"{tool}: error: {message} (--helpshort lists the flags)"


def _is_user_error(error):
    """Whether `error` is about the user's input, files or environment (see _USER_ERRORS)."""
    if isinstance(error, _USER_ERRORS):
        return True
    errors = getattr(sys.modules.get("tensorflow"), "errors", None)  # loaded if it raised this
    if errors is None or not isinstance(error, errors.OpError):
        return False
    if isinstance(error, tuple(getattr(errors, name) for name in _TF_FILE_ERRORS)):
        return True
    frames = traceback.extract_tb(error.__traceback__)
    return (isinstance(error, tuple(getattr(errors, name) for name in _TF_FILE_API_ERRORS))
            and bool(frames) and _TF_FILE_API in frames[-1].filename)


def _register_key_flags():
    """Makes the flags of every loaded `bert_tf.cli` module key flags of `sys.argv[0]` (the
    module absl's help describes), so that a console script's help lists them."""
    for module, module_flags in FLAGS.flags_by_module_dict().items():
        if module.startswith(__package__ + "."):
            for flag in module_flags:
                FLAGS.register_key_flag_for_module(sys.argv[0], flag)


class _OwnRecordsBelowError(logging.Filter):
    """Passes the log records of this package's modules, and ERROR or worse from any module."""

    _PACKAGE_DIRECTORY = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep

    def filter(self, record):
        return (record.levelno >= logging.ERROR
                or os.path.abspath(record.pathname).startswith(self._PACKAGE_DIRECTORY))


class _ToolLines(logging.Formatter):
    """A log record as a line of the tool's own, like its other lines: the message alone for
    INFO ("1842 training examples, 4 steps at batch 16"), `<tool>: warning: <message>` for a
    warning (and `error`, `critical` alike), instead of absl's prefix of level, date, time,
    thread id and source line ("I1201 06:57:12.203504 139719929355136 squad.py:271] ..."),
    which --verbosity=1 keeps."""

    def __init__(self, tool):
        super().__init__()
        self.tool = tool

    def format(self, record):
        message = super().format(record)
        if record.levelno < logging.WARNING:
            return message
        return f"{self.tool}: {record.levelname.lower()}: {message}"


def _quiet_libraries(tool, timestamped):
    """Keeps the libraries' warnings and log lines off a tool's console: Python warnings
    (Keras' "renamed to unknown_..." and the like), and log records below ERROR that do not
    come from this package (TensorFlow's "Sharding callback duration: 33 microseconds" at
    every checkpoint, "Using MirroredStrategy with devices ..."). They speak of the libraries'
    internals, not of the user's job; --verbosity=1 shows them. The records left are written
    as the tool's own lines (`_ToolLines`), or with absl's prefix if `timestamped` (a server's
    log, read afterwards, needs the time of each line).

    The filter goes on absl's handler and on the handlers of TensorFlow's Python logger: a
    TensorFlow first imported before absl set up logging gave that logger a handler of its own
    ("INFO:tensorflow:Assets written to: ..."); later, seeing absl's, it adds none."""
    warnings.simplefilter("ignore")
    only_own_records = _OwnRecordsBelowError()
    for handler in [absl_logging.get_absl_handler(), *logging.getLogger("tensorflow").handlers]:
        handler.addFilter(only_own_records)
        if not timestamped:
            handler.setFormatter(_ToolLines(tool))


class _LineTrackingStdout:
    """`sys.stdout`, remembering whether its last write left a line open: a progress bar's
    ("3/10 ━━━━━━ 2s/step", redrawn after a carriage return), which the error line, written
    to stderr, would otherwise continue on a terminal."""

    def __init__(self, stream):
        self.stream = stream
        self.line_open = False

    def write(self, text):
        if text:
            self.line_open = not text.endswith("\n")
        return self.stream.write(text)

    def end_open_line(self):
        if self.line_open:
            self.write("\n")
            self.stream.flush()

    def __getattr__(self, name):
        return getattr(self.stream, name)


def _silent_on_keyboard_interrupt(excepthook):
    """`excepthook` (Python's report of an exception that ends the program), saying nothing of
    a KeyboardInterrupt: its traceback (~60 lines from inside Keras or TensorFlow) tells a user
    who pressed Ctrl-C nothing."""
    def hook(error_type, error, error_traceback):
        if not issubclass(error_type, KeyboardInterrupt):
            excepthook(error_type, error, error_traceback)
    return hook


def run_tool(main, define_flags, timestamped_logs=False):
    """Runs the tool whose `main` is given (see the module docstring) on `sys.argv`.

    Args:
        main: the tool's main function, without arguments; its module names the tool and
            gives the usage text.
        define_flags: a function defining the tool's flags (with the shared groups it uses).
        timestamped_logs: whether its log lines keep absl's prefix with their time (a
            server's), instead of reading as its other lines.
    """
    tool_module = sys.modules[main.__module__]
    tool = main.__module__.rsplit(".", 1)[-1]
    define_flags()
    _register_key_flags()
    # absl prints __main__'s docstring as the usage: a console script's own has none.
    sys.modules["__main__"].__doc__ = tool_module.__doc__

    def main_with_one_line_errors(_argv):  # parse_flags refused any beyond the program
        if FLAGS.verbosity < 1:
            _quiet_libraries(tool, timestamped_logs)
        stdout = sys.stdout = _LineTrackingStdout(sys.stdout)
        try:
            return main()
        except app.UsageError as error:  # the tool's own check of its flags: names them
            print(f"{tool}: error: {error}", file=sys.stderr)
            return error.exitcode
        except KeyboardInterrupt:
            stdout.end_open_line()
            print(f"{tool}: interrupted", file=sys.stderr)
            if FLAGS.verbosity < 1:
                sys.excepthook = _silent_on_keyboard_interrupt(sys.excepthook)
            raise  # Python then ends the process by SIGINT, as a shell expects of it
        except Exception as error:  # noqa: BLE001 (every failure becomes one line)
            stdout.end_open_line()
            if getattr(error, "signum", None) == signal.SIGINT:  # Ctrl-C saved training
                print(f"{tool}: {error}", file=sys.stderr)
                sys.excepthook = _silent_on_keyboard_interrupt(sys.excepthook)
                raise KeyboardInterrupt from None  # ends the process by SIGINT, as Ctrl-C does
            verbose = FLAGS.verbosity >= 1
            if verbose:
                traceback.print_exc()
            print(error_line(tool, error, traceback_hint=not verbose), file=sys.stderr)
            return 1
        finally:
            sys.stdout = stdout.stream

    def parse_flags(argv):
        try:
            remaining_argv = FLAGS(argv)
        except SystemExit as end:  # --help, --helpshort, --helpfull, --helpxml: printed
            # absl then exits with status 1; a request for help that was answered is a success
            # (status 0, as argparse's and every GNU tool's), which scripts can tell from an
            # error.
            raise SystemExit(0 if end.code == 1 else end.code) from None
        except flags.Error as error:  # unknown flag, bad value, failed validator
            print(usage_error_line(tool, error), file=sys.stderr)
            sys.exit(1)
        if len(remaining_argv) > 1:  # no tool takes positional arguments
            print(usage_error_line(tool, f"unexpected arguments: {remaining_argv[1:]}"),
                  file=sys.stderr)
            sys.exit(1)
        return remaining_argv

    app.run(main_with_one_line_errors, flags_parser=parse_flags)
