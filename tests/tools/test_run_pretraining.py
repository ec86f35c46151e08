"""tools/run_pretraining.py end to end, in subprocesses, on records written exactly as Google's
create_pretraining_data.py writes them. XLA (the default) runs in the multi-worker test; the
other runs use --nojit_compile, as an XLA compilation costs tens of seconds of CPU."""

import dataclasses
import json
import os
import shutil
import subprocess
import types

import numpy as np
import pytest
import tensorflow as tf

from bert_tf.checkpoints.sources import stated_lower_case
from bert_tf.config import BertConfig
from bert_tf.text.bert_tokenizer import BertTokenizer
from bert_tf.training.existing_run import is_run_output
from bert_tf.text.vocab import load_vocab
from tests.data.pretraining.records import (make_instance, serialize_instance,
                                            write_pretraining_records)
from tests.data.pretraining.toy_corpus import CLS as CLS_ID
from tests.data.pretraining.toy_corpus import SEP as SEP_ID
from tests.data.pretraining.toy_corpus import (VOCAB, numbered_documents, word_ids, write_corpus,
                                               write_vocab)
from tests.read_only import read_only
from tests.training.test_distributed import free_port
from tests.training.test_schedule import googles_learning_rate
from tests.tools.tool_runs import (error_output, eval_results, kill_at_first_checkpoint,
                                   latest_step, run_tool, scalar_curves, tool_command, tool_env)

TOOL = "run_pretraining.py"
CONFIG = {"vocab_size": 40, "hidden_size": 16, "num_hidden_layers": 1, "num_attention_heads": 2,
          "intermediate_size": 32, "hidden_act": "gelu", "hidden_dropout_prob": 0.1,
          "attention_probs_dropout_prob": 0.1, "max_position_embeddings": 16,
          "type_vocab_size": 2, "initializer_range": 0.02}
HELD_OUT = 21  # not a multiple of any batch size below: evaluation pads its last batch
METRIC_TAGS = {"loss", "masked_lm_loss", "masked_lm_accuracy", "next_sentence_loss",
               "next_sentence_accuracy"}


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    directory = tmp_path_factory.mktemp("data")
    write_pretraining_records(directory / "train-0.tfrecord", 48, 16, 3, vocab_size=40, seed=1)
    write_pretraining_records(directory / "train-1.tfrecord", 48, 16, 3, vocab_size=40, seed=2)
    write_pretraining_records(directory / "heldout.tfrecord", HELD_OUT, 16, 3, vocab_size=40,
                              seed=3)
    config = directory / "bert_config.json"
    config.write_text(json.dumps(CONFIG))
    return {"config": str(config), "train": str(directory / "train-*.tfrecord"),
            "heldout": str(directory / "heldout.tfrecord"), "dir": directory}


STEPS, WARMUP, CHECKPOINT_EVERY = 150, 10, 25
# One document of one 40-word line: 7 segments when cut at --max_seq_length=16, one truncated.
BOOK_ON_ONE_LINE = numbered_documents([1], 40)


def training_flags(data, output_dir):
    return [f"--bert_config_file={data['config']}", f"--input_file={data['train']}",
            f"--output_dir={output_dir}", "--train_batch_size=8",
            f"--num_train_steps={STEPS}", f"--num_warmup_steps={WARMUP}", "--learning_rate=1e-3",
            f"--save_checkpoints_steps={CHECKPOINT_EVERY}", "--steps_per_execution=1",
            "--strategy=cpu", "--nojit_compile"]


@pytest.fixture(scope="module")
def reference(data, tmp_path_factory):
    """An uninterrupted run with evaluation: the loss curve the interrupted run must match."""
    output_dir = str(tmp_path_factory.mktemp("reference"))
    result = run_tool(TOOL, *training_flags(data, output_dir), "--do_eval",
                      f"--eval_input_file={data['heldout']}", "--eval_batch_size=8")
    assert result.returncode == 0, result.stderr[-3000:]
    return output_dir


def test_trains_googles_records_checkpoints_and_evaluates(reference):
    assert latest_step(reference) == STEPS
    # keep_checkpoint_max=5 of the checkpoints every 25 steps
    assert sorted(int(f[5:-6]) for f in os.listdir(reference) if f.endswith(".index")) == [
        50, 75, 100, 125, 150]
    assert json.load(open(os.path.join(reference, "bert_config.json"))) == {
        **CONFIG, "layer_norm_eps": 1e-12}
    # What the check of a directory holding no run knows (other_files_problem).
    assert all(is_run_output(name) for name in os.listdir(reference))
    scalars = scalar_curves(os.path.join(reference, "train"))
    assert METRIC_TAGS | {"learning_rate", "examples_per_second", "steps_per_second"} <= set(
        scalars)
    assert [step for step, _ in scalars["loss"]] == list(range(1, STEPS + 1))
    np.testing.assert_allclose([v for _, v in scalars["learning_rate"]], [
        googles_learning_rate(step - 1, 1e-3, STEPS, WARMUP) for step in range(1, STEPS + 1)],
        rtol=1e-5, atol=1e-12)
    losses = [v for _, v in scalars["loss"]]
    assert np.mean(losses[-20:]) < np.mean(losses[:20]) - 0.1  # it learns
    results = eval_results(reference)
    assert results["global_step"] == STEPS and results["examples"] == HELD_OUT
    assert set(results) == METRIC_TAGS | {"global_step", "examples"}
    assert 0.0 <= results["masked_lm_accuracy"] <= 1.0
    evaluation = scalar_curves(os.path.join(reference, "eval"))
    assert evaluation["masked_lm_loss"] == [(STEPS, pytest.approx(results["masked_lm_loss"],
                                                                  rel=1e-6))]


def test_a_job_killed_with_sigkill_resumes_exactly(data, reference, tmp_path):
    output_dir = str(tmp_path / "killed")
    flags = training_flags(data, output_dir)
    killed_at = kill_at_first_checkpoint(TOOL, flags, output_dir)
    assert killed_at < STEPS
    before = scalar_curves(os.path.join(output_dir, "train"))

    resumed = run_tool(TOOL, *flags)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert f"ckpt-{killed_at} at step {killed_at}" in resumed.stderr
    assert latest_step(output_dir) == STEPS
    reader = tf.train.load_checkpoint(tf.train.latest_checkpoint(output_dir))
    assert reader.get_tensor("global_step/.ATTRIBUTES/VARIABLE_VALUE") == STEPS
    # Both runs' curves, the steps done twice included, are the uninterrupted run's: same
    # weights, optimizer state, dropout RNG and input position after the restart.
    expected = dict(scalar_curves(os.path.join(reference, "train"))["loss"])
    curve = scalar_curves(os.path.join(output_dir, "train"))["loss"]
    resumed_steps = [step for step, _ in curve[len(before.get("loss", [])):]]
    assert resumed_steps == list(range(killed_at + 1, STEPS + 1))
    for step, loss in curve:
        assert loss == pytest.approx(expected[step], rel=1e-4), f"step {step}"


def test_a_corrupt_file_is_named(data, tmp_path):
    truncated = tmp_path / "z_truncated.tfrecord"
    good = open(data["heldout"], "rb").read()
    truncated.write_bytes(good[:len(good) // 2 + 30])
    # The first file is fine, so the damage shows only when the input pipeline reaches it.
    result = run_tool(
        TOOL, f"--bert_config_file={data['config']}", f"--output_dir={tmp_path / 'out'}",
        f"--input_file={data['heldout']},{truncated}", "--num_train_steps=50",
        "--num_warmup_steps=0", "--train_batch_size=8", "--strategy=cpu", "--nojit_compile")
    assert result.returncode != 0
    line = result.stderr.splitlines()[-1]  # after the lines of the training it began
    assert line.startswith(f"run_pretraining: error: {truncated}: corrupt, truncated"), line
    assert "{{" not in line and "[Op:" not in line, line  # the op's context


def test_evaluation_names_a_truncated_file(data, reference, tmp_path):
    truncated = tmp_path / "heldout.tfrecord"
    good = open(data["heldout"], "rb").read()
    truncated.write_bytes(good[:len(good) - 20])
    result = run_tool(TOOL, f"--bert_config_file={data['config']}", f"--output_dir={reference}",
                      "--nodo_train", "--do_eval", f"--eval_input_file={truncated}",
                      "--strategy=cpu")
    assert result.returncode != 0
    [line] = result.stderr.splitlines()
    assert line.startswith(f"run_pretraining: error: {truncated}: corrupt or truncated TFRecord "
                           f"file"), line
    assert "{{" not in line and "[Op:" not in line, line


def test_without_the_other_input_flags_it_lists_what_is_missing(data):
    result = run_tool(TOOL, "--vocab_file=vocab.txt")  # an input flag: not the embedded default job
    assert result.returncode != 0
    for message in ("--bert_config_file (the model's bert_config.json) is required",
                    "--output_dir is required", "--input_file (comma-separated globs"):
        assert message in result.stderr
    result = run_tool(TOOL, f"--bert_config_file={data['config']}", "--output_dir=/tmp/unused",
                      f"--input_file={data['train']}", "--input_text_file=corpus.txt")
    assert result.returncode != 0
    for message in ("--input_file (records) and --input_text_file (raw text) exclude each other",
                    "--input_text_file needs --vocab_file"):
        assert message in result.stderr
    result = run_tool(TOOL, f"--bert_config_file={data['config']}", "--output_dir=/tmp/unused",
                      "--nodo_train", "--do_eval", f"--eval_input_file={data['heldout']}",
                      "--init_checkpoint=/tmp/converted", "--vocab_file=vocab.txt",
                      "--export_dir=/tmp/unused/export")
    assert result.returncode != 0
    assert ("--export_dir with --nodo_train exports the checkpoint in --output_dir, which has "
            "none") in result.stderr


def test_evaluating_without_a_checkpoint_is_refused_before_writing(data, tmp_path):
    output_dir = tmp_path / "new"
    result = run_tool(TOOL, f"--bert_config_file={data['config']}", f"--output_dir={output_dir}",
                      "--nodo_train", "--do_eval", f"--eval_input_file={data['heldout']}")
    assert result.returncode == 1
    assert result.stderr.strip().splitlines()[0] == (
        "run_pretraining: error: --nodo_train --do_eval needs a checkpoint: --output_dir has none "
        "and --init_checkpoint is not set")
    # Its run.json would have refused the directory to every other tool.
    assert not output_dir.exists()


@pytest.mark.parametrize("text, flag, message", [
    ("corpus", "--max_predictions_per_seq=0", "max_predictions_per_seq must be at least 1, got 0."),
    ("corpus", "--max_seq_length=4",
     "max_seq_length must be at least 5 ([CLS], [SEP]s and one piece per segment), got 4."),
    ("records", "--max_seq_length=16",
     "--input_text_file: {text} is a TFRecord file (pre-training records?), not text: give "
     "records to run_pretraining's --input_file"),
    # Found when training began, after the run's files were written.
    ("blank", "--max_seq_length=16",
     "{text}: no pre-training example can be made: no line has tokens (the files are empty or "
     "blank, or their text is not UTF-8)"),
    ("book", "--max_seq_length=16",
     "{text}: no pre-training example can be made: they hold a single document and it makes a "
     "single segment (sentences are gathered up to 6 pieces): sentence pairs need a second "
     "document (after a blank line) or a longer one, or no next-sentence prediction; a line "
     "longer than 6 pieces is one segment, truncated (run_pretraining --cut_long_lines cuts it "
     "into segments)"),
])
def test_raw_text_that_cannot_train_is_refused_before_writing(data, tmp_path, text, flag,
                                                              message):
    corpus = tmp_path / "corpus.txt"
    write_corpus(corpus, numbered_documents([5] * 10, 4))
    (tmp_path / "blank.txt").write_text("\n \n")
    write_corpus(tmp_path / "book.txt", BOOK_ON_ONE_LINE)
    text = {"corpus": corpus, "records": data["heldout"], "blank": tmp_path / "blank.txt",
            "book": tmp_path / "book.txt"}[text]
    config = tmp_path / "bert_config.json"
    config.write_text(json.dumps({**CONFIG, "vocab_size": len(VOCAB)}))
    output_dir = tmp_path / "new"
    result = run_tool(TOOL, f"--bert_config_file={config}", f"--input_text_file={text}",
                      f"--vocab_file={write_vocab(tmp_path)}", f"--output_dir={output_dir}",
                      "--num_train_steps=2", "--strategy=cpu", flag)
    assert result.stderr.splitlines() == [
        f"run_pretraining: error: {message.format(text=text)}"]
    # Its run.json would have refused the directory to every other tool.
    assert not output_dir.exists()


def _train_on_text(directory, text_files, *flags):
    """A short run on raw text (`text_files`: the flag's value) with its config and vocabulary
    in `directory`; the `CompletedProcess` and its output directory, `directory`/out."""
    config = directory / "bert_config.json"
    config.write_text(json.dumps({**CONFIG, "vocab_size": len(VOCAB)}))
    output_dir = directory / "out"
    result = run_tool(TOOL, f"--bert_config_file={config}", f"--input_text_file={text_files}",
                      f"--vocab_file={write_vocab(directory)}", f"--output_dir={output_dir}",
                      "--max_seq_length=16", "--max_predictions_per_seq=3",
                      "--train_batch_size=4", "--strategy=cpu", "--nojit_compile", *flags)
    return result, output_dir


@pytest.fixture(scope="module")
def book_run(tmp_path_factory):
    """2 steps, cased, on a book on one line, its long lines cut: read by the tests of the
    book, of the casing and of an --init_checkpoint that does not fit."""
    directory = tmp_path_factory.mktemp("book")
    write_corpus(directory / "book.txt", BOOK_ON_ONE_LINE)
    return _train_on_text(directory, directory / "book.txt", "--cut_long_lines",
                          "--nodo_lower_case", "--num_train_steps=2")


@pytest.fixture(scope="module")
def partly_latin1_run(tmp_path_factory):
    """1 step, uncased, on a corpus and a Latin-1 file: read by the tests of the UTF-8 warning
    and of the casing; the run, its output directory and the Latin-1 file."""
    directory = tmp_path_factory.mktemp("latin1")
    corpus = write_corpus(directory / "corpus.txt", numbered_documents([5] * 10, 4))
    latin1 = directory / "latin1.txt"
    latin1.write_bytes("the cat sat on the mat .\ncaf\xe9 .\n\nthe cat .\nna\xefve .\n"
                       .encode("latin-1"))
    return (*_train_on_text(directory, f"{corpus},{latin1}", "--do_lower_case",
                            "--num_train_steps=1"), latin1)


def test_a_book_on_one_line_trains_when_its_long_lines_are_cut(book_run):
    result, output_dir = book_run
    assert result.returncode == 0, result.stderr[-3000:]
    assert latest_step(output_dir) == 2


def test_text_that_is_not_utf8_is_warned_of_before_training(partly_latin1_run):
    result, output_dir, latin1 = partly_latin1_run
    assert result.returncode == 0, result.stderr[-3000:]
    warnings = [line for line in result.stderr.splitlines() if "UTF-8" in line]
    assert len(warnings) == 1 and warnings[0].endswith(
        f"--input_text_file: lines that are not valid UTF-8 are skipped: {latin1}: 2 of 5 "
        f"lines read; convert the text to UTF-8 (e.g. iconv -f latin1 -t utf-8)")
    assert latest_step(output_dir) == 1


@pytest.mark.parametrize("run, lower_case", [("book_run", False), ("partly_latin1_run", True)])
def test_the_casing_of_a_raw_text_run_is_recorded_for_the_tools_that_read_it(request, run,
                                                                             lower_case):
    # A cased run installed by bert-tf-install-hub-model as uncased (its default when nothing
    # states the casing), whose preprocessor then lower-cased text for a cased vocabulary.
    result, output_dir = request.getfixturevalue(run)[:2]
    assert result.returncode == 0, result.stderr[-3000:]
    assert stated_lower_case(str(output_dir), default=None) is lower_case


@pytest.fixture(scope="module")
def short_run(data, book_run, tmp_path_factory):
    """4 steps on the held-out records, a checkpoint every 2 steps, evaluating held-out records
    of other lengths, after the same command failed with an --init_checkpoint that does not fit
    (the book run's: a vocab_size of 215, not 40). Read by the tests of that failure, of
    held-out lengths and of a text file added to the records; `flags`: the command without
    --output_dir."""
    directory = tmp_path_factory.mktemp("short")
    # E.g. held-out records with the paper's 15 % masking beside training records with more
    # predictions, or a short-sequence phase evaluated on longer held-out sequences.
    heldout = directory / "heldout-8.tfrecord"
    write_pretraining_records(heldout, HELD_OUT, 8, 5, vocab_size=40, seed=4)
    output_dir = directory / "out"
    flags = [f"--bert_config_file={data['config']}", f"--input_file={data['heldout']}",
             "--train_batch_size=8", "--num_train_steps=4", "--num_warmup_steps=1",
             "--save_checkpoints_steps=2", "--steps_per_execution=2", "--strategy=cpu",
             "--nojit_compile", "--do_eval", f"--eval_input_file={heldout}",
             "--eval_batch_size=8"]
    failed = run_tool(TOOL, *flags, f"--output_dir={output_dir}",
                      f"--init_checkpoint={book_run[1]}")
    files_after_failure = os.listdir(output_dir) if output_dir.exists() else []
    return types.SimpleNamespace(flags=flags, output_dir=output_dir, failed=failed,
                                 files_after_failure=files_after_failure,
                                 result=run_tool(TOOL, *flags, f"--output_dir={output_dir}"))


def test_an_init_checkpoint_that_does_not_fit_leaves_no_run_in_the_way(short_run):
    # The failed run had recorded itself (bert_config.json, run.json) before loading the
    # checkpoint: the corrected command was refused as "a run of another model".
    assert "does not fit the model" in error_output(short_run.failed), short_run.failed.stderr
    assert short_run.files_after_failure == []
    assert short_run.result.returncode == 0, short_run.result.stderr[-3000:]
    assert latest_step(short_run.output_dir) == 4


def _files(directory):
    return {name: open(os.path.join(directory, name), "rb").read()
            for name in os.listdir(directory) if os.path.isfile(os.path.join(directory, name))}


def test_a_run_of_another_model_in_output_dir_is_refused_and_kept(data, reference, tmp_path):
    other = tmp_path / "bert_config.json"
    other.write_text(json.dumps({**CONFIG, "hidden_size": 32, "num_attention_heads": 4}))
    before = _files(reference)
    flags = [flag for flag in training_flags(data, reference) if "bert_config_file" not in flag]
    result = run_tool(TOOL, f"--bert_config_file={other}", *flags)
    assert result.returncode == 1
    assert result.stderr.strip().splitlines()[-1] == (
        f"run_pretraining: error: --output_dir {reference} holds a run of another model: "
        f"bert_config.json differs in hidden_size (16 there, 32 here), num_attention_heads (2 "
        f"there, 4 here); use a new --output_dir")
    assert _files(reference) == before


def test_token_ids_beyond_the_configs_vocab_size_are_named(data, tmp_path):
    records = tmp_path / "big_vocab.tfrecord"
    instances = write_pretraining_records(records, 8, 16, 3, vocab_size=40, seed=7)
    largest = max(max(i["input_ids"] + i["masked_lm_ids"]) for i in instances)
    config = tmp_path / "bert_config.json"
    config.write_text(json.dumps({**CONFIG, "vocab_size": 20}))
    # The --init_checkpoint is never read: the held-out records are refused first.
    result = run_tool(TOOL, f"--bert_config_file={config}", f"--input_file={data['train']}",
                      f"--output_dir={tmp_path / 'out'}", "--nodo_train", "--do_eval",
                      f"--eval_input_file={records}", "--init_checkpoint=unused",
                      "--strategy=cpu")
    assert result.returncode == 1
    assert result.stderr.strip().splitlines()[-1] == (
        f"run_pretraining: error: {records} (from --eval_input_file) holds token id {largest}, "
        f"but {config} has vocab_size 20: the records were made with another vocabulary; use "
        f"its config")
    result = run_tool(TOOL, f"--bert_config_file={config}", f"--input_file={records}",
                      f"--output_dir={tmp_path / 'out'}", "--num_train_steps=2",
                      "--train_batch_size=8", "--strategy=cpu", "--nojit_compile")
    assert result.returncode == 1
    assert f"{records} (from --input_file) holds token id {largest}, but" in result.stderr
    assert not (tmp_path / "out").exists()


def test_token_ids_beyond_the_vocab_size_in_a_later_file_name_it_and_keep_checkpoints(
        data, tmp_path):
    # Only the first file's first records are checked before training: the second file's last
    # record (an id of a 60-word vocabulary) reaches the step, which stops naming the file and the
    # limit, after checkpoints that stay as they were.
    rng = np.random.default_rng(8)
    instances = [make_instance(rng, 16, 3, vocab_size=40) for _ in range(96)]
    largest = instances[-1]["input_ids"][1] = 59
    later = tmp_path / "z_bigger_vocab.tfrecord"
    with tf.io.TFRecordWriter(str(later)) as writer:
        for instance in instances:
            writer.write(serialize_instance(instance))
    output_dir = tmp_path / "out"
    result = run_tool(TOOL, f"--bert_config_file={data['config']}", f"--output_dir={output_dir}",
                      f"--input_file={data['heldout']},{later}", "--num_train_steps=200",
                      "--num_warmup_steps=0", "--train_batch_size=8", "--save_checkpoints_steps=2",
                      "--steps_per_execution=1", "--strategy=cpu", "--nojit_compile")
    assert result.returncode == 1
    assert result.stderr.strip().splitlines()[-1] == (
        f"run_pretraining: error: {later}: holds token id {largest}, but the model's vocab_size "
        f"is 40: the records were made with another vocabulary; use its config")
    saved = tf.train.latest_checkpoint(str(output_dir))
    assert saved
    tf.train.load_checkpoint(saved).get_variable_to_shape_map()  # readable, not cut short


def test_a_file_as_output_dir_or_export_dir_is_refused_before_anything_is_written(data, tmp_path):
    notes = tmp_path / "notes.txt"
    notes.write_text("kept")
    flags = [f"--bert_config_file={data['config']}", f"--input_file={data['train']}",
             "--num_train_steps=2", "--train_batch_size=8", "--strategy=cpu", "--nojit_compile"]
    for directory_flags, message in (
            ([f"--output_dir={notes}"], f"--output_dir {notes} is a file, not a directory"),
            ([f"--output_dir={notes}/run"],
             f"--output_dir {notes}/run: {notes} is a file, not a directory"),
            ([f"--output_dir={tmp_path}/out", f"--export_dir={notes}", "--vocab_file=vocab.txt"],
             f"--export_dir {notes} is a file, not a directory")):
        result = run_tool(TOOL, *flags, *directory_flags)
        assert result.returncode == 1
        assert result.stderr.strip().splitlines() == [
            f"run_pretraining: error: {message}"]
    assert sorted(os.listdir(tmp_path)) == ["notes.txt"] and notes.read_text() == "kept"


def test_an_output_dir_of_files_a_run_writes_but_no_run_is_refused_and_kept(data, tmp_path):
    mine = tmp_path / "mine"
    (mine / "eval").mkdir(parents=True)
    (mine / "eval_results.json").write_text('{"masked_lm_accuracy": 0.7}')
    result = run_tool(TOOL, *training_flags(data, mine), "--num_train_steps=2",
                      "--num_warmup_steps=0")
    assert error_output(result) == (
        f"run_pretraining: error: --output_dir {mine} holds eval, eval_results.json but no run "
        f"of bert_tf (no run.json), and this run would overwrite them; use another "
        f"--output_dir")
    assert sorted(os.listdir(mine)) == ["eval", "eval_results.json"]
    assert (mine / "eval_results.json").read_text() == '{"masked_lm_accuracy": 0.7}'


def test_an_export_dir_it_cannot_write_is_refused_before_training(data, tmp_path):
    export_dir = tmp_path / "export"
    export_dir.mkdir()
    output_dir = tmp_path / "out"
    with read_only(export_dir):
        result = run_tool(TOOL, *training_flags(data, output_dir), "--num_train_steps=2",
                          "--num_warmup_steps=0", f"--export_dir={export_dir}",
                          "--vocab_file=vocab.txt")
    assert error_output(result) == (
        f"run_pretraining: error: --export_dir {export_dir} is not writable; make it writable "
        f"or use another --export_dir")
    assert not output_dir.exists()  # found before the training, not after it


def _text_file_refusal(flag, path):
    return (f"run_pretraining: error: {flag}: {path} is not a TFRecord file of pre-training "
            f"examples: its first record is corrupt or truncated")


def test_a_text_file_as_input_file_is_named_with_the_raw_text_flags(data, tmp_path):
    text = tmp_path / "corpus.txt"
    text.write_text("The first sentence of a document.\nIts second sentence.\n" * 5)
    result = run_tool(TOOL, f"--bert_config_file={data['config']}", f"--input_file={text}",
                      f"--output_dir={tmp_path / 'out'}", "--num_train_steps=2",
                      "--train_batch_size=8", "--strategy=cpu", "--nojit_compile")
    assert result.returncode == 1
    assert result.stderr.strip().splitlines()[-1] == _text_file_refusal("--input_file", text) + (
        "; to train on raw text, use --input_text_file (with --vocab_file) instead of "
        "--input_file")
    assert not (tmp_path / "out").exists()


def test_a_text_file_as_eval_input_file_is_named_with_its_flag(data, tmp_path):
    # Held-out records have no raw-text form: the flag is named, without the training hint.
    text = tmp_path / "heldout.txt"
    text.write_text("The first sentence of a document.\nIts second sentence.\n" * 5)
    result = run_tool(TOOL, f"--bert_config_file={data['config']}",
                      f"--input_file={data['train']}", f"--eval_input_file={text}", "--do_eval",
                      f"--output_dir={tmp_path / 'out'}", "--num_train_steps=2",
                      "--train_batch_size=8", "--strategy=cpu", "--nojit_compile")
    assert result.returncode == 1
    assert result.stderr.strip().splitlines()[-1] == _text_file_refusal("--eval_input_file", text)
    assert not (tmp_path / "out").exists()


def test_a_text_file_after_records_is_named_with_the_raw_text_flags_and_checkpoints_kept(
        data, short_run, tmp_path):
    # A run resumed with a text file added: the input pipeline finds it after the first file's
    # check, and says what the refusal of a first text file says. The checkpoints stay.
    assert short_run.result.returncode == 0, short_run.result.stderr[-3000:]
    output_dir = shutil.copytree(short_run.output_dir, tmp_path / "out")
    before = _files(output_dir)  # the checkpoints and their index
    text = tmp_path / "z_corpus.txt"
    text.write_text("The first sentence of a document.\nIts second sentence.\n" * 5)
    result = run_tool(TOOL, *short_run.flags, f"--output_dir={output_dir}",
                      f"--input_file={data['heldout']},{text}", "--num_train_steps=8")
    assert result.returncode == 1
    assert result.stderr.strip().splitlines()[-1] == _text_file_refusal("--input_file", text) + (
        "; to train on raw text, use --input_text_file (with --vocab_file) instead of "
        "--input_file")
    assert _files(output_dir) == before


def test_flags_must_match_the_records(data, tmp_path):
    result = run_tool(TOOL, f"--bert_config_file={data['config']}", f"--input_file={data['train']}",
                      f"--output_dir={tmp_path}", "--max_seq_length=32")
    assert result.returncode != 0
    assert ("train-0.tfrecord (from --input_file) holds records with max_seq_length 16, but "
            "--max_seq_length=32") in result.stderr


def test_held_out_records_keep_their_own_lengths(short_run, tmp_path):
    assert short_run.result.returncode == 0, short_run.result.stderr[-3000:]
    results = eval_results(short_run.output_dir)
    assert results["global_step"] == 4 and results["examples"] == HELD_OUT

    too_long = tmp_path / "heldout-32.tfrecord"
    write_pretraining_records(too_long, 4, 32, 5, vocab_size=40, seed=5)
    result = run_tool(TOOL, *short_run.flags, f"--output_dir={tmp_path / 'long'}",
                      f"--eval_input_file={too_long}")
    assert result.returncode != 0
    assert "max_seq_length 32 exceeds max_position_embeddings 16" in result.stderr
    assert f"({too_long} (from --eval_input_file))" in result.stderr


def test_an_unreachable_tpu_is_a_clear_error(data, tmp_path):
    port = free_port()
    result = run_tool(TOOL, f"--bert_config_file={data['config']}", f"--input_file={data['train']}",
                      f"--output_dir={tmp_path}", "--strategy=tpu",
                      f"--tpu=grpc://127.0.0.1:{port}", timeout=120)
    assert result.returncode != 0
    assert f"Cannot reach the TPU worker at grpc://127.0.0.1:{port} (--tpu)" in result.stderr


def test_two_workers_train_and_checkpoint_with_multi_worker_mirrored(data, tmp_path):
    # Also the test of XLA and of float16 (dynamic loss scaling) under a distribution strategy.
    output_dir = str(tmp_path / "mwms")
    cluster = {"worker": [f"127.0.0.1:{free_port()}", f"127.0.0.1:{free_port()}"]}
    flags = [f"--bert_config_file={data['config']}", f"--input_file={data['train']}",
             f"--output_dir={output_dir}", "--train_batch_size=8", "--num_train_steps=6",
             "--num_warmup_steps=1", "--save_checkpoints_steps=3", "--steps_per_execution=3",
             "--strategy=multi_worker_mirrored", "--mixed_precision=float16", "--do_eval",
             f"--eval_input_file={data['heldout']}", "--eval_batch_size=8"]
    workers = [subprocess.Popen(
        tool_command(TOOL, *flags), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env=tool_env({"TF_CONFIG": json.dumps({"cluster": cluster,
                                               "task": {"type": "worker", "index": i}})}))
        for i in range(2)]
    try:
        outputs = [worker.communicate(timeout=900) for worker in workers]
    finally:
        for worker in workers:
            if worker.poll() is None:
                worker.kill()
    for worker, (_, stderr) in zip(workers, outputs):
        assert worker.returncode == 0, stderr[-3000:]
        assert "on 2 replica(s) (--strategy=multi_worker_mirrored)" in stderr
        # float16 on these CPU workers: each says so once, at default verbosity, as it starts.
        assert stderr.count("--mixed_precision=float16 on a CPU runs TensorFlow's slow") == 1
    assert latest_step(output_dir) == 6
    assert sorted(f for f in os.listdir(output_dir) if f.endswith(".index")) == [
        "ckpt-3.index", "ckpt-6.index"]
    assert not [f for f in os.listdir(output_dir) if f.startswith(".tmp")]  # worker 1's copies
    # Synchronous replicas hold the same weights: both workers evaluate to the same metrics,
    # over every held-out record once (each worker reads half of them, plus padding).
    reports = [next(line for line in stderr.splitlines() if "Evaluation at step 6" in line)
               for _, stderr in outputs]
    assert f"on {HELD_OUT} records" in reports[0]
    assert reports[0].split("records: ")[1] == reports[1].split("records: ")[1]
    metrics = eval(reports[0].split("records: ")[1])  # the logged dict of floats
    assert np.isfinite(list(metrics.values())).all() and metrics["examples"] == HELD_OUT
    assert eval_results(output_dir)["examples"] == HELD_OUT


def test_raw_text_trains_with_dynamic_masking_evaluates_gzip_records_and_exports(data, tmp_path):
    vocab = write_vocab(tmp_path)
    write_corpus(tmp_path / "corpus.txt", numbered_documents([5] * 10, 4))
    config = tmp_path / "bert_config.json"
    config.write_text(json.dumps({**CONFIG, "vocab_size": len(VOCAB)}))
    # GZIP-compressed held-out records under a name that does not say so.
    heldout = str(tmp_path / "heldout.records")
    with tf.io.TFRecordWriter(heldout, tf.io.TFRecordOptions(compression_type="GZIP")) as writer:
        for record in tf.data.TFRecordDataset(data["heldout"]):
            writer.write(record.numpy())
    output_dir = tmp_path / "out"
    result = run_tool(
        TOOL,
        f"--bert_config_file={config}", f"--input_text_file={tmp_path}/corpus*.txt",
        f"--vocab_file={vocab}", f"--output_dir={output_dir}", "--max_seq_length=16",
        "--max_predictions_per_seq=3", "--train_batch_size=8", "--num_train_steps=12",
        "--num_warmup_steps=2", "--learning_rate=1e-3", "--save_checkpoints_steps=6",
        "--steps_per_execution=3", "--strategy=cpu", "--nojit_compile", "--do_eval",
        f"--eval_input_file={heldout}", "--eval_batch_size=8", "--eval_every_checkpoint",
        f"--export_dir={output_dir / 'export'}")
    assert result.returncode == 0, result.stderr[-3000:]
    assert "Training on 1 text file(s) on 1 replica(s)" in result.stderr
    assert latest_step(output_dir) == 12
    assert [step for step, _ in scalar_curves(os.path.join(output_dir, "train"))["loss"]] == [
        3, 6, 9, 12]
    # Evaluated after each checkpoint, and not once more at the end.
    curve = scalar_curves(os.path.join(output_dir, "eval"))["masked_lm_accuracy"]
    assert [step for step, _ in curve] == [6, 12]
    results = eval_results(output_dir)
    assert results["global_step"] == 12 and results["examples"] == HELD_OUT

    assert os.listdir(output_dir / "export") == ["12"]
    encoder = tf.saved_model.load(str(output_dir / "export" / "12"))
    assert open(encoder.vocab_file.asset_path.numpy(), encoding="utf-8").read().split() == VOCAB
    ids = tf.constant([[CLS_ID] + word_ids("w3 w4 w5") + [SEP_ID]], tf.int32)
    outputs = encoder.mlm({"input_word_ids": ids, "input_mask": tf.ones_like(ids),
                           "input_type_ids": tf.zeros_like(ids),
                           "masked_lm_positions": tf.constant([[1, 2]], tf.int32)})
    assert outputs["mlm_logits"].shape == (1, 2, len(VOCAB))
    assert outputs["pooled_output"].shape == (1, CONFIG["hidden_size"])


def test_no_flags_runs_the_embedded_default_job_and_a_rerun_finds_it_done(tmp_path):
    output_dir = tmp_path / "default"
    # The default job at a smaller budget: what `bert-tf-run-pretraining` does.
    # Its warmup follows --num_train_steps: 10 % of 20 steps, not its own 10 % of 800.
    budget = [f"--output_dir={output_dir}", "--embedded_corpus_mb=0.15",
              "--embedded_vocab_size=600", "--num_train_steps=20",
              "--steps_per_execution=5", "--save_checkpoints_steps=10"]
    result = run_tool(TOOL, *budget)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "running the embedded default job" in result.stdout
    prepared = output_dir / "data"
    train_text = open(prepared / "corpus" / "train.txt", encoding="utf-8").read()
    assert 0.1e6 < len(train_text.encode()) < 0.2e6 and "\n\n" in train_text
    vocab = load_vocab(str(prepared / "vocab.txt"))
    # The output directory is complete as a fine-tuning tool's --init_checkpoint.
    assert load_vocab(str(output_dir / "vocab.txt")) == vocab
    config = BertConfig.from_json_file(str(output_dir / "bert_config.json"))
    assert config == dataclasses.replace(BertConfig.from_name("bert_tiny"),
                                         vocab_size=len(vocab))
    assert 200 < len(vocab) <= 600 * 1.05   # tf.text's learner aims at the size +- 5 %
    assert latest_step(output_dir) == 20
    scalars = scalar_curves(os.path.join(output_dir, "train"))
    losses = [loss for _, loss in scalars["loss"]]
    assert len(losses) == 4 and losses[-1] < losses[0] - 0.5, losses   # it learns
    np.testing.assert_allclose([rate for _, rate in scalars["learning_rate"]], [
        googles_learning_rate(step - 1, 1e-3, 20, 2) for step in (5, 10, 15, 20)], rtol=1e-5)
    results = eval_results(output_dir)
    assert results["global_step"] == 20 and results["examples"] > 0

    export = output_dir / "export" / "20"
    encoder = tf.saved_model.load(str(export))
    tokenizer = BertTokenizer(encoder.vocab_file.asset_path.numpy().decode(), lower_case=True)
    ids = tokenizer.tokenize(tf.constant(["Return the value of the named attribute."]))
    ids = tf.concat([[[vocab.index("[CLS]")]], ids.merge_dims(1, 2).to_tensor()], axis=1)
    outputs = encoder({"input_word_ids": ids, "input_mask": tf.ones_like(ids),
                       "input_type_ids": tf.zeros_like(ids)}, training=False)
    assert outputs["pooled_output"].shape == (1, config.hidden_size)
    for line in ("Embedded default pre-training: bert_tiny", f"training loss      "
                 f"{losses[0]:.3f} at step 5 -> {losses[-1]:.3f} at step 20",
                 f"masked_lm_accuracy {results['masked_lm_accuracy']:.3f}",
                 f"encoder SavedModel {export} "):
        assert line in result.stdout, result.stdout

    rerun = run_tool(TOOL, *budget)
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    assert "is already at step 20 of 20" in rerun.stderr
    assert f"{export} exists already: not exported again" in rerun.stderr
    assert f"encoder SavedModel {export} " in rerun.stdout
    assert os.listdir(output_dir / "export") == ["20"] and latest_step(output_dir) == 20


def test_the_embedded_jobs_steps_are_not_blamed_on_the_user(tmp_path):
    result = run_tool(TOOL, f"--output_dir={tmp_path}", "--num_warmup_steps=900")
    assert result.returncode != 0
    assert ("run_pretraining: error: --num_warmup_steps must be in [0, 800] (the embedded "
            "default job's steps), got 900") in result.stderr
