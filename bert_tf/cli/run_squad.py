"""Fine-tunes BERT on SQuAD v1.1 / v2.0, predicts answers and scores them with the official
EM/F1 (Google's `run_squad.py` flags, plus the shared ones of `fine_tuning_flags`).

--do_train    fine-tunes a `BertSpanLabeler` on --train_file (checkpoints in --output_dir;
              rerunning the command resumes). Each question trains on its first answer;
              questions whose answer is not at its answer_start, or starts/ends inside a word
              piece, are skipped and counted in the log.
--do_predict  answers every question of --predict_file: predictions.json ({id: text}),
              nbest_predictions.json and, for --version_2_with_negative, null_odds.json (null
              score - best span score per question, the official v2.0 script's --na-prob-file).
--do_eval     the same, then the official EM/F1 (v1.1 or v2.0 script) against the file's answers
              -> eval_results.json and TensorBoard scalars in --output_dir/eval.

Contexts longer than a sequence are read in windows --doc_stride word pieces apart; answers are
cut out of the original context through each token's offsets. Batches are padded to their
longest sequence, training batches bucketed by length.

Or from TensorFlow Datasets: --tfds_name=squad/v1.1 or squad/v2.0 (v2.0 sets
--version_2_with_negative) prepared in --tfds_data_dir; training reads --tfds_train_split,
evaluation --tfds_eval_split (validation), prediction alone --tfds_predict_split. The questions
are regrouped into SQuAD's articles, so the official metric scores them as the JSON file's.

--train_articles / --predict_articles take a slice "start:stop" of a file's articles, e.g. to
train on the first 38 articles of dev-v1.1.json and evaluate on the last 10.

Example (MiniLM from its Hugging Face directory):
    bert-tf-run-squad --init_checkpoint=$MINILM --do_train --do_eval \\
        --train_file=dev-v1.1.json --train_articles=0:38 \\
        --predict_file=dev-v1.1.json --predict_articles=38: \\
        --max_seq_length=384 --doc_stride=128 --num_train_epochs=2 --output_dir=/tmp/squad
"""

import logging

from absl import flags

from bert_tf.cli import fine_tuning_flags as common
from bert_tf.cli import tfds_flags
from bert_tf.cli.app import run_tool
from bert_tf.cli.squad_flags import check_answer_flags
from bert_tf.data.tasks.squad_windows import (DEFAULT_DOC_STRIDE, DEFAULT_MAX_QUERY_LENGTH,
                                              check_windows)

FLAGS = flags.FLAGS

# What it writes to --output_dir beside every run's files.
PREDICTIONS_FILE, NBEST_FILE, NULL_ODDS_FILE = ("predictions.json", "nbest_predictions.json",
                                                "null_odds.json")
OUTPUTS = (PREDICTIONS_FILE, NBEST_FILE, NULL_ODDS_FILE)


def define_flags():
    common.define_fine_tuning_flags(max_seq_length=384)
    tfds_flags.define_fine_tuning_tfds_flags("squad/v1.1, squad/v2.0")
    flags.DEFINE_string("train_file", None, "SQuAD JSON for training, e.g. train-v1.1.json.")
    flags.DEFINE_string("predict_file", None, "SQuAD JSON to predict (and, with --do_eval, "
                        "score), e.g. dev-v1.1.json.")
    flags.DEFINE_string("train_articles", None, "Only these articles of --train_file (or of "
                        "the --tfds_name split, in its order): a slice 'start:stop', e.g. '0:38'.")
    flags.DEFINE_string("predict_articles", None, "Only these articles of --predict_file (or of "
                        "the --tfds_name split, in its order): a slice 'start:stop', e.g. '38:'.")
    flags.DEFINE_bool("version_2_with_negative", False, "SQuAD v2.0: questions may have no "
                      "answer (scored at [CLS]).")
    flags.DEFINE_integer("doc_stride", DEFAULT_DOC_STRIDE, "Word pieces between the starts of "
                         "consecutive context windows.")
    flags.DEFINE_integer("max_query_length", DEFAULT_MAX_QUERY_LENGTH, "Questions are cut to "
                         "this many word pieces.")
    flags.DEFINE_integer("n_best_size", 20, "Start/end positions searched per window, and "
                         "answers kept in nbest_predictions.json.")
    flags.DEFINE_integer("max_answer_length", 30, "The longest answer, in word pieces.")
    flags.DEFINE_float("null_score_diff_threshold", 0.0, "v2.0: answer '' when the null score "
                       "exceeds the best span's score by more than this.")

logger = logging.getLogger("bert_tf.tools")


def _check_squad_flags():
    """Raises the one-line ValueError of `check_answer_flags`, else `app.UsageError` listing
    every problem of the common and the other SQuAD flags."""
    # (A v2.0 TFDS dataset turns --version_2_with_negative on.)
    check_answer_flags(FLAGS.version_2_with_negative or bool(FLAGS.tfds_name))
    problems = [] if FLAGS.n_best_size >= 1 else [
        f"--n_best_size must be at least 1, got {FLAGS.n_best_size}"]
    try:
        check_windows(FLAGS.max_seq_length, FLAGS.doc_stride, FLAGS.max_query_length,
                      tool_flags={"seq_length": "max_seq_length"})
    except ValueError as error:  # listed with the others
        problems.append(str(error).rstrip("."))
    data_flags = {} if FLAGS.tfds_name else {"train": ["train_file"], "eval": ["predict_file"],
                                              "predict": ["predict_file"]}
    common.check_flags(data_flags, tool_problems=problems, outputs=OUTPUTS)


def _read(path, articles, tokenizer, is_training, tfds_split=None):
    """(articles, examples, features) of `path`, or of `tfds_split` of --tfds_name; logs the
    skipped training questions."""
    from bert_tf.data.tasks import squad

    if FLAGS.tfds_name:
        from bert_tf.data.tfds.squad import read_squad_tfds

        selected, path = read_squad_tfds(FLAGS.tfds_name, tfds_split, FLAGS.tfds_data_dir)
        selected = selected[squad.article_slice(articles)]
    else:
        selected = squad.read_squad_file(path, squad.article_slice(articles))
    skipped = squad.SkippedQuestions()
    examples = squad.squad_examples(selected, path, is_training, FLAGS.version_2_with_negative,
                                    require_answers=FLAGS.do_eval and not is_training,
                                    skipped=skipped)
    features = squad.squad_features(examples, tokenizer, FLAGS.max_seq_length, FLAGS.doc_stride,
                                    FLAGS.max_query_length, is_training, skipped=skipped)
    used = len(set(features.example_index.tolist()))
    if skipped.total:
        logger.warning("%s: skipped %d training questions (used %d): %s", path, skipped.total,
                       used, skipped.summary())
    if not used:
        raise squad.SquadFormatError(f"{path}: no usable questions"
                                     + (f" ({skipped.summary()})" if skipped.total else ""))
    logger.info("%s: %d questions, %d features", path, used, len(features))
    return selected, examples, features


def _predict_answers(tuner, examples, features):
    """{question id: decode_answer(...) result} for every example."""
    import numpy as np
    import tensorflow as tf

    from bert_tf.data.tasks.dynamic_padding import padded_batches
    from bert_tf.metrics.squad_postprocess import decode_answer

    batch_size = FLAGS.predict_batch_size if FLAGS.do_predict else FLAGS.eval_batch_size
    # Features sorted by length, so that each batch is padded to little more than its own
    # examples (in file order, every batch would be padded to its longest window).
    order = np.argsort(features.inputs["input_mask"].sum(axis=1), kind="stable")
    batches = padded_batches(
        tf.data.Dataset.from_tensor_slices({k: v[order] for k, v in features.inputs.items()}),
        batch_size, FLAGS.max_seq_length)
    logits = tuner.predict(batches, FLAGS.max_seq_length,
                           sequence_outputs=("start_logits", "end_logits"))
    sorted_row = np.empty_like(order)
    sorted_row[order] = np.arange(len(order))
    windows = [[] for _ in examples]
    for row, example_index in enumerate(features.example_index):
        windows[example_index].append({
            "start_logits": logits["start_logits"][sorted_row[row]],
            "end_logits": logits["end_logits"][sorted_row[row]],
            "token_offsets": features.token_offsets[row],
            "token_is_max_context": features.token_is_max_context[row]})
    # Offsets are UTF-8 bytes of the context.
    return {example.qas_id: decode_answer(
        example.context.encode("utf-8"), example_windows, FLAGS.n_best_size,
        FLAGS.max_answer_length, FLAGS.version_2_with_negative, FLAGS.null_score_diff_threshold)
        for example, example_windows in zip(examples, windows)}


def _write_predictions(answers, predictions, null_odds):
    path = common.write_json(PREDICTIONS_FILE, predictions, ensure_ascii=False)
    common.write_json(NBEST_FILE,
                      {qid: answer["nbest"] for qid, answer in answers.items()},
                      ensure_ascii=False)
    if null_odds is not None:
        common.write_json(NULL_ODDS_FILE, null_odds, ensure_ascii=False)
    print(f"Wrote predictions for {len(answers)} questions to {path}")


def _null_odds(answers):
    """v2.0: {question id: null score - best span score}. +inf (no valid span) is not JSON;
    any big number ranks the same."""
    return {qid: min(answer["null_score_diff"], 1e30) for qid, answer in answers.items()}


def _evaluate(articles, predictions, null_odds):
    from bert_tf.metrics.squad import evaluate_squad_v1, evaluate_squad_v2

    if null_odds is not None:
        return evaluate_squad_v2(articles, predictions, null_odds)
    return evaluate_squad_v1(articles, predictions)


def main():
    _check_squad_flags()
    if FLAGS.tfds_name:
        from bert_tf.data.tfds.squad import squad_version_2

        FLAGS.version_2_with_negative = squad_version_2(FLAGS.tfds_name)
    splits = tfds_flags.tfds_split_flags()
    logging.getLogger("bert_tf").setLevel(logging.INFO)
    import keras
    import tensorflow as tf

    from bert_tf.models.bert_span_labeler import BertSpanLabeler
    from bert_tf.text.bert_tokenizer import BertTokenizer

    vocab_file = common.vocab_file_from_flags()
    tokenizer = BertTokenizer(vocab_file, common.do_lower_case_from_flags())
    # Read all data before building the model: a bad file fails in seconds.
    train = (_read(FLAGS.train_file, FLAGS.train_articles, tokenizer, is_training=True,
                   tfds_split=splits["train"]) if FLAGS.do_train else None)
    predict = (_read(FLAGS.predict_file, FLAGS.predict_articles, tokenizer, is_training=False,
                     tfds_split=splits["eval" if FLAGS.do_eval else "predict"])
               if FLAGS.do_eval or FLAGS.do_predict else None)

    encoder = common.encoder_from_flags()
    common.prepare_output_dir(encoder, vocab_file, "run_squad",
                              training_examples=len(train[2]) if train else None)
    # The paper's loss: the mean of the start and end cross-entropies.
    cross_entropy = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    tuner = common.fine_tuner_from_flags(
        BertSpanLabeler(encoder), len(train[2]) if train else 1,
        loss={"start_logits": cross_entropy, "end_logits": cross_entropy},
        loss_weights={"start_logits": 0.5, "end_logits": 0.5})
    if train:
        features = train[2]
        tuner.train(common.training_batches_from_flags(
            tf.data.Dataset.from_tensor_slices((features.inputs, features.labels())),
            len(features), drop_remainder=True))
    else:
        tuner.restore_latest()

    if predict:
        articles, examples, features = predict
        answers = _predict_answers(tuner, examples, features)
        predictions = {qid: answer["text"] for qid, answer in answers.items()}
        null_odds = _null_odds(answers) if FLAGS.version_2_with_negative else None
        _write_predictions(answers, predictions, null_odds)
        if FLAGS.do_eval:
            results = {**_evaluate(articles, predictions, null_odds),
                       "num_questions": len(examples),
                       "num_features": len(features)}
            path = common.write_results(results, tuner.step)
            # v1.1 reports exact_match, v2.0 exact (each the official script's name).
            exact = results.get("exact_match", results.get("exact"))
            print(f"eval exact match = {exact:.2f}, F1 = {results['f1']:.2f} "
                  f"({len(examples)} questions; {path})")
    if train:
        # The export answers as this run predicts with the run's windows and answer rules.
        common.print_export_command("squad", *[
            f"--{name}={FLAGS[name].value}"
            for name in ("doc_stride", "max_query_length", "max_answer_length")], *([
                "--version_2_with_negative",
                f"--null_score_diff_threshold={FLAGS.null_score_diff_threshold}"]
                if FLAGS.version_2_with_negative else []))
    return 0


def run():
    run_tool(main, define_flags)
