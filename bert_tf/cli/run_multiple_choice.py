"""Fine-tunes BERT for multiple choice on SWAG-format CSV data, evaluates accuracy, and picks
answers for new examples.

Data: --data_dir with --train_file (train.csv), --eval_file (val.csv) and --predict_file
(test.csv), SWAG's columns `video-id,fold-ind,startphrase,sent1,sent2,gold-source,ending0..3,
label` (`label` not needed for prediction; any number >= 2 of `ending<i>` columns). As in the
paper, each choice is packed as the pair `[CLS] sent1 [SEP] sent2 ending_i [SEP]`,
`BertMultipleChoice` scores each with a vector on its `[CLS]` output, and a softmax over the
choices is trained with cross-entropy. Pairs longer than --max_seq_length are truncated
(round robin); their number is logged and written to eval_results.json.

Or from TensorFlow Datasets: --tfds_name=hellaswag (or a multiple-choice dataset with `context`,
`endings` and `label`) prepared in --tfds_data_dir, splits --tfds_train_split,
--tfds_eval_split, --tfds_predict_split; each choice is the pair `[CLS] context [SEP] ending_i
[SEP]`. HellaSwag's `test` has no labels: it can be predicted, not evaluated.

Writes to --output_dir: checkpoints (resumable), TensorBoard logs, `eval_results.json`
(accuracy, loss), `eval_predictions.csv` and `test_predictions.csv` (the example's `fold-ind`
or line, or its position in the TFDS split; the chosen ending and each choice's probability).

Example:
    bert-tf-run-multiple-choice --init_checkpoint=$MINILM --data_dir=swag \\
        --output_dir=/tmp/swag --do_train --do_eval --num_train_epochs=3 --learning_rate=2e-5
"""

import csv
import logging
import os

from absl import flags

from bert_tf.cli import fine_tuning_flags as common
from bert_tf.cli import tfds_flags
from bert_tf.cli.app import run_tool
from bert_tf.file_io import replacing

FLAGS = flags.FLAGS

EVAL_PREDICTIONS_FILE, TEST_PREDICTIONS_FILE = "eval_predictions.csv", "test_predictions.csv"
OUTPUTS = (EVAL_PREDICTIONS_FILE, TEST_PREDICTIONS_FILE)  # beside every run's files

logger = logging.getLogger("bert_tf.tools")


def define_flags():
    common.define_fine_tuning_flags()
    common.define_data_file_flags("SWAG CSV", "train.csv", "val.csv", "test.csv")
    tfds_flags.define_fine_tuning_tfds_flags("hellaswag")


def _read(mode, require_labels, tokenizer):
    """`(where, examples, truncated pairs)` of `mode` ("train", "eval", "predict"): from
    --tfds_name's split, or from the file of --<mode>_file in --data_dir."""
    if FLAGS.tfds_name:
        from bert_tf.data.tfds.multiple_choice import read_multiple_choice_tfds

        examples, where = read_multiple_choice_tfds(
            FLAGS.tfds_name, tfds_flags.tfds_split_flags()[mode], FLAGS.tfds_data_dir,
            require_labels)
    else:
        from bert_tf.data.tasks.swag import read_swag

        where = common.data_path(f"{mode}_file")
        examples = read_swag(where, require_labels)
    truncated = examples.truncated_choices(tokenizer, FLAGS.max_seq_length)
    logger.info("%s: %d examples of %d choices; %d of the %d (context, choice) pairs truncated "
                "to %d pieces", where, len(examples), examples.num_choices, truncated,
                len(examples) * examples.num_choices, FLAGS.max_seq_length)
    return where, examples, truncated


def _write_predictions(path, examples, probabilities):
    with replacing(path) as temporary, open(temporary, "w", encoding="utf-8", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["id", "line", "prediction"]
                        + [f"probability{i}" for i in range(examples.num_choices)])
        for example_id, line, row in zip(examples.ids, examples.lines, probabilities,
                                         strict=True):
            writer.writerow([example_id, line, int(row.argmax())] + [f"{p:.6f}" for p in row])


def fine_tune(vocab_file):
    import keras

    from bert_tf.data.tasks.dynamic_padding import padded_batches
    from bert_tf.metrics.glue import accuracy
    from bert_tf.metrics.softmax import cross_entropy, softmax
    from bert_tf.models.bert_multiple_choice import BertMultipleChoice
    from bert_tf.text.bert_preprocessor import BertPreprocessor

    preprocessor = BertPreprocessor(vocab_file, common.do_lower_case_from_flags(),
                                    FLAGS.max_seq_length)
    tokenizer = preprocessor.tokenizer
    train = _read("train", True, tokenizer)[1] if FLAGS.do_train else None
    evaluation = _read("eval", True, tokenizer) if FLAGS.do_eval else None
    prediction = _read("predict", False, tokenizer) if FLAGS.do_predict else None

    encoder = common.encoder_from_flags()
    common.prepare_output_dir(encoder, vocab_file, "run_multiple_choice",
                              training_examples=len(train) if train else None)
    model = BertMultipleChoice(encoder)
    loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    tuner = common.fine_tuner_from_flags(
        model, len(train) if train else 1, loss={"logits": loss},
        metrics={"logits": [keras.metrics.SparseCategoricalAccuracy(name="accuracy")]})
    if FLAGS.do_train:
        tuner.train(common.training_batches_from_flags(train.texts(), len(train),
                                                       prepare=train.packing(preprocessor)))
    else:
        tuner.restore_latest()

    def logits(examples, batch_size):
        batches = padded_batches(examples.dataset(preprocessor), batch_size, FLAGS.max_seq_length)
        return tuner.predict(batches, FLAGS.max_seq_length)["logits"]

    if FLAGS.do_eval:
        path, examples, truncated = evaluation
        scores = logits(examples, FLAGS.eval_batch_size)
        results = {
            "accuracy": accuracy(examples.labels, scores.argmax(-1)),
            "loss": cross_entropy(scores, examples.labels),
            "data": {"file": path, "examples": len(examples),
                     "num_choices": examples.num_choices, "truncated_pairs": truncated}}
        _write_predictions(os.path.join(FLAGS.output_dir, EVAL_PREDICTIONS_FILE), examples,
                           softmax(scores))
        json_path = common.write_results(results, tuner.step)
        print(f"eval accuracy = {results['accuracy']:.4f} ({len(examples)} examples; "
              f"{json_path})")

    if FLAGS.do_predict:
        _, examples, _ = prediction
        output = os.path.join(FLAGS.output_dir, TEST_PREDICTIONS_FILE)
        _write_predictions(output, examples, softmax(logits(examples, FLAGS.predict_batch_size)))
        print(f"Wrote predictions for {len(examples)} examples to {output}")
    if FLAGS.do_train:
        common.print_export_command("multiple_choice")


def main():
    # (context, ending) pairs
    common.fine_tune_on_data_dir(fine_tune, OUTPUTS, files=not FLAGS.tfds_name, segments=2)


def run():
    run_tool(main, define_flags)
