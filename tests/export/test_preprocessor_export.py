import json
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

from bert_tf.text.bert_preprocessor import BertPreprocessor
from bert_tf.export.preprocessor_export import export_preprocessor
from tests.text.reference import minilm_vocab

TEXTS_A = ["Hello, World!", "Ünïcödé naïve café 中文 😀", "", "y " * 300]
TEXTS_B = ["How are you?", "second", "only b", "z"]

# Runs in a fresh interpreter that imports nothing but tensorflow and tensorflow_text.
LOADER = """
import json, sys
import tensorflow as tf
import tensorflow_text  # noqa: F401  (registers the WordPiece op)
assert not any(name.split(".")[0] == "bert_tf" for name in sys.modules)
model = tf.saved_model.load(sys.argv[1])
a, b = tf.constant(json.loads(sys.argv[2])), tf.constant(json.loads(sys.argv[3]))
tokens_a, tokens_b = model.tokenize(a), model.tokenize(b)
out = {
    "call": {k: v.numpy().tolist() for k, v in model(a).items()},
    "pair": {k: v.numpy().tolist() for k, v in
             model.bert_pack_inputs([tokens_a, tokens_b], seq_length=20).items()},
    "pair_default_length": {k: v.numpy().tolist() for k, v in
                            model.bert_pack_inputs([tokens_a, tokens_b]).items()},
    "tokenize": tokens_a.to_list(),
    "tokenize_ragged_rank": tokens_a.ragged_rank,
    "serving": {k: v.numpy().tolist() for k, v in
                model.signatures["serving_default"](text=a).items()},
    "vocab_lines": len(open(model.vocab_file.asset_path.numpy().decode()).read().splitlines()),
    "do_lower_case": bool(model.do_lower_case.numpy()),
}
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def moved_export(tmp_path_factory):
    root = tmp_path_factory.mktemp("export")
    export_preprocessor(str(root / "original"), minilm_vocab(), do_lower_case=True)
    # The SavedModel must not remember where it was written.
    shutil.move(str(root / "original"), str(root / "moved"))
    return str(root / "moved")


def test_exported_preprocessor_runs_in_a_fresh_process_after_moving(moved_export):
    result = subprocess.run(
        [sys.executable, "-c", LOADER, moved_export, json.dumps(TEXTS_A), json.dumps(TEXTS_B)],
        capture_output=True, text=True, timeout=600,
        env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"})
    assert result.returncode == 0, result.stderr[-3000:]
    out = json.loads(result.stdout.strip().splitlines()[-1])

    in_process = BertPreprocessor(minilm_vocab(), lower_case=True, seq_length=128)
    single = in_process(tf.constant(TEXTS_A))
    tokenized = [in_process.tokenizer.tokenize(tf.constant(t)) for t in (TEXTS_A, TEXTS_B)]
    pair = in_process.packer(tokenized, seq_length=20)
    # bert_pack_inputs without seq_length: the export's, as TF Hub's preprocessors do.
    pair_default_length = in_process.packer(tokenized)
    for key in ("input_word_ids", "input_mask", "input_type_ids"):
        np.testing.assert_array_equal(out["call"][key], single[key])
        np.testing.assert_array_equal(out["serving"][key], single[key])
        np.testing.assert_array_equal(out["pair"][key], pair[key])
        np.testing.assert_array_equal(out["pair_default_length"][key], pair_default_length[key])
    assert np.asarray(out["call"]["input_word_ids"]).shape == (4, 128)
    assert np.asarray(out["pair_default_length"]["input_word_ids"]).shape == (4, 128)
    assert out["tokenize"] == in_process.tokenizer.tokenize(tf.constant(TEXTS_A)).to_list()
    assert out["tokenize_ragged_rank"] == 2
    assert out["vocab_lines"] == 30522 and out["do_lower_case"] is True
