"""The preprocess export with `special_tokens_in_strings=True`: Hugging Face's ids in a fresh
process, from a graph that TF Serving 2.12+ can run (core ops + FastWordpieceTokenizeWithOffsets).
"""

import json
import os
import subprocess
import sys

from bert_tf.export.preprocessor_export import export_preprocessor
from tests.text.reference import hf_ids, hf_tokenizer, minilm_vocab

TEXTS = ["[CLS] Who wrote it? [SEP] Goethe. [SEP]", "the [MASK] sat on a[MASK]b.",
         "[cls] [Mask] stay text", "naïve [SEP]中文[PAD][UNK]", ""]
SEQ_LENGTH = 24

# Lists the graph's op types before tensorflow_text is imported: every op but the WordPiece one
# must be a core TensorFlow op. Then runs the export as a consumer would.
LOADER = """
import json, sys
import tensorflow as tf
from tensorflow.core.protobuf import saved_model_pb2
from tensorflow.python.framework import op_def_registry
saved_model = saved_model_pb2.SavedModel()
with open(sys.argv[1] + "/saved_model.pb", "rb") as f:
    saved_model.ParseFromString(f.read())
graph = saved_model.meta_graphs[0].graph_def
ops = {node.op for node in graph.node}
ops |= {node.op for function in graph.library.function for node in function.node_def}
functions = {function.signature.name for function in graph.library.function}
not_core = sorted(op for op in ops - functions if op_def_registry.get(op) is None)
import tensorflow_text  # noqa: F401  (registers the WordPiece op)
assert not any(name.split(".")[0] == "bert_tf" for name in sys.modules)
model = tf.saved_model.load(sys.argv[1])
texts = tf.constant(json.loads(sys.argv[2]))
print(json.dumps({"not_core": not_core,
                  "ids": model(texts)["input_word_ids"].numpy().tolist(),
                  "tokens": model.tokenize(texts).merge_dims(1, 2).to_list(),
                  "setting": bool(model.special_tokens_in_strings.numpy())}))
"""


def test_export_gives_hugging_face_ids_with_core_ops_only(tmp_path):
    # Without the option the export is the one test_preprocessor_export.py checks.
    export_preprocessor(str(tmp_path / "preprocess"), minilm_vocab(), do_lower_case=True,
                        seq_length=SEQ_LENGTH, special_tokens_in_strings=True)
    result = subprocess.run(
        [sys.executable, "-c", LOADER, str(tmp_path / "preprocess"), json.dumps(TEXTS)],
        capture_output=True, text=True, timeout=600,
        env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"})
    assert result.returncode == 0, result.stderr[-3000:]
    out = json.loads(result.stdout.strip().splitlines()[-1])
    assert out["not_core"] == ["FastWordpieceTokenizeWithOffsets"]
    assert out["setting"] is True
    expected = hf_ids(hf_tokenizer(minilm_vocab(), lower_case=True), TEXTS)
    assert out["tokens"] == expected
    assert out["tokens"][1][:3] == [1996, 103, 2938]          # the [MASK] sat
    packed = [[101] + ids[:SEQ_LENGTH - 2] + [102] for ids in expected]
    assert out["ids"] == [ids + [0] * (SEQ_LENGTH - len(ids)) for ids in packed]
