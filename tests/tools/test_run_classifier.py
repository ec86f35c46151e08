"""tools/run_classifier.py end to end, in subprocesses: a tiny BERT on small GLUE files written
here (single sentences, pairs with MNLI's two dev sets, STS-B regression), exact resume after
SIGKILL, the exported SavedModel agreeing with the tool, bad input, and MiniLM on real SST-2."""

import json
import os
import random
import shutil
import subprocess

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_text  # noqa: F401  (registers the WordPiece op the export uses)

from bert_tf.cli.run_classifier import OUTPUTS
from bert_tf.metrics.glue import glue_metrics
from bert_tf.training.existing_run import is_run_output
from tests.export.tiny_models import VOCAB, tiny_config, write_vocab
from tests.read_only import read_only
from tests.resources import minilm_dir, shared_data_path
from tests.tools.tool_runs import (error_output, kill_at_first_checkpoint, latest_step, run_tool,
                                   scalar_curves, set_up_then_exec, tool_command, tool_env)

SEQ = 32  # short texts are padded to 16, the export pads to 32: results must not change
POSITIVE = ["a good movie", "good film", "a good good film !", "what a good movie"]
NEGATIVE = ["a bad movie", "bad film", "the bad bad films .", "what a bad film"]
TRAIN_FLAGS = ["--task_name=sst-2", f"--max_seq_length={SEQ}", "--train_batch_size=8",
               "--num_train_epochs=20", "--learning_rate=2e-3", "--save_checkpoints_steps=80"]
STEPS = 240  # 96 examples * 20 epochs / 8


def _sentences(n, seed):
    """A learnable toy sentiment task: label 1 iff the text says "good"."""
    rng = random.Random(seed)
    return [(f"{rng.choice(POSITIVE if i % 2 else NEGATIVE)} {rng.choice(['hello', 'world', ''])}"
             .strip(), str(i % 2)) for i in range(n)]


def _write(path, rows):
    path.write_text("".join("\t".join(row) + "\n" for row in rows), encoding="utf-8")


def _tsv(path):
    return [line.split("\t") for line in path.read_text(encoding="utf-8").splitlines()]


@pytest.fixture(scope="module")
def workspace(tmp_path_factory):
    directory = tmp_path_factory.mktemp("glue")
    vocab_file = write_vocab(str(directory))
    config_file = str(directory / "bert_config.json")
    tiny_config(num_hidden_layers=1).to_json_file(config_file)
    sst2 = directory / "SST-2"
    sst2.mkdir()
    _write(sst2 / "train.tsv", [["sentence", "label"], *_sentences(96, seed=0)])
    _write(sst2 / "dev.tsv", [["sentence", "label"], *_sentences(20, seed=1)])
    test = [[str(100 + i), text] for i, (text, _) in enumerate(_sentences(11, seed=2))]
    _write(sst2 / "test.tsv", [["index", "sentence"], *test, ["111", " "]])  # empty: kept
    return {"dir": directory, "vocab": vocab_file, "config": config_file, "sst2": sst2,
            "model": [f"--bert_config_file={config_file}", f"--vocab_file={vocab_file}"]}


@pytest.fixture(scope="module")
def sst2_run(workspace):
    output_dir = workspace["dir"] / "sst2_out"
    # Thread pools sized by flag: had the tool run a TensorFlow op before sizing them, it would
    # stop with "cannot take effect" (bert_tf.thread_pools).
    result = run_tool("run_classifier.py", *workspace["model"], *TRAIN_FLAGS,
                      f"--data_dir={workspace['sst2']}", f"--output_dir={output_dir}",
                      "--do_train", "--do_eval", "--do_predict",
                      "--tensorflow_intra_op_parallelism=1", "--tensorflow_inter_op_parallelism=2")
    assert result.returncode == 0, result.stderr[-3000:]
    return output_dir, result


def _one_step_flags(workspace):
    """One training step on the SST-2 files, --output_dir to come."""
    return [*TRAIN_FLAGS, f"--data_dir={workspace['sst2']}", "--num_train_steps=1", "--do_train"]


@pytest.fixture(scope="module")
def cased_run(workspace):
    """One step with --nodo_lower_case into a directory that held someone's notes.txt: read by
    the tests of the casing, of epochs overridden by steps and of an --output_dir of other
    files; its output directory and run."""
    output_dir = workspace["dir"] / "cased"
    output_dir.mkdir()
    (output_dir / "notes.txt").write_text("kept")
    return output_dir, run_tool("run_classifier.py", *workspace["model"],
                                *_one_step_flags(workspace), f"--output_dir={output_dir}",
                                "--nodo_lower_case")


def test_trains_evaluates_and_predicts(workspace, sst2_run):
    output_dir, result = sst2_run
    assert latest_step(str(output_dir)) == STEPS
    assert {"bert_config.json", "vocab.txt", "train", "eval"} <= set(os.listdir(output_dir))
    # What the check of a directory holding no run knows (other_files_problem).
    assert all(is_run_output(name, OUTPUTS) for name in os.listdir(output_dir))
    losses = [loss for _, loss in scalar_curves(str(output_dir / "train"))["loss"]]
    assert losses[-1] < 0.5 * losses[0]  # it learns
    results = json.loads((output_dir / "eval_results.json").read_text())
    assert set(results) == {"global_step", "accuracy", "loss", "num_examples",
                            "skipped_examples"}
    assert results["global_step"] == STEPS and results["num_examples"] == 20
    assert results["accuracy"] >= 0.9 and results["skipped_examples"] == 0
    assert scalar_curves(str(output_dir / "eval"))["accuracy"] == [
        (STEPS, pytest.approx(results["accuracy"]))]
    assert "SST-2 evaluation at step 240" in result.stdout

    rows = _tsv(output_dir / "predictions.tsv")
    assert rows[0] == ["id", "label", "probability_0", "probability_1"]
    assert [row[0] for row in rows[1:]] == [str(100 + i) for i in range(12)]
    probabilities = np.array([[float(p) for p in row[2:]] for row in rows[1:]])
    np.testing.assert_allclose(probabilities.sum(-1), 1.0, atol=1e-5)
    assert [row[1] for row in rows[1:]] == [str(i) for i in probabilities.argmax(-1)]
    texts = [row[1] for row in _tsv(workspace["sst2"] / "test.tsv")[1:12]]
    assert [row[1] for row in rows[1:12]] == ["1" if "good" in t else "0" for t in texts]
    assert ("--export_type=classifier --init_checkpoint=" f"{output_dir} " in result.stdout
            and "--label_names=0,1" in result.stdout)


def test_export_agrees_with_the_tools_evaluation_and_predictions(workspace, sst2_run, tmp_path):
    output_dir, _ = sst2_run
    export = run_tool("export_savedmodel.py", "--export_type=classifier",
                      f"--init_checkpoint={output_dir}", f"--output_dir={tmp_path}",
                      f"--seq_length={SEQ}", "--label_names=0,1")
    assert export.returncode == 0, export.stderr[-3000:]
    serving = tf.saved_model.load(str(tmp_path / "1")).signatures["serving_default"]

    test_texts = [row[1] for row in _tsv(workspace["sst2"] / "test.tsv")[1:]]
    served = serving(text=tf.constant(test_texts))
    rows = _tsv(output_dir / "predictions.tsv")[1:]
    np.testing.assert_allclose(served["probabilities"].numpy(),
                               [[float(p) for p in row[2:]] for row in rows], atol=2e-6)
    assert [name.decode() for name in served["label_name"].numpy()] == [row[1] for row in rows]

    dev = _tsv(workspace["sst2"] / "dev.tsv")[1:]
    served = serving(text=tf.constant([text for text, _ in dev]))
    labels = np.array([int(label) for _, label in dev])
    results = json.loads((output_dir / "eval_results.json").read_text())
    assert results["accuracy"] == glue_metrics("SST-2", labels, served["label"].numpy())[
        "accuracy"]
    log_probabilities = np.log(served["probabilities"].numpy())
    assert results["loss"] == pytest.approx(
        -log_probabilities[np.arange(len(labels)), labels].mean(), rel=1e-4, abs=1e-6)


def test_a_run_killed_with_sigkill_resumes_exactly(workspace, sst2_run, tmp_path):
    reference, _ = sst2_run
    output_dir = tmp_path / "killed"
    # The reference's thread flags too: with one thread per op the step runs in batch halves,
    # which draw their own dropout masks (bert_tf.models.batch_halves).
    flags = [*workspace["model"], *TRAIN_FLAGS, f"--data_dir={workspace['sst2']}",
             f"--output_dir={output_dir}", "--do_train", "--save_checkpoints_steps=10",
             "--tensorflow_intra_op_parallelism=1", "--tensorflow_inter_op_parallelism=2"]
    killed_at = kill_at_first_checkpoint("run_classifier.py", flags, output_dir)
    assert killed_at < STEPS

    resumed = run_tool("run_classifier.py", *flags)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert f"ckpt-{killed_at} at step {killed_at}" in resumed.stderr
    assert latest_step(str(output_dir)) == STEPS
    # Same data order, dropout masks and optimizer state as the uninterrupted run: same weights.
    expected = tf.train.load_checkpoint(str(reference))
    actual = tf.train.load_checkpoint(str(output_dir))
    names = [name for name, _ in tf.train.list_variables(str(reference))
             if name.startswith("model/")]
    assert any("classifier/bias" in name for name in names)
    for name in names:
        np.testing.assert_allclose(actual.get_tensor(name), expected.get_tensor(name),
                                   atol=1e-4, err_msg=name)


def test_without_training_it_evaluates_the_checkpoint_in_output_dir(workspace, sst2_run,
                                                                    tmp_path):
    output_dir, _ = sst2_run
    again = tmp_path / "again"
    again.mkdir()
    for name in os.listdir(output_dir):  # the checkpoint, without the results
        if name.startswith(("ckpt-", "checkpoint", "bert_config", "vocab")):
            (again / name).write_bytes((output_dir / name).read_bytes())
    # Neither --init_checkpoint nor --bert_config_file: the run's own config and vocabulary.
    result = run_tool("run_classifier.py", "--task_name=SST-2", f"--data_dir={workspace['sst2']}",
                      f"--output_dir={again}", f"--max_seq_length={SEQ}", "--do_eval")
    assert result.returncode == 0, result.stderr[-3000:]
    trained = json.loads((output_dir / "eval_results.json").read_text())
    # The same results; the loss to float32 rounding: the training run evaluated in batch
    # halves (one intra-op thread), this one in whole batches, summing in another order.
    assert (json.loads((again / "eval_results.json").read_text())
            == {**trained, "loss": pytest.approx(trained["loss"], rel=1e-6)})

    empty = tmp_path / "untrained"
    result = run_tool("run_classifier.py", *workspace["model"], "--task_name=SST-2",
                      f"--data_dir={workspace['sst2']}", f"--output_dir={empty}",
                      f"--max_seq_length={SEQ}", "--do_eval")
    assert result.returncode != 0
    assert "needs a fine-tuned checkpoint in --output_dir" in result.stderr
    assert not empty.exists()  # nothing written: a later training there is a new run


def _casing_refusal(flag, directory, stated):
    return (f"run_classifier: error: {flag} contradicts {directory}/tokenizer_config.json, which "
            f"says do_lower_case {stated} (the casing its model was trained with); drop {flag}")


def _files(directory):
    return {name: (directory / name).read_bytes() for name in os.listdir(directory)
            if (directory / name).is_file()}


def test_a_run_of_another_task_or_model_in_output_dir_is_refused_and_kept(workspace, sst2_run,
                                                                           tmp_path):
    output_dir, _ = sst2_run
    before = _files(output_dir)
    # MRPC has SST-2's two labels: its weights would "resume" without an error.
    mrpc = tmp_path / "MRPC"
    mrpc.mkdir()
    _write(mrpc / "train.tsv", [["Quality", "#1 ID", "#2 ID", "#1 String", "#2 String"],
                                *[[label, "1", "2", text, text]
                                  for text, label in _sentences(16, seed=3)]])
    result = run_tool("run_classifier.py", *workspace["model"], *TRAIN_FLAGS[1:],
                      "--task_name=MRPC", f"--data_dir={mrpc}", f"--output_dir={output_dir}",
                      "--do_train", f"--num_train_steps={STEPS + 2}")
    assert result.returncode == 1
    assert result.stderr.strip().splitlines()[-1] == (
        f"run_classifier: error: --output_dir {output_dir} holds a run of another task: "
        f"trained by run_classifier SST-2 (run.json), this run is run_classifier MRPC; use a "
        f"new --output_dir")

    config = tmp_path / "bert_config.json"
    tiny_config(num_hidden_layers=2).to_json_file(str(config))
    result = run_tool("run_classifier.py", f"--bert_config_file={config}",
                      f"--vocab_file={workspace['vocab']}", *TRAIN_FLAGS,
                      f"--data_dir={workspace['sst2']}", f"--output_dir={output_dir}",
                      "--do_train", "--do_eval", f"--num_train_steps={STEPS + 2}")
    assert result.returncode == 1
    assert result.stderr.strip().splitlines()[-1] == (
        f"run_classifier: error: --output_dir {output_dir} holds a run of another model: "
        f"bert_config.json differs in num_hidden_layers (1 there, 2 here); use a new "
        f"--output_dir")
    assert _files(output_dir) == before


def test_a_run_trained_with_other_settings_is_refused_and_kept(workspace, sst2_run, tmp_path):
    # Resumed (or, finished, "already trained" with its old metrics reported as new) whatever
    # the learning rate or batch asked: a trap when tuning.
    output_dir = _copy_of_run(sst2_run[0], tmp_path / "run")
    before = _files(output_dir)
    flags = [flag for flag in TRAIN_FLAGS if not flag.startswith("--learning_rate")]
    result = run_tool("run_classifier.py", *workspace["model"], *flags, "--learning_rate=0.5",
                      f"--data_dir={workspace['sst2']}", f"--output_dir={output_dir}",
                      "--do_train", "--do_eval")
    assert result.returncode == 1
    error = result.stderr.strip().splitlines()[-1]  # after the random-weights warning
    assert error.startswith(
        f"run_classifier: error: --output_dir {output_dir} holds a run with other training "
        f"settings: --learning_rate 0.002 there, 0.5 here; use a new --output_dir"), error
    assert _files(output_dir) == before
    # Evaluating it does not train: its training flags are not asked.
    result = run_tool("run_classifier.py", *workspace["model"], *flags, "--learning_rate=0.5",
                      f"--data_dir={workspace['sst2']}", f"--output_dir={output_dir}",
                      "--do_eval")
    assert result.returncode == 0, result.stderr[-3000:]


def test_epochs_overridden_by_steps_are_not_a_setting_of_the_run(workspace, cased_run,
                                                                 tmp_path):
    """--num_train_steps decides the schedule: a rerun with the same steps and other
    --num_train_epochs (ignored by both) is the same run."""
    run, result = cased_run
    assert result.returncode == 0, result.stderr[-3000:]  # with TRAIN_FLAGS' 20 epochs
    output_dir = _copy_of_run(run, tmp_path / "run")
    flags = [*_one_step_flags(workspace), f"--output_dir={output_dir}", "--nodo_lower_case"]
    result = run_tool("run_classifier.py", *workspace["model"], *flags, "--num_train_epochs=3")
    assert result.returncode == 0, result.stderr[-3000:]
    result = run_tool("run_classifier.py", *workspace["model"],
                      *[flag for flag in flags if flag != "--num_train_steps=1"],
                      "--num_train_steps=2")
    assert result.returncode == 1
    assert "--num_train_steps 1 there, 2 here" in result.stderr.strip().splitlines()[-1]


def test_an_output_dir_of_files_a_run_writes_but_no_run_is_refused_and_kept(workspace,
                                                                            cased_run,
                                                                            tmp_path):
    """Someone's own results there, not a run of this package: a run would overwrite them."""
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "predictions.tsv").write_text("my predictions")
    (mine / "eval_results.json").write_text('{"accuracy": 0.97}')
    (mine / "notes.txt").write_text("kept")
    before = _files(mine)
    result = run_tool("run_classifier.py", *workspace["model"], *TRAIN_FLAGS,
                      f"--data_dir={workspace['sst2']}", f"--output_dir={mine}", "--do_train",
                      "--do_eval", "--do_predict")
    assert error_output(result) == (
        f"run_classifier: error: --output_dir {mine} holds eval_results.json, predictions.tsv "
        f"but no run of bert_tf (no run.json), and this run would overwrite them; use another "
        f"--output_dir")
    assert _files(mine) == before and sorted(os.listdir(mine)) == sorted(before)

    # Without those two, the notes are no run's: the cased run trained beside them.
    cased, result = cased_run
    assert result.returncode == 0, result.stderr[-3000:]
    assert (cased / "notes.txt").read_text() == "kept" and latest_step(cased) == 1


def _copy_of_run(run, directory):
    shutil.copytree(run, directory)
    return directory


def test_a_file_the_run_cannot_write_is_refused_before_it_trains(workspace, sst2_run, tmp_path):
    output_dir = _copy_of_run(sst2_run[0], tmp_path / "run")
    with read_only(output_dir / "predictions.tsv"):
        result = run_tool("run_classifier.py", *workspace["model"], *TRAIN_FLAGS,
                          f"--data_dir={workspace['sst2']}", f"--output_dir={output_dir}",
                          "--do_train", f"--num_train_steps={STEPS + 10}", "--do_predict")
    assert error_output(result) == (
        f"run_classifier: error: --output_dir {output_dir}: {output_dir}/predictions.tsv is not "
        f"writable; make it writable or use another --output_dir")
    assert latest_step(output_dir) == STEPS  # found before training, not after it


def test_a_full_disk_leaves_the_runs_files_whole(workspace, sst2_run, tmp_path):
    """A full disk (here: a limit on the size of a file written) while the run's config or its
    predictions are written again leaves the earlier files whole, not cut short as if complete
    (a config cut short broke the run)."""
    output_dir = _copy_of_run(sst2_run[0], tmp_path / "run")
    before = _files(output_dir)
    data = tmp_path / "SST-2"
    shutil.copytree(workspace["sst2"], data)
    _write(data / "test.tsv", [["index", "sentence"], *[[str(i), text] for i, (text, _) in
                                                          enumerate(_sentences(3000, seed=4))]])
    # bert_config.json takes ~330 bytes, the predictions of 3,000 sentences ~75 KB.
    for limit, name in ((200, "bert_config.json"), (16 << 10, "predictions.tsv")):
        result = subprocess.run(set_up_then_exec(
            f"import resource; resource.setrlimit(resource.RLIMIT_FSIZE, ({limit}, {limit}))",
            tool_command("run_classifier.py", "--task_name=SST-2", f"--data_dir={data}",
                         f"--output_dir={output_dir}", f"--max_seq_length={SEQ}",
                         "--do_predict")),
            capture_output=True, text=True, timeout=900, env=tool_env())
        assert result.returncode == 1
        assert result.stderr.strip().splitlines()[-1] == (
            f"run_classifier: error: [Errno 27] File too large: '{output_dir}/{name}'")
        assert _files(output_dir) == before


def test_the_casing_is_recorded_followed_and_never_contradicted(workspace, cased_run, tmp_path):
    """A run records its lower-casing beside its checkpoints (tokenizer_config.json, as Hugging
    Face does); runs from it and the printed export command follow it, and a flag contradicting
    it is refused before anything is written."""
    cased, result = cased_run
    assert result.returncode == 0, result.stderr[-3000:]
    assert json.loads((cased / "tokenizer_config.json").read_text()) == {"do_lower_case": False}
    assert result.stdout.splitlines()[-1].endswith("--label_names=0,1 --nodo_lower_case")
    before = _files(cased)

    result = run_tool("run_classifier.py", "--task_name=SST-2", f"--data_dir={workspace['sst2']}",
                      f"--output_dir={cased}", f"--max_seq_length={SEQ}", "--do_eval",
                      "--do_lower_case")
    assert result.returncode == 1
    assert result.stderr.splitlines() == [_casing_refusal("--do_lower_case", cased, "false")]
    assert _files(cased) == before

    # Fine-tuned further without the flag: the new run keeps the casing.
    again = tmp_path / "again"
    result = run_tool("run_classifier.py", f"--init_checkpoint={cased}",
                      *_one_step_flags(workspace), f"--output_dir={again}")
    assert result.returncode == 0, result.stderr[-3000:]
    assert json.loads((again / "tokenizer_config.json").read_text()) == {"do_lower_case": False}
    assert result.stdout.splitlines()[-1].endswith(" --nodo_lower_case")


def test_a_vocab_file_other_than_the_checkpoints_is_refused(workspace, sst2_run, tmp_path):
    output_dir, _ = sst2_run
    flags = [f"--init_checkpoint={output_dir}", *TRAIN_FLAGS, f"--data_dir={workspace['sst2']}",
             "--num_train_steps=1", "--do_train", f"--output_dir={tmp_path / 'out'}"]
    shuffled = tmp_path / "shuffled.txt"  # as many tokens: each id would mean another word
    shuffled.write_text("\n".join(VOCAB[:5] + VOCAB[6:7] + VOCAB[5:6] + VOCAB[7:]) + "\n")
    result = run_tool("run_classifier.py", *flags, f"--vocab_file={shuffled}")
    assert result.returncode == 1
    assert result.stderr.splitlines() == [
        f"run_classifier: error: --vocab_file is not the vocabulary of --init_checkpoint: "
        f"{output_dir}/vocab.txt ({len(VOCAB)} tokens) is not {shuffled} ({len(VOCAB)} "
        f"tokens; they differ from line 6); drop --vocab_file to use the checkpoint's"]
    assert not (tmp_path / "out").exists()

    result = run_tool("run_classifier.py", *flags, f"--vocab_file={workspace['vocab']}")
    assert result.returncode == 0, result.stderr[-3000:]  # the same tokens elsewhere: fine


MNLI_HEADER = ["index", "promptID", "pairID", "genre", "sentence1_binary_parse",
               "sentence2_binary_parse", "sentence1_parse", "sentence2_parse", "sentence1",
               "sentence2"]
MNLI_LABELS = ["contradiction", "entailment", "neutral"]


def _mnli_rows(n, seed, labelled=True):
    rng = random.Random(seed)
    rows = []
    for i in range(n):
        premise = rng.choice(POSITIVE)
        hypothesis, label = [("a bad film", 0), ("a good film", 1), ("hello world", 2)][i % 3]
        row = [str(i), str(i), f"{i}x", "slate", "( x )", "( y )", "(x)", "(y)", premise,
               hypothesis]
        rows.append(row + [MNLI_LABELS[label]] * 2 if labelled else row)
    return rows


def test_sentence_pairs_with_mnlis_matched_and_mismatched_files(workspace, tmp_path):
    data = tmp_path / "MNLI"
    data.mkdir()
    _write(data / "train.tsv", [MNLI_HEADER + ["label1", "gold_label"], *_mnli_rows(24, 0)])
    _write(data / "dev_matched.tsv", [MNLI_HEADER + ["label1", "gold_label"],
                                      *_mnli_rows(9, 1)])
    mismatched = _mnli_rows(6, 2)
    mismatched[2][8] = ""  # an empty premise: skipped and counted
    _write(data / "dev_mismatched.tsv", [MNLI_HEADER + ["label1", "gold_label"], *mismatched])
    _write(data / "test_matched.tsv", [MNLI_HEADER, *_mnli_rows(4, 3, labelled=False)])
    _write(data / "test_mismatched.tsv", [MNLI_HEADER, *_mnli_rows(5, 4, labelled=False)])
    output_dir = tmp_path / "out"
    result = run_tool("run_classifier.py", *workspace["model"], "--task_name=MNLI",
                      f"--data_dir={data}", f"--output_dir={output_dir}",
                      f"--max_seq_length={SEQ}", "--train_batch_size=8", "--num_train_epochs=1",
                      "--do_train", "--do_eval", "--do_predict")
    assert result.returncode == 0, result.stderr[-3000:]
    results = json.loads((output_dir / "eval_results.json").read_text())
    assert set(results) == {"global_step", "accuracy", "loss", "num_examples",
                            "skipped_examples", "mismatched_accuracy", "mismatched_loss",
                            "mismatched_num_examples", "mismatched_skipped_examples"}
    assert (results["num_examples"], results["skipped_examples"]) == (9, 0)
    assert (results["mismatched_num_examples"], results["mismatched_skipped_examples"]) == (5, 1)
    assert "skipped 1 example(s) with an empty text (first at line 4)" in result.stderr
    for name, count in (("predictions.tsv", 4), ("predictions_mismatched.tsv", 5)):
        rows = _tsv(output_dir / name)
        assert rows[0] == ["id", "label"] + [f"probability_{label}" for label in MNLI_LABELS]
        assert len(rows) == count + 1 and all(row[1] in MNLI_LABELS for row in rows[1:])
    assert "--text_pairs --label_names=contradiction,entailment,neutral" in result.stdout
    # Exported without those flags, it takes the task's pairs and labels from the run; a flag
    # contradicting the task is refused before loading.
    result = run_tool("export_savedmodel.py", "--export_type=classifier",
                      f"--init_checkpoint={output_dir}", f"--output_dir={tmp_path / 'served'}",
                      f"--seq_length={SEQ}")
    assert result.returncode == 0, result.stderr[-3000:]
    serving = tf.saved_model.load(str(tmp_path / "served" / "1")).signatures["serving_default"]
    assert sorted(serving.structured_input_signature[1]) == ["text_a", "text_b"]
    labels = serving(text_a=tf.constant(["a cat sat"] * 2), text_b=tf.constant(["a cat", "no"]))
    assert {name.decode() for name in labels["label_name"].numpy()} <= set(MNLI_LABELS)
    result = run_tool("export_savedmodel.py", "--export_type=classifier",
                      f"--init_checkpoint={output_dir}", f"--output_dir={tmp_path / 'single'}",
                      "--notext_pairs")
    assert error_output(result) == (
        f"export_savedmodel: error: --notext_pairs: {output_dir} was fine-tuned on MNLI, which "
        f"reads pairs of texts; leave the flag out")
    assert not (tmp_path / "single").exists()


def test_sts_b_is_a_regression(workspace, tmp_path):
    header = ["index", "genre", "filename", "year", "old_index", "source1", "source2",
              "sentence1", "sentence2"]
    rng = random.Random(0)

    def rows(n, labelled=True):
        return [[str(i), "main", "f", "2012", str(i), "none", "none", rng.choice(POSITIVE),
                 rng.choice(NEGATIVE + POSITIVE)] + ([f"{rng.uniform(0, 5):.3f}"] if labelled
                                                     else []) for i in range(n)]
    data = tmp_path / "STS-B"
    data.mkdir()
    _write(data / "train.tsv", [header + ["score"], *rows(16)])
    dev = rows(7)
    _write(data / "dev.tsv", [header + ["score"], *dev])
    _write(data / "test.tsv", [header, *rows(3, labelled=False)])
    output_dir = tmp_path / "out"
    result = run_tool("run_classifier.py", *workspace["model"], "--task_name=sts-b",
                      f"--data_dir={data}", f"--output_dir={output_dir}",
                      f"--max_seq_length={SEQ}", "--train_batch_size=8", "--num_train_epochs=1",
                      "--do_train", "--do_eval", "--do_predict")
    assert result.returncode == 0, result.stderr[-3000:]
    results = json.loads((output_dir / "eval_results.json").read_text())
    assert set(results) == {"global_step", "pearson", "spearman", "loss", "num_examples",
                            "skipped_examples"}
    assert -1 <= results["pearson"] <= 1 and results["num_examples"] == 7
    rows = _tsv(output_dir / "predictions.tsv")
    assert rows[0] == ["id", "score"] and [row[0] for row in rows[1:]] == ["0", "1", "2"]
    reader = tf.train.load_checkpoint(str(output_dir))
    assert reader.get_tensor("model/classifier/bias/.ATTRIBUTES/VARIABLE_VALUE").shape == (1,)
    assert "--label_names" not in result.stdout


@pytest.mark.parametrize("files, flags, message", [
    ({}, [], "SST-2 data file {data}/train.tsv does not exist"),
    ({"train.tsv": "sentence\tlabel\nfine\t1\ndull\tnegative\n"}, [],
     "run_classifier: error: {data}/train.tsv:3: unknown label 'negative' in column 'label'; "
     "SST-2's labels are ['0', '1']"),
    ({"train.tsv": "sentence\tlabel\nfine\t1\n", "dev.tsv": "sentence,label\nfine,1\n"},
     ["--do_eval"],
     "run_classifier: error: {data}/dev.tsv:1: no column 'sentence', which SST-2 needs"),
    ({"train.tsv": "sentence\tlabel\nfine\t1\n", "test.tsv": "index\tsentence\n0\ta\tb\n"},
     ["--do_predict"], "{data}/test.tsv:2: 3 tab-separated column(s), expected 2"),
    ({"train.tsv": ""}, [], "{data}/train.tsv is empty"),
])
def test_bad_data_is_an_error_naming_file_and_line(workspace, tmp_path, files, flags, message):
    data = tmp_path / "data"
    data.mkdir()
    for name, text in files.items():
        (data / name).write_text(text, encoding="utf-8")
    result = run_tool("run_classifier.py", *workspace["model"], "--task_name=SST-2",
                      f"--data_dir={data}", f"--output_dir={tmp_path / 'out'}", "--do_train",
                      *flags)
    assert result.returncode == 1
    assert message.format(data=data) in result.stderr
    assert not (tmp_path / "out").exists()  # it stopped before loading a model


def test_flag_errors(workspace, tmp_path):
    result = run_tool("run_classifier.py", *workspace["model"], "--task_name=squad",
                      f"--data_dir={tmp_path}", f"--output_dir={tmp_path}", "--do_train")
    assert result.returncode != 0
    assert "--task_name: Unknown GLUE task 'squad'; known: CoLA, SST-2, MRPC" in result.stderr
    result = run_tool("run_classifier.py", *workspace["model"], f"--output_dir={tmp_path}",
                      "--do_eval")
    assert result.returncode != 0
    assert "--do_eval needs --task_name; --do_eval needs --data_dir" in result.stderr
    # Named with its flag, before anything is read (it was "[Errno 2] No such file ...").
    result = run_tool("run_classifier.py", f"--bert_config_file={tmp_path}/none.json",
                      f"--vocab_file={workspace['vocab']}", "--task_name=SST-2",
                      f"--data_dir={workspace['sst2']}", f"--output_dir={tmp_path}/out",
                      "--do_train")
    assert result.returncode == 1
    assert (f"run_classifier: error: --bert_config_file {tmp_path}/none.json does not exist"
            in result.stderr.splitlines())


def test_a_max_seq_length_beyond_the_position_embeddings_is_refused(workspace, tmp_path):
    result = run_tool("run_classifier.py", *workspace["model"], "--task_name=SST-2",
                      f"--data_dir={workspace['sst2']}", f"--output_dir={tmp_path / 'out'}",
                      "--do_train", "--max_seq_length=513")
    assert result.returncode != 0
    limit = tiny_config().max_position_embeddings
    assert (f"run_classifier: error: max_seq_length 513 exceeds the encoder's "
            f"max_position_embeddings ({limit})" in result.stderr)
    assert not (tmp_path / "out").exists()  # refused before anything was written


def test_a_run_refused_before_training_leaves_output_dir_as_it_was(workspace, tmp_path):
    # Refused after bert_config.json, vocab.txt, tokenizer_config.json and run.json were
    # written, such a run made its --output_dir "a run of another task" for the corrected
    # command.
    output_dir = tmp_path / "out"
    output_dir.mkdir()
    flags = ["--task_name=SST-2", f"--data_dir={workspace['sst2']}", f"--output_dir={output_dir}",
             "--do_train"]
    result = run_tool("run_classifier.py", *workspace["model"], *flags, "--max_seq_length=1")
    assert error_output(result) == ("run_classifier: error: --max_seq_length 1 cannot hold a "
                                    "text: it needs at least 3 ([CLS], one [SEP] per segment and "
                                    "a word piece of each text)")
    assert os.listdir(output_dir) == []
    no_unk = tmp_path / "vocab.txt"
    no_unk.write_text("".join(f"{token}\n" for token in VOCAB if token != "[UNK]"))
    result = run_tool("run_classifier.py", f"--bert_config_file={workspace['config']}",
                      f"--vocab_file={no_unk}", *flags, f"--max_seq_length={SEQ}")
    assert error_output(result).endswith("has no '[UNK]' token.")
    assert os.listdir(output_dir) == []


def test_a_max_seq_length_too_short_for_a_sentence_pair_is_a_flag_error(workspace, tmp_path):
    # It was a TensorFlow traceback from inside the tf.data pipeline, after the model loaded.
    mrpc = tmp_path / "MRPC"
    mrpc.mkdir()
    _write(mrpc / "train.tsv", [["Quality", "#1 ID", "#2 ID", "#1 String", "#2 String"],
                                *[[label, "1", "2", text, text]
                                  for text, label in _sentences(8, seed=3)]])
    result = run_tool("run_classifier.py", *workspace["model"], "--task_name=MRPC",
                      f"--data_dir={mrpc}", f"--output_dir={tmp_path / 'out'}", "--do_train",
                      "--max_seq_length=4")
    assert error_output(result) == (
        "run_classifier: error: --max_seq_length 4 cannot hold a sentence pair: it needs at "
        "least 5 ([CLS], one [SEP] per segment and a word piece of each text)")
    assert not (tmp_path / "out").exists()


def test_minilm_fine_tunes_on_real_sst2(tmp_path):
    """The real pre-trained MiniLM on 64 real SST-2 sentences, end to end: after 16 steps its
    dev loss is below chance level (ln 2 = 0.693, where the fresh head starts)."""
    model_dir = minilm_dir()
    data = tmp_path / "SST-2"
    data.mkdir()
    for split in ("train", "dev"):
        lines = open(shared_data_path(f"SST-2/{split}.tsv"), encoding="utf-8").readlines()
        (data / f"{split}.tsv").write_text("".join(lines[:65]), encoding="utf-8")
    output_dir = tmp_path / "out"
    result = run_tool("run_classifier.py", f"--init_checkpoint={model_dir}", "--task_name=SST-2",
                      f"--data_dir={data}", f"--output_dir={output_dir}", "--max_seq_length=64",
                      "--train_batch_size=16", "--num_train_epochs=4", "--learning_rate=2e-4",
                      "--do_train", "--do_eval")
    assert result.returncode == 0, result.stderr[-3000:]
    results = json.loads((output_dir / "eval_results.json").read_text())
    assert results["global_step"] == 16 and results["num_examples"] == 64
    assert results["loss"] < 0.67
    assert open(output_dir / "vocab.txt").read() == open(os.path.join(model_dir,
                                                                      "vocab.txt")).read()


def test_a_hugging_face_checkpoints_casing_and_directory_are_kept(workspace, tmp_path):
    """MiniLM's tokenizer_config.json says do_lower_case true: --nodo_lower_case is refused. Its
    directory as --output_dir is refused too: its model.safetensors would hide the fine-tuned
    checkpoints from every tool reading the directory."""
    model_dir = tmp_path / "minilm"
    model_dir.mkdir()
    for name in os.listdir(minilm_dir()):
        (model_dir / name).symlink_to(os.path.join(minilm_dir(), name))
    before = sorted(os.listdir(model_dir))
    flags = [f"--init_checkpoint={model_dir}", "--task_name=SST-2", "--do_train",
             f"--data_dir={workspace['sst2']}"]
    result = run_tool("run_classifier.py", *flags, f"--output_dir={tmp_path / 'out'}",
                      "--nodo_lower_case")
    assert result.returncode == 1
    assert result.stderr.splitlines() == [_casing_refusal("--nodo_lower_case", model_dir,
                                                           "true")]
    assert not (tmp_path / "out").exists()

    result = run_tool("run_classifier.py", *flags, f"--output_dir={model_dir}")
    assert result.returncode == 1
    assert result.stderr.splitlines()[0] == (
        f"run_classifier: error: --output_dir {model_dir} holds a Hugging Face model "
        f"(model.safetensors, e.g. the initial weights), which tools reading the directory "
        f"would take instead of the fine-tuned checkpoints; use another --output_dir")
    assert sorted(os.listdir(model_dir)) == before
