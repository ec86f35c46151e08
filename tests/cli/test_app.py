"""The tools' entry point (`bert_tf.cli.app.run_tool`) as a user meets it, through the
`tools/<tool>.py` scripts in fresh processes: help listing each tool's own flags (the shared
ones included), errors in one line, usage errors without the flag list, TensorFlow's logging
level set before TensorFlow loads."""

import ast
import os
import subprocess
import sys

import pytest
import tensorflow as tf

from bert_tf.cli.app import error_line
from tests.resources import REPO_ROOT
from tests.tools.tool_runs import run_tool

TOOLS = ["build_vocab", "convert_checkpoint", "create_pretraining_data", "encoder_demo",
         "export_savedmodel", "install_hub_model", "run_classifier", "run_multiple_choice",
         "run_ner", "run_pretraining", "run_squad", "serve"]
FINE_TUNING_TOOLS = {"run_classifier", "run_multiple_choice", "run_ner", "run_squad"}
CLI_DIR = os.path.join(REPO_ROOT, "bert_tf", "cli")


def defined_flags(path, function=None):
    """The names of the flags `flags.DEFINE_*(...)` calls define in the file at `path` (only in
    `function`, if given), read from its source."""
    tree = ast.parse(open(path, encoding="utf-8").read())
    if function:
        tree = next(node for node in ast.walk(tree)
                    if isinstance(node, ast.FunctionDef) and node.name == function)
    return {node.args[0].value for node in ast.walk(tree)
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
            and node.func.attr.startswith("DEFINE_")}


def expected_flags(tool):
    names = defined_flags(os.path.join(CLI_DIR, f"{tool}.py"))
    if tool in FINE_TUNING_TOOLS:
        shared = os.path.join(CLI_DIR, "fine_tuning_flags.py")
        names |= defined_flags(shared, "define_fine_tuning_flags")
        if tool in ("run_ner", "run_multiple_choice"):
            names |= defined_flags(shared, "define_data_file_flags")
    return names


def listed_flags(help_text):
    """The flags a help text lists: lines `  --name: ...` or `  --[no]name: ...`."""
    return {line.split(":")[0].strip().removeprefix("--").removeprefix("[no]")
            for line in help_text.splitlines() if line.startswith("  --")}


@pytest.mark.parametrize("tool", TOOLS)
def test_helpshort_lists_the_tools_own_flags_and_the_shared_ones(tool):
    result = run_tool(f"{tool}.py", "--helpshort")
    assert result.returncode == 1  # absl's help exits with 1
    expected = expected_flags(tool)
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
    assert listed_flags(result.stdout) == expected_flags(tool)
    if tool == "run_classifier":   # example commands keep their continuation lines
        assert "    bert-tf-run-classifier --task_name=SST-2 --data_dir=glue/SST-2 \\\n" in (
            result.stdout)


def test_an_error_is_one_line_and_verbosity_adds_the_traceback(tmp_path):
    flags = [f"--input_file={tmp_path}/none-*.txt", f"--output_file={tmp_path}/vocab.txt"]
    line = f"build_vocab: error: --input_file: no file matches '{tmp_path}/none-*.txt'"
    result = run_tool("build_vocab.py", *flags)
    assert result.returncode == 1
    assert result.stderr.strip().splitlines()[-1] == line
    assert "Traceback" not in result.stderr
    verbose = run_tool("build_vocab.py", *flags, "--verbosity=1")
    assert verbose.returncode == 1
    assert verbose.stderr.strip().splitlines()[-1] == line
    assert "Traceback (most recent call last)" in verbose.stderr
    assert 'raise FileNotFoundError(f"--input_file: no file matches' in verbose.stderr


def test_a_usage_error_is_one_line_and_a_pointer_to_help():
    result = run_tool("run_classifier.py", "--task_name=SST-2")
    assert result.returncode == 1
    assert result.stderr.strip().splitlines()[-2:] == [
        "run_classifier: error: nothing to do: give --do_train, --do_eval and/or --do_predict; "
        "--output_dir is required; --init_checkpoint (pre-trained weights) or at least "
        "--bert_config_file is required; --vocab_file is required without --init_checkpoint",
        "Pass --helpshort or --helpfull to see help on flags."]
    assert not listed_flags(result.stderr) and "flags:" not in result.stderr


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
    # TensorFlow's errors: their message, without the op's context.
    error = tf.errors.DataLossError(None, None, "corrupted record at 12")
    assert error_line("run_pretraining", error) == (
        "run_pretraining: error: DataLossError: corrupted record at 12 (--verbosity=1 prints "
        "the traceback)")


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
