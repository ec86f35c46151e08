"""tools/run_squad.py end to end, in subprocesses: train / eval / predict on a tiny SQuAD file
written by the test (non-ASCII contexts, long contexts in several windows, v2.0 no-answer),
the export of the trained checkpoint answering as the tool does, bad input, and a MiniLM run on
a handful of real dev questions."""

import json
import os
import subprocess

import keras
import pytest
import tensorflow as tf

from bert_tf import BertConfig, BertEncoder
from bert_tf.checkpoints import save_checkpoint
from bert_tf.cli.run_squad import OUTPUTS
from bert_tf.metrics.squad import evaluate_squad_v1, evaluate_squad_v2
from bert_tf.training.existing_run import is_run_output
from tests.data.tasks.test_squad import VOCAB, squad_json, write_squad, write_vocab
from tests.resources import minilm_dir, shared_data_path
from tests.tools.tool_runs import run_printed_export, run_tool, scalar_curves

SEQ = 32
# Small windows (several per long context); n_best_size = SEQ makes the span search exhaustive,
# as the exported model's is, so that both must pick the same answer.
SQUAD_FLAGS = [f"--max_seq_length={SEQ}", "--doc_stride=8", "--max_query_length=8",
               f"--n_best_size={SEQ}", "--train_batch_size=4", "--eval_batch_size=5",
               "--predict_batch_size=3", "--learning_rate=5e-3", "--save_checkpoints_steps=40"]


def read_json(directory, name):
    with open(os.path.join(directory, name), encoding="utf-8") as f:
        return json.load(f)


def contexts_by_id(dataset):
    return {qa["id"]: paragraph["context"] for article in dataset["data"]
            for paragraph in article["paragraphs"] for qa in paragraph["qas"]}


@pytest.fixture(scope="module")
def pretrained(tmp_path_factory):
    """A tiny random BERT saved as a converted checkpoint, with the test vocabulary."""
    directory = tmp_path_factory.mktemp("pretrained")
    keras.utils.set_random_seed(0)
    config = BertConfig(vocab_size=len(VOCAB), hidden_size=32, num_hidden_layers=2,
                        num_attention_heads=2, intermediate_size=64, max_position_embeddings=64)
    save_checkpoint(directory / "ckpt", BertEncoder(config),
                    vocab_file=write_vocab(str(directory)))
    return str(directory / "ckpt")


@pytest.fixture(scope="module")
def trained(pretrained, tmp_path_factory):
    """Trains, evaluates and predicts v1.1 on the same file (the model memorizes it)."""
    directory = tmp_path_factory.mktemp("squad_v1")
    dataset = squad_json(bad_answers=True)
    data = write_squad(directory / "train.json", dataset)
    output_dir = str(directory / "out")
    result = run_tool(
        "run_squad.py", f"--init_checkpoint={pretrained}", f"--output_dir={output_dir}",
        "--do_train", "--do_eval", "--do_predict", f"--train_file={data}", f"--predict_file={data}",
        "--num_train_epochs=25", *SQUAD_FLAGS)
    assert result.returncode == 0, result.stderr[-3000:]
    return {"output_dir": output_dir, "data": data, "dataset": dataset, "stderr": result.stderr,
            "stdout": result.stdout}


def test_reports_skipped_training_questions(trained):
    assert ("skipped 2 training questions (used 7): answer text not found at answer_start: 1 "
            "(e.g. shifted); answer starts or ends inside a word piece: 1 (e.g. inside)"
            in trained["stderr"])


def test_the_summary_is_on_stdout(trained):
    # As the other fine-tuning tools: the scores and what was written, without the log.
    results = read_json(trained["output_dir"], "eval_results.json")
    path = os.path.join(trained["output_dir"], "eval_results.json")
    predictions = os.path.join(trained["output_dir"], "predictions.json")
    assert trained["stdout"].splitlines()[-3:-1] == [
        f"Wrote predictions for 9 questions to {predictions}",
        f"eval exact match = {results['exact_match']:.2f}, F1 = {results['f1']:.2f} "
        f"(9 questions; {path})"]
    assert trained["stdout"].splitlines()[-1].startswith("To serve it: ")


def test_predictions_come_from_the_contexts_and_are_scored_officially(trained):
    output_dir, dataset = trained["output_dir"], trained["dataset"]
    predictions = read_json(output_dir, "predictions.json")
    contexts = contexts_by_id(dataset)
    assert set(predictions) == set(contexts)
    for qas_id, text in predictions.items():
        assert text and text in contexts[qas_id], qas_id
    nbest = read_json(output_dir, "nbest_predictions.json")
    for qas_id, entries in nbest.items():
        assert entries[0]["text"] == predictions[qas_id]
        assert sum(entry["probability"] for entry in entries) == pytest.approx(1.0)
        assert len({entry["text"] for entry in entries}) == len(entries) <= SEQ
    results = read_json(output_dir, "eval_results.json")
    expected = evaluate_squad_v1(dataset, predictions)
    assert results["exact_match"] == pytest.approx(expected["exact_match"])
    assert results["f1"] == pytest.approx(expected["f1"])
    assert results["num_questions"] == 9
    # 25 epochs over its own 7 trainable questions: the tiny model has learnt them, non-ASCII
    # and multi-window answers included.
    learnt = [qas_id for qas_id in ("zurich", "year", "unaff", "tokyo", "naive", "emoji", "zebra")
              if predictions[qas_id] == dataset_answer(dataset, qas_id)]
    assert len(learnt) >= 5, predictions


def dataset_answer(dataset, qas_id):
    return next(qa["answers"][0]["text"] for article in dataset["data"]
                for paragraph in article["paragraphs"] for qa in paragraph["qas"]
                if qa["id"] == qas_id)


def test_writes_checkpoints_and_tensorboard(trained):
    output_dir = trained["output_dir"]
    # What the check of a directory holding no run knows (other_files_problem).
    assert all(is_run_output(name, OUTPUTS) for name in os.listdir(output_dir))
    results = read_json(output_dir, "eval_results.json")
    assert tf.train.latest_checkpoint(output_dir).endswith(f"ckpt-{results['global_step']}")
    train_scalars = scalar_curves(os.path.join(output_dir, "train"))
    losses = [value for _, value in train_scalars["loss"]]
    assert losses[-1] < losses[0]
    eval_scalars = scalar_curves(os.path.join(output_dir, "eval"))
    assert eval_scalars["f1"] == [(results["global_step"], pytest.approx(results["f1"]))]


def test_predict_only_restores_the_fine_tuned_checkpoint(trained, tmp_path):
    # A copy, so that the module's other tests keep their files.
    output_dir = str(tmp_path / "out")
    subprocess.run(["cp", "-r", trained["output_dir"], output_dir], check=True)
    os.remove(os.path.join(output_dir, "predictions.json"))
    result = run_tool(
        "run_squad.py", f"--init_checkpoint={output_dir}", f"--output_dir={output_dir}",
        "--do_predict", f"--predict_file={trained['data']}", *SQUAD_FLAGS)
    assert result.returncode == 0, result.stderr[-3000:]
    assert (read_json(output_dir, "predictions.json")
            == read_json(trained["output_dir"], "predictions.json"))


def exported_answers(stdout, dataset, tmp_path):
    """{question id: answer} of the SavedModel that the run's printed export command writes."""
    result = run_printed_export(stdout, tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    serving = tf.saved_model.load(str(tmp_path / "1")).signatures["serving_default"]
    questions = {qa["id"]: (qa["question"], paragraph["context"])
                 for article in dataset["data"]
                 for paragraph in article["paragraphs"] for qa in paragraph["qas"]}
    ids = sorted(questions)
    answers = serving(question=tf.constant([questions[i][0] for i in ids]),
                      context=tf.constant([questions[i][1] for i in ids]))["answer"]
    return {i: a.decode("utf-8") for i, a in zip(ids, answers.numpy())}


def test_exported_model_gives_the_tools_answers(trained, tmp_path):
    # With the run's windows (the printed command names them): the long context's answer
    # (zebra) is in its last one.
    predictions = read_json(trained["output_dir"], "predictions.json")
    assert exported_answers(trained["stdout"], trained["dataset"], tmp_path) == predictions


def test_version_2_with_negative(pretrained, tmp_path):
    dataset = squad_json(version_2=True)
    data = write_squad(tmp_path / "train-v2.json", dataset)
    output_dir = str(tmp_path / "out")
    result = run_tool(
        "run_squad.py", f"--init_checkpoint={pretrained}", f"--output_dir={output_dir}",
        "--do_train", "--do_eval", f"--train_file={data}", f"--predict_file={data}",
        "--version_2_with_negative", "--null_score_diff_threshold=0.5", "--num_train_epochs=3",
        *SQUAD_FLAGS)
    assert result.returncode == 0, result.stderr[-3000:]
    predictions = read_json(output_dir, "predictions.json")
    null_odds = read_json(output_dir, "null_odds.json")
    assert set(predictions) == set(null_odds) == set(contexts_by_id(dataset))
    # "No answer" exactly where the null score beats the best span by more than the threshold.
    for qas_id, text in predictions.items():
        assert (text == "") == (null_odds[qas_id] > 0.5), qas_id
    nbest = read_json(output_dir, "nbest_predictions.json")
    assert all("" in {entry["text"] for entry in entries} for entries in nbest.values())
    results = read_json(output_dir, "eval_results.json")
    expected = evaluate_squad_v2(dataset, predictions, null_odds)
    for key in ("exact", "f1", "HasAns_f1", "NoAns_f1", "best_f1", "best_f1_thresh"):
        assert results[key] == pytest.approx(expected[key]), key
    assert results["NoAns_total"] == 1
    # Served, "no answer" where the tool found none.
    assert "--version_2_with_negative --null_score_diff_threshold=0.5" in (
        result.stdout.splitlines()[-1])
    assert exported_answers(result.stdout, dataset, tmp_path / "served") == predictions


def test_bad_input_is_named(pretrained, tmp_path):
    broken = tmp_path / "broken.json"
    broken.write_text('{"data": [{"paragraphs": [\n{"context": "x", "qas": [}]}]}')
    result = run_tool(
        "run_squad.py", f"--init_checkpoint={pretrained}", f"--output_dir={tmp_path / 'out'}",
        "--do_train", f"--train_file={broken}")
    assert result.returncode == 1
    assert f"run_squad: error: {broken}: not valid JSON at line 2, column 26" in result.stderr
    assert not os.path.exists(tmp_path / "out")        # failed before building anything

    result = run_tool(
        "run_squad.py", f"--init_checkpoint={pretrained}", f"--output_dir={tmp_path / 'out'}",
        "--do_train", "--do_eval", "--doc_stride=0")
    assert result.returncode != 0
    for message in ("--do_train needs --train_file", "--do_eval needs --predict_file",
                    "--doc_stride must be at least 1, got 0"):
        assert message in result.stderr

    # A threshold v1.1 would ignore, and one no comparison holds for.
    for flags, message in (
            (["--null_score_diff_threshold=1"],
             "--null_score_diff_threshold applies with --version_2_with_negative"),
            (["--version_2_with_negative", "--null_score_diff_threshold=nan"],
             "--null_score_diff_threshold must be a number, got nan")):
        result = run_tool(
            "run_squad.py", f"--init_checkpoint={pretrained}", f"--output_dir={tmp_path / 'out'}",
            "--do_eval", f"--predict_file={broken}", *flags)
        assert result.returncode == 1 and message in result.stderr, result.stderr


def test_predict_without_a_fine_tuned_checkpoint_is_refused(pretrained, tmp_path):
    data = write_squad(tmp_path / "dev.json", squad_json())
    result = run_tool(
        "run_squad.py", f"--init_checkpoint={pretrained}", f"--output_dir={tmp_path / 'out'}",
        "--do_predict", f"--predict_file={data}", *SQUAD_FLAGS)
    assert result.returncode != 0
    assert "needs a fine-tuned checkpoint in --output_dir" in result.stderr


def _first_paragraphs(dataset, article, count):
    source = dataset["data"][article]
    return {"version": dataset["version"],
            "data": [{"title": source["title"], "paragraphs": source["paragraphs"][:count]}]}


def test_minilm_on_real_dev_questions(tmp_path):
    """The real MiniLM, a few steps on the first dev questions, predicting questions of the
    last article: the tool runs on real data and writes consistent official scores."""
    with open(shared_data_path("squad/dev-v1.1.json"), encoding="utf-8") as f:
        dev = json.load(f)
    train = write_squad(tmp_path / "train.json", _first_paragraphs(dev, 0, 2))
    predict_dataset = _first_paragraphs(dev, 47, 1)
    predict = write_squad(tmp_path / "predict.json", predict_dataset)
    output_dir = str(tmp_path / "out")
    result = run_tool(
        "run_squad.py", f"--init_checkpoint={minilm_dir()}", f"--output_dir={output_dir}",
        "--do_train", "--do_eval", f"--train_file={train}", f"--predict_file={predict}",
        "--max_seq_length=192", "--train_batch_size=8", "--num_train_epochs=1",
        "--learning_rate=5e-5")
    assert result.returncode == 0, result.stderr[-3000:]
    predictions = read_json(output_dir, "predictions.json")
    contexts = contexts_by_id(predict_dataset)
    assert set(predictions) == set(contexts)
    assert all(text in contexts[qas_id] for qas_id, text in predictions.items())
    results = read_json(output_dir, "eval_results.json")
    assert results["f1"] == pytest.approx(evaluate_squad_v1(predict_dataset, predictions)["f1"])
