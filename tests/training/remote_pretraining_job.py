"""A pre-training job whose inputs and outputs are all on TensorFlow's in-memory filesystem
`ram://`, which, like `gs://`, only `tf.io.gfile` can reach: run in a fresh process (ram://
lives as long as the process) from the directory holding the job's local inputs, it copies
them to ram://, trains, resumes with more steps, and prints as JSON what it finds there.

Example (what tests/training/test_remote_paths.py runs):
    $ cd /tmp/inputs && python -m tests.training.remote_pretraining_job  # train.tfrecord,
    {"after_first_run": ..., "after_second_run": ...}            # bert_config.json, vocab.txt
"""

import json
import sys

import tensorflow as tf
from absl import flags

from bert_tf.cli import run_pretraining
from bert_tf.config import BertConfig
from bert_tf.text.vocab import load_vocab
from bert_tf.training.scalar_logs import read_scalars

INPUTS = ("train.tfrecord", "bert_config.json", "vocab.txt")
REMOTE = "ram://bert_tf_job"
OUTPUT_DIR = f"{REMOTE}/output"
EXPORT_DIR = f"{REMOTE}/export"
# Files a finished run leaves in --output_dir.
OUTPUT_FILES = ("checkpoint", "bert_config.json", "vocab.txt", "eval_results.json")


def job_flags(num_train_steps):
    return [f"--input_file={REMOTE}/inputs/train.tfrecord",
            f"--bert_config_file={REMOTE}/inputs/bert_config.json",
            f"--vocab_file={REMOTE}/inputs/vocab.txt", f"--output_dir={OUTPUT_DIR}",
            f"--export_dir={EXPORT_DIR}", f"--num_train_steps={num_train_steps}",
            "--num_warmup_steps=1", "--train_batch_size=8", "--learning_rate=1e-3",
            "--save_checkpoints_steps=2", "--steps_per_execution=2", "--do_eval",
            "--eval_batch_size=8", "--max_eval_steps=2", "--strategy=cpu", "--nojit_compile"]


def run(num_train_steps):
    """Runs the tool's main in this process (so that it sees this process's ram://)."""
    flags.FLAGS.unparse_flags()
    flags.FLAGS(["run_pretraining", *job_flags(num_train_steps)])
    run_pretraining.main()


def remote_state():
    """What the job left on ram://: which files of --output_dir exist, the config and vocabulary
    read back from there, the latest checkpoint, the steps of the TensorBoard loss (a resumed
    run adds only its own), the evaluation's step and the export's versions and signatures."""
    with tf.io.gfile.GFile(f"{OUTPUT_DIR}/eval_results.json") as f:
        results = json.load(f)
    versions = sorted(tf.io.gfile.listdir(EXPORT_DIR), key=int)
    latest_export = tf.saved_model.load(f"{EXPORT_DIR}/{versions[-1]}")
    return {"files": {name: tf.io.gfile.exists(f"{OUTPUT_DIR}/{name}") for name in OUTPUT_FILES},
            "config": BertConfig.from_json_file(f"{OUTPUT_DIR}/bert_config.json").to_dict(),
            "vocab": load_vocab(f"{OUTPUT_DIR}/vocab.txt"),
            "latest_checkpoint": tf.train.latest_checkpoint(OUTPUT_DIR),
            "loss_steps": [event.step for event in read_scalars(f"{OUTPUT_DIR}/train")["loss"]],
            "eval_global_step": results["global_step"],
            "export_versions": versions,
            "export_signatures": sorted(latest_export.signatures)}


def main():
    tf.io.gfile.makedirs(f"{REMOTE}/inputs")
    for name in INPUTS:
        tf.io.gfile.copy(name, f"{REMOTE}/inputs/{name}")
    run_pretraining.define_flags()
    run(num_train_steps=4)
    first = remote_state()
    run(num_train_steps=6)
    print(json.dumps({"after_first_run": first, "after_second_run": remote_state()}))


if __name__ == "__main__":
    sys.exit(main())
