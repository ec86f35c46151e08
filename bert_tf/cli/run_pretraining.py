"""Pre-trains BERT (masked LM + next sentence) on TFRecords from
`bert-tf-create-pretraining-data`, or on raw text masked on the fly.

Google's `run_pretraining.py` flags, on TF2 `tf.distribute`: one process per machine,
synchronous data parallelism, XLA, mixed precision, gradient accumulation, checkpoints with
automatic resume (rerun the same command after a crash: it continues from the latest
checkpoint in --output_dir at its exact step, optimizer state and input position).

With no flags that name the job's inputs (--input_file, --input_text_file, --eval_input_file,
--bert_config_file, --init_checkpoint, --vocab_file), it runs the embedded default job: a few
minutes of pre-training from scratch on the Python standard library's docstrings, from the
corpus to an exported encoder (`bert_tf.training.embedded_default`), into
/tmp/bert_tf_pretraining_default unless --output_dir says otherwise.

Examples:
    bert-tf-run-pretraining                     # the embedded default job
    bert-tf-run-pretraining --bert_config_file=bert_tiny \\
        --input_file="data/wiki-*.tfrecord,data/books-*.tfrecord" --output_dir=/tmp/pretrain \\
        --train_batch_size=256 --num_train_steps=100000 --num_warmup_steps=10000 \\
        --learning_rate=1e-4 --strategy=mirrored --mixed_precision=bfloat16
    bert-tf-run-pretraining ... --strategy=tpu --tpu=grpc://10.2.3.4:8470
    bert-tf-run-pretraining ... --nodo_train --do_eval --eval_input_file=heldout.tfrecord
    bert-tf-run-pretraining --bert_config_file=bert_mini \\
        --input_text_file="corpus/*.txt" --vocab_file=vocab.txt --output_dir=/tmp/pretrain \\
        --max_seq_length=128 --export_dir=/tmp/pretrain/export

Outputs in --output_dir: `ckpt-<step>.*` (the package's checkpoint: `encoder` + `pretraining_heads`
+ optimizer, readable by every tool's --init_checkpoint), `bert_config.json`, `run.json`,
TensorBoard scalars in `train/` and `eval/`, and `eval_results.json`; with --export_dir, the
encoder SavedModel in `<export_dir>/<step>/`. An --output_dir holding a run of another model, or
files of these names but no run, is refused before anything is written; so is an --output_dir or
--export_dir (or a file there written again) that cannot be written.
"""

import contextlib
import os
import types

from absl import app, flags, logging

from bert_tf.cli import config_flag, tfds_flags
from bert_tf.cli.app import run_tool
from bert_tf.cli.path_checks import (output_dir_problem, run_output_dir_problem,
                                     unwritable_output_problem)
from bert_tf.training import embedded_default
from bert_tf.training.mixed_precision import MIXED_PRECISION
from bert_tf.training.optimizer_names import OPTIMIZERS
from bert_tf.training.strategy_names import STRATEGIES

FLAGS = flags.FLAGS

_TOOL = "run_pretraining"  # what --output_dir's run.json says trained its checkpoints

# Flags that name the job's inputs: with none of them, the embedded default job runs.
_JOB_FLAGS = ("input_file", "input_text_file", "tfds_name", "eval_input_file",
              "bert_config_file", "init_checkpoint", "vocab_file")
_TEXT_INPUT_DEFAULTS = {"max_seq_length": 128, "max_predictions_per_seq": 20}
# Percent of --num_train_steps that warm up when --num_warmup_steps is not given.
WARMUP_PERCENT = 10
# The flags the checkpoints' optimizer and schedule follow, recorded in run.json. A run
# resumes with other values (the paper's second phase trains another batch size), with a
# warning naming them. Not --num_train_steps: raising it extends a run.
_TRAINING_SETTINGS = ("train_batch_size", "learning_rate", "optimizer", "num_warmup_steps",
                      "weight_decay_rate", "clip_norm", "gradient_accumulation_steps")
_NOTHING_TO_EVALUATE = ("--nodo_train --do_eval needs a checkpoint: --output_dir has none and "
                        "--init_checkpoint is not set")
# Records whose token ids are checked against the config's vocab_size before training: one
# file's first records, a fraction of a second (its other records and files are not read).
_CHECKED_RECORDS = 256


def define_flags():
    # The original BERT flags (same names and meaning).
    config_flag.define_bert_config_file_flag("The model's bert_config.json.")
    flags.DEFINE_string("input_file", None, "Comma-separated globs of training TFRecord files "
                        "(create_pretraining_data).")
    flags.DEFINE_string("output_dir", None, "Where checkpoints and summaries go; resumed from if "
                        "it holds checkpoints.")
    flags.DEFINE_string("init_checkpoint", None, "Initial weights when --output_dir has no "
                        "checkpoint: a Google, Hugging Face or bert_tf checkpoint (heads too if "
                        "present).")
    flags.DEFINE_integer("train_batch_size", 32, "Examples per optimizer step, over all "
                         "replicas.")
    flags.DEFINE_integer("max_seq_length", None, "Tokens per sequence; default: read from the "
                         "records (must match them), 128 with --input_text_file.")
    flags.DEFINE_integer("max_predictions_per_seq", None, "Masked-LM predictions per sequence; "
                         "default: read from the records (must match them), 20 with "
                         "--input_text_file. Held-out records (--eval_input_file) are read "
                         "with their own lengths.")
    flags.DEFINE_integer("num_train_steps", 100000, "Optimizer steps of the whole run.")
    flags.DEFINE_integer("num_warmup_steps", None, "Linear learning-rate warmup steps; "
                         f"default: {WARMUP_PERCENT} % of --num_train_steps (the original "
                         "flags' 10000 of 100000, scaled to the job's length).")
    flags.DEFINE_float("learning_rate", 5e-5, "Peak learning rate (then linear decay to 0).")
    flags.DEFINE_integer("save_checkpoints_steps", 1000, "Checkpoint every this many steps.")
    flags.DEFINE_string("tpu", None, "The TPU for --strategy=tpu: grpc://HOST:PORT, a Cloud TPU "
                        "name or 'local'.")
    flags.DEFINE_bool("do_train", True, "Train.")
    flags.DEFINE_bool("do_eval", False, "Evaluate on --eval_input_file (default --input_file).")
    flags.DEFINE_integer("eval_batch_size", 8, "Examples per evaluation step, over all "
                         "replicas.")
    flags.DEFINE_integer("max_eval_steps", None, "Evaluate at most this many batches (default: "
                         "all records).")
    # TF2 additions.
    flags.DEFINE_enum("strategy", "mirrored", STRATEGIES, "The tf.distribute strategy.")
    flags.DEFINE_bool("jit_compile", True, "Compile the train step with XLA.")
    flags.DEFINE_enum("mixed_precision", "float32", list(MIXED_PRECISION),
                      "Compute dtype of the encoder (float16 adds dynamic loss scaling).")
    flags.DEFINE_enum("optimizer", "adamw", OPTIMIZERS, "adamw (Google's BERT) or lamb (large "
                      "batches).")
    flags.DEFINE_float("weight_decay_rate", 0.01, "Decoupled weight decay (not on LayerNorm, "
                       "biases).")
    flags.DEFINE_float("clip_norm", 1.0, "Clip the global gradient norm to this (0: no "
                       "clipping).")
    flags.DEFINE_integer("gradient_accumulation_steps", 1, "Split each replica's batch into this "
                         "many micro-batches (same update, less memory).")
    flags.DEFINE_integer("steps_per_execution", 100, "Train steps per host call (and per "
                         "summary).")
    flags.DEFINE_integer("keep_checkpoint_max", 5, "Checkpoints kept.")
    flags.DEFINE_string("eval_input_file", None, "Comma-separated globs of held-out TFRecord "
                        "files.")
    flags.DEFINE_integer("seed", 12345, "Seed of the initial weights, dropout and input "
                         "shuffling.")
    flags.DEFINE_string("input_text_file", None, "Instead of --input_file: comma-separated globs "
                        "of raw text files (one sentence per line, blank lines between "
                        "documents), tokenized and masked anew each epoch (dynamic masking); "
                        "needs --vocab_file.")
    flags.DEFINE_string("vocab_file", None, "The vocabulary: tokenizes --input_text_file and "
                        "goes into the --export_dir SavedModel.")
    flags.DEFINE_bool("do_lower_case", True, "Whether the vocabulary is uncased (lower-case and "
                      "strip accents before WordPiece).")
    flags.DEFINE_bool("next_sentence_prediction", True, "With --input_text_file: sentence pairs "
                      "with next-sentence labels (BERT); --nonext_sentence_prediction: one "
                      "segment per sequence (RoBERTa).")
    flags.DEFINE_bool("do_whole_word_mask", False, "With --input_text_file: mask whole words.")
    flags.DEFINE_bool("cut_long_lines", False, "With raw text: cut a line longer than "
                      "a segment (a paragraph or a book per line) into segments instead of "
                      "truncating it as the original does (it then loses no text, but pairs "
                      "break mid-sentence).")
    flags.DEFINE_bool("eval_every_checkpoint", False, "With --do_train and --do_eval: evaluate "
                      "after every checkpoint too (a held-out curve in eval/), not only at the "
                      "end.")
    flags.DEFINE_string("export_dir", None, "After training, export the encoder with its "
                        "masked-LM head as a SavedModel to <export_dir>/<global step>/ (needs "
                        "--vocab_file).")
    flags.DEFINE_float("embedded_corpus_mb", embedded_default.CORPUS_MEGABYTES,
                       "Embedded default job only: megabytes of standard-library docstrings.")
    flags.DEFINE_integer("embedded_vocab_size", embedded_default.VOCAB_SIZE,
                         "Embedded default job only: target size of the learned vocabulary "
                         "(see bert_tf.text.vocab.learn_vocab).")
    # Instead of --input_text_file: TFDS text, masked on the fly the same way.
    tfds_flags.define_pretraining_tfds_flags()


def _runs_embedded_default():
    return not any(FLAGS[name].present for name in _JOB_FLAGS)


def _embedded_defaults():
    """The embedded default job's settings, by the flag that sets each."""
    settings = embedded_default.SETTINGS
    return {"output_dir": settings.output_dir, "strategy": settings.strategy,
            "jit_compile": settings.jit_compile, "train_batch_size": settings.global_batch_size,
            "num_train_steps": settings.num_train_steps, "learning_rate": settings.learning_rate,
            "save_checkpoints_steps": settings.save_checkpoints_steps,
            "steps_per_execution": settings.steps_per_execution, "do_eval": settings.evaluate,
            "eval_batch_size": settings.eval_batch_size}


def _job(embedded):
    """The job's settings: the flags' values, with the embedded default job's own defaults for
    the flags not given when it runs. `main` reads these, never FLAGS, so that what the job
    fills in later (the embedded job's inputs, lengths read from records) stays out of FLAGS."""
    job = {flag.name: flag.value
           for module in (__name__, tfds_flags.__name__, config_flag.__name__)
           for flag in FLAGS.get_flags_for_module(module)}
    if embedded:
        job.update({name: value for name, value in _embedded_defaults().items()
                    if not FLAGS[name].present})
    if job["num_warmup_steps"] is None:
        job["num_warmup_steps"] = job["num_train_steps"] * WARMUP_PERCENT // 100
    return types.SimpleNamespace(**job)


def _has_checkpoint_state(output_dir):
    """Whether `output_dir` (local or gs://) holds a `checkpoint` state file."""
    import tensorflow as tf  # after bert_tf.__init__ skipped libtpu without a TPU chip

    return tf.io.gfile.exists(os.path.join(output_dir, "checkpoint"))


def _input_problems(job):
    """What is missing or contradictory among the flags that name the job's inputs."""
    problems = []
    if not job.bert_config_file:
        problems.append("--bert_config_file (the model's bert_config.json) is required")
    elif problem := config_flag.bert_config_file_problem(job.bert_config_file):
        problems.append(problem)
    if job.input_file and job.input_text_file:
        problems.append("--input_file (records) and --input_text_file (raw text) exclude each "
                        "other")
    if job.tfds_name and (job.input_file or job.input_text_file):
        problems.append("--tfds_name (TFDS text) excludes --input_file and --input_text_file")
    if job.do_train and not (job.input_file or job.input_text_file or job.tfds_name):
        problems.append("--input_file (comma-separated globs of TFRecord files), "
                        "--input_text_file (raw text) or --tfds_name (TFDS text) is required "
                        "to train")
    for text_flag in ("input_text_file", "tfds_name"):
        if getattr(job, text_flag) and not job.vocab_file:
            problems.append(f"--{text_flag} needs --vocab_file to tokenize the text")
    if job.do_eval and not (job.eval_input_file or job.input_file):
        problems.append("--eval_input_file (records) or --input_file is required to evaluate")
    if job.export_dir and not job.vocab_file:
        problems.append("--export_dir needs --vocab_file (the SavedModel carries it)")
    without_checkpoint = (not job.do_train and job.output_dir
                          and not _has_checkpoint_state(job.output_dir))
    # Exports are versioned by the global step: without training, only a checkpoint of this
    # job (step > 0) has one; weights from --init_checkpoint are at step 0.
    if job.export_dir and without_checkpoint:
        problems.append("--export_dir with --nodo_train exports the checkpoint in --output_dir, "
                        "which has none (export converted weights with export_savedmodel)")
    # Before the run's files are written: they would mark --output_dir as this tool's run.
    if job.do_eval and without_checkpoint and not job.init_checkpoint:
        problems.append(_NOTHING_TO_EVALUATE)
    return problems


def _output_problems(job):
    """What keeps the job from writing --output_dir and --export_dir, found before the first
    write there, not after minutes of loading ("[Errno 20] Not a directory") or hours of
    training (a read-only file at the first save): a file in the way, files of the names a run
    writes in an --output_dir that holds no run, a directory or file it cannot write."""
    problems = [job.output_dir and run_output_dir_problem(job.output_dir),
                job.export_dir and (output_dir_problem("export_dir", job.export_dir)
                                    or unwritable_output_problem("export_dir", job.export_dir))]
    return list(filter(None, problems))


def _check(job, embedded):
    # The embedded job writes its inputs itself, after these checks.
    problems = [] if embedded else _input_problems(job)
    if not job.output_dir:
        problems.append("--output_dir is required")
    problems += _output_problems(job)
    if not (job.do_train or job.do_eval):
        problems.append("nothing to do: --do_train and --do_eval are both off")
    if embedded and job.strategy == "multi_worker_mirrored":
        problems.append(f"the embedded default job runs on this machine, not with "
                        f"--strategy={job.strategy}; name the inputs with --input_file etc.")
    if embedded and not (0 < job.embedded_corpus_mb and job.embedded_vocab_size > 100):
        problems.append("--embedded_corpus_mb must be positive and --embedded_vocab_size over "
                        "100")
    for name in ("train_batch_size", "num_train_steps", "save_checkpoints_steps",
                 "steps_per_execution", "eval_batch_size", "keep_checkpoint_max",
                 "gradient_accumulation_steps"):
        if getattr(job, name) < 1:
            problems.append(f"--{name} must be positive, got {getattr(job, name)}")
    if not 0 <= job.num_warmup_steps <= job.num_train_steps:
        # The embedded job's own steps are not the user's --num_train_steps.
        steps = ("the embedded default job's steps"
                 if embedded and not FLAGS["num_train_steps"].present else "--num_train_steps")
        problems.append(f"--num_warmup_steps must be in [0, {job.num_train_steps}] "
                        f"({steps}), got {job.num_warmup_steps}")
    if job.learning_rate <= 0:
        problems.append(f"--learning_rate must be positive, got {job.learning_rate}")
    if job.max_eval_steps is not None and job.max_eval_steps < 1:
        problems.append(f"--max_eval_steps must be positive, got {job.max_eval_steps}")
    if problems:
        raise app.UsageError("; ".join(problems))


def _prepare_embedded_inputs(job):
    """Writes (or finds) the embedded job's inputs and points the job's inputs at them."""
    inputs = embedded_default.prepare_inputs(job.output_dir, job.embedded_corpus_mb,
                                             job.embedded_vocab_size, seed=job.seed)
    job.input_file = ",".join(inputs.train_records)
    job.eval_input_file = ",".join(inputs.heldout_records)
    job.bert_config_file = inputs.bert_config_file
    job.vocab_file = inputs.vocab_file
    job.do_lower_case = True
    job.export_dir = job.export_dir or os.path.join(job.output_dir, "export")
    return inputs


@contextlib.contextmanager
def _naming_the_raw_text_flags(job, flag, files):
    """Prefixes a `NotRecordsError` about one of `files` (a text file given as records) with
    `flag` and, for --input_file when training, says how to train on raw text: the first
    file's, refused before training, and a later file's, found by the input pipeline, read the
    same. Another input's (held-out files evaluated at a checkpoint) is not this flag's and
    passes unchanged."""
    from bert_tf.data.pretraining.records_dataset import NotRecordsError

    try:
        yield
    except NotRecordsError as error:
        if error.path not in files:
            raise
        raw_text = (("; to train on raw text, use --input_text_file (with --vocab_file) instead "
                     "of --input_file") if job.do_train and flag == "--input_file" else "")
        raise NotRecordsError(f"{flag}: {error}{raw_text}", error.path) from error


def _record_lengths(job, files, flag):
    """(max_seq_length, max_predictions_per_seq) of the records, checked against the job's."""
    from bert_tf.data.pretraining.records_dataset import InputFileError, record_lengths

    with _naming_the_raw_text_flags(job, flag, files[:1]):
        lengths = record_lengths(files[0])
    for name, found in zip(("max_seq_length", "max_predictions_per_seq"), lengths):
        wanted = getattr(job, name)
        if wanted is not None and wanted != found:
            raise InputFileError(f"{files[0]} (from {flag}) holds records with {name} {found}, "
                                 f"but --{name}={wanted}")
    return lengths


def _check_token_ids(path, flag, lengths, config, config_file):
    """Refuses records whose token ids reach the config's vocab_size, read from the first
    `_CHECKED_RECORDS` of `path` (records of `lengths`): made with another vocabulary, they
    show it there, and in training they would stop the first step with an embedding lookup
    error naming neither the file nor the config. Records that do not read or parse are left
    to the input pipeline, which names a damaged file."""
    import tensorflow as tf

    from bert_tf.data.pretraining.records_dataset import (InputFileError, feature_spec,
                                                          read_records)

    spec = feature_spec(*lengths)
    spec = {name: spec[name] for name in ("input_ids", "masked_lm_ids")}
    ids = next(iter(read_records(path).take(_CHECKED_RECORDS)
                    .map(lambda record: tf.io.parse_single_example(record, spec))
                    .ignore_errors().batch(_CHECKED_RECORDS)), None)
    largest = max(int(tf.reduce_max(values)) for values in ids.values()) if ids else -1
    if largest >= config.vocab_size:
        raise InputFileError(f"{path} (from {flag}) holds token id {largest}, but "
                             f"{config_file} has vocab_size {config.vocab_size}: the records "
                             f"were made with another vocabulary; use its config")


def _training_dataset_fn(job, train_files, text_files, seq_length, predictions, vocab_size,
                         tokenizer=None, read_lines=None):
    """`(input_context, start_step) -> dataset` of the records (their token ids checked
    against `vocab_size`) or, masked on the fly, the text (tokenized by `tokenizer`, a
    `BertTokenizer`; `read_lines`: how a text file is read, see `dynamic_masking_dataset`)."""
    from bert_tf.data.pretraining.dynamic_masking_dataset import dynamic_masking_dataset
    from bert_tf.data.pretraining.records_dataset import training_dataset

    if text_files:
        return lambda context, start_step: dynamic_masking_dataset(
            text_files, job.train_batch_size, seq_length, predictions, context,
            seed=job.seed, start_step=start_step, tokenizer=tokenizer,
            next_sentence=job.next_sentence_prediction, whole_word_mask=job.do_whole_word_mask,
            read_lines=read_lines, cut_long_sentences=job.cut_long_lines)
    return lambda context, start_step: training_dataset(
        train_files, job.train_batch_size, seq_length, predictions, context, seed=job.seed,
        start_step=start_step, vocab_size=vocab_size)


def main():
    embedded = _runs_embedded_default()
    job = _job(embedded)
    if embedded and job.strategy == "tpu":  # said before anything runs or prints
        inputs = " or ".join(f"--{name}" for name in ("input_file", "input_text_file", "tfds_name")
                             if name in FLAGS)
        raise app.UsageError(f"a TPU job (--strategy=tpu) needs its inputs named: {inputs} (on "
                             f"gs:// for a TPU node), with --bert_config_file; the embedded "
                             f"default job runs on this machine only")
    if embedded:
        print(f"run_pretraining: no input flags (--input_file, --input_text_file, ...): running "
              f"the embedded default job, pre-training {embedded_default.CONFIG_NAME} from "
              f"scratch on Python standard-library docstrings, into {job.output_dir}",
              flush=True)
    _check(job, embedded)
    import keras
    import tensorflow as tf

    from bert_tf.checkpoints import restore_weights
    from bert_tf.config import BertConfig
    from bert_tf.data.pretraining import dynamic_masking_dataset
    from bert_tf.data.pretraining.corpus import expand_text_files, invalid_utf8_at_start
    from bert_tf.data.pretraining.records_dataset import (expand_input_files,
                                                          naming_bad_input_files,
                                                          record_lengths)
    from bert_tf.text.bert_tokenizer import BertTokenizer
    from bert_tf.text.vocab_size import check_vocab_size
    from bert_tf.training import distribution
    from bert_tf.training.existing_run import (check_existing_run, other_training_settings,
                                               record_run)
    from bert_tf.training.heldout_evaluation import HeldOutEvaluation
    from bert_tf.training.pretraining_export import export_pretrained
    from bert_tf.training.pretraining_trainer import PretrainingTrainer

    # Before any TensorFlow op: MultiWorkerMirroredStrategy configures the runtime's collectives.
    strategy = distribution.create_strategy(job.strategy, job.tpu, quiet=FLAGS.verbosity < 1)
    inputs = _prepare_embedded_inputs(job) if embedded else None
    text_files = (expand_text_files(job.input_text_file, "--input_text_file")
                  if job.do_train and job.input_text_file else [])
    tfds_text = None
    if job.do_train and job.tfds_name:
        from bert_tf.data.tfds.pretraining_text import TfdsText

        tfds_text = TfdsText(job.tfds_name, job.tfds_split, job.tfds_data_dir, job.tfds_text_key)
        text_files = tfds_text.files
    train_files = (expand_input_files(job.input_file)
                   if job.do_train and not text_files else [])
    eval_flag = "--eval_input_file" if job.eval_input_file else "--input_file"
    eval_files = (expand_input_files(job.eval_input_file or job.input_file, eval_flag)
                  if job.do_eval else [])
    tokenizer = BertTokenizer(job.vocab_file, job.do_lower_case) if text_files else None
    if text_files:
        for name, value in _TEXT_INPUT_DEFAULTS.items():
            if getattr(job, name) is None:
                setattr(job, name, value)
        seq_length, predictions = job.max_seq_length, job.max_predictions_per_seq
        # Here, not when training starts: by then the run's files mark --output_dir as a run.
        dynamic_masking_dataset.check_arguments(
            text_files, seq_length, predictions, job.next_sentence_prediction,
            tokenizer=tokenizer, read_lines=tfds_text.line_dataset if tfds_text else None,
            cut_long_sentences=job.cut_long_lines)
        # Training skips the lines that are not UTF-8 as it reads them, uncounted (unlike
        # create_pretraining_data): the files' start tells of them in advance. TFDS text is
        # Unicode already.
        invalid_utf8 = None if tfds_text else invalid_utf8_at_start(text_files)
        if invalid_utf8:
            logging.warning("--input_text_file: %s", invalid_utf8)
    else:
        seq_length, predictions = _record_lengths(job, train_files or eval_files,
                                                  "--input_file" if train_files else eval_flag)
    # Held-out records keep their own lengths: e.g. the paper's 15 % masking (20 predictions)
    # evaluates a model trained with more, or a short-sequence phase is evaluated at 128.
    eval_lengths = (seq_length, predictions)
    if eval_files and (train_files or text_files):
        with _naming_the_raw_text_flags(job, eval_flag, eval_files[:1]):
            eval_lengths = record_lengths(eval_files[0])
    config = BertConfig.from_json_file(job.bert_config_file)
    if job.vocab_file:
        check_vocab_size(config, job.vocab_file, job.bert_config_file)
    # Before anything is written there: a run of another model stays as it is.
    check_existing_run(job.output_dir, config, job.vocab_file, _TOOL)
    lengths = {"the training input": seq_length} if train_files or text_files else {}
    if eval_files:
        lengths[f"{eval_files[0]} (from {eval_flag})"] = eval_lengths[0]
    for source, length in lengths.items():
        if length > config.max_position_embeddings:
            raise app.UsageError(f"max_seq_length {length} exceeds max_position_embeddings "
                                 f"{config.max_position_embeddings} of {job.bert_config_file}"
                                 f" ({source})")
    if train_files:
        _check_token_ids(train_files[0], "--input_file", (seq_length, predictions), config,
                         job.bert_config_file)
    if eval_files:
        _check_token_ids(eval_files[0], eval_flag, eval_lengths, config, job.bert_config_file)

    keras.utils.set_random_seed(job.seed)
    replicas = strategy.num_replicas_in_sync
    if job.eval_batch_size % replicas:
        raise app.UsageError(f"--eval_batch_size {job.eval_batch_size} must be divisible by "
                             f"the {replicas} replicas")
    try:
        trainer = PretrainingTrainer(
            strategy, config, global_batch_size=job.train_batch_size,
            num_train_steps=job.num_train_steps, num_warmup_steps=job.num_warmup_steps,
            learning_rate=job.learning_rate, optimizer=job.optimizer,
            weight_decay_rate=job.weight_decay_rate, clip_norm=job.clip_norm,
            mixed_precision=job.mixed_precision, jit_compile=job.jit_compile,
            gradient_accumulation_steps=job.gradient_accumulation_steps)
    except ValueError as e:  # e.g. a batch that does not split over replicas
        raise app.UsageError(f"{e} (--train_batch_size, --gradient_accumulation_steps)") from e
    init_checkpoint = job.init_checkpoint
    resuming = job.do_train and bool(tf.train.latest_checkpoint(job.output_dir))
    if init_checkpoint and job.do_train and not resuming:
        # Before the run is recorded: a checkpoint that does not fit the model would leave a
        # run of this model in --output_dir, which would refuse the corrected command.
        trainer.initialize_from(init_checkpoint)
        init_checkpoint = None
    training = ({name: getattr(job, name) for name in _TRAINING_SETTINGS} if job.do_train
                else None)
    if training and not FLAGS["num_warmup_steps"].present:
        # Recorded as the rule, not its number: it follows --num_train_steps, which a resumed
        # run may raise, but an explicit warmup dropped on a resume changes the schedule.
        training["num_warmup_steps"] = f"{WARMUP_PERCENT} % of the steps"
    if resuming:
        other = other_training_settings(job.output_dir, training)
        if other:
            logging.warning("Resuming --output_dir %s with other settings than it trained with "
                            "(%s): it goes on with this command's", job.output_dir, other)
    chief = distribution.is_chief(strategy)
    if chief:  # the checkpoints are then complete for the fine-tuning tools' --init_checkpoint
        # The casing travels with the vocabulary (the export's and bert-tf-install-hub-model's
        # default): a cased run installed as uncased would lower-case its inputs.
        record_run(job.output_dir, config, job.vocab_file, _TOOL,
                   do_lower_case=job.do_lower_case if job.vocab_file else None,
                   training=training)
    evaluation = (HeldOutEvaluation(trainer, eval_files, *eval_lengths, job.eval_batch_size,
                                    job.output_dir, job.max_eval_steps, chief)
                  if job.do_eval else None)

    if job.do_train:
        source = (f"{job.tfds_name} ({job.tfds_split}, {len(text_files)} TFDS file(s))"
                  if tfds_text else
                  f"{len(text_files or train_files)} {'text' if text_files else 'record'} "
                  f"file(s)")
        logging.info("Training on %s on %d replica(s) (--strategy=%s)", source, replicas,
                     job.strategy)
        reading = (contextlib.nullcontext() if text_files
                   else naming_bad_input_files(train_files, seq_length, predictions,
                                               config.vocab_size))
        with _naming_the_raw_text_flags(job, "--input_file", train_files), reading:
            trainer.train(
                _training_dataset_fn(job, train_files, text_files, seq_length, predictions,
                                     config.vocab_size, tokenizer,
                                     tfds_text.line_dataset if tfds_text else None),
                job.output_dir, steps_per_execution=job.steps_per_execution,
                save_checkpoints_steps=job.save_checkpoints_steps,
                keep_checkpoint_max=job.keep_checkpoint_max,
                init_checkpoint=init_checkpoint,
                after_checkpoint=(lambda step: evaluation()) if job.eval_every_checkpoint
                else None)
    elif tf.train.latest_checkpoint(job.output_dir):
        trainer.restore(tf.train.latest_checkpoint(job.output_dir))
    elif job.init_checkpoint:
        restore_weights(trainer.model, job.init_checkpoint, pretraining_heads=True)
    else:
        raise app.UsageError(_NOTHING_TO_EVALUATE)

    step = int(trainer.global_step.numpy())
    if evaluation and evaluation.step != step:
        evaluation()
        distribution.wait_for_every_worker(strategy, "evaluation")
    export_dir = (export_pretrained(trainer.model, job.export_dir, step, job.vocab_file,
                                    job.do_lower_case)
                  if job.export_dir and chief else None)
    if embedded and chief:
        print(embedded_default.summary(job.output_dir, inputs, step,
                                       tf.train.latest_checkpoint(job.output_dir),
                                       evaluation and evaluation.metrics, export_dir),
              flush=True)


def run():
    run_tool(main, define_flags)
