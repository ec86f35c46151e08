"""bert_tf's short model names for tensorflow_hub (`hub.KerasLayer("bert_tf_base")`), resolvable
in any process without importing bert_tf.

A name is "bert_tf_" followed by letters, digits, "_" or "-". Installed models live in the
model directory, `$BERT_TF_HUB_DIR` or `~/.cache/bert_tf/hub`, as `<dir>/<name>/<version>/`
(TF Serving's layout); a name resolves to its highest version, never to the network. A local
path of the same name is left to tensorflow_hub's own path resolver. An install records the size
of every file it wrote in the version (`INSTALL_RECORD`); a version that no longer matches
(a file truncated or missing) is refused with `DamagedModelError` naming what is damaged.

tensorflow_hub has no plugin entry point for resolvers, so installing bert_tf also installs
`bert_tf_hub_names.pth` into site-packages, whose one line calls `install()` at interpreter
start-up. That only puts a finder on `sys.meta_path` (`bert_tf_post_import`); when (if ever)
the process imports `tensorflow_hub`, the finder lets the import run, then registers
`ModelNameResolver`, which tensorflow_hub asks before its own resolvers. Start-up stays free
(this module and that one import only the standard library), and resolving a name imports
neither TensorFlow code of bert_tf nor Keras 3, so this module is kept apart from the `bert_tf`
package, whose import loads both.

Example (a fresh process; bert_tf is never imported):
    >>> import tensorflow_hub as hub
    >>> encoder = hub.KerasLayer("bert_tf_base", trainable=True)
    >>> preprocess = hub.KerasLayer("bert_tf_base_preprocess")
"""

import os

from bert_tf_post_import import call_after_import

HUB_DIR_ENV = "BERT_TF_HUB_DIR"
DEFAULT_HUB_DIR = os.path.join("~", ".cache", "bert_tf", "hub")
PREPROCESS_SUFFIX = "_preprocess"
NAME_PREFIX = "bert_tf_"
SAVED_MODEL_FILE = "saved_model.pb"
# Every file an install wrote into a version directory, with its size: a damaged copy (a file
# truncated or missing) is then named before TensorFlow reads it, which fails with "Read less
# bytes than requested", naming nothing. TF Serving reads only its warm-up requests from
# assets.extra/ and SavedModel loaders nothing at all.
INSTALL_RECORD = "assets.extra/bert_tf_installed_files.json"
_HUB_MODULE = "tensorflow_hub"
_INT64_MAX = (1 << 63) - 1
_registered = []


def hub_dir():
    """The model directory, read from the environment at each call."""
    return os.path.expanduser(os.environ.get(HUB_DIR_ENV) or DEFAULT_HUB_DIR)


def is_model_name(handle):
    """Whether `handle` is a short model name such as "bert_tf_base"."""
    if not isinstance(handle, str) or not handle.startswith(NAME_PREFIX):
        return False
    # String methods rather than a regular expression: `re` is not loaded at start-up.
    rest = handle[len(NAME_PREFIX):]
    return (rest[:1].isalnum() and rest.isascii()
            and all(char.isalnum() or char in "_-" for char in rest))


def model_base_path(name, directory=None):
    """`<directory or hub_dir()>/<name>`, the base path holding the versions of `name`."""
    if not is_model_name(name):
        raise ValueError(f"{name!r} is not a bert_tf model name: names start with 'bert_tf_' "
                         f"followed by letters, digits, '_' or '-'.")
    return os.path.join(directory or hub_dir(), name)


class ModelNotInstalledError(FileNotFoundError):
    """A bert_tf model name with no exported model in the local model directory."""


class DamagedModelError(OSError):
    """An installed bert_tf model whose files are not those its install wrote."""


def _install_hint(name):
    encoder_name = name[:-len(PREPROCESS_SUFFIX)] if name.endswith(PREPROCESS_SUFFIX) else name
    other = (f"with its encoder {encoder_name}" if encoder_name != name
             else f"with {name}{PREPROCESS_SUFFIX}")
    return (f"Install it ({other}) from a checkpoint and its "
            f"vocab.txt: bert-tf-install-hub-model --name={encoder_name} "
            f"--init_checkpoint=<checkpoint dir or prefix> [--vocab_file=<vocab.txt>] "
            f"[--nodo_lower_case], or bert_tf.hub.install_model(...). Set {HUB_DIR_ENV} to use "
            f"another model directory.")


def version_numbers(names):
    """The versions among the directory entries `names`: those named by a positive integer as
    written by `str` (ASCII digits, no leading zero: the directory of version 10 is "10", not
    "010") that fits TF Serving's int64 version numbers; a trailing "/", as gfile lists a
    bucket's directories, is ignored.

    Example:
        >>> version_numbers(["1", "12/", ".3-incomplete-5f2a", "0", "010", "variables"])
        [1, 12]
    """
    entries = (name.rstrip("/") for name in names)
    return [int(entry) for entry in entries
            if entry.isascii() and entry.isdigit() and entry[0] != "0"
            and int(entry) <= _INT64_MAX]


class _LocalFiles:
    """The three file-system calls `saved_model_versions` makes, on local paths."""
    listdir = staticmethod(os.listdir)
    isdir = staticmethod(os.path.isdir)
    exists = staticmethod(os.path.exists)


def saved_model_versions(base_path, files=_LocalFiles):
    """The versions under `base_path` that hold a `saved_model.pb`, ascending (TF Serving's
    `<base_path>/<version>/` layout); none if `base_path` is not a directory. `files` lists
    and tests paths (`listdir`, `isdir`, `exists`): local ones by default, `tf.io.gfile` for
    `gs://...` and the other file systems TensorFlow reads.

    Example:
        >>> saved_model_versions(os.path.join(hub_dir(), "bert_tf_base"))
        [1, 2]
    """
    if not files.isdir(base_path):
        return []
    return sorted(version for version in version_numbers(files.listdir(base_path))
                  if files.exists(os.path.join(base_path, str(version), SAVED_MODEL_FILE)))


def _local_path(directory, relative):
    return os.path.join(directory, *relative.split("/"))


def installed_versions(base_path):
    """The versions under `base_path` that hold a `saved_model.pb` or an install's record
    (`INSTALL_RECORD`: one whose saved_model.pb is lost is still a version), ascending.

    Example:
        >>> installed_versions(os.path.join(hub_dir(), "bert_tf_base"))
        [1, 2]
    """
    recorded = [version for version in version_numbers(
                    os.listdir(base_path) if os.path.isdir(base_path) else [])
                if os.path.isfile(_local_path(os.path.join(base_path, str(version)),
                                              INSTALL_RECORD))]
    return sorted(set(saved_model_versions(base_path)) | set(recorded))


def damaged_files(version_dir):
    """What differs from the install record (`INSTALL_RECORD`) of the local version directory
    `version_dir`, one phrase per file; none when nothing does or when the version has no
    record (installed before installs wrote one, or not by an install). Sizes only, from
    `os.stat`: cheap enough for every load, and what a truncated copy or download changes.

    Example:
        >>> damaged_files(os.path.join(hub_dir(), "bert_tf_base", "1"))
        ['fingerprint.pb is missing', 'variables/variables.index has 1000 bytes, not 2034']
    """
    record = _local_path(version_dir, INSTALL_RECORD)
    if not os.path.lexists(record):
        return []
    import json  # not at start-up, where every process imports this module
    try:
        with open(record, encoding="utf-8") as f:
            sizes = json.load(f)["files"]
        sizes = {str(relative): int(size) for relative, size in sizes.items()}
    except (OSError, ValueError, TypeError, KeyError, AttributeError) as error:
        return [f"its install record {INSTALL_RECORD} is unreadable ({error})"]
    problems = []
    for relative, size in sorted(sizes.items()):
        try:
            found = os.stat(_local_path(version_dir, relative)).st_size
        except FileNotFoundError:
            problems.append(f"{relative} is missing")
        except OSError as error:
            problems.append(f"{relative} cannot be read ({error.strerror})")
        else:
            if found != size:
                problems.append(f"{relative} has {found} bytes, not {size}")
    return problems


def resolve_model_name(name):
    """The SavedModel directory of the installed model `name`: its highest version, checked
    against its install record (`damaged_files`)."""
    base_path = model_base_path(name)
    versions = installed_versions(base_path)
    if not versions:
        # A model directory (or a model's) that is a file: a mistaken $BERT_TF_HUB_DIR.
        blocking = next((path for path in (os.path.dirname(base_path), base_path)
                         if os.path.exists(path) and not os.path.isdir(path)), None)
        where = (f"{blocking} is a file, not a directory" if blocking
                 else f"{base_path} holds no exported version")
        raise ModelNotInstalledError(
            f"The bert_tf model {name!r} is not installed: {where} (model directory: "
            f"${HUB_DIR_ENV} or {DEFAULT_HUB_DIR}). {_install_hint(name)}")
    path = os.path.join(base_path, str(versions[-1]))
    problems = damaged_files(path)
    if problems:
        raise DamagedModelError(
            f"The bert_tf model {name!r} is damaged: version {versions[-1]} at {path} is not "
            f"as its install wrote it ({'; '.join(problems)}); installing it again adds a "
            f"version that takes this one's place. {_install_hint(name)}")
    return path


class ModelNameResolver:
    """tensorflow_hub's resolver interface (`is_supported`, `__call__`) for bert_tf names."""

    def is_supported(self, handle):
        return is_model_name(handle) and not os.path.exists(handle)

    def __call__(self, handle):
        return resolve_model_name(handle)


def register_resolver():
    """Adds `ModelNameResolver` to tensorflow_hub's registry once (later calls do nothing);
    resolvers registered last are asked first, so it runs before the built-in ones."""
    if not _registered:
        from tensorflow_hub import registry
        _registered.append(ModelNameResolver())
        registry.resolver.add_implementation(_registered[0])


def install():
    """Registers the resolver now if tensorflow_hub is imported already, else once it is (the
    `.pth` line's call; a second call only adds a registration that does nothing)."""
    call_after_import(_HUB_MODULE, register_resolver)
