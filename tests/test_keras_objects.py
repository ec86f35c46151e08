"""`bert_tf.keras_objects`: a `.keras` file of any of this package's models loads in a fresh
process that imported bert_tf, as a keras-hub user expects of `import keras_hub`."""

import os
import subprocess
import sys

import numpy as np
import pytest

from bert_tf import BertConfig, BertEncoder, keras_objects
from bert_tf.models.bert_pretrainer import BertPretrainer
from tests.resources import REPO_ROOT
from tests.test_import_graph import package_modules

LOAD = """
import sys
import numpy as np
import pytest
{imports}
model = keras.models.load_model(sys.argv[1])
inputs = dict(np.load(sys.argv[2]))
outputs = model(inputs)
outputs = outputs if isinstance(outputs, dict) else {{"output": outputs}}
np.savez(sys.argv[3], **{{key: np.asarray(value) for key, value in outputs.items()}})
"""


def test_every_module_registering_keras_classes_is_listed():
    registering = {name for name, path in package_modules().items()
                   if "@keras.saving.register_keras_serializable" in open(path, encoding="utf-8").read()}
    assert set(keras_objects.MODULES) == registering


def _load_in_fresh_process(imports, model_path, inputs_path, tmp_path):
    outputs_path = str(tmp_path / "outputs.npz")
    env = {**os.environ, "PYTHONPATH": REPO_ROOT, "TF_CPP_MIN_LOG_LEVEL": "3"}
    result = subprocess.run(
        [sys.executable, "-c", LOAD.format(imports=imports), model_path, inputs_path,
         outputs_path], capture_output=True, text=True, timeout=300, env=env)
    assert result.returncode == 0, result.stderr[-3000:]
    return dict(np.load(outputs_path))


def _assert_same_outputs(loaded, expected):
    expected = expected if isinstance(expected, dict) else {"output": expected}
    assert set(loaded) == set(expected)
    for key, value in expected.items():
        np.testing.assert_allclose(loaded[key], np.asarray(value), atol=1e-6)


@pytest.fixture(scope="module")
def saved_pretrainer(tmp_path_factory):
    """`(path, inputs path, expected outputs)` of a pre-training model saved to `.keras`: no
    class of it is pulled in by importing the encoder or a classifier."""
    tmp_path = tmp_path_factory.mktemp("saved")
    pretrainer = BertPretrainer(BertEncoder(BertConfig.from_name("bert_tiny")))
    inputs = {"input_word_ids": np.array([[2, 7, 9, 3]], np.int32),
              "input_mask": np.ones([1, 4], np.int32),
              "input_type_ids": np.zeros([1, 4], np.int32),
              "masked_lm_positions": np.array([[1, 2]], np.int32)}
    path, inputs_path = str(tmp_path / "pretrainer.keras"), str(tmp_path / "inputs.npz")
    pretrainer.save(path)
    np.savez(inputs_path, **inputs)
    return path, inputs_path, pretrainer(inputs)


# How a process may come to have both bert_tf and Keras: Keras before or after bert_tf, imported
# by TensorFlow, or first by a module of bert_tf (half run when Keras is in: the classes are
# registered once its import ends).
IMPORTS = ("import keras\nimport bert_tf",
           "import bert_tf\nimport keras",
           "import bert_tf\nimport tensorflow\nimport keras",
           "from bert_tf.models.bert_encoder import BertEncoder\nimport keras")


@pytest.mark.parametrize("imports", IMPORTS)
def test_a_keras_file_loads_in_a_process_that_only_imported_bert_tf(saved_pretrainer, imports,
                                                                    tmp_path):
    path, inputs_path, expected = saved_pretrainer
    _assert_same_outputs(_load_in_fresh_process(imports, path, inputs_path, tmp_path), expected)

