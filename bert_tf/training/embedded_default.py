"""The embedded default job: what `bert-tf-run-pretraining` does with no flags at all.

A complete pre-training from scratch that needs nothing but this package and Python, and takes
a few minutes on two CPU cores, so that a new user sees every stage work on their machine:

1. corpus: the Python standard library's docstrings (`stdlib_corpus`; 1.35 MB in Python 3.11,
   one module per document), one passage in 20 held out;
2. a WordPiece vocabulary (uncased; about 2.5k tokens: the learner keeps pieces seen at least
   10 times) learned from it (`bert-tf-build-vocab`'s learner, 2 refinement passes);
3. pre-training TFRecords (`bert-tf-create-pretraining-data`'s writer: seq 128, 20
   predictions, 5 copies with different masks);
4. training `bert_tiny` (with the learned vocabulary's size) with the tool's trainer: a
   progress bar with a falling loss, checkpoints, TensorBoard scalars;
5. evaluation on the held-out records;
6. the encoder with its masked-LM head exported as a SavedModel (`export_encoder`).

Everything goes under one output directory (`DEFAULT_OUTPUT_DIR` unless `--output_dir`);
running again resumes from there: finished stages are skipped, training continues from its
last checkpoint, and a finished job only evaluates and summarises again. Every training flag
of the tool still applies (`--num_train_steps`, `--strategy`, ...); `SETTINGS` are the job's
own defaults for them.

Example:
    >>> inputs = prepare_inputs("/tmp/bert_tf_pretraining_default")
    >>> inputs.bert_config_file
    '/tmp/bert_tf_pretraining_default/data/bert_config.json'
"""

import dataclasses
import os
import tempfile

DEFAULT_OUTPUT_DIR = os.path.join(tempfile.gettempdir(), "bert_tf_pretraining_default")
CONFIG_NAME = "bert_tiny"
CORPUS_MEGABYTES = 2.0
VOCAB_SIZE = 4096
MAX_SEQ_LENGTH, MAX_PREDICTIONS_PER_SEQ, DUPE_FACTOR = 128, 20, 5


@dataclasses.dataclass(frozen=True)
class JobSettings:
    """How the job trains, unless the user says otherwise: a few minutes on 2 cores.

    A compact model learns fastest with a large learning rate. One device, no XLA: on a CPU,
    TensorFlow's own (oneDNN) kernels run this model's step 2-3x faster than XLA's CPU code
    (measured: bert_tiny, batch 32, seq 128), and a single replica needs no MirroredStrategy.
    """
    output_dir: str = DEFAULT_OUTPUT_DIR
    strategy: str = "one_device"
    jit_compile: bool = False
    global_batch_size: int = 32
    num_train_steps: int = 800  # the first 10 % warm up, the tool's default for any number
    learning_rate: float = 1e-3
    save_checkpoints_steps: int = 200
    steps_per_execution: int = 20
    evaluate: bool = True
    eval_batch_size: int = 32


SETTINGS = JobSettings()


def prepare_inputs(output_dir, corpus_megabytes=CORPUS_MEGABYTES, vocab_size=VOCAB_SIZE,
                   seed=12345):
    """Writes (or finds) the corpus, vocabulary, records and config under `output_dir/data`;
    returns the `PretrainingInputs`."""
    # Imported here: run_pretraining reads this module's defaults before TensorFlow loads.
    from bert_tf.data.pretraining.inputs import prepare_pretraining_inputs
    from bert_tf.data.pretraining.stdlib_corpus import stdlib_documents

    return prepare_pretraining_inputs(
        os.path.join(output_dir, "data"), stdlib_documents(int(corpus_megabytes * 2**20)),
        config_name=CONFIG_NAME, vocab_size=vocab_size, max_seq_length=MAX_SEQ_LENGTH,
        max_predictions_per_seq=MAX_PREDICTIONS_PER_SEQ, dupe_factor=DUPE_FACTOR,
        vocab_iterations=2, seed=seed)


def summary(output_dir, inputs, step, checkpoint, evaluation, export_dir):
    """The closing report: what was trained, how the loss went, the held-out metrics and
    where every output is.

    Args:
      output_dir: the job's directory (TensorBoard logs in `train/` and `eval/`).
      inputs: the `PretrainingInputs`.
      step: the global step of the evaluated weights.
      checkpoint: the last checkpoint's prefix.
      evaluation: the held-out metrics (`PretrainingTrainer.evaluate`), or None.
      export_dir: the exported encoder's directory.
    """
    from bert_tf.training.scalar_logs import read_scalars  # see prepare_inputs

    # A job killed after its last checkpoint logged steps that its resumption redid.
    losses = [event for event in read_scalars(os.path.join(output_dir, "train")).get("loss", [])
              if event.step <= step]
    lines = [f"Embedded default pre-training: {CONFIG_NAME} on Python standard-library "
             f"docstrings, {step} steps."]
    if losses:
        lines.append(f"  training loss      {losses[0].value:.3f} at step {losses[0].step} -> "
                     f"{losses[-1].value:.3f} at step {losses[-1].step}")
    if evaluation:
        lines.append(
            f"  held-out           masked_lm_accuracy {evaluation['masked_lm_accuracy']:.3f}, "
            f"masked_lm_loss {evaluation['masked_lm_loss']:.3f}, next_sentence_accuracy "
            f"{evaluation['next_sentence_accuracy']:.3f} ({evaluation['examples']} examples)")
    lines += [
        f"  corpus             {inputs.train_text}, {inputs.heldout_text}",
        f"  vocabulary         {inputs.vocab_file}",
        f"  records            {os.path.dirname(inputs.train_records[0])}, "
        f"{inputs.heldout_records[0]}",
        f"  config             {inputs.bert_config_file}",
        f"  checkpoint         {checkpoint}",
        f"  TensorBoard        tensorboard --logdir {output_dir}",
        f"  encoder SavedModel {export_dir} (tf.saved_model.load; obj.mlm gives MLM logits)",
        "Run it again to resume; --output_dir, --num_train_steps and the other training flags "
        "change the job.",
    ]
    return "\n".join(lines)
