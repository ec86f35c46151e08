"""Where `hub.KerasLayer("bert_tf_...")` finds installed models: the local model directory.

The directory is `$BERT_TF_HUB_DIR`, or `~/.cache/bert_tf/hub` when that is unset. Each model
lives in `<dir>/<name>/<version>/` (TF Serving's layout, so `tools/serve.py` can serve it too);
a name resolves to its highest version.

Example:
    >>> os.environ["BERT_TF_HUB_DIR"] = "/opt/bert_models"
    >>> model_base_path("bert_tf_base")
    '/opt/bert_models/bert_tf_base'
"""

import os
import re

HUB_DIR_ENV = "BERT_TF_HUB_DIR"
DEFAULT_HUB_DIR = os.path.join("~", ".cache", "bert_tf", "hub")
DEFAULT_MODEL_NAME = "bert_tf_base"
PREPROCESS_SUFFIX = "_preprocess"
# Short model names: "bert_tf_" and letters, digits, "_" or "-" (no path separators).
_MODEL_NAME = re.compile(r"bert_tf_[A-Za-z0-9][A-Za-z0-9_-]*")


def hub_dir():
    """The model directory, read from the environment at each call."""
    return os.path.expanduser(os.environ.get(HUB_DIR_ENV) or DEFAULT_HUB_DIR)


def is_model_name(handle):
    """Whether `handle` is a short model name such as "bert_tf_base"."""
    return isinstance(handle, str) and _MODEL_NAME.fullmatch(handle) is not None


def model_base_path(name, directory=None):
    """`<directory or hub_dir()>/<name>`, the base path holding the versions of `name`."""
    if not is_model_name(name):
        raise ValueError(f"{name!r} is not a bert_tf model name: names start with 'bert_tf_' "
                         f"followed by letters, digits, '_' or '-'.")
    return os.path.join(directory or hub_dir(), name)
