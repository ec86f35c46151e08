"""TF Serving's model layout: `<model_base_path>/<version>/saved_model.pb`, versions atomically.

TF Serving (and `tools/serve.py`) watch `<model_base_path>` and load every directory whose
name is a positive integer as that version of the model. A version directory must therefore
appear complete or not at all: `write_version` writes into a hidden temporary directory beside
it (its name is not a number, so servers ignore it) and renames that into place.

Example:
    >>> write_version("/models/sst2", lambda path: export_something(path))   # first version
    '/models/sst2/1'
    >>> latest_version_dir("/models/sst2")
    '/models/sst2/1'
"""

import os
import uuid

import tensorflow as tf

from bert_tf_hub_names import saved_model_versions, version_numbers

from bert_tf.file_io import rename_directory

# What a server running as another user needs to load a version: every directory listable
# (rwxr-xr-x) and every file readable (rw-r--r--). TensorFlow creates them with the writer's
# umask, e.g. 0700/0600 under umask 077, and a temporary directory is 0700 whatever the umask.
DIRECTORY_MODE = 0o755
FILE_MODE = 0o644


def _is_local(path):
    return "://" not in path  # gs://, s3://, ...: the store's own access control applies


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


def latest_version_dir(base_path):
    """The directory of the highest version under `base_path` that holds a SavedModel, or None
    if it has none (local or remote, through `tf.io.gfile`)."""
    # The listing hub model names resolve with (bert_tf_hub_names, which TensorFlow-free
    # processes import), here through gfile.
    versions = saved_model_versions(base_path, files=tf.io.gfile)
    return tf.io.gfile.join(base_path, str(versions[-1])) if versions else None


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
    if version is None:
        existing = (version_numbers(tf.io.gfile.listdir(base_path))
                    if tf.io.gfile.isdir(base_path) else [])
        version = max(existing, default=0) + 1
    if not isinstance(version, int) or version < 1:
        raise ValueError(f"The model version must be a positive integer, got {version!r}.")
    final_dir = tf.io.gfile.join(base_path, str(version))
    if tf.io.gfile.exists(final_dir):
        raise FileExistsError(f"{final_dir} already exists: version {version} of this model is "
                              f"taken; choose another version or base path.")
    if not tf.io.gfile.isdir(base_path):
        tf.io.gfile.makedirs(base_path)
        if _is_local(base_path):
            os.chmod(base_path, DIRECTORY_MODE)
    staging_dir = tf.io.gfile.join(base_path, f".{version}-incomplete-{uuid.uuid4().hex[:12]}")
    tf.io.gfile.makedirs(staging_dir)
    try:
        write_savedmodel(staging_dir)
        make_world_readable(staging_dir)
        rename_directory(staging_dir, final_dir)
    except BaseException:
        if tf.io.gfile.exists(staging_dir):
            tf.io.gfile.rmtree(staging_dir)
        raise
    return final_dir
