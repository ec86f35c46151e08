"""Pre-trains BERT (masked LM + next sentence) on TFRecords from `create_pretraining_data.py`,
or on raw text masked on the fly.

Google's `run_pretraining.py` flags, on TF2 `tf.distribute`: one process per machine,
synchronous data parallelism, XLA, mixed precision, gradient accumulation, checkpoints with
automatic resume (rerun the same command after a crash: it continues from the latest
checkpoint in --output_dir at its exact step, optimizer state and input position).

With no flags that name the job's inputs (--input_file, --input_text_file, --eval_input_file,
--bert_config_file, --init_checkpoint, --vocab_file), it runs the embedded default job: a few
minutes of pre-training from scratch on the Python standard library's docstrings, from the
corpus to an exported encoder (`bert_tf/training/embedded_default.py`), into
/tmp/bert_tf_pretraining_default unless --output_dir says otherwise.

Examples:
    python tools/run_pretraining.py                     # the embedded default job
    python tools/run_pretraining.py --bert_config_file=official_configs/bert_tiny.json \\
        --input_file="data/wiki-*.tfrecord,data/books-*.tfrecord" --output_dir=/tmp/pretrain \\
        --train_batch_size=256 --num_train_steps=100000 --num_warmup_steps=10000 \\
        --learning_rate=1e-4 --strategy=mirrored --mixed_precision=bfloat16
    python tools/run_pretraining.py ... --strategy=tpu --tpu=grpc://10.2.3.4:8470
    python tools/run_pretraining.py ... --nodo_train --do_eval --eval_input_file=heldout.tfrecord
    python tools/run_pretraining.py --bert_config_file=official_configs/bert_mini.json \
        --input_text_file="corpus/*.txt" --vocab_file=vocab.txt --output_dir=/tmp/pretrain \
        --max_seq_length=128 --export_dir=/tmp/pretrain/export

Outputs in --output_dir: `ckpt-<step>.*` (the package's checkpoint: `encoder` + `pretraining_heads`
+ optimizer, readable by every tool's --init_checkpoint), `bert_config.json`, TensorBoard
scalars in `train/` and `eval/`, and `eval_results.txt`; with --export_dir, the encoder
SavedModel in `<export_dir>/<step>/`.
"""

import contextlib
import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from absl import app, flags, logging  # noqa: E402

from bert_tf.training import embedded_default  # noqa: E402
from bert_tf.training.distribution import STRATEGIES  # noqa: E402
from bert_tf.training.optimizers import OPTIMIZERS  # noqa: E402
from bert_tf.training.pretraining_trainer import MIXED_PRECISION  # noqa: E402

# The original BERT flags (same names and meaning).
flags.DEFINE_string("bert_config_file", None, "The model's bert_config.json.")
flags.DEFINE_string("input_file", None,
                    "Comma-separated globs of training TFRecord files (create_pretraining_data.py).")
flags.DEFINE_string("output_dir", None, "Where checkpoints and summaries go; resumed from if it "
                    "holds checkpoints.")
flags.DEFINE_string("init_checkpoint", None, "Initial weights when --output_dir has no "
                    "checkpoint: a Google, Hugging Face or bert_tf checkpoint (heads too if present).")
flags.DEFINE_integer("train_batch_size", 32, "Examples per optimizer step, over all replicas.")
flags.DEFINE_integer("max_seq_length", None, "Tokens per sequence; default: read from the records "
                     "(must match them), 128 with --input_text_file.")
flags.DEFINE_integer("max_predictions_per_seq", None, "Masked-LM predictions per sequence; "
                     "default: read from the records (must match them), 20 with "
                     "--input_text_file. Held-out records (--eval_input_file) are read with "
                     "their own lengths.")
flags.DEFINE_integer("num_train_steps", 100000, "Optimizer steps of the whole run.")
flags.DEFINE_integer("num_warmup_steps", 10000, "Linear learning-rate warmup steps.")
flags.DEFINE_float("learning_rate", 5e-5, "Peak learning rate (then linear decay to 0).")
flags.DEFINE_integer("save_checkpoints_steps", 1000, "Checkpoint every this many steps.")
flags.DEFINE_string("tpu", None, "The TPU for --strategy=tpu: grpc://HOST:PORT, a Cloud TPU name "
                    "or 'local'.")
flags.DEFINE_bool("do_train", True, "Train.")
flags.DEFINE_bool("do_eval", False, "Evaluate on --eval_input_file (default --input_file).")
flags.DEFINE_integer("eval_batch_size", 8, "Examples per evaluation step, over all replicas.")
flags.DEFINE_integer("max_eval_steps", None, "Evaluate at most this many batches (default: all "
                     "records).")
# TF2 additions.
flags.DEFINE_enum("strategy", "mirrored", STRATEGIES, "The tf.distribute strategy.")
flags.DEFINE_bool("jit_compile", True, "Compile the train step with XLA.")
flags.DEFINE_enum("mixed_precision", "float32", list(MIXED_PRECISION),
                  "Compute dtype of the encoder (float16 adds dynamic loss scaling).")
flags.DEFINE_enum("optimizer", "adamw", OPTIMIZERS, "adamw (Google's BERT) or lamb (large "
                  "batches).")
flags.DEFINE_float("weight_decay_rate", 0.01, "Decoupled weight decay (not on LayerNorm, biases).")
flags.DEFINE_float("clip_norm", 1.0, "Clip the global gradient norm to this (0: no clipping).")
flags.DEFINE_integer("gradient_accumulation_steps", 1, "Split each replica's batch into this "
                     "many micro-batches (same update, less memory).")
flags.DEFINE_integer("steps_per_execution", 100, "Train steps per host call (and per summary).")
flags.DEFINE_integer("keep_checkpoint_max", 5, "Checkpoints kept.")
flags.DEFINE_string("eval_input_file", None, "Comma-separated globs of held-out TFRecord files.")
flags.DEFINE_integer("seed", 12345, "Seed of the initial weights, dropout and input shuffling.")
flags.DEFINE_string("input_text_file", None, "Instead of --input_file: comma-separated globs of "
                    "raw text files (one sentence per line, blank lines between documents), "
                    "tokenized and masked anew each epoch (dynamic masking); needs --vocab_file.")
flags.DEFINE_string("vocab_file", None, "The vocabulary: tokenizes --input_text_file and goes "
                    "into the --export_dir SavedModel.")
flags.DEFINE_bool("do_lower_case", True, "Whether the vocabulary is uncased (lower-case and "
                  "strip accents before WordPiece).")
flags.DEFINE_bool("next_sentence_prediction", True, "With --input_text_file: sentence pairs with "
                  "next-sentence labels (BERT); --nonext_sentence_prediction: one segment per "
                  "sequence (RoBERTa).")
flags.DEFINE_bool("do_whole_word_mask", False, "With --input_text_file: mask whole words.")
flags.DEFINE_bool("eval_every_checkpoint", False, "With --do_train and --do_eval: evaluate after "
                  "every checkpoint too (a held-out curve in eval/), not only at the end.")
flags.DEFINE_string("export_dir", None, "After training, export the encoder with its masked-LM "
                    "head as a SavedModel to <export_dir>/<global step>/ (needs --vocab_file).")
flags.DEFINE_float("embedded_corpus_mb", embedded_default.CORPUS_MEGABYTES,
                   "Embedded default job only: megabytes of standard-library docstrings.")
flags.DEFINE_integer("embedded_vocab_size", embedded_default.VOCAB_SIZE,
                     "Embedded default job only: target size of the learned vocabulary "
                     "(see bert_tf.text.vocab.learn_vocab).")
FLAGS = flags.FLAGS

# Flags that name the job's inputs: with none of them, the embedded default job runs.
_JOB_FLAGS = ("input_file", "input_text_file", "eval_input_file", "bert_config_file",
              "init_checkpoint", "vocab_file")
_TEXT_INPUT_DEFAULTS = {"max_seq_length": 128, "max_predictions_per_seq": 20}


def _runs_embedded_default():
    return not any(FLAGS[name].present for name in _JOB_FLAGS)


def _input_problems():
    """What is missing or contradictory among the flags that name the job's inputs."""
    problems = []
    if not FLAGS.bert_config_file:
        problems.append("--bert_config_file (the model's bert_config.json) is required")
    if FLAGS.input_file and FLAGS.input_text_file:
        problems.append("--input_file (records) and --input_text_file (raw text) exclude each "
                        "other")
    if FLAGS.do_train and not (FLAGS.input_file or FLAGS.input_text_file):
        problems.append("--input_file (comma-separated globs of TFRecord files) or "
                        "--input_text_file (raw text) is required to train")
    if FLAGS.input_text_file and not FLAGS.vocab_file:
        problems.append("--input_text_file needs --vocab_file to tokenize the text")
    if FLAGS.do_eval and not (FLAGS.eval_input_file or FLAGS.input_file):
        problems.append("--eval_input_file (records) or --input_file is required to evaluate")
    if FLAGS.export_dir and not FLAGS.vocab_file:
        problems.append("--export_dir needs --vocab_file (the SavedModel carries it)")
    # Exports are versioned by the global step: without training, only a checkpoint of this
    # job (step > 0) has one; weights from --init_checkpoint are at step 0.
    if (FLAGS.export_dir and not FLAGS.do_train and FLAGS.output_dir
            and not os.path.exists(os.path.join(FLAGS.output_dir, "checkpoint"))):
        problems.append("--export_dir with --nodo_train exports the checkpoint in --output_dir, "
                        "which has none (export converted weights with export_savedmodel.py)")
    return problems


def _check_flags(embedded):
    # The embedded job writes its inputs itself, after these checks.
    problems = [] if embedded else _input_problems()
    if not FLAGS.output_dir:
        problems.append("--output_dir is required")
    if not (FLAGS.do_train or FLAGS.do_eval):
        problems.append("nothing to do: --do_train and --do_eval are both off")
    if embedded and FLAGS.strategy in ("multi_worker_mirrored", "tpu"):
        problems.append(f"the embedded default job runs on this machine, not with "
                        f"--strategy={FLAGS.strategy}; name the inputs with --input_file etc.")
    if embedded and not (0 < FLAGS.embedded_corpus_mb and FLAGS.embedded_vocab_size > 100):
        problems.append("--embedded_corpus_mb must be positive and --embedded_vocab_size over "
                        "100")
    for name in ("train_batch_size", "num_train_steps", "save_checkpoints_steps",
                 "steps_per_execution", "eval_batch_size", "keep_checkpoint_max",
                 "gradient_accumulation_steps"):
        if FLAGS[name].value < 1:
            problems.append(f"--{name} must be positive, got {FLAGS[name].value}")
    if not 0 <= FLAGS.num_warmup_steps <= FLAGS.num_train_steps:
        problems.append(f"--num_warmup_steps must be in [0, --num_train_steps], got "
                        f"{FLAGS.num_warmup_steps}")
    if FLAGS.learning_rate <= 0:
        problems.append(f"--learning_rate must be positive, got {FLAGS.learning_rate}")
    if FLAGS.max_eval_steps is not None and FLAGS.max_eval_steps < 1:
        problems.append(f"--max_eval_steps must be positive, got {FLAGS.max_eval_steps}")
    if problems:
        raise app.UsageError("run_pretraining.py: " + "; ".join(problems))


def _use_embedded_default():
    """Makes the embedded default job's settings the defaults of the flags not given."""
    for name, value in embedded_default.FLAG_DEFAULTS.items():
        FLAGS.set_default(name, value)
    print(f"run_pretraining.py: no input flags (--input_file, --input_text_file, ...): running "
          f"the embedded default job, pre-training {embedded_default.CONFIG_NAME} from scratch "
          f"on Python standard-library docstrings, into {FLAGS.output_dir}", flush=True)


def _prepare_embedded_inputs():
    """Writes (or finds) the embedded job's inputs and points the input flags at them."""
    inputs = embedded_default.prepare_inputs(FLAGS.output_dir, FLAGS.embedded_corpus_mb,
                                             FLAGS.embedded_vocab_size, seed=FLAGS.seed)
    FLAGS.input_file = ",".join(inputs.train_records)
    FLAGS.eval_input_file = ",".join(inputs.heldout_records)
    FLAGS.bert_config_file = inputs.bert_config_file
    FLAGS.vocab_file = inputs.vocab_file
    FLAGS.do_lower_case = True
    if not FLAGS.export_dir:
        FLAGS.export_dir = os.path.join(FLAGS.output_dir, "export")
    return inputs


def _record_lengths(files, flag):
    """(max_seq_length, max_predictions_per_seq) of the records, checked against the flags."""
    from bert_tf.data.pretraining.records_dataset import InputFileError, record_lengths

    lengths = record_lengths(files[0])
    for name, found in zip(("max_seq_length", "max_predictions_per_seq"), lengths):
        wanted = FLAGS[name].value
        if wanted is not None and wanted != found:
            raise InputFileError(f"{files[0]} (from {flag}) holds records with {name} {found}, "
                                 f"but --{name}={wanted}")
    return lengths


def _write_eval_results(path, step, metrics):
    with open(path, "w", encoding="utf-8") as f:
        f.write(f"global_step = {step}\n")
        for name in sorted(metrics):
            f.write(f"{name} = {metrics[name]}\n")


def _training_dataset_fn(train_files, text_files, seq_length, predictions):
    """`(input_context, start_step) -> dataset` of the records or, masked on the fly, the text."""
    from bert_tf.data.pretraining.dynamic_masking_dataset import dynamic_masking_dataset
    from bert_tf.data.pretraining.records_dataset import training_dataset
    from bert_tf.text.bert_tokenizer import BertTokenizer

    if text_files:
        tokenizer = BertTokenizer(FLAGS.vocab_file, FLAGS.do_lower_case)
        return lambda context, start_step: dynamic_masking_dataset(
            text_files, FLAGS.train_batch_size, seq_length, predictions, context,
            seed=FLAGS.seed, start_step=start_step, tokenizer=tokenizer,
            next_sentence=FLAGS.next_sentence_prediction,
            whole_word_mask=FLAGS.do_whole_word_mask)
    return lambda context, start_step: training_dataset(
        train_files, FLAGS.train_batch_size, seq_length, predictions, context, seed=FLAGS.seed,
        start_step=start_step)


class _HeldOutEvaluation:
    """Evaluates the trainer's current weights on the held-out records and records the result
    (log, `eval_results.txt`, TensorBoard `eval/`); remembers the last step it evaluated."""

    def __init__(self, trainer, files, seq_length, predictions, chief):
        from bert_tf.data.pretraining.records_dataset import count_records

        self.trainer, self.files, self.chief = trainer, files, chief
        self.seq_length, self.predictions = seq_length, predictions
        limit = FLAGS.max_eval_steps * FLAGS.eval_batch_size if FLAGS.max_eval_steps else None
        self.num_records = count_records(files, limit)
        self.steps = math.ceil(self.num_records / FLAGS.eval_batch_size)
        self.step, self.metrics = None, None

    def __call__(self):
        import tensorflow as tf

        from bert_tf.data.pretraining.records_dataset import evaluation_dataset, naming_bad_input_files
        from bert_tf.training.summaries import write_scalars

        with naming_bad_input_files(self.files, self.seq_length, self.predictions):
            self.metrics = self.trainer.evaluate(
                lambda context: evaluation_dataset(self.files, FLAGS.eval_batch_size,
                                                   self.seq_length, self.predictions,
                                                   self.num_records, context), self.steps)
        self.step = int(self.trainer.global_step.numpy())
        logging.info("Evaluation at step %d on %d records: %s", self.step, self.num_records,
                     self.metrics)
        if self.chief:
            _write_eval_results(os.path.join(FLAGS.output_dir, "eval_results.txt"), self.step,
                                self.metrics)
            writer = tf.summary.create_file_writer(os.path.join(FLAGS.output_dir, "eval"))
            write_scalars(writer, self.step, self.metrics)
            writer.close()


def _export(trainer, step):
    """The encoder with its MLM head as `<export_dir>/<step>/` (kept if already there)."""
    from bert_tf.export import export_encoder, write_version

    path = os.path.join(FLAGS.export_dir, str(step))
    if os.path.exists(path):
        logging.info("%s exists already: not exported again", path)
        return path
    path = write_version(FLAGS.export_dir, lambda directory: export_encoder(
        directory, trainer.model, FLAGS.vocab_file, FLAGS.do_lower_case), version=step)
    logging.info("Exported the encoder (with its masked-LM head) to %s", path)
    return path


def main(argv):
    if len(argv) > 1:
        raise app.UsageError(f"Unexpected arguments: {argv[1:]}")
    embedded = _runs_embedded_default()
    if embedded:
        _use_embedded_default()
    _check_flags(embedded)
    import keras
    import tensorflow as tf

    from bert_tf.checkpoints import restore_weights, write_model_files
    from bert_tf.config import BertConfig
    from bert_tf.data.pretraining.records_dataset import (expand_input_files, naming_bad_input_files,
                                                  record_lengths)
    from bert_tf.training import distribution
    from bert_tf.training.pretraining_trainer import PretrainingTrainer

    # Before any TensorFlow op: MultiWorkerMirroredStrategy configures the runtime's collectives.
    strategy = distribution.create_strategy(FLAGS.strategy, FLAGS.tpu)
    inputs = _prepare_embedded_inputs() if embedded else None
    text_files = (expand_input_files(FLAGS.input_text_file, "--input_text_file")
                  if FLAGS.do_train and FLAGS.input_text_file else [])
    train_files = (expand_input_files(FLAGS.input_file)
                   if FLAGS.do_train and not text_files else [])
    eval_flag = "--eval_input_file" if FLAGS.eval_input_file else "--input_file"
    eval_files = (expand_input_files(FLAGS.eval_input_file or FLAGS.input_file, eval_flag)
                  if FLAGS.do_eval else [])
    if text_files:
        for name, value in _TEXT_INPUT_DEFAULTS.items():
            FLAGS.set_default(name, value)
        seq_length, predictions = FLAGS.max_seq_length, FLAGS.max_predictions_per_seq
    else:
        seq_length, predictions = _record_lengths(train_files or eval_files,
                                                  "--input_file" if train_files else eval_flag)
    # Held-out records keep their own lengths: e.g. the paper's 15 % masking (20 predictions)
    # evaluates a model trained with more, or a short-sequence phase is evaluated at 128.
    eval_lengths = (record_lengths(eval_files[0])
                    if eval_files and (train_files or text_files) else (seq_length, predictions))
    config = BertConfig.from_json_file(FLAGS.bert_config_file)
    lengths = {"the training input": seq_length} if train_files or text_files else {}
    if eval_files:
        lengths[f"{eval_files[0]} (from {eval_flag})"] = eval_lengths[0]
    for source, length in lengths.items():
        if length > config.max_position_embeddings:
            raise app.UsageError(f"max_seq_length {length} exceeds max_position_embeddings "
                                 f"{config.max_position_embeddings} of {FLAGS.bert_config_file}"
                                 f" ({source})")

    keras.utils.set_random_seed(FLAGS.seed)
    replicas = strategy.num_replicas_in_sync
    if FLAGS.eval_batch_size % replicas:
        raise app.UsageError(f"--eval_batch_size {FLAGS.eval_batch_size} must be divisible by "
                             f"the {replicas} replicas")
    try:
        trainer = PretrainingTrainer(
            strategy, config, global_batch_size=FLAGS.train_batch_size,
            num_train_steps=FLAGS.num_train_steps, num_warmup_steps=FLAGS.num_warmup_steps,
            learning_rate=FLAGS.learning_rate, optimizer=FLAGS.optimizer,
            weight_decay_rate=FLAGS.weight_decay_rate, clip_norm=FLAGS.clip_norm,
            mixed_precision=FLAGS.mixed_precision, jit_compile=FLAGS.jit_compile,
            gradient_accumulation_steps=FLAGS.gradient_accumulation_steps)
    except ValueError as e:  # e.g. a batch that does not split over replicas
        raise app.UsageError(f"run_pretraining.py: {e} (--train_batch_size, "
                             f"--gradient_accumulation_steps)") from e
    chief = distribution.is_chief(strategy)
    if chief:  # the checkpoints are then complete for the fine-tuning tools' --init_checkpoint
        write_model_files(FLAGS.output_dir, config, FLAGS.vocab_file)
    evaluation = (_HeldOutEvaluation(trainer, eval_files, *eval_lengths, chief)
                  if FLAGS.do_eval else None)

    if FLAGS.do_train:
        logging.info("Training on %d %s file(s) on %d replica(s) (--strategy=%s)",
                     len(text_files or train_files), "text" if text_files else "record",
                     replicas, FLAGS.strategy)
        reading = (contextlib.nullcontext() if text_files
                   else naming_bad_input_files(train_files, seq_length, predictions))
        with reading:
            trainer.train(
                _training_dataset_fn(train_files, text_files, seq_length, predictions),
                FLAGS.output_dir, steps_per_execution=FLAGS.steps_per_execution,
                save_checkpoints_steps=FLAGS.save_checkpoints_steps,
                keep_checkpoint_max=FLAGS.keep_checkpoint_max,
                init_checkpoint=FLAGS.init_checkpoint,
                after_checkpoint=(lambda step: evaluation()) if FLAGS.eval_every_checkpoint
                else None)
    elif tf.train.latest_checkpoint(FLAGS.output_dir):
        trainer.restore(tf.train.latest_checkpoint(FLAGS.output_dir))
    elif FLAGS.init_checkpoint:
        restore_weights(trainer.model, FLAGS.init_checkpoint, pretraining_heads=True)
    else:
        raise app.UsageError("--nodo_train --do_eval needs a checkpoint: --output_dir has none "
                             "and --init_checkpoint is not set")

    step = int(trainer.global_step.numpy())
    if evaluation and evaluation.step != step:
        evaluation()
    export_dir = _export(trainer, step) if FLAGS.export_dir and chief else None
    if embedded and chief:
        print(embedded_default.summary(FLAGS.output_dir, inputs, step,
                                       tf.train.latest_checkpoint(FLAGS.output_dir),
                                       evaluation and evaluation.metrics, export_dir),
              flush=True)


if __name__ == "__main__":
    app.run(main)
