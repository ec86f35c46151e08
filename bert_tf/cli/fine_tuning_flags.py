"""The flags every fine-tuning tool shares (run_classifier, run_squad, run_ner,
run_multiple_choice): Google's `run_classifier.py` / `run_squad.py` flag names, plus mixed
precision, XLA and a seed; and the steps that turn them into the library's arguments.

A tool calls `define_fine_tuning_flags()` in its `define_flags`, validates with
`check_flags(...)`, and builds its encoder with `encoder_from_flags()` and its `FineTuner` with
`fine_tuner_from_flags(...)`.

Example (inside a tool):
    def main():
        common.check_flags({"train": ["data_dir"], ...})
        vocab_file = common.vocab_file_from_flags()
        encoder = common.encoder_from_flags()
"""

import logging
import math
import os

from absl import app, flags

from bert_tf.cli import checkpoint_flags
from bert_tf.cli.checkpoint_flags import define_checkpoint_flags
from bert_tf.cli.config_flag import bert_config_file_problem
from bert_tf.cli.path_checks import run_output_dir_problem
from bert_tf.cli.thread_pool_flags import define_thread_pool_flags, size_thread_pools_from_flags
from bert_tf.file_io import file_kind
from bert_tf.training.mixed_precision import MIXED_PRECISION

FLAGS = flags.FLAGS

# The flag of the file each mode reads from --data_dir (tools with `define_data_file_flags`).
DATA_FILE_FLAGS = {"train": "train_file", "eval": "eval_file", "predict": "predict_file"}

logger = logging.getLogger("bert_tf.tools")


def define_fine_tuning_flags(max_seq_length=128):
    """Defines the shared flags; `max_seq_length` is the tool's default for --max_seq_length."""
    define_checkpoint_flags("Pre-trained weights: a Google TF1 checkpoint, a Hugging Face "
                            "directory / model.safetensors, or this package's checkpoint. "
                            "Without it the encoder starts from random weights "
                            "(--bert_config_file); without --do_train, the run in "
                            "--output_dir is used.")
    flags.DEFINE_string("output_dir", None, "Checkpoints, TensorBoard logs, metrics and "
                        "predictions; training resumes from its latest checkpoint. A directory "
                        "holding files of these names but no run is refused.")
    flags.DEFINE_integer("max_seq_length", max_seq_length, "Longest packed input, in word "
                         "pieces; batches are padded only to their longest example.")
    flags.DEFINE_bool("do_train", False, "Fine-tune on the training data.")
    flags.DEFINE_bool("do_eval", False, "Evaluate on the dev data (writes eval_results.json).")
    flags.DEFINE_bool("do_predict", False, "Predict the test data (writes predictions).")
    flags.DEFINE_integer("train_batch_size", 32, "Examples per training step.")
    flags.DEFINE_integer("eval_batch_size", 64, "Examples per evaluation batch.")
    flags.DEFINE_integer("predict_batch_size", 64, "Examples per prediction batch.")
    flags.DEFINE_float("learning_rate", 5e-5, "Peak learning rate of AdamW.")
    flags.DEFINE_float("num_train_epochs", 3.0, "Passes over the training data (may be "
                       "fractional).")
    flags.DEFINE_integer("num_train_steps", None, "Optimizer steps to train; overrides "
                         "--num_train_epochs.", lower_bound=1)
    flags.DEFINE_float("warmup_proportion", 0.1, "Share of the steps with a linear warmup.")
    flags.DEFINE_integer("save_checkpoints_steps", 1000, "Checkpoint every this many steps.")
    flags.DEFINE_integer("steps_per_execution", 10, "Training steps per host call; the "
                         "progress bar moves, and checkpoints and TensorBoard logs fall due, "
                         "at the end of a call. 10 trains SST-2 ~3 % faster than 1 "
                         "(docs/PERFORMANCE.md).", lower_bound=1)
    flags.DEFINE_enum("mixed_precision", "float32", list(MIXED_PRECISION),
                      "Compute dtype of the encoder (bfloat16 is faster on CPUs with "
                      "AMX/AVX512-BF16 and on TPUs; float32 keeps the reference numerics).")
    flags.DEFINE_bool("jit_compile", False, "Compile the train step with XLA (one compilation "
                      "per padded length).")
    flags.DEFINE_integer("seed", 12345, "Seed of the head's initial weights, dropout and "
                         "shuffling.")
    define_thread_pool_flags("1 also runs each training step as two passes over the halves "
                             "of the batch, one per core, each with its own dropout masks "
                             "(resume a run with the same setting); on 2 cores it trains "
                             "SST-2's short texts faster (docs/PERFORMANCE.md).")


def define_data_file_flags(kind, train, eval, predict, predict_note=""):
    """Defines --data_dir (a directory of `kind` files) and --train_file, --eval_file,
    --predict_file with these default names in it (`DATA_FILE_FLAGS`)."""
    flags.DEFINE_string("data_dir", None, f"Directory of the {kind} files.")
    flags.DEFINE_string("train_file", train, "Training file, in --data_dir (or a path).")
    flags.DEFINE_string("eval_file", eval, "Evaluation file (with labels), in --data_dir.")
    flags.DEFINE_string("predict_file", predict, "File to predict, in --data_dir" + predict_note
                        + ".")


def check_flags(data_flags, data_files=None, tool_problems=(), outputs=(), segments=1):
    """Raises `app.UsageError` listing every missing or invalid common flag and `tool_problems`
    (the tool's own), so that one run shows all of them.

    `data_flags` maps each of "train", "eval", "predict" to the flag(s) that tool needs for it,
    e.g. `{"train": ["data_dir"], ...}`; `data_files` maps them to the flag of the file they read
    in --data_dir (`data_path`), which must exist: checked before minutes of model loading and
    training, not after. `outputs` are the names (shell patterns) of the files the tool writes
    to --output_dir beside every run's (e.g. "predictions*.tsv"), checked with the run's own
    (`run_output_dir_problem`). `segments` is how many texts each input packs
    (`max_seq_length_problem`). Then sizes TensorFlow's thread pools
    (--tensorflow_intra_op_parallelism, --tensorflow_inter_op_parallelism), which must happen
    before its first op."""
    problems = list(tool_problems)
    if not (FLAGS.do_train or FLAGS.do_eval or FLAGS.do_predict):
        problems.append("nothing to do: give --do_train, --do_eval and/or --do_predict")
    if not FLAGS.output_dir:
        problems.append("--output_dir is required")
    elif problem := (_hugging_face_model_problem(FLAGS.output_dir)
                     or run_output_dir_problem(FLAGS.output_dir, outputs)):
        problems.append(problem)
    init_checkpoint = init_checkpoint_from_flags()
    try:
        do_lower_case_from_flags()
    except (app.UsageError, ValueError) as error:
        problems.append(str(error))
    if not (init_checkpoint or FLAGS.bert_config_file):
        problems.append("--init_checkpoint (pre-trained weights) or at least --bert_config_file "
                        "is required")
    elif problem := bert_config_file_problem(FLAGS.bert_config_file):
        problems.append(problem)
    if not (FLAGS.vocab_file or init_checkpoint):
        problems.append("--vocab_file is required without --init_checkpoint")
    if problem := max_seq_length_problem(segments):
        problems.append(problem)
    for name in ("train_batch_size", "eval_batch_size", "predict_batch_size",
                 "save_checkpoints_steps"):
        if FLAGS[name].value < 1:
            problems.append(f"--{name} must be positive, got {FLAGS[name].value}")
    if FLAGS.do_train and not FLAGS.num_train_epochs > 0:
        problems.append(f"--num_train_epochs must be positive, got {FLAGS.num_train_epochs}")
    if not FLAGS.learning_rate > 0:
        problems.append(f"--learning_rate must be positive, got {FLAGS.learning_rate}")
    if not 0 <= FLAGS.warmup_proportion <= 1:
        problems.append(f"--warmup_proportion must be in [0, 1], got {FLAGS.warmup_proportion}")
    data_dir_is_a_file = ("data_dir" in FLAGS and FLAGS.data_dir
                          and file_kind(FLAGS.data_dir) == "file")
    if data_dir_is_a_file:
        problems.append(f"--data_dir {FLAGS.data_dir} is a file, not a directory (of the "
                        f"task's files)")
    for mode, names in data_flags.items():
        if not FLAGS[f"do_{mode}"].value:
            continue
        missing = [f"--do_{mode} needs --{name}" for name in names if not FLAGS[name].value]
        problems += missing
        name = (data_files or {}).get(mode)
        kind = (file_kind(data_path(name)) if name and not (missing or data_dir_is_a_file)
                else "file")
        if kind != "file":
            what = {None: "does not exist", "directory": "is a directory, not a file"}.get(
                kind, "is not a regular file")
            problems.append(f"--do_{mode}: {data_path(name)} (--data_dir/--{name}) {what}")
    if problems:
        raise app.UsageError("; ".join(problems))
    size_thread_pools_from_flags()  # before the tool's first TensorFlow op


def max_seq_length_problem(segments=1):
    """Why --max_seq_length cannot hold inputs of `segments` texts (1, or 2 for pairs): [CLS],
    one [SEP] per segment and a word piece of each text must fit (with the special tokens alone,
    `BertPacker`'s own bound, the model would train on no text at all); None otherwise. Checked
    with the flags because the packer meets its bound only inside the traced tf.data pipeline,
    after the model loaded, where its error reaches the user as a TensorFlow traceback."""
    need = 2 * segments + 1
    if FLAGS.max_seq_length >= need:
        return None
    inputs = {1: "a text", 2: "a sentence pair"}.get(segments, f"{segments} texts")
    return (f"--max_seq_length {FLAGS.max_seq_length} cannot hold {inputs}: it needs at least "
            f"{need} ([CLS], one [SEP] per segment and a word piece of each text)")


def _hugging_face_model_problem(output_dir):
    """Why `output_dir` cannot take a run when it holds a Hugging Face model (e.g. it is the
    --init_checkpoint): every tool reading the directory would read that model, not the
    fine-tuned checkpoints written beside it; None otherwise."""
    from bert_tf.checkpoints.sources import HUGGING_FACE_WEIGHT_FILES, detect_format

    try:
        _, weights = detect_format(output_dir)  # what a tool reading the directory reads
    except (OSError, ValueError):  # no checkpoint there (yet), or none this package reads
        return None
    name = os.path.basename(weights)
    if name not in HUGGING_FACE_WEIGHT_FILES:  # the ones read before any checkpoint there
        return None
    return (f"--output_dir {output_dir} holds a Hugging Face model ({name}, e.g. the initial "
            f"weights), which tools reading the directory would take instead of the fine-tuned "
            f"checkpoints; use another --output_dir")


def fine_tune_on_data_dir(fine_tune, outputs, files=True, segments=1):
    """The `main` of a tool whose modes read the files of `define_data_file_flags` (unless
    `files` is False: the data comes from elsewhere, e.g. --tfds_name), pack inputs of
    `segments` texts and write `outputs` to --output_dir (`check_flags`): checks the flags,
    then calls `fine_tune(vocab_file)`."""
    if files:
        check_flags({mode: ["data_dir"] for mode in DATA_FILE_FLAGS}, data_files=DATA_FILE_FLAGS,
                    outputs=outputs, segments=segments)
    else:
        check_flags({}, outputs=outputs, segments=segments)
    logging.getLogger("bert_tf").setLevel(logging.INFO)
    fine_tune(vocab_file_from_flags())


def init_checkpoint_from_flags():
    """--init_checkpoint; without it and --bert_config_file, when the tool only evaluates or
    predicts, the run in --output_dir, which holds its model's bert_config.json and vocab.txt
    (`prepare_output_dir`) beside its checkpoints: `--do_eval --output_dir=/tmp/sst2` evaluates
    what trained there."""
    if (FLAGS.init_checkpoint or FLAGS.bert_config_file or FLAGS.do_train
            or not FLAGS.output_dir):
        return FLAGS.init_checkpoint
    if file_kind(os.path.join(FLAGS.output_dir, "bert_config.json")) == "file":
        return FLAGS.output_dir
    return None


def vocab_file_from_flags():
    """--vocab_file, or the vocab.txt beside the initial checkpoint
    (`init_checkpoint_from_flags`), which --vocab_file must equal
    (`checkpoint_vocab_file_from_flags`)."""
    return checkpoint_flags.checkpoint_vocab_file_from_flags(init_checkpoint_from_flags())


def do_lower_case_from_flags():
    """--do_lower_case, defaulting to (and checked against) the casing stated beside the
    initial checkpoint (`init_checkpoint_from_flags`) or recorded by the run in --output_dir
    (`checkpoint_flags.do_lower_case_from_flags`)."""
    return checkpoint_flags.do_lower_case_from_flags(init_checkpoint_from_flags(),
                                                     FLAGS.output_dir)


def encoder_from_flags():
    """The `BertEncoder` to fine-tune (`fine_tuning_encoder`), after --seed is set (it seeds
    the task head's initial weights too)."""
    import keras

    from bert_tf.training.fine_tuning_encoder import fine_tuning_encoder

    keras.utils.set_random_seed(FLAGS.seed)
    return fine_tuning_encoder(init_checkpoint_from_flags(), FLAGS.bert_config_file,
                               FLAGS.mixed_precision, FLAGS.max_seq_length)


# The flags a run's checkpoints follow: with --do_train, a run in --output_dir trained with
# other values is refused rather than resumed (`check_existing_run`).
TRAINING_SETTINGS = ("learning_rate", "train_batch_size", "num_train_epochs", "num_train_steps",
                     "warmup_proportion", "max_seq_length", "seed")


def prepare_output_dir(encoder, vocab_file, tool, task=None, training_examples=None):
    """Writes `bert_config.json`, `vocab.txt`, `run.json` and the casing
    (`do_lower_case_from_flags`) into --output_dir (`record_run`:
    its checkpoints are then complete for `bert-tf-export-savedmodel` and as an
    --init_checkpoint). A tool calls it last before training, once everything else that can
    refuse the run (its data, vocabulary, preprocessor) has been checked: files left by a
    refused run would make the directory "a run of another task" for the corrected command.
    It checks, so that nothing is written otherwise: that the
    encoder's vocab_size fits the vocabulary, that --output_dir holds no run of another model
    or task (`check_existing_run`; `tool` and `task`, e.g. "run_classifier" and "SST-2", name
    this run's) nor, with --do_train, one trained with other `TRAINING_SETTINGS` or on another
    number of `training_examples` (other data: a run resumed on it would mix the two), and,
    without --do_train, that it has a checkpoint to use.

    Example (in run_classifier):
        common.prepare_output_dir(encoder, vocab_file, "run_classifier", task.name, len(train))
    """
    import tensorflow as tf

    from bert_tf.text.vocab_size import check_vocab_size
    from bert_tf.training.existing_run import check_existing_run, record_run

    check_vocab_size(encoder.config, vocab_file,
                     FLAGS.bert_config_file or f"the config of {init_checkpoint_from_flags()}")
    if not FLAGS.do_train and not tf.train.latest_checkpoint(FLAGS.output_dir):
        raise app.UsageError(f"--do_eval/--do_predict without --do_train needs a fine-tuned "
                             f"checkpoint in --output_dir {FLAGS.output_dir}; it has none")
    training = ({name: FLAGS[name].value for name in TRAINING_SETTINGS
                 # --num_train_steps overrides the epochs: they say nothing of the schedule.
                 if not (name == "num_train_epochs" and FLAGS.num_train_steps)}
                if FLAGS.do_train else None)
    if training is not None and training_examples is not None:
        training["training_examples"] = training_examples
    check_existing_run(FLAGS.output_dir, encoder.config, vocab_file, tool, task, training)
    record_run(FLAGS.output_dir, encoder.config, vocab_file, tool, task,
               do_lower_case_from_flags(), training)


def print_export_command(export_type, *export_flags):
    """Prints, after training, the `bert-tf-export-savedmodel` command that serves the run:
    its checkpoint, --max_seq_length, its casing and `export_flags` (the task's, e.g.
    "--doc_stride=128"); the user completes `--output_dir`.

    Example:
        >>> print_export_command("ner")
        To serve it: bert-tf-export-savedmodel --export_type=ner --init_checkpoint=/tmp/ner
        --output_dir=<model base path> --seq_length=128
    """
    casing = [] if do_lower_case_from_flags() else ["--nodo_lower_case"]
    print("To serve it: " + " ".join([
        "bert-tf-export-savedmodel", f"--export_type={export_type}",
        f"--init_checkpoint={FLAGS.output_dir}", "--output_dir=<model base path>",
        f"--seq_length={FLAGS.max_seq_length}", *export_flags, *casing]))


def num_train_steps(num_examples):
    """--num_train_steps, else the optimizer steps for --num_train_epochs over `num_examples` at
    --train_batch_size."""
    if FLAGS.num_train_steps:
        return FLAGS.num_train_steps
    return max(1, math.ceil(num_examples * FLAGS.num_train_epochs / FLAGS.train_batch_size))


def fine_tuner_from_flags(model, num_examples, **compile_arguments):
    """A `FineTuner` for `model` with the flags' optimizer, schedule and checkpointing;
    `compile_arguments` are its `loss`, `metrics`, `loss_weights`."""
    from bert_tf.training.fine_tuning import FineTuner

    steps = num_train_steps(num_examples)
    if FLAGS.do_train:  # else `num_examples` stands in for data that is not read
        epochs = steps * FLAGS.train_batch_size / max(num_examples, 1)
        logger.info("%d training examples, %d steps at batch %d (%.2f epochs)", num_examples,
                    steps, FLAGS.train_batch_size, epochs)
    return FineTuner(model, FLAGS.output_dir, num_train_steps=steps,
                     learning_rate=FLAGS.learning_rate,
                     warmup_proportion=FLAGS.warmup_proportion,
                     steps_per_checkpoint=FLAGS.save_checkpoints_steps,
                     jit_compile=FLAGS.jit_compile,
                     steps_per_execution=FLAGS.steps_per_execution, **compile_arguments)


def data_path(flag_name):
    """The file named by flag `flag_name`, inside --data_dir unless it is an absolute path."""
    return os.path.join(FLAGS.data_dir, FLAGS[flag_name].value)


def training_batches_from_flags(examples, num_examples, prepare=None, drop_remainder=False):
    """The `dataset_fn` of `FineTuner.train` (`training_batches_fn`) at --train_batch_size,
    --max_seq_length and --seed."""
    from bert_tf.data.tasks.training_batches import training_batches_fn

    return training_batches_fn(examples, num_examples, FLAGS.train_batch_size,
                               FLAGS.max_seq_length, FLAGS.seed, prepare=prepare,
                               drop_remainder=drop_remainder)


def write_json(name, value, **dump_options):
    """Writes `value` as indented JSON to --output_dir/`name`; returns the path."""
    from bert_tf.training.eval_results import write_json as write_json_file

    return write_json_file(os.path.join(FLAGS.output_dir, name), value, **dump_options)


def write_results(results, step):
    """Writes `results` to --output_dir's eval_results.json and TensorBoard `eval/`
    (`write_eval_results`); returns the JSON's path."""
    from bert_tf.training.eval_results import write_eval_results

    return write_eval_results(FLAGS.output_dir, results, step)
