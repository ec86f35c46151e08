"""One optimizer step of fine-tuning MiniLM, alone: this package's `FusedAdamW` (`apply`, with
global-norm clipping at 1.0 and the word embeddings' gradient sparse, as `Model.fit` gives it)
against PyTorch's fused AdamW with `clip_grad_norm_` (Hugging Face `Trainer`'s default,
`adamw_torch_fused`) on the same 22.7 M weights. Median and best of `--steps`.

The step is memory-bound: each weight's value, two moments and gradient are read and three are
written. PyTorch runs in `bench/.venvs/torch` when `bench/setup_envs.sh` built it.

Example:
    .venv/bin/python bench/optimizer_step.py
"""

import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # bench/ helpers
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
from absl import app, flags  # noqa: E402

from benchmarking import (MINILM, PEER_PYTHON, cpu_description, machine_load,  # noqa: E402
                          stopwatch)

FLAGS = flags.FLAGS
flags.DEFINE_integer("steps", 30, "Timed steps.")
flags.DEFINE_integer("embedding_rows", 470, "Word-embedding rows with a gradient (an SST-2 "
                     "batch of 32 has ~470 tokens).")

# PyTorch's side: argv = steps; prints the step times in seconds, one per line.
_TORCH_STEP = """
import sys, time, torch
from transformers import BertConfig, BertForSequenceClassification
torch.set_num_threads(2)
torch.manual_seed(0)
model = BertForSequenceClassification(BertConfig(
    vocab_size=30522, hidden_size=384, num_hidden_layers=6, num_attention_heads=12,
    intermediate_size=1536))
parameters = [p for p in model.parameters() if p.requires_grad]
for p in parameters:
    p.grad = torch.randn_like(p) * 1e-3
optimizer = torch.optim.AdamW(parameters, lr=1e-4, weight_decay=0.01, eps=1e-6, fused=True)
optimizer.step()
for _ in range(int(sys.argv[1])):
    start = time.perf_counter()
    torch.nn.utils.clip_grad_norm_(parameters, 1.0)
    optimizer.step()
    print(time.perf_counter() - start)
"""


def bert_tf_step_times():
    from bert_tf import BertEncoder
    from bert_tf.models.bert_classifier import BertClassifier
    from bert_tf.training.optimizers import create_optimizer

    model = BertClassifier(BertEncoder(MINILM), num_classes=2)
    model({"input_word_ids": tf.ones([1, 8], tf.int32), "input_mask": tf.ones([1, 8], tf.int32),
           "input_type_ids": tf.zeros([1, 8], tf.int32)})  # builds the weights
    variables = model.trainable_variables
    optimizer = create_optimizer("adamw", 1e-4, variables, clip_norm=1.0,
                                 summed_by_train_step=False)
    rng = np.random.default_rng(0)

    def gradient(variable):
        if variable.shape[0] == MINILM.vocab_size:  # the word embeddings: rows, as Keras gives
            rows = rng.choice(MINILM.vocab_size, FLAGS.embedding_rows, replace=False)
            values = tf.random.normal([FLAGS.embedding_rows, variable.shape[1]]) * 1e-3
            return tf.IndexedSlices(values, tf.constant(rows, tf.int32),
                                    tf.constant(variable.shape))
        return tf.random.normal(variable.shape) * 1e-3

    gradients = [gradient(v) for v in variables]

    @tf.function
    def apply(gradients):
        optimizer.apply(gradients, variables)
        return optimizer.iterations

    step = stopwatch(lambda: apply(gradients).numpy())
    step()  # traces, compiles the XLA loops
    return sum(int(np.prod(v.shape)) for v in variables), [step() for _ in range(FLAGS.steps)]


def main(argv):
    del argv
    start_load = machine_load()
    weights, times = bert_tf_step_times()
    results = {"bert_tf FusedAdamW, sparse embedding gradient": times}
    if os.path.exists(PEER_PYTHON["transformers"]):
        output = subprocess.run([PEER_PYTHON["transformers"], "-c", _TORCH_STEP,
                                 str(FLAGS.steps)], capture_output=True, text=True,
                                check=True).stdout
        results["PyTorch fused AdamW + clip_grad_norm_"] = [float(t) for t in output.split()]
    print(f"{cpu_description()}; {weights / 1e6:.1f} M weights; {start_load} at start, "
          f"{machine_load()} at end")
    for name, step_times in results.items():
        print(f"  {name:46s} median {np.median(step_times) * 1e3:5.1f} ms, best "
              f"{min(step_times) * 1e3:5.1f} ms of {len(step_times)}")


if __name__ == "__main__":
    app.run(main)
