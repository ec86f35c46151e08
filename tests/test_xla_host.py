"""`bert_tf.xla_host`: under tensorflow-tpu, which has no XLA backend for the CPU, no function of
a training step asks XLA to compile on the host; under `tensorflow`, the XLA loops do.

The TPU build is stood in for by its distribution's metadata (a `tensorflow_tpu-2.20.0.dist-info`
on the path of a fresh process): what `host_jit_compile` reads."""

import os
import subprocess
import sys

import pytest

from bert_tf.xla_host import host_jit_compile
from tests.resources import REPO_ROOT

# A bfloat16 fine-tuning step of a tiny classifier (dropout, the residual LayerNorm's and the
# GELU's loops, AdamW's updates), traced; prints how many of the functions in its graph must be
# compiled by XLA.
_MUST_COMPILE = """
import tensorflow as tf
from bert_tf import BertClassifier, BertConfig, BertEncoder
from bert_tf.training.optimizers import create_optimizer

def must_compile(concrete):
    library = concrete.graph.as_graph_def().library.function
    return sum(f.attr["_XlaMustCompile"].b for f in library)

encoder = BertEncoder(BertConfig.from_name("bert_tiny"), dtype="mixed_bfloat16")
model = BertClassifier(encoder, num_classes=2)
optimizer = create_optimizer("adamw", 1e-4, model.trainable_variables)
ids = tf.TensorSpec([4, 8], tf.int32)

@tf.function
def step(word_ids):
    inputs = {"input_word_ids": word_ids, "input_mask": tf.ones_like(word_ids),
              "input_type_ids": tf.zeros_like(word_ids)}
    with tf.GradientTape() as tape:
        loss = tf.reduce_mean(tf.cast(model(inputs, training=True)["logits"], tf.float32))
    optimizer.apply(tape.gradient(loss, model.trainable_variables), model.trainable_variables)
    return loss

print(must_compile(step.get_concrete_function(ids)))
"""


def _functions_xla_must_compile(tmp_path, tpu_build):
    path = [REPO_ROOT]
    if tpu_build:
        metadata = tmp_path / "tensorflow_tpu-2.20.0.dist-info" / "METADATA"
        metadata.parent.mkdir()
        metadata.write_text("Metadata-Version: 2.1\nName: tensorflow-tpu\nVersion: 2.20.0\n")
        path.append(str(tmp_path))
    environment = dict(os.environ, PYTHONPATH=os.pathsep.join(path))
    run = subprocess.run([sys.executable, "-c", _MUST_COMPILE], env=environment,
                         capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]
    return int(run.stdout.split()[-1])


@pytest.mark.skipif(host_jit_compile() is None, reason="tensorflow-tpu is installed here")
def test_xla_loops_compile_on_the_host_only_where_xla_can(tmp_path):
    assert _functions_xla_must_compile(tmp_path, tpu_build=False) > 0
    assert _functions_xla_must_compile(tmp_path, tpu_build=True) == 0
