"""Exports a SavedModel for TF Serving / TF Hub into `<output_dir>/<version>/`.

--export_type:
  encoder           the encoder of --init_checkpoint, TF Hub style (`obj(inputs, training=)`,
                    fine-tunable with hub.KerasLayer, `serving_default` on the three int32 inputs).
  encoder_with_mlm  the same plus `obj.mlm` / signature `mlm` (needs the pre-training heads in the
                    checkpoint, e.g. one converted from Google's or written by run_pretraining).
  preprocess        raw strings -> the three int32 inputs at --seq_length; needs only --vocab_file
                    and --do_lower_case.
  classifier, ner, squad, multiple_choice
                    a fine-tuned task model (checkpoint with `model=`, see
                    bert_tf/export/task_checkpoint.py) with in-graph tokenization:
                    serving_default takes raw strings (text | text_a, text_b | question,
                    context | context, choices). squad reads a long context in windows as
                    run_squad does (--doc_stride, --max_query_length), at most --max_windows;
                    with --version_2_with_negative it may answer nothing, as run_squad.
                    The model runs on at most --max_tokens_per_call packed positions at a
                    time, whatever a request holds.

The version is one more than the highest under --output_dir unless --version is given; it
appears atomically, so a running TF Serving picks it up only when complete. The vocabulary is
copied into the SavedModel, which can be moved anywhere. Each version records its
--export_type (assets.extra/bert_tf_export.json, which TF Serving ignores): a version of
another type under the same --output_dir, which a server would serve in the model's place, is
refused.

Example:
    bert-tf-export-savedmodel --export_type=classifier --init_checkpoint=/tmp/sst2 \\
        --output_dir=/models/sst2 --seq_length=128 --label_names=negative,positive
    saved_model_cli show --dir /models/sst2/1 --all
"""

import json
import os
import sys
import time

from absl import app, flags

from bert_tf.cli.app import run_tool
from bert_tf.cli.checkpoint_flags import (checkpoint_vocab_file_from_flags,
                                          define_checkpoint_flags, do_lower_case_from_flags)
from bert_tf.cli.config_flag import bert_config_file_problem
from bert_tf.data.tasks.squad_windows import (DEFAULT_DOC_STRIDE, DEFAULT_MAX_QUERY_LENGTH,
                                              DEFAULT_MAX_WINDOWS)
from bert_tf.export.export_arguments import TASK_EXPORT_TYPES
from bert_tf.export.model_slices import DEFAULT_MAX_TOKENS_PER_CALL

EXPORT_TYPES = ("encoder", "encoder_with_mlm", "preprocess", *TASK_EXPORT_TYPES)
SQUAD_FLAGS = ("max_answer_length", "doc_stride", "max_query_length", "max_windows",
               "version_2_with_negative", "null_score_diff_threshold")

FLAGS = flags.FLAGS


def define_flags():
    flags.DEFINE_enum("export_type", None, EXPORT_TYPES, "What to export.")
    flags.DEFINE_string("output_dir", None, "The model's base path: the SavedModel is written to "
                        "<output_dir>/<version>/.")
    define_checkpoint_flags("Checkpoint directory or prefix (this package's; for the encoder "
                            "exports also Google's or Hugging Face's).")
    flags.DEFINE_integer("seq_length", 128, "Packed sequence length of the preprocess and task "
                         "exports: at least 3, at most the encoder's max_position_embeddings "
                         "(encoder signatures take any length).")
    flags.DEFINE_integer("version", None, "Version number; defaults to the next free one.")
    flags.DEFINE_bool("text_pairs", False, "classifier: take text_a/text_b instead of text "
                      "(default: as the GLUE task run_classifier trained the checkpoint on).")
    flags.DEFINE_list("label_names", None, "classifier/ner: a name per class, in class order "
                      "(defaults: the GLUE task's labels for a run_classifier checkpoint, the "
                      "label_list.txt run_ner wrote beside a run_ner one).")
    flags.DEFINE_integer("max_answer_length", 30, "squad: the longest answer, in tokens.")
    flags.DEFINE_integer("doc_stride", DEFAULT_DOC_STRIDE, "squad: tokens between the starts of "
                         "consecutive context windows (as run_squad).")
    flags.DEFINE_integer("max_query_length", DEFAULT_MAX_QUERY_LENGTH, "squad: questions are "
                         "cut to this many tokens (as run_squad).")
    flags.DEFINE_integer("max_windows", DEFAULT_MAX_WINDOWS, "squad: the most windows read per "
                         "context; a longer context is cut after them.")
    flags.DEFINE_bool("version_2_with_negative", False, "squad: SQuAD v2.0, questions may have "
                      "no answer: answer '' when null_score beats the best span's score by more "
                      "than --null_score_diff_threshold (as run_squad).")
    flags.DEFINE_float("null_score_diff_threshold", 0.0, "squad v2.0: see "
                       "--version_2_with_negative.")
    flags.DEFINE_integer("max_tokens_per_call", DEFAULT_MAX_TOKENS_PER_CALL, "Task exports: "
                         "the model runs on at most this many packed positions (sequences x "
                         "their packed length, at least one sequence) at a time, so that a "
                         "request of many texts, windows or choices cannot claim the memory of "
                         "all of them at once.", lower_bound=1)
    flags.DEFINE_bool("special_tokens_in_strings", False, "preprocess: [CLS], [SEP], [MASK], "
                      "[PAD] and [UNK] written in a text become their ids (as Hugging Face's "
                      "tokenizer does) instead of ordinary text (as Google's does).")
    flags.mark_flags_as_required(["export_type", "output_dir"])


def _check_flags():
    """Refuses, before minutes of loading and tracing, what the export would refuse after
    them: a --version below 1, an --output_dir under a file, a --seq_length below 3 (its
    upper bound needs the model), squad windows without room for the context or answer flags
    without rules, and --seq_length, --text_pairs or the squad flags given to an export that
    does not use them. TensorFlow (4 s to import) loads only for remote paths (gs://...)."""
    from bert_tf.cli.path_checks import input_file_problem, output_dir_problem
    from bert_tf.cli.squad_flags import check_answer_flags
    from bert_tf.data.tasks.squad_windows import check_windows
    from bert_tf.export.export_arguments import check_seq_length, repeated_label_names
    from bert_tf.export.serving_layout import taken_version_problem

    problems = []
    if FLAGS.version is not None and FLAGS.version < 1:
        problems.append(f"--version must be a positive integer, got {FLAGS.version}")
    if problem := output_dir_problem("output_dir", FLAGS.output_dir):
        problems.append(problem)
    if FLAGS.export_type in ("encoder", "encoder_with_mlm") and FLAGS["seq_length"].present:
        problems.append(f"--seq_length applies to the preprocess and task exports; the "
                        f"{FLAGS.export_type} export takes any length up to the encoder's "
                        f"max_position_embeddings")
    else:
        check_seq_length(FLAGS.seq_length)  # its own one-line ValueError
    if FLAGS.export_type == "squad":
        check_windows(FLAGS.seq_length, FLAGS.doc_stride, FLAGS.max_query_length,
                      FLAGS.max_windows, tool_flags={})  # its own one-line error
        check_answer_flags(FLAGS.version_2_with_negative)  # and this one
    if FLAGS.text_pairs and FLAGS.export_type != "classifier":
        problems.append(f"--text_pairs applies to the classifier export, not to "
                        f"{FLAGS.export_type}")
    problems += [f"--{name} applies to the squad export, not to {FLAGS.export_type}"
                 for name in SQUAD_FLAGS if FLAGS[name].present and FLAGS.export_type != "squad"]
    if FLAGS["max_tokens_per_call"].present and FLAGS.export_type not in TASK_EXPORT_TYPES:
        problems.append(f"--max_tokens_per_call applies to the task exports, not to "
                        f"{FLAGS.export_type}")
    if FLAGS.label_names and repeated_label_names(FLAGS.label_names):
        problems.append(f"--label_names names two classes alike: {','.join(FLAGS.label_names)}")
    problems += filter(None, [FLAGS.vocab_file and input_file_problem("vocab_file",
                                                                      FLAGS.vocab_file),
                              bert_config_file_problem(FLAGS.bert_config_file)])
    if not problems:  # --output_dir is a directory, or will be
        problems += filter(None, [_other_export_type_problem(), FLAGS.version and
                                  taken_version_problem(FLAGS.output_dir, FLAGS.version)])
    if problems:
        raise app.UsageError("; ".join(problems))


_EXPORT_RECORD = "assets.extra/bert_tf_export.json"


def _other_export_type_problem():
    """Why --output_dir cannot take this export: its newest version records another
    --export_type (a server would serve the preprocessor in the encoder's place); None
    otherwise, or for versions written before the record or by other tools."""
    from bert_tf.export.serving_layout import latest_version_dir
    from bert_tf.file_io import file_kind, open_file

    latest = latest_version_dir(FLAGS.output_dir)  # None when the directory is not there yet
    record = latest and os.path.join(latest, _EXPORT_RECORD)
    if not record or file_kind(record) is None:
        return None
    with open_file(record) as f:
        theirs = json.load(f).get("export_type")
    if theirs in (None, FLAGS.export_type):
        return None
    return (f"--output_dir {FLAGS.output_dir} holds an --export_type={theirs} model "
            f"({latest}): an --export_type={FLAGS.export_type} one there would be served in its "
            f"place under the same model name; use another --output_dir")


def _recording_export_type(write):
    """`write` (a SavedModel writer of a directory), recording --export_type beside it."""
    import tensorflow as tf

    def write_and_record(path):
        write(path)
        record = tf.io.gfile.join(path, _EXPORT_RECORD)
        tf.io.gfile.makedirs(os.path.dirname(record))
        with tf.io.gfile.GFile(record, "w") as f:
            json.dump({"export_type": FLAGS.export_type}, f)

    return write_and_record


def _writer():
    """A function writing the requested SavedModel into a directory."""
    from bert_tf.checkpoints import has_pretraining_heads, load_model
    from bert_tf.export import (export_encoder, export_preprocessor, export_task_model,
                                load_task_model)
    from bert_tf.export.export_arguments import check_seq_length
    from bert_tf.models.bert_encoder import BertEncoder
    from bert_tf.models.bert_pretrainer import BertPretrainer

    if FLAGS.export_type == "preprocess":
        if not FLAGS.vocab_file:
            raise app.UsageError("--export_type=preprocess needs --vocab_file.")
        check_seq_length(FLAGS.seq_length)
        do_lower_case = do_lower_case_from_flags(FLAGS.init_checkpoint)
        return lambda path: export_preprocessor(
            path, FLAGS.vocab_file, do_lower_case, seq_length=FLAGS.seq_length,
            special_tokens_in_strings=FLAGS.special_tokens_in_strings)
    if not FLAGS.init_checkpoint:
        raise app.UsageError(f"--export_type={FLAGS.export_type} needs --init_checkpoint.")
    if FLAGS.export_type == "encoder_with_mlm" and not has_pretraining_heads(
            FLAGS.init_checkpoint):
        raise ValueError(f"--export_type=encoder_with_mlm needs a masked-LM head, and "
                         f"{FLAGS.init_checkpoint} has none (no pre-training heads, cls/...): "
                         f"export its encoder with --export_type=encoder, or use a checkpoint "
                         f"written by run_pretraining or converted from Google's.")
    vocab_file = checkpoint_vocab_file_from_flags(FLAGS.init_checkpoint)
    do_lower_case = do_lower_case_from_flags(FLAGS.init_checkpoint)
    text_pairs, label_names = _classifier_inputs_and_labels()
    _stage(f"loading {FLAGS.init_checkpoint}")
    if FLAGS.export_type in ("encoder", "encoder_with_mlm"):
        model = load_model(FLAGS.init_checkpoint, BertPretrainer if FLAGS.export_type ==
                           "encoder_with_mlm" else BertEncoder,
                           bert_config_file=FLAGS.bert_config_file)
        return lambda path: export_encoder(path, model, vocab_file, do_lower_case)
    model = load_task_model(FLAGS.export_type, FLAGS.init_checkpoint, FLAGS.bert_config_file)
    check_seq_length(FLAGS.seq_length, model.encoder.config.max_position_embeddings)
    label_names = label_names or _label_list_beside_checkpoint()
    return lambda path: export_task_model(
        path, FLAGS.export_type, model, vocab_file, do_lower_case,
        seq_length=FLAGS.seq_length, text_pairs=text_pairs, label_names=label_names,
        max_answer_length=FLAGS.max_answer_length, doc_stride=FLAGS.doc_stride,
        max_query_length=FLAGS.max_query_length, max_windows=FLAGS.max_windows,
        null_score_diff_threshold=(FLAGS.null_score_diff_threshold
                                   if FLAGS.version_2_with_negative else None),
        max_tokens_per_call=FLAGS.max_tokens_per_call)


def _classifier_inputs_and_labels():
    """`(text_pairs, label_names)` of the export: the flags', except that a classifier trained
    by run_classifier on a GLUE task (its run.json beside --init_checkpoint) takes its task's
    inputs and label names unless given. A --text_pairs contradicting the task is refused: a
    pair model served single texts (or the reverse) answers without an error, but wrongly."""
    from bert_tf.data.tasks.glue_tasks import glue_task
    from bert_tf.training.existing_run import recorded_task

    if FLAGS.export_type != "classifier":
        return FLAGS.text_pairs, FLAGS.label_names
    task_name = recorded_task(_checkpoint_directory(), "run_classifier")
    if task_name is None:
        return FLAGS.text_pairs, FLAGS.label_names
    task = glue_task(task_name)
    if FLAGS["text_pairs"].present and FLAGS.text_pairs != task.is_pair_task:
        reads = "pairs of texts" if task.is_pair_task else "single texts"
        raise app.UsageError(f"--{'' if FLAGS.text_pairs else 'no'}text_pairs: "
                             f"{FLAGS.init_checkpoint} was fine-tuned on {task.name}, which "
                             f"reads {reads}; leave the flag out")
    return task.is_pair_task, FLAGS.label_names or (task.label_names and list(task.label_names))


def _label_list_beside_checkpoint():
    """For --export_type=ner, the labels of the label_list.txt run_ner wrote beside
    --init_checkpoint, else None."""
    from bert_tf.data.tasks.conll import LABEL_LIST_FILE, read_label_list

    if FLAGS.export_type != "ner":
        return None
    path = os.path.join(_checkpoint_directory(), LABEL_LIST_FILE)
    return read_label_list(path) if os.path.isfile(path) else None


def _checkpoint_directory():
    """The directory of --init_checkpoint's files (it names that directory or a prefix in it):
    where a fine-tuning tool wrote its run.json and label_list.txt.

    Example:
        >>> _checkpoint_directory()   # --init_checkpoint=/tmp/sst2/ckpt-600
        '/tmp/sst2'
    """
    from bert_tf.checkpoints import detect_format

    _, resolved = detect_format(FLAGS.init_checkpoint)
    return os.path.dirname(resolved)


def _stage(message):
    """Says on stderr what the export does next (loading and tracing take from seconds to
    minutes, with nothing else to show)."""
    print(f"export_savedmodel: {message}", file=sys.stderr, flush=True)


def main():
    from bert_tf.export import write_version

    started = time.monotonic()
    _check_flags()
    writer = _writer()
    _stage(f"tracing the signatures and writing the SavedModel under {FLAGS.output_dir}")
    path = write_version(FLAGS.output_dir, _recording_export_type(writer),
                         version=FLAGS.version)
    print(f"Exported {FLAGS.export_type} to {path} in {time.monotonic() - started:.0f}s")
    return 0


def run():
    run_tool(main, define_flags)
