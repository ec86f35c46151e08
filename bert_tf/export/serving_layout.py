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
import shutil
import tempfile

import tensorflow as tf


def _versions(base_path):
    """The numeric versions under `base_path` that hold a SavedModel."""
    if not os.path.isdir(base_path):
        return []
    return sorted(int(name) for name in os.listdir(base_path)
                  if name.isdigit() and int(name) > 0
                  and os.path.exists(os.path.join(base_path, name,
                                                  tf.saved_model.SAVED_MODEL_FILENAME_PB)))


def latest_version_dir(base_path):
    """The directory of the highest version under `base_path`, or None if it has none."""
    versions = _versions(base_path)
    return os.path.join(base_path, str(versions[-1])) if versions else None


def write_version(base_path, write_savedmodel, version=None):
    """Writes a new version of the model under `base_path` and returns its directory.

    Args:
        base_path: the model's base path (created if missing).
        write_savedmodel: called with an empty directory to write the SavedModel into.
        version: positive integer; defaults to one more than the highest existing version (1
            for a new model). An existing version is never overwritten.
    """
    if version is None:
        existing = [int(name) for name in os.listdir(base_path) if name.isdigit()] \
            if os.path.isdir(base_path) else []
        version = max(existing, default=0) + 1
    if not isinstance(version, int) or version < 1:
        raise ValueError(f"The model version must be a positive integer, got {version!r}.")
    final_dir = os.path.join(base_path, str(version))
    if os.path.exists(final_dir):
        raise FileExistsError(f"{final_dir} already exists: version {version} of this model is "
                              f"taken; choose another version or base path.")
    os.makedirs(base_path, exist_ok=True)
    staging_dir = tempfile.mkdtemp(prefix=f".{version}-incomplete-", dir=base_path)
    try:
        write_savedmodel(staging_dir)
        os.rename(staging_dir, final_dir)
    except BaseException:
        shutil.rmtree(staging_dir, ignore_errors=True)
        raise
    return final_dir
