"""The tools' entry point (`bert_tf.cli.app.run_tool`) as a user meets it, through the
`tools/<tool>.py` scripts in fresh processes: help listing each tool's own flags (the shared
ones included), errors in one line, usage errors without the flag list, TensorFlow's logging
level set before TensorFlow loads."""

import ast
import os
import pty
import re
import signal
import subprocess
import sys

import pytest
import tensorflow as tf

from bert_tf.cli.app import error_line
from tests.cli.tensorflow_refused import REFUSING_TENSORFLOW
from tests.cli.tool_flags import TOOLS, listed_flags, tool_flags
from tests.resources import REPO_ROOT
from tests.tools.tool_runs import run_tool

CLI_DIR = os.path.join(REPO_ROOT, "bert_tf", "cli")


# Flags the public contract names, and the shared fine-tuning flags in each fine-tuning tool.
FINE_TUNING = {"do_train", "do_eval", "do_predict", "init_checkpoint", "vocab_file",
               "bert_config_file", "do_lower_case", "max_seq_length", "train_batch_size",
               "learning_rate", "num_train_epochs", "warmup_proportion", "save_checkpoints_steps",
               "mixed_precision", "jit_compile", "seed", "output_dir"}
CONTRACT_FLAGS = {
    "convert_checkpoint": {"checkpoint", "output_dir", "bert_config_file"},
    "create_pretraining_data": {"input_file", "output_file", "vocab_file", "do_lower_case",
                                "do_whole_word_mask", "max_seq_length",
                                "max_predictions_per_seq", "masked_lm_prob", "dupe_factor",
                                "short_seq_prob", "random_seed"},
    "run_pretraining": {"strategy", "tpu", "bert_config_file", "input_file", "output_dir",
                        "init_checkpoint", "train_batch_size", "max_seq_length",
                        "max_predictions_per_seq", "num_train_steps", "num_warmup_steps",
                        "learning_rate", "save_checkpoints_steps", "jit_compile",
                        "mixed_precision", "optimizer"},
    "export_savedmodel": {"export_type", "output_dir", "bert_config_file", "init_checkpoint",
                          "vocab_file", "do_lower_case", "seq_length"},
    "run_classifier": FINE_TUNING | {"task_name", "data_dir"},
    "run_squad": FINE_TUNING | {"train_file", "predict_file", "doc_stride", "max_query_length"},
    "run_ner": FINE_TUNING | {"data_dir", "train_file", "eval_file", "predict_file"},
    "run_multiple_choice": FINE_TUNING | {"data_dir", "train_file", "eval_file", "predict_file"},
}


def test_every_tool_is_a_console_script_bert_tf_tool():
    # The contract: every tool is also `bert-tf-<tool>` (underscores to hyphens) after a
    # regular install; tests/test_packaging.py runs each one installed.
    scripts = sorted(name[:-len(".py")] for name in os.listdir(os.path.join(REPO_ROOT, "tools"))
                     if name.endswith(".py"))
    assert sorted(TOOLS) == scripts
    with open(os.path.join(REPO_ROOT, "setup.py"), encoding="utf-8") as f:
        tree = ast.parse(f.read())
    entry_points = next(ast.literal_eval(node.value) for node in ast.walk(tree)
                        if isinstance(node, ast.keyword) and node.arg == "entry_points")
    assert sorted(entry_points["console_scripts"]) == sorted(
        f"bert-tf-{tool.replace('_', '-')} = bert_tf.cli.{tool}:run" for tool in TOOLS)


@pytest.mark.parametrize("tool", sorted(CONTRACT_FLAGS))
def test_the_tools_define_the_contracts_flags(tool):
    assert CONTRACT_FLAGS[tool] <= set(tool_flags()[tool])


@pytest.mark.parametrize("tool", TOOLS)
def test_helpshort_lists_the_tools_own_flags_and_the_shared_ones(tool):
    result = run_tool(f"{tool}.py", "--helpshort")
    assert result.returncode == 0, result.stderr
    expected = tool_flags()[tool]
    assert len(expected) >= 3
    assert listed_flags(result.stdout) == expected
    # The usage is the tool module's docstring, line breaks kept.
    docstring = ast.get_docstring(ast.parse(open(os.path.join(CLI_DIR, f"{tool}.py")).read()))
    assert result.stdout.startswith(docstring.splitlines()[0] + "\n")


@pytest.mark.parametrize("tool, flag", [("run_pretraining", "strategy"),
                                        ("run_classifier", "init_checkpoint")])
def test_help_lists_the_flags_too(tool, flag):
    result = run_tool(f"{tool}.py", "--help")
    assert f"  --{flag}:" in result.stdout
    assert listed_flags(result.stdout) == tool_flags()[tool]
    if tool == "run_classifier":   # example commands keep their continuation lines
        assert "    bert-tf-run-classifier --task_name=SST-2 --data_dir=glue/SST-2 \\\n" in (
            result.stdout)


def test_an_error_is_one_line_and_verbosity_adds_the_traceback(tmp_path):
    flags = [f"--input_file={tmp_path}/none-*.txt", f"--output_file={tmp_path}/vocab.txt"]
    line = f"build_vocab: error: --input_file: '{tmp_path}/none-*.txt' matches no file"
    result = run_tool("build_vocab.py", *flags)
    assert result.returncode == 1
    assert result.stderr.strip().splitlines()[-1] == line
    assert "Traceback" not in result.stderr
    verbose = run_tool("build_vocab.py", *flags, "--verbosity=1")
    assert verbose.returncode == 1
    assert verbose.stderr.strip().splitlines()[-1] == line
    assert "Traceback (most recent call last)" in verbose.stderr
    assert 'raise InputFileError(f"{flag}: ' in verbose.stderr


def test_an_error_after_a_progress_bar_starts_its_own_line_on_a_terminal(tmp_path):
    # A progress bar leaves its line open (redrawn after "\r"); on a terminal, where stdout
    # and stderr meet, the error line continued it: "3/10 ━━ 2s/steptool: error: ...".
    tool = tmp_path / "failing_tool.py"
    tool.write_text(
        "import sys\n"
        "from bert_tf.cli.app import run_tool\n"
        "def main():\n"
        "    sys.stdout.write('\\r3/10 ━━━━ 2s/step')\n"
        "    sys.stdout.flush()\n"
        "    raise ValueError('the records ran out')\n"
        "run_tool(main, lambda: None)\n")
    controller, terminal = pty.openpty()
    process = subprocess.Popen([sys.executable, str(tool)], stdout=terminal, stderr=terminal,
                               env=dict(os.environ, PYTHONPATH=REPO_ROOT))
    os.close(terminal)
    shown = b""
    while True:
        try:
            chunk = os.read(controller, 4096)
        except OSError:  # the terminal closed with the process
            break
        if not chunk:
            break
        shown += chunk
    os.close(controller)
    assert process.wait(timeout=60) == 1
    lines = shown.decode().replace("\r\n", "\n").split("\n")
    assert "\r3/10 ━━━━ 2s/step" in lines
    assert "__main__: error: the records ran out" in lines


def test_ctrl_c_is_one_line_and_ends_the_process_by_sigint(tmp_path):
    tool = tmp_path / "waiting_tool.py"
    tool.write_text(
        "import sys, time\n"
        "from bert_tf.cli.app import run_tool\n"
        "def main():\n"
        "    print('ready', flush=True)\n"
        "    time.sleep(600)\n"
        "run_tool(main, lambda: None)\n")
    for verbosity, traceback_shown in (("--verbosity=0", False), ("--verbosity=1", True)):
        process = subprocess.Popen([sys.executable, str(tool), verbosity], text=True,
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                   env=dict(os.environ, PYTHONPATH=REPO_ROOT))
        assert process.stdout.readline() == "ready\n"
        process.send_signal(signal.SIGINT)
        _, stderr = process.communicate(timeout=60)
        # Killed by SIGINT, as Python ends on Ctrl-C: a shell's loop over the tool stops too.
        assert process.returncode == -signal.SIGINT
        assert ("Traceback" in stderr) == traceback_shown, stderr
        assert "__main__: interrupted" in stderr.splitlines()
        if not traceback_shown:
            assert stderr == "__main__: interrupted\n"


def test_a_usage_error_is_one_line_and_a_pointer_to_help():
    result = run_tool("run_classifier.py", "--task_name=SST-2")
    assert result.returncode == 1
    assert result.stderr.strip().splitlines() == [
        "run_classifier: error: nothing to do: give --do_train, --do_eval and/or --do_predict; "
        "--output_dir is required; --init_checkpoint (pre-trained weights) or at least "
        "--bert_config_file is required; --vocab_file is required without --init_checkpoint"]
    assert not listed_flags(result.stderr) and "flags:" not in result.stderr



@pytest.mark.parametrize("tool, flag, message", [
    ("run_classifier", "--max_seq_lenght=64",
     "Unknown command line flag 'max_seq_lenght'. Did you mean: max_seq_length ?"),
    ("run_classifier", "--max_seq_length=long",
     "flag --max_seq_length=long: invalid literal for int() with base 10: 'long'"),
    ("run_ner", "--conll_encoding=utf-9",  # a validator of the tool's
     "flag --conll_encoding=utf-9: unknown text encoding (e.g. utf-8, latin-1)"),
    ("run_squad", "train-v1.1.json", "unexpected arguments: ['train-v1.1.json']"),
])
def test_a_command_line_absl_cannot_parse_is_one_line_too(tool, flag, message):
    # absl's own report was two lines, "FATAL Flags parsing error: ..." and "Pass --helpshort
    # or --helpfull to see help on flags.", unlike every other error of the tools.
    result = run_tool(f"{tool}.py", flag)
    assert result.returncode == 1
    assert result.stderr.splitlines() == [
        f"{tool}: error: {message} (--helpshort lists the flags)"]

def test_error_lines():
    assert error_line("serve", FileNotFoundError("/models/x has no versions")) == (
        "serve: error: /models/x has no versions")
    # A bug keeps its type, and says how to see where it arose.
    assert error_line("run_ner", KeyError("B-XYZ")) == (
        "run_ner: error: KeyError: 'B-XYZ' (--verbosity=1 prints the traceback)")
    assert error_line("run_ner", KeyError("B-XYZ"), traceback_hint=False) == (
        "run_ner: error: KeyError: 'B-XYZ'")
    assert error_line("run_ner", AssertionError()) == (
        "run_ner: error: AssertionError (--verbosity=1 prints the traceback)")
    # Several lines become one.
    assert error_line("x", ValueError("a.tsv: bad\n  line 3\n")) == "x: error: a.tsv: bad line 3"
    # TensorFlow's errors about files: their message, without the op's context.
    error = tf.errors.DataLossError(None, None, "corrupted record at 12")
    assert error_line("run_pretraining", error) == "run_pretraining: error: corrupted record at 12"


def raised(function):
    try:
        function()
    except tf.errors.OpError as error:
        return error
    raise AssertionError("no tf.errors.OpError")


def test_tensorflows_errors_about_files_are_the_users_and_others_are_bugs(tmp_path):
    (tmp_path / "afile").write_text("not a directory, not records")
    afile = str(tmp_path / "afile")
    # Raised by TensorFlow's file API: its message alone (it was "FailedPreconditionError:
    # ... (--verbosity=1 prints the traceback)").
    assert error_line("x", raised(lambda: tf.io.gfile.makedirs(afile))) == (
        f"x: error: {afile} is not a directory")
    assert error_line("x", raised(lambda: tf.io.TFRecordWriter(str(tmp_path)))) == (
        f"x: error: {tmp_path}; Is a directory")
    # A file's error in graph execution: without the graph's stack and node names.
    read = tf.function(lambda iterator: next(iterator))
    assert error_line("x", raised(lambda: read(iter(tf.data.TFRecordDataset(afile))))) == (
        "x: error: corrupted record at 0 (Is this even a TFRecord file?)")
    # The same classes from ops are a program's mistake: their type, the context and the hint.
    gather = tf.function(lambda index: tf.gather(tf.zeros([3]), index))
    line = error_line("x", raised(lambda: gather(tf.constant(5))))
    assert re.fullmatch(r"x: error: InvalidArgumentError: \{\{function_node (__inference_\S+)\}\} "
                        r"indices = 5 is not in \[0, 3\) \[\[\{\{node GatherV2\}\}\]\] "
                        r"\[Op:\1\] \(--verbosity=1 prints the traceback\)", line), line
    error = tf.errors.FailedPreconditionError(None, None, "Table not initialized.")
    assert error_line("x", error) == (
        "x: error: FailedPreconditionError: Table not initialized. (--verbosity=1 prints the "
        "traceback)")


@pytest.mark.parametrize("user_setting", [None, "0"])
def test_tensorflow_logging_is_set_before_tensorflow_loads_unless_the_user_set_it(user_setting):
    env = {key: value for key, value in os.environ.items() if key != "TF_CPP_MIN_LOG_LEVEL"}
    if user_setting is not None:
        env["TF_CPP_MIN_LOG_LEVEL"] = user_setting
    check = ("import os, sys; import bert_tf.cli.app; "
             "assert 'tensorflow' not in sys.modules; print(os.environ['TF_CPP_MIN_LOG_LEVEL'])")
    result = subprocess.run([sys.executable, "-c", check], capture_output=True, text=True,
                            env=env, cwd=REPO_ROOT, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == (user_setting or "2")


# Imports each tool and defines its flags as `run_tool` does, with `import tensorflow` refused;
# prints each tool that reached it, with the package's line that imported it.
_IMPORT_REFUSING_TENSORFLOW = REFUSING_TENSORFLOW + """
import importlib, os, traceback
from absl import flags

for tool in sys.argv[1:]:
    try:
        importlib.import_module("bert_tf.cli." + tool).define_flags()
    except TensorFlowImported as error:
        frame = [frame for frame in traceback.extract_tb(error.__traceback__)
                 if os.sep + "bert_tf" + os.sep in frame.filename][-1]
        print(f"{tool} ({frame.filename}:{frame.lineno})")
    # Tools define flags of the same name.
    for name in [flag.name for module, module_flags in flags.FLAGS.flags_by_module_dict().items()
                 if module.startswith("bert_tf.cli.") for flag in module_flags]:
        delattr(flags.FLAGS, name)
"""


def test_no_tool_imports_tensorflow_before_its_main_runs():
    # `import tensorflow` takes seconds: --helpshort and a usage error would wait for it.
    result = subprocess.run([sys.executable, "-c", _IMPORT_REFUSING_TENSORFLOW, *TOOLS],
                            capture_output=True, text=True, cwd=REPO_ROOT, timeout=120)
    assert result.returncode == 0, result.stderr
    assert not result.stdout, f"tools importing TensorFlow with their flags:\n{result.stdout}"
