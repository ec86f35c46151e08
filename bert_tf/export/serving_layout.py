"""TF Serving's model layout: `<model_base_path>/<version>/saved_model.pb`, versions atomically.

TF Serving (and `tools/serve.py`) watch `<model_base_path>` and load every directory whose
name is a positive integer as that version of the model. A version directory must therefore
appear complete or not at all: `write_version` writes into a hidden temporary directory beside
it (its name is not a number, so servers ignore it) and renames that into place;
`write_versions` does so for several models that belong together (an encoder and its
preprocessor), renaming none of them into place unless all were written. A staging directory
is named after its writer's host and process, so that the next write into a local base path
removes those of this host's writers that were killed (`remove_abandoned_staging`).

Example:
    >>> write_version("/models/sst2", lambda path: export_something(path))   # first version
    '/models/sst2/1'
    >>> latest_version_dir("/models/sst2")
    '/models/sst2/1'
"""

import logging
import os
import re
import socket
import uuid

from bert_tf_hub_names import saved_model_versions, version_numbers

from bert_tf.file_io import file_kind, is_remote, remove_leftover_directories, rename_directory

logger = logging.getLogger("bert_tf.export")

# What a server running as another user needs to load a version: every directory listable
# (rwxr-xr-x) and every file readable (rw-r--r--). TensorFlow creates them with the writer's
# umask, e.g. 0700/0600 under umask 077, and a temporary directory is 0700 whatever the umask.
DIRECTORY_MODE = 0o755
FILE_MODE = 0o644


def _is_local(path):
    return "://" not in path  # gs://, s3://, ...: the store's own access control applies


# `.{version}-incomplete-{host}-{pid}-{random}`: the owner's host name (letters, digits, '-'
# and '.') comes before the two fields that hold no '-', so the last two '-' split it off.
_STAGING = re.compile(r"\.\d+-incomplete-(?P<host>.+)-(?P<pid>\d+)-[0-9a-f]{12}")


def _staging_name(version):
    return f".{version}-incomplete-{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:12]}"


def _process_exists(pid):
    try:
        os.kill(pid, 0)  # signal 0: only checks that the process exists
    except ProcessLookupError:
        return False
    except PermissionError:  # it exists, as another user's
        pass
    return True


def remove_abandoned_staging(base_path):
    """Deletes the staging directories in the local `base_path` whose writer, a process of this
    host, no longer exists (killed, or its machine lost power); returns their paths. Left alone:
    another host's (on a shared file system it may be writing now), a live writer's, those
    named without a writer, and remote base paths.

    Example:
        >>> remove_abandoned_staging("/models/sst2")
        ['/models/sst2/.4-incomplete-worker-3.example.com-81234-5f2a0b1c2d3e']
    """
    if not _is_local(base_path):
        return []
    host = socket.gethostname()

    def abandoned(path):
        owner = _STAGING.fullmatch(os.path.basename(path))
        return bool(owner and owner["host"] == host and not _process_exists(int(owner["pid"])))

    removed = remove_leftover_directories(base_path, abandoned)
    if removed:
        logger.warning("Removed %d model version(s) whose writing was interrupted earlier: %s",
                       len(removed), ", ".join(removed))
    return removed


def make_world_readable(path):
    """Makes the local directory tree `path` readable by every user (directories 0755, files
    0644) and returns `path`; remote paths (gs://...) are left to their store's permissions.

    Example:
        >>> make_world_readable("/models/sst2/1")
        '/models/sst2/1'
    """
    if not _is_local(path):
        return path
    os.chmod(path, DIRECTORY_MODE)
    for directory, subdirectories, files in os.walk(path):
        for name in subdirectories:
            os.chmod(os.path.join(directory, name), DIRECTORY_MODE)
        for name in files:
            os.chmod(os.path.join(directory, name), FILE_MODE)
    return path


def _make_directories(path):
    """`tf.io.gfile.makedirs(path)`, with the local directories it creates (the parents too:
    a `--hub_dir` made for its first model) 0755 whatever the umask: a model server running as
    another user must reach the models under them."""
    if not _is_local(path):
        import tensorflow as tf  # only gfile reaches a remote filesystem

        tf.io.gfile.makedirs(path)
        return
    missing, directory = [], os.path.abspath(path)
    while not os.path.isdir(directory):
        missing.append(directory)
        directory = os.path.dirname(directory)
    os.makedirs(path, exist_ok=True)
    for directory in missing:
        os.chmod(directory, DIRECTORY_MODE)


def latest_version_dir(base_path):
    """The directory of the highest version under `base_path` that holds a SavedModel, or None
    if it has none (local, or remote through `tf.io.gfile`)."""
    # The listing hub model names resolve with (bert_tf_hub_names, which TensorFlow-free
    # processes import).
    if is_remote(base_path):
        # Only then: export_savedmodel checks a local --output_dir before TensorFlow loads.
        import tensorflow as tf

        versions = saved_model_versions(base_path, files=tf.io.gfile)
    else:
        versions = saved_model_versions(base_path)
    return os.path.join(base_path, str(versions[-1])) if versions else None


def taken_version_problem(base_path, version):
    """Why `version` cannot be written under `base_path` (its directory exists), or None."""
    final_dir = os.path.join(base_path, str(version))
    if file_kind(final_dir) is not None:  # TensorFlow loads only for a remote path
        return (f"{final_dir} already exists: version {version} of this model is taken; choose "
                f"another version or base path.")
    return None


def write_version(base_path, write_savedmodel, version=None):
    """Writes a new version of the model under `base_path` and returns its directory.

    Local or remote (`gs://...`, through `tf.io.gfile`). A local version directory, and
    `base_path` if this call created it, are made readable by every user
    (`make_world_readable`), so that a server running as another user can load them.

    Args:
        base_path: the model's base path (created if missing).
        write_savedmodel: called with an empty directory to write the SavedModel into.
        version: positive integer; defaults to one more than the highest existing version (1
            for a new model). An existing version is never overwritten.
    """
    return write_versions({base_path: write_savedmodel}, version=version)[base_path]


def _next_version(base_path):
    import tensorflow as tf  # here: export_savedmodel imports this module before TensorFlow

    existing = (version_numbers(tf.io.gfile.listdir(base_path))
                if tf.io.gfile.isdir(base_path) else [])
    return max(existing, default=0) + 1


def write_versions(writers, version=None):
    """Writes a new version of several models together, all or nothing, as `write_version`
    writes one: every SavedModel is written into its staging directory first, and only when
    all of them succeeded are they renamed into place. A failure leaves every base path as it
    was (a base path this call created is removed again). What killed writers of this host left
    in a local base path is removed first (`remove_abandoned_staging`).

    Args:
        writers: `{base_path: write_savedmodel}`.
        version: the version number all of them get; defaults to one more than the highest
            existing version of any of them, so that versions written together share a number.

    Returns:
        `{base_path: version directory}`.

    Example (an encoder and its preprocessor, which are only of use together):
        >>> write_versions({"hub/bert": write_encoder, "hub/bert_preprocess": write_preprocess})
        {'hub/bert': 'hub/bert/3', 'hub/bert_preprocess': 'hub/bert_preprocess/3'}
    """
    import tensorflow as tf  # here: export_savedmodel imports this module before TensorFlow

    if version is None:
        version = max(_next_version(base_path) for base_path in writers)
    if not isinstance(version, int) or version < 1:
        raise ValueError(f"The model version must be a positive integer, got {version!r}.")
    final_dirs = {base_path: tf.io.gfile.join(base_path, str(version)) for base_path in writers}
    for base_path in writers:
        if problem := taken_version_problem(base_path, version):
            raise FileExistsError(problem)
    for base_path in writers:
        remove_abandoned_staging(base_path)
    created, staged, renamed = [], {}, []
    try:
        for base_path, write_savedmodel in writers.items():
            if not tf.io.gfile.isdir(base_path):
                _make_directories(base_path)
                created.append(base_path)
            staged[base_path] = tf.io.gfile.join(base_path, _staging_name(version))
            tf.io.gfile.makedirs(staged[base_path])
            write_savedmodel(staged[base_path])
            make_world_readable(staged[base_path])
        for base_path, staging_dir in staged.items():
            rename_directory(staging_dir, final_dirs[base_path])
            renamed.append(final_dirs[base_path])
    except BaseException:
        # Versions already in place are taken back too (only a failed rename gets there):
        # a model without its companion is of no use.
        for path in list(staged.values()) + renamed:
            if tf.io.gfile.exists(path):
                tf.io.gfile.rmtree(path)
        for base_path in created:
            if tf.io.gfile.isdir(base_path) and not tf.io.gfile.listdir(base_path):
                tf.io.gfile.rmtree(base_path)
        raise
    return final_dirs
