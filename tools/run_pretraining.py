"""Pre-trains BERT (masked LM + next sentence) on TFRecords from `create_pretraining_data.py`.

Google's `run_pretraining.py` flags, on TF2 `tf.distribute`: one process per machine,
synchronous data parallelism, XLA, mixed precision, gradient accumulation, checkpoints with
automatic resume (rerun the same command after a crash: it continues from the latest
checkpoint in --output_dir at its exact step, optimizer state and input position).

Examples:
    python tools/run_pretraining.py --bert_config_file=official_configs/bert_tiny.json \\
        --input_file="data/wiki-*.tfrecord,data/books-*.tfrecord" --output_dir=/tmp/pretrain \\
        --train_batch_size=256 --num_train_steps=100000 --num_warmup_steps=10000 \\
        --learning_rate=1e-4 --strategy=mirrored --mixed_precision=bfloat16
    python tools/run_pretraining.py ... --strategy=tpu --tpu=grpc://10.2.3.4:8470
    python tools/run_pretraining.py ... --nodo_train --do_eval --eval_input_file=heldout.tfrecord

Outputs in --output_dir: `ckpt-<step>.*` (the package's checkpoint: `encoder` + `pretraining_heads`
+ optimizer, readable by every tool's --init_checkpoint), `bert_config.json`, TensorBoard
scalars in `train/` and `eval/`, and `eval_results.txt`.
"""

import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from absl import app, flags, logging  # noqa: E402

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
                     "(must match them).")
flags.DEFINE_integer("max_predictions_per_seq", None, "Masked-LM predictions per sequence; "
                     "default: read from the records (must match them).")
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
FLAGS = flags.FLAGS


def _check_flags():
    problems = []
    if not FLAGS.bert_config_file:
        problems.append("--bert_config_file (the model's bert_config.json) is required")
    if not FLAGS.output_dir:
        problems.append("--output_dir is required")
    if not (FLAGS.do_train or FLAGS.do_eval):
        problems.append("nothing to do: --do_train and --do_eval are both off")
    if FLAGS.do_train and not FLAGS.input_file:
        problems.append("--input_file (comma-separated globs of TFRecord files) is required to "
                        "train")
    if FLAGS.do_eval and not (FLAGS.eval_input_file or FLAGS.input_file):
        problems.append("--eval_input_file or --input_file is required to evaluate")
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


def _record_lengths(files, flag):
    """(max_seq_length, max_predictions_per_seq) of the records, checked against the flags."""
    from bert_tf.data.pretraining_dataset import InputFileError, record_lengths

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


def main(argv):
    del argv
    _check_flags()
    import keras
    import tensorflow as tf

    from bert_tf.config import BertConfig
    from bert_tf.data.pretraining_dataset import (count_records, evaluation_dataset,
                                                  expand_input_files, naming_bad_input_files,
                                                  training_dataset)
    from bert_tf.training import distribution
    from bert_tf.training.pretraining_trainer import PretrainingTrainer, write_scalars

    config = BertConfig.from_json_file(FLAGS.bert_config_file)
    train_files = expand_input_files(FLAGS.input_file) if FLAGS.do_train else []
    eval_flag = "--eval_input_file" if FLAGS.eval_input_file else "--input_file"
    eval_files = (expand_input_files(FLAGS.eval_input_file or FLAGS.input_file, eval_flag)
                  if FLAGS.do_eval else [])
    # Before any TensorFlow op: MultiWorkerMirroredStrategy configures the runtime's collectives.
    strategy = distribution.create_strategy(FLAGS.strategy, FLAGS.tpu)
    seq_length, predictions = _record_lengths(train_files or eval_files,
                                              "--input_file" if train_files else eval_flag)
    if eval_files and train_files:
        _record_lengths(eval_files, eval_flag)
    if seq_length > config.max_position_embeddings:
        raise app.UsageError(f"The records' max_seq_length {seq_length} exceeds "
                             f"max_position_embeddings {config.max_position_embeddings} of "
                             f"{FLAGS.bert_config_file}")

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
    if chief:
        os.makedirs(FLAGS.output_dir, exist_ok=True)
        config.to_json_file(os.path.join(FLAGS.output_dir, "bert_config.json"))

    if FLAGS.do_train:
        logging.info("Training on %d file(s) on %d replica(s) (--strategy=%s)", len(train_files),
                     replicas, FLAGS.strategy)
        with naming_bad_input_files(train_files, seq_length, predictions):
            trainer.train(
                lambda context, start_step: training_dataset(
                    train_files, FLAGS.train_batch_size, seq_length, predictions, context,
                    seed=FLAGS.seed, start_step=start_step),
                FLAGS.output_dir, steps_per_execution=FLAGS.steps_per_execution,
                save_checkpoints_steps=FLAGS.save_checkpoints_steps,
                keep_checkpoint_max=FLAGS.keep_checkpoint_max,
                init_checkpoint=FLAGS.init_checkpoint)
    elif tf.train.latest_checkpoint(FLAGS.output_dir):
        trainer.restore(tf.train.latest_checkpoint(FLAGS.output_dir))
    elif FLAGS.init_checkpoint:
        trainer.model.load_checkpoint(FLAGS.init_checkpoint, require_heads=True)
    else:
        raise app.UsageError("--nodo_train --do_eval needs a checkpoint: --output_dir has none "
                             "and --init_checkpoint is not set")

    if FLAGS.do_eval:
        limit = FLAGS.max_eval_steps * FLAGS.eval_batch_size if FLAGS.max_eval_steps else None
        num_records = count_records(eval_files, limit)
        steps = math.ceil(num_records / FLAGS.eval_batch_size)
        with naming_bad_input_files(eval_files, seq_length, predictions):
            metrics = trainer.evaluate(
                lambda context: evaluation_dataset(eval_files, FLAGS.eval_batch_size, seq_length,
                                                   predictions, num_records, context), steps)
        step = int(trainer.global_step.numpy())
        logging.info("Evaluation at step %d on %d records: %s", step, num_records, metrics)
        if chief:
            _write_eval_results(os.path.join(FLAGS.output_dir, "eval_results.txt"), step, metrics)
            writer = tf.summary.create_file_writer(os.path.join(FLAGS.output_dir, "eval"))
            write_scalars(writer, step, metrics)
            writer.close()


if __name__ == "__main__":
    app.run(main)
