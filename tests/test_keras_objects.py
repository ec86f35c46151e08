"""`bert_tf.keras_objects`: a `.keras` file of any of this package's models loads in a fresh
process that imported bert_tf, as a keras-hub user expects of `import keras_hub`."""

import os
import subprocess
import sys

import numpy as np

from bert_tf import BertClassifier, BertConfig, BertEncoder, keras_objects
from bert_tf.models.bert_pretrainer import BertPretrainer
from tests.resources import REPO_ROOT
from tests.test_import_graph import package_modules

LOAD = """
import sys
import numpy as np
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


def test_a_keras_file_loads_in_a_process_that_only_imported_bert_tf(tmp_path):
    config = BertConfig.from_name("bert_tiny")
    inputs = {"input_word_ids": np.array([[2, 7, 9, 3]], np.int32),
              "input_mask": np.ones([1, 4], np.int32),
              "input_type_ids": np.zeros([1, 4], np.int32)}
    inputs_path = str(tmp_path / "inputs.npz")
    np.savez(inputs_path, **inputs)
    # A pre-training model: no class of it is pulled in by importing a classifier.
    pretrainer = BertPretrainer(BertEncoder(config))
    pretrainer_path = str(tmp_path / "pretrainer.keras")
    pretrainer.save(pretrainer_path)
    pretrainer_inputs = {**inputs, "masked_lm_positions": np.array([[1, 2]], np.int32)}
    np.savez(inputs_path.replace(".npz", "_mlm.npz"), **pretrainer_inputs)
    loaded = _load_in_fresh_process("import keras\nimport bert_tf", pretrainer_path,
                                    inputs_path.replace(".npz", "_mlm.npz"), tmp_path)
    _assert_same_outputs(loaded, pretrainer(pretrainer_inputs))

    # Keras imported after bert_tf: the first name imported from bert_tf registers them.
    classifier = BertClassifier(BertEncoder(config), num_classes=3)
    classifier_path = str(tmp_path / "classifier.keras")
    classifier.save(classifier_path)
    loaded = _load_in_fresh_process("import bert_tf\nimport keras\nfrom bert_tf import BertConfig",
                                    classifier_path, inputs_path, tmp_path)
    _assert_same_outputs(loaded, classifier(inputs))
