"""`tools/create_pretraining_data.py` as a user runs it: flags, parallel workers, the report."""

import os
import signal
import subprocess
import time

import pytest
from bert_tf.data.pretraining.records_writer import write_pretraining_data
from tests.data.pretraining.toy_corpus import numbered_documents, write_corpus, write_vocab
from tests.tools.tool_runs import run_tool, set_up_then_exec, tool_command, tool_env

TOOL = "create_pretraining_data.py"


def test_parallel_workers_write_what_one_process_writes(tmp_path):
    # Two worker processes, many small chunks, two shards: the same bytes as one process.
    corpus = write_corpus(tmp_path / "corpus.txt", numbered_documents([3, 1, 6, 2, 5, 4, 2], 4))
    latin1 = tmp_path / "latin1.txt"
    latin1.write_bytes("w90 w91.\nna\xefve.\n".encode("latin-1"))
    vocab = write_vocab(tmp_path)
    chunk_mb = 0.0001                                         # 104 bytes: about 2 documents
    result = run_tool(TOOL, f"--input_file={tmp_path}/corpus*.txt,{latin1}",
                      f"--output_file={tmp_path}/out.tfrecord", "--num_output_shards=2",
                      f"--vocab_file={vocab}", "--do_lower_case", "--do_whole_word_mask",
                      "--max_seq_length=20", "--max_predictions_per_seq=3", "--dupe_factor=3",
                      "--random_seed=7", "--num_workers=2", f"--chunk_size_mb={chunk_mb}")
    assert result.returncode == 0, result.stderr
    shards = [str(tmp_path / f"out.tfrecord-0000{i}-of-00002") for i in range(2)]
    expected = [str(tmp_path / f"expected-{i}.tfrecord") for i in range(2)]
    statistics = write_pretraining_data(
        [corpus, str(latin1)], expected, vocab, True, random_seed=7, num_workers=0,
        max_chunk_bytes=int(chunk_mb * 2**20), progress_stream=None, max_seq_length=20,
        max_predictions_per_seq=3, whole_word_mask=True, dupe_factor=3)
    for shard, reference in zip(shards, expected):
        with open(shard, "rb") as got, open(reference, "rb") as want:
            assert got.read() == want.read()
    assert statistics.instances > 20
    assert f"{statistics.instances:,} instances." in result.stderr
    assert f"{latin1}: 1 lines skipped, not valid UTF-8" in result.stderr
    assert "create_pretraining_data: 100.0% of" in result.stderr


def test_a_pattern_matching_no_file_is_named(tmp_path):
    vocab = write_vocab(tmp_path)
    result = run_tool(TOOL, f"--input_file={tmp_path}/nothing-*.txt",
                      f"--output_file={tmp_path}/out.tfrecord", f"--vocab_file={vocab}")
    assert result.returncode == 1
    assert result.stderr.strip().endswith(
        f"create_pretraining_data: error: --input_file: '{tmp_path}/nothing-*.txt' "
        f"matches no file")
    assert not os.path.exists(tmp_path / "out.tfrecord")


@pytest.mark.parametrize("flag, message", [
    ("--vocab_file={tmp_path}/missing.txt", "--vocab_file {tmp_path}/missing.txt does not exist"),
    ("--max_seq_length=4", "max_seq_length must be at least 5 ([CLS] A [SEP] B [SEP] with one "
                           "piece in A and B), got 4."),
])
def test_a_bad_option_is_its_one_line_before_anything_is_read(tmp_path, flag, message):
    corpus = write_corpus(tmp_path / "corpus.txt", numbered_documents([3, 1, 6], 4))
    result = run_tool(TOOL, f"--input_file={corpus}", f"--output_file={tmp_path}/out.tfrecord",
                      f"--vocab_file={write_vocab(tmp_path)}", flag.format(tmp_path=tmp_path))
    assert result.returncode == 1
    # No "Reading 1 files, writing 1 files" before it: nothing was.
    assert result.stderr.splitlines() == [
        f"create_pretraining_data: error: {message.format(tmp_path=tmp_path)}"]
    assert sorted(os.listdir(tmp_path)) == ["corpus.txt", "vocab.txt"]


def test_an_output_file_that_is_an_input_file_is_refused(tmp_path):
    corpus = write_corpus(tmp_path / "corpus.txt", numbered_documents([3, 1, 6], 4))
    with open(corpus, "rb") as f:
        text = f.read()
    result = run_tool(TOOL, f"--input_file={corpus}", f"--output_file={corpus}",
                      f"--vocab_file={write_vocab(tmp_path)}", "--num_workers=0")
    assert result.returncode == 1
    assert result.stderr.strip().splitlines()[-1] == (
        f"create_pretraining_data: error: output file {corpus} is also an input file: name "
        f"other output files")
    with open(corpus, "rb") as f:
        assert f.read() == text
    assert sorted(os.listdir(tmp_path)) == ["corpus.txt", "vocab.txt"]


def test_ctrl_c_while_the_workers_start_is_one_line(tmp_path):
    corpus = write_corpus(tmp_path / "corpus.txt", numbered_documents([3, 1, 6, 2, 5, 4, 2], 4))
    with open(corpus, "rb") as f:
        text = f.read()
    with open(corpus, "wb") as f:
        f.write(text * 50)  # a hundred chunks or so
    command = tool_command(TOOL, f"--input_file={corpus}", f"--output_file={tmp_path}/out",
                           f"--vocab_file={write_vocab(tmp_path)}", "--max_seq_length=20",
                           "--max_predictions_per_seq=3", "--num_workers=2",
                           "--chunk_size_mb=0.0001")
    # Ctrl-C signals the terminal's whole process group: the tool and its workers, which
    # take seconds to import TensorFlow. Each printed its KeyboardInterrupt traceback.
    process = subprocess.Popen(
        set_up_then_exec("import signal; signal.signal(signal.SIGINT, signal.SIG_DFL)", command),
        stderr=subprocess.PIPE, text=True, env=tool_env(), start_new_session=True)
    assert process.stderr.readline().startswith("Reading 1 files, writing 1 files")
    time.sleep(1.5)
    os.killpg(process.pid, signal.SIGINT)
    stderr = process.communicate(timeout=300)[1]
    assert process.returncode == -signal.SIGINT
    assert "Traceback" not in stderr
    assert stderr.splitlines()[-1] == "create_pretraining_data: interrupted"
    assert sorted(os.listdir(tmp_path)) == ["corpus.txt", "vocab.txt"]


def _children(pid):
    """The process ids of `pid`'s children (Linux)."""
    children = set()
    for task in os.listdir(f"/proc/{pid}/task"):
        with open(f"/proc/{pid}/task/{task}/children") as f:
            children.update(int(child) for child in f.read().split())
    return children


def test_sigterm_ends_the_workers_and_leaves_no_partial_file(tmp_path):
    # SIGTERM (timeout, a scheduler, docker stop) killed the tool silently (exit 143), left
    # out.incomplete behind and its two workers (~0.7 GB each) running.
    corpus = write_corpus(tmp_path / "corpus.txt", numbered_documents([3, 1, 6, 2, 5, 4, 2], 4))
    with open(corpus, "rb") as f:
        text = f.read()
    with open(corpus, "wb") as f:
        f.write(text * 200)
    process = subprocess.Popen(
        tool_command(TOOL, f"--input_file={corpus}", f"--output_file={tmp_path}/out",
                     f"--vocab_file={write_vocab(tmp_path)}", "--max_seq_length=20",
                     "--max_predictions_per_seq=3", "--num_workers=2", "--chunk_size_mb=0.001",
                     "--dupe_factor=20"),
        stderr=subprocess.PIPE, text=True, env=tool_env())
    assert process.stderr.readline().startswith("Reading 1 files, writing 1 files")
    deadline = time.monotonic() + 120
    while len(workers := _children(process.pid)) < 2 and time.monotonic() < deadline:
        time.sleep(0.2)
    time.sleep(3)  # the workers import TensorFlow, then take chunks
    process.send_signal(signal.SIGTERM)
    stderr = process.communicate(timeout=300)[1]
    assert process.returncode == 1, stderr
    assert stderr.splitlines()[-1] == ("create_pretraining_data: error: terminated (SIGTERM): "
                                       "nothing written, the output files are as they were")
    assert sorted(os.listdir(tmp_path)) == ["corpus.txt", "vocab.txt"]
    time.sleep(1)
    assert not [pid for pid in workers if os.path.exists(f"/proc/{pid}")
                and open(f"/proc/{pid}/stat").read().split()[2] != "Z"]
