"""A tool's console holds its own lines only: TensorFlow's start-up lines, C++ and Python log
lines and library warnings are off (`bert_tf.cli.quiet_tensorflow`, `app.run_tool`) unless
--verbosity=1 asks for them. The tools run in fresh processes, with no TF_CPP_MIN_LOG_LEVEL of
the test's environment."""

import importlib.util
import json
import os
import re
import subprocess
import sys
import types

import pytest

from bert_tf.cli import quiet_tensorflow
from tests.cli.user_runs import run_as_user
from tests.data.pretraining.records import write_pretraining_records
from tests.data.pretraining.toy_corpus import VOCAB, numbered_documents, write_corpus, write_vocab
from tests.tools.test_run_pretraining import CONFIG
from tests.resources import REPO_ROOT

# What TensorFlow 2.21 printed at every tool's start on a CPU-only machine (and printed again
# in each worker process), before this package kept it off.
STARTUP_NOISE = """\
WARNING: All log messages before absl::InitializeLog() is called are written to STDERR
I0000 00:00:1795515373.005688     941 port.cc:153] oneDNN custom operations are on. You may see \
slightly different numerical results due to floating-point round-off errors.
I0000 00:00:1795515373.006018     941 cudart_stub.cc:31] Could not find cuda drivers on your \
machine, GPU will not be used.
E0000 00:00:1795515377.543426     941 cuda_platform.cc:52] failed call to cuInit: INTERNAL: \
CUDA error: Failed call to cuInit: UNKNOWN ERROR (303)
"""
CUINIT_WITHOUT_DRIVER = STARTUP_NOISE.splitlines(keepends=True)[-1]
# TensorFlow 2.20's only start-up line at TF_CPP_MIN_LOG_LEVEL=2, on the same machine.
STARTUP_NOISE_TF_2_20 = """\
2026-11-29 05:02:51.721743: E external/local_xla/xla/stream_executor/cuda/cuda_platform.cc:51] \
failed call to cuInit: INTERNAL: CUDA error: Failed call to cuInit: UNKNOWN ERROR (303)
"""
# With a CUDA driver but no usable GPU.
CUINIT_FAILED = ("E0000 00:00:1795515377.543426     941 cuda_platform.cc:52] failed call to "
                 "cuInit: INTERNAL: CUDA error: Failed call to cuInit: CUDA_ERROR_NO_DEVICE: no "
                 "CUDA-capable device is detected\n")
# A C++ log line of any level (glog format), and absl's banner: none of them is the tool's.
CPP_LOG_LINE = re.compile(r"^[IWEF]\d{4} [\d:.]+ +\d+ \w+\.cc:\d+\] |^WARNING: All log messages",
                          re.MULTILINE)
# absl's prefix of a Python log line.
ABSL_PREFIX = re.compile(r"^[IWEF]\d{4} [\d:.]+ +\d+ \w+\.py:\d+\] ", re.MULTILINE)


@pytest.fixture(scope="module")
def text_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("text") / "text.txt"
    path.write_text("The quick brown fox jumps over the lazy dog.\nA second line, of words.\n"
                    * 20, encoding="utf-8")
    return str(path)


def test_a_tool_prints_only_its_own_lines(text_file, tmp_path):
    # build_vocab: TensorFlow in this process and in a worker process; nothing to say on stderr.
    result = run_as_user(
        "build_vocab.py", f"--input_file={text_file}", f"--output_file={tmp_path}/vocab.txt",
        "--vocab_size=100")
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    assert result.stdout == (f"Read 1 file(s), 340 words (15 distinct); wrote 73 tokens to "
                             f"{tmp_path}/vocab.txt\n")


def test_verbosity_1_brings_tensorflows_lines_back(text_file, tmp_path):
    result = run_as_user(
        "build_vocab.py", f"--input_file={text_file}", f"--output_file={tmp_path}/vocab.txt",
        "--vocab_size=100", "--verbosity=1")
    assert result.returncode == 0, result.stderr
    assert CPP_LOG_LINE.search(result.stderr), result.stderr


def test_startup_noise_is_dropped_and_other_lines_kept():
    kept = "2026-11-24 10:00:00.1: E tensorflow/core/x.cc:1] a real problem\nTraceback (...)\n"
    assert quiet_tensorflow.shown_lines(STARTUP_NOISE) == []
    assert quiet_tensorflow.shown_lines(STARTUP_NOISE_TF_2_20) == []
    assert quiet_tensorflow.shown_lines(STARTUP_NOISE + kept) == kept.splitlines(keepends=True)
    # A failed cuInit where a CUDA driver was found is a real problem with the GPU: kept.
    assert quiet_tensorflow.shown_lines(CUINIT_FAILED) == [CUINIT_FAILED]


@pytest.mark.parametrize("argv, verbosity", [
    (["tool"], 0), (["tool", "--verbosity=1"], 1), (["tool", "--verbosity", "2"], 2),
    (["tool", "-v", "1"], 1), (["tool", "-v=-1"], -1), (["tool", "--v=3", "--verbosity=0"], 0),
    (["tool", "-verbosity=2"], 2), (["tool", "--verbosity"], 0), (["tool", "--verbosity=x"], 0), (["tool", "--vocab_file=1"], 0)])
def test_verbosity_is_read_before_the_flags_are_parsed(argv, verbosity):
    assert quiet_tensorflow.verbosity_in(argv) == verbosity


class PrintingLoader:
    """Stands for TensorFlow's loader: prints to file descriptor 2 as its C++ code does, then
    fails or gives a module with a `config.list_physical_devices`."""

    def __init__(self, text, error=None):
        self.text, self.error = text, error

    def create_module(self, spec):
        return None

    def exec_module(self, module):
        os.write(2, self.text.encode())
        if self.error:
            raise self.error
        module.config = types.SimpleNamespace(
            list_physical_devices=lambda: os.write(2, CUINIT_WITHOUT_DRIVER.encode()))


def new_module(loader):
    return importlib.util.module_from_spec(importlib.util.spec_from_loader("tensorflow", loader))


def test_the_import_keeps_what_is_not_noise(capfd):
    noise = "".join(STARTUP_NOISE.splitlines(keepends=True)[:-1])  # cuInit comes on listing
    original = PrintingLoader(noise + "a line of its own\n")
    loader = quiet_tensorflow._QuietLoader(original)
    module = new_module(loader)
    loader.exec_module(module)
    assert capfd.readouterr().err == "a line of its own\n"
    assert module.__loader__ is module.__spec__.loader is original


def test_a_failed_import_shows_everything(capfd):
    loader = quiet_tensorflow._QuietLoader(PrintingLoader(STARTUP_NOISE, ImportError("no .so")))
    with pytest.raises(ImportError, match="no .so"):
        loader.exec_module(new_module(loader))
    assert capfd.readouterr().err == STARTUP_NOISE


# etils' epath (TFDS's paths) looks TensorFlow up before a later step imports it.
@pytest.mark.parametrize("before", ["", "importlib.util.find_spec('tensorflow'); "])
def test_tensorflow_is_imported_quietly_in_a_fresh_process(before):
    check = ("import importlib.util; import bert_tf.cli; " + before + "import tensorflow as tf; "
             "print(len(tf.config.list_physical_devices('CPU')))")
    env = {name: value for name, value in os.environ.items() if name != "TF_CPP_MIN_LOG_LEVEL"}
    result = subprocess.run([sys.executable, "-c", check], capture_output=True, text=True,
                            env=env, cwd=REPO_ROOT, timeout=300)
    assert result.returncode == 0, result.stderr
    assert (result.stdout, result.stderr) == ("1\n", "")


def test_an_export_says_its_stages_and_nothing_else(tmp_path):
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("".join(f"{token}\n" for token in [
        "[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "fox", "##es"]), encoding="utf-8")
    # TensorFlow logs "... will be renamed to unknown, unknown_0, ..." for every signature, its
    # "Sharding callback duration" and "Assets written to" lines: none of them shows.
    result = run_as_user("export_savedmodel.py", "--export_type=preprocess",
                         f"--vocab_file={vocab}", f"--output_dir={tmp_path}/preprocess",
                         "--seq_length=16")
    assert result.returncode == 0, result.stderr
    assert result.stderr == ("export_savedmodel: tracing the signatures and writing the "
                             f"SavedModel under {tmp_path}/preprocess\n")
    assert re.fullmatch(f"Exported preprocess to {tmp_path}/preprocess/1 in \\d+s\n",
                        result.stdout)


def test_run_pretraining_with_its_default_strategy_prints_no_tensorflow_log_line(tmp_path):
    # TensorFlow, imported before absl set up logging, gave its Python logger a handler of its
    # own: "INFO:tensorflow:Using MirroredStrategy with devices (...)" at every such run and
    # "INFO:tensorflow:Assets written to: .../export/.2-incomplete-.../assets" at the export.
    vocab = write_vocab(tmp_path)
    write_corpus(tmp_path / "corpus.txt", numbered_documents([5] * 4, 4))
    config = tmp_path / "bert_config.json"
    config.write_text(json.dumps({**CONFIG, "vocab_size": len(VOCAB)}))
    result = run_as_user(
        "run_pretraining.py", f"--bert_config_file={config}",
        f"--input_text_file={tmp_path}/corpus.txt", f"--vocab_file={vocab}",
        f"--output_dir={tmp_path}/out", "--max_seq_length=16", "--max_predictions_per_seq=3",
        "--train_batch_size=4", "--num_train_steps=2", "--nojit_compile",
        f"--export_dir={tmp_path}/out/export")
    assert result.returncode == 0, result.stderr[-3000:]
    # The package's log lines read as the tool's own, without absl's prefix of level, date,
    # time, thread and source line ("I1201 06:57:12.203504 139719929355136 squad.py:271] ").
    assert not ABSL_PREFIX.search(result.stderr), result.stderr
    assert (f"Training on 1 text file(s) on 1 replica(s) (--strategy=mirrored)"
            in result.stderr.splitlines())  # the default, which logged the first line
    assert f"Exported the encoder (with its masked-LM head) to {tmp_path}/out/export/2" in (
        result.stderr)
    assert "INFO:tensorflow" not in result.stderr


def test_an_unreachable_tpu_is_the_only_line_on_stderr(tmp_path):
    records = tmp_path / "train.tfrecord"
    write_pretraining_records(records, 8, 16, 3, vocab_size=40)
    config = tmp_path / "bert_config.json"
    config.write_text(json.dumps(CONFIG))
    result = run_as_user(
        "run_pretraining.py", f"--bert_config_file={config}", f"--input_file={records}",
        f"--output_dir={tmp_path}/out", "--strategy=tpu", "--tpu=grpc://127.0.0.1:1",
        timeout=120)
    assert result.returncode == 1
    assert result.stderr.startswith("run_pretraining: error: Cannot reach the TPU worker at "
                                    "grpc://127.0.0.1:1 (--tpu)"), result.stderr
    assert result.stderr.count("\n") == 1, result.stderr
