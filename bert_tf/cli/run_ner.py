"""Fine-tunes BERT for named-entity recognition on CoNLL-2003-format data, evaluates with
entity-level F1 (seqeval rules), and tags new text.

Data: --data_dir with --train_file (train.txt), --eval_file (valid.txt) and --predict_file
(test.txt): one word per line, the tag in the last column (`EU NNP B-NP B-ORG`), a blank line
between sentences, `-DOCSTART-` lines between documents; IOB1 or IOB2 tags, kept as found.

Or from TensorFlow Datasets: --tfds_name=conll2003 (or a CoNLL-like dataset with `tokens` and
`ner`) prepared in --tfds_data_dir, splits --tfds_train_split, --tfds_eval_split (validation:
conll2003's dev), --tfds_predict_split; the labels are the names of the `ner` ClassLabel.

As in the paper, each word is tokenized on its own and tagged by the logits at its first word
piece; the other pieces are left out of the loss. A sentence longer than --max_seq_length pieces
is split at word boundaries into several windows, so every word gets a prediction (the counts
of split sentences are logged and written to eval_results.json). Evaluation data may hold tags
the training data never had (a warning names them): their entities count as missed.

Writes to --output_dir: checkpoints (resumable), `label_list.txt` (the classes, in order; what
evaluation, prediction and `export_savedmodel.py --export_type=ner` reuse),
TensorBoard logs, `eval_results.json` (precision/recall/F1 overall and per entity type),
`eval_predictions.txt` and `test_predictions.txt` (each input row + the predicted tag, as
`conlleval` reads).

Example:
    bert-tf-run-ner --init_checkpoint=$MINILM --data_dir=conll2003 \\
        --output_dir=/tmp/ner --do_train --do_eval --num_train_epochs=3 --learning_rate=5e-5
"""

import logging
import os

from absl import app, flags

from bert_tf.cli import fine_tuning_flags as common
from bert_tf.cli import tfds_flags
from bert_tf.cli.app import run_tool
from bert_tf.data.tasks.conll import LABEL_LIST_FILE
from bert_tf.file_io import replacing

FLAGS = flags.FLAGS

EVAL_PREDICTIONS_FILE, TEST_PREDICTIONS_FILE = "eval_predictions.txt", "test_predictions.txt"
OUTPUTS = (LABEL_LIST_FILE, EVAL_PREDICTIONS_FILE, TEST_PREDICTIONS_FILE)  # beside every run's

logger = logging.getLogger("bert_tf.tools")


def define_flags():
    common.define_fine_tuning_flags()
    common.define_data_file_flags("CoNLL", "train.txt", "valid.txt", "test.txt",
                                  "; a tag column, if any, is ignored")
    tfds_flags.define_fine_tuning_tfds_flags("conll2003")
    flags.DEFINE_string("conll_encoding", "utf-8", "Text encoding of the CoNLL files (the "
                        "original CoNLL-2003 release is latin-1).")
    # Checked as the flags are read, like an enum flag: Python's LookupError came only when the
    # first file was opened, reported as a bug.
    flags.register_validator("conll_encoding", _is_text_encoding,
                             "unknown text encoding (e.g. utf-8, latin-1)")


def _is_text_encoding(name):
    try:
        "".encode(name)  # LookupError for an unknown name and for bytes codecs (base64)
    except LookupError:
        return False
    return True


def _labels(train_sentences, train_path, dataset_labels=None):
    """The label list: `dataset_labels` (a TFDS dataset's) or the training data's tags (saved
    to --output_dir once all the data is read), or the saved list."""
    from bert_tf.data.tasks import conll
    from bert_tf.training.existing_run import check_same_task

    path = os.path.join(FLAGS.output_dir, LABEL_LIST_FILE)
    if train_sentences is not None:
        labels = dataset_labels or conll.label_list(train_sentences, train_path)
        if os.path.exists(path) and conll.read_label_list(path) != labels:
            raise conll.ConllFormatError(
                f"{train_path} has the tags {labels}, but {path} (from an earlier run in "
                f"--output_dir) has {conll.read_label_list(path)}; use a new --output_dir")
        return labels
    if not os.path.exists(path):
        check_same_task(FLAGS.output_dir, "run_ner")  # another task's run has no list either
        raise app.UsageError(f"--do_eval/--do_predict without --do_train needs {path}, written "
                             f"when the model was trained in --output_dir")
    return conll.read_label_list(path)


def _warn_of_tags_never_predicted(unknown, labels):
    """Evaluation data may tag a type the training data never had (a subset of CoNLL trained
    on, the full dev set evaluated): its entities count as missed, as seqeval scores them."""
    if unknown:
        logger.warning("%s: not one of the model's labels %s (its entities count as missed)",
                       "; ".join(unknown), labels)


def _windows(sentences, tokenizer, tags=None, description=""):
    from bert_tf.data.tasks.tagging_windows import TaggingWindows

    windows = TaggingWindows.build([s.words for s in sentences], tokenizer,
                                   FLAGS.max_seq_length, tags)
    counts = windows.counts()
    logger.info("%s: %d sentences, %d windows of at most %d pieces (%d sentence(s) split, %d "
                "word(s) without pieces given [UNK], %d over-long word(s) cut)", description,
                counts["sentences"], counts["windows"], FLAGS.max_seq_length,
                counts["split_sentences"], counts["empty_words"], counts["truncated_words"])
    return windows


def _predict_tags(tuner, windows, labels, batch_size):
    from bert_tf.data.tasks.dynamic_padding import padded_batches

    batches = padded_batches(windows.dataset(), batch_size, FLAGS.max_seq_length)
    logits = tuner.predict(batches, FLAGS.max_seq_length, sequence_outputs=("logits",))["logits"]
    return [[labels[i] for i in sentence] for sentence in windows.word_predictions(logits)]


def _read_sentences(mode, file_flag):
    """`(where, sentences, the dataset's labels or None)` of `mode`: from --tfds_name's split,
    or from the file of `file_flag` in --data_dir."""
    from bert_tf.data.tasks import conll

    if FLAGS.tfds_name:
        from bert_tf.data.tfds.conll import read_conll_tfds

        sentences, labels, where = read_conll_tfds(
            FLAGS.tfds_name, tfds_flags.tfds_split_flags()[mode], FLAGS.tfds_data_dir)
        return where, sentences, labels
    path = common.data_path(file_flag)
    return path, conll.read_conll(path, FLAGS.conll_encoding), None


def fine_tune(tokenizer_vocab):
    import keras

    from bert_tf.data.tasks import conll
    from bert_tf.data.tasks.tagging_windows import IGNORED_LABEL
    from bert_tf.metrics.sequence_labeling import entity_scores
    from bert_tf.models.bert_token_classifier import BertTokenClassifier
    from bert_tf.text.bert_tokenizer import BertTokenizer

    tokenizer = BertTokenizer(tokenizer_vocab, common.do_lower_case_from_flags())
    # Every file is read and checked before the (long) training.
    train_path, train_sentences, dataset_labels = (
        _read_sentences("train", "train_file") if FLAGS.do_train else (None, None, None))
    labels = _labels(train_sentences, train_path, dataset_labels)
    logger.info("%d labels: %s", len(labels), " ".join(labels))
    data = {}
    for mode, name in (("train", "train_file"), ("eval", "eval_file"),
                       ("predict", "predict_file")):
        if FLAGS[f"do_{mode}"].value:
            path, sentences, _ = ((train_path, train_sentences, None) if mode == "train"
                                  else _read_sentences(mode, name))
            if mode == "eval":
                _warn_of_tags_never_predicted(conll.tags_not_in(labels, sentences, path), labels)
            # Only training reads tag ids; evaluation compares tag names.
            tags = conll.tag_ids(sentences, labels, path) if mode == "train" else None
            data[mode] = (path, sentences, _windows(sentences, tokenizer, tags,
                                                    f"{mode} data {path}"))

    encoder = common.encoder_from_flags()
    common.prepare_output_dir(encoder, tokenizer_vocab, "run_ner",
                              training_examples=len(data["train"][2]) if FLAGS.do_train else None)
    if FLAGS.do_train:  # only now: a run stopped by bad data leaves no list to block its rerun
        with replacing(os.path.join(FLAGS.output_dir, LABEL_LIST_FILE)) as temporary:
            conll.write_label_list(temporary, labels)
    model = BertTokenClassifier(encoder, num_classes=len(labels))
    # The loss is the mean over first word pieces only: -1 marks every other position.
    loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True,
                                                      ignore_class=IGNORED_LABEL)
    tuner = common.fine_tuner_from_flags(model, len(data["train"][2]) if FLAGS.do_train else 1,
                                         loss={"logits": loss})
    if FLAGS.do_train:
        train_windows = data["train"][2]

        tuner.train(common.training_batches_from_flags(train_windows.dataset(), len(train_windows)))
    else:
        tuner.restore_latest()

    if FLAGS.do_eval:
        path, sentences, windows = data["eval"]
        predicted = _predict_tags(tuner, windows, labels, FLAGS.eval_batch_size)
        results = entity_scores([s.tags for s in sentences], predicted)
        results["data"] = {"file": path, "words": sum(len(s.rows) for s in sentences),
                           **windows.counts()}
        with replacing(os.path.join(FLAGS.output_dir, EVAL_PREDICTIONS_FILE)) as temporary:
            conll.write_conll_predictions(temporary, sentences, predicted)
        json_path = common.write_results(results, tuner.step)
        print(f"eval entity F1 = {results['f1']:.4f} (precision {results['precision']:.4f}, "
              f"recall {results['recall']:.4f}; {json_path})")

    if FLAGS.do_predict:
        _, sentences, windows = data["predict"]
        output = os.path.join(FLAGS.output_dir, TEST_PREDICTIONS_FILE)
        predicted = _predict_tags(tuner, windows, labels, FLAGS.predict_batch_size)
        with replacing(output) as temporary:
            conll.write_conll_predictions(temporary, sentences, predicted)
        print(f"Wrote predictions for {len(sentences)} sentences to {output}")
    if FLAGS.do_train:
        common.print_export_command("ner")  # its labels: label_list.txt, beside the checkpoint


def main():
    common.fine_tune_on_data_dir(fine_tune, OUTPUTS, files=not FLAGS.tfds_name)


def run():
    run_tool(main, define_flags)
