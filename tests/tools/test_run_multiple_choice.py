"""tools/run_multiple_choice.py end to end, in subprocesses, on small SWAG CSV files written
here: a tiny BERT learns which ending is right, the accuracy agrees with the predictions file,
an eval-only rerun and the exported `multiple_choice` SavedModel; bad input fails naming the
file, line and column."""

import csv
import json
import os
import random

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_text  # noqa: F401  (the exported SavedModel uses tf.text ops)

from bert_tf.cli.run_multiple_choice import OUTPUTS
from bert_tf.data.tasks.swag import read_swag
from bert_tf.training.existing_run import is_run_output
from tests.tools.tool_runs import error_output, run_printed_export, run_tool, scalar_curves

VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "man", "woman", "opens", "door",
         "she", "he", "runs", "walks", "sits", "smiles", "away", "home", "down", "good", "bad",
         "##ly", "."]
CONFIG = {"vocab_size": len(VOCAB), "hidden_size": 32, "num_hidden_layers": 1,
          "num_attention_heads": 2, "intermediate_size": 64, "hidden_act": "gelu",
          "hidden_dropout_prob": 0.1, "attention_probs_dropout_prob": 0.1,
          "max_position_embeddings": 64, "type_vocab_size": 2, "initializer_range": 0.02}
HEADER = ["video-id", "fold-ind", "startphrase", "sent1", "sent2", "gold-source", "ending0",
          "ending1", "ending2", "ending3", "label"]
MAX_SEQ_LENGTH = 24


def write_swag(path, count, seed, labels=True):
    """A learnable SWAG-like task: the right ending says "good", the wrong ones "badly"."""
    rng = random.Random(seed)
    with open(path, "w", encoding="utf-8", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(HEADER if labels else HEADER[:-1])
        for index in range(count):
            subject = rng.choice(["The man", "The woman"])
            context = f"{subject} {rng.choice(['opens the door', 'walks', 'sits down'])}."
            verbs = rng.sample(["runs", "walks", "sits", "smiles"], 4)
            label = rng.randrange(4)
            endings = [f"{verb} {'good' if i == label else 'badly'} ."
                       for i, verb in enumerate(verbs)]
            row = [f"video{index}", str(1000 + index), "", context,
                   rng.choice(["She", "He", ""]), "gen", *endings]
            writer.writerow(row + [str(label)] if labels else row)


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    directory = tmp_path_factory.mktemp("swag")
    write_swag(directory / "train.csv", 160, seed=1)
    write_swag(directory / "val.csv", 30, seed=2)
    write_swag(directory / "test.csv", 10, seed=3, labels=False)
    (directory / "vocab.txt").write_text("\n".join(VOCAB) + "\n")
    (directory / "bert_config.json").write_text(json.dumps(CONFIG))
    return directory


def base_flags(data, output_dir, *flags, data_dir=None):
    return [f"--data_dir={data_dir or data}", f"--output_dir={output_dir}",
            f"--vocab_file={data}/vocab.txt", f"--bert_config_file={data}/bert_config.json",
            f"--max_seq_length={MAX_SEQ_LENGTH}", *flags]


def read_predictions(path):
    with open(path, encoding="utf-8", newline="") as f:
        return list(csv.DictReader(f))


@pytest.fixture(scope="module")
def trained(data, tmp_path_factory):
    output_dir = tmp_path_factory.mktemp("multiple_choice")
    result = run_tool("run_multiple_choice.py", *base_flags(
        data, output_dir, "--do_train", "--do_eval", "--do_predict", "--num_train_epochs=8",
        "--train_batch_size=16", "--learning_rate=2e-3", "--save_checkpoints_steps=40"))
    assert result.returncode == 0, result.stderr[-3000:]
    return output_dir, result


def test_trains_evaluates_and_predicts(data, trained):
    output_dir, result = trained
    results = json.loads((output_dir / "eval_results.json").read_text())
    assert results["global_step"] == 80  # 160 * 8 / 16
    assert results["data"] == {"file": f"{data}/val.csv", "examples": 30, "num_choices": 4,
                               "truncated_pairs": 0}
    assert results["accuracy"] >= 0.9, results
    assert f"eval accuracy = {results['accuracy']:.4f}" in result.stdout

    rows = read_predictions(output_dir / "eval_predictions.csv")
    gold = read_swag(str(data / "val.csv"), require_labels=True)
    assert [row["id"] for row in rows] == gold.ids
    probabilities = np.array([[float(row[f"probability{i}"]) for i in range(4)] for row in rows])
    np.testing.assert_allclose(probabilities.sum(-1), 1, atol=1e-5)
    predicted = [int(row["prediction"]) for row in rows]
    assert predicted == probabilities.argmax(-1).tolist()
    assert results["accuracy"] == pytest.approx(np.mean(np.equal(predicted, gold.labels)))
    assert results["loss"] == pytest.approx(
        -np.mean(np.log(probabilities[np.arange(30), gold.labels])), rel=1e-3)
    assert len(read_predictions(output_dir / "test_predictions.csv")) == 10
    # What the check of a directory holding no run knows (other_files_problem).
    assert all(is_run_output(name, OUTPUTS) for name in os.listdir(output_dir))

    scalars = scalar_curves(str(output_dir / "train"))
    assert [step for step, _ in scalars["loss"]] == [50, 80]  # every 50 steps and at the end
    assert scalars["loss"][-1][1] < scalars["loss"][0][1]
    assert scalar_curves(str(output_dir / "eval"))["accuracy"] == [
        (80, pytest.approx(results["accuracy"]))]


def test_eval_only_rerun_and_export_agree(data, trained, tmp_path):
    output_dir, _ = trained
    before = read_predictions(output_dir / "eval_predictions.csv")
    result = run_tool("run_multiple_choice.py", *base_flags(data, output_dir, "--do_eval",
                                                            "--eval_batch_size=7"))
    assert result.returncode == 0, result.stderr[-3000:]
    after = read_predictions(output_dir / "eval_predictions.csv")
    assert [row["prediction"] for row in after] == [row["prediction"] for row in before]

    # The command the training run printed.
    result = run_printed_export(trained[1].stdout, tmp_path / "swag")
    assert result.returncode == 0, result.stderr[-3000:]
    serving = tf.saved_model.load(str(tmp_path / "swag" / "1")).signatures["serving_default"]
    examples = read_swag(str(data / "val.csv"), require_labels=True)
    outputs = serving(context=tf.constant(examples.contexts), choices=tf.constant(examples.choices))
    probabilities = np.array([[float(row[f"probability{i}"]) for i in range(4)] for row in after])
    np.testing.assert_allclose(outputs["probabilities"], probabilities, atol=1e-4)


def test_bad_input_names_file_line_and_column(data, trained, tmp_path):
    output_dir, _ = trained
    (tmp_path / "train.csv").write_text("sent1,sent2,ending0,ending1,label\na,b,c,d,4\n")
    result = run_tool("run_multiple_choice.py", *base_flags(data, tmp_path / "out", "--do_train",
                                                            data_dir=tmp_path))
    assert result.returncode == 1
    assert (f"run_multiple_choice: error: {tmp_path}/train.csv:2: column 'label' is '4', not a "
            f"choice index 0..1") in result.stderr
    (tmp_path / "val.csv").write_text("sent1,ending0,ending1,label\na,c,d,1\n")
    result = run_tool("run_multiple_choice.py", *base_flags(data, output_dir, "--do_eval",
                                                            data_dir=tmp_path))
    assert result.returncode == 1
    assert f"{tmp_path}/val.csv:1: no column 'sent2' in the header" in result.stderr


def test_a_max_seq_length_too_short_for_a_pair_is_a_flag_error(data, tmp_path):
    # It was a TensorFlow traceback from inside the tf.data pipeline, after the model loaded.
    result = run_tool("run_multiple_choice.py", *base_flags(data, tmp_path / "out", "--do_train",
                                                            "--max_seq_length=2"))
    assert error_output(result) == (
        "run_multiple_choice: error: --max_seq_length 2 cannot hold a sentence pair: it needs "
        "at least 5 ([CLS], one [SEP] per segment and a word piece of each text)")
    assert not (tmp_path / "out").exists()
