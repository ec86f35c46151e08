"""A regular (non-editable) install of the checkout, used from another directory: the shipped
configs resolve by name and every console script `bert-tf-<tool>` runs and lists its flags.

The install is pip's wheel build of a copy of the checkout (no build files land in the
checkout), into a target directory without dependencies (TensorFlow is not downloaded again);
the checks run with that directory first on PYTHONPATH and check that the bert_tf they import
is the installed one.
"""

import json
import os
import shutil
import subprocess
import sys

import pytest

from tests.cli.tool_flags import TOOLS, listed_flags, tool_flags
from tests.resources import REPO_ROOT

CONSOLE_SCRIPTS = {f"bert-tf-{tool.replace('_', '-')}": tool for tool in TOOLS}
# What a wheel is built from; everything else in a checkout (tests, benchmarks, virtual
# environments, git) stays out of the copy.
NOT_COPIED = shutil.ignore_patterns(".git", ".venv", ".ci", "bench", "tests", "docs", "build",
                                    "*.egg-info", "__pycache__")


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """`(target, env)`: the directory pip installed into, and the environment that uses it."""
    source = tmp_path_factory.mktemp("checkout") / "bert_tf_source"
    shutil.copytree(REPO_ROOT, source, ignore=NOT_COPIED)
    target = tmp_path_factory.mktemp("installed")
    result = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--no-deps", "--no-build-isolation",
         "--no-index", "--quiet", "--target", str(target), str(source)],
        capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stdout + result.stderr
    env = {**os.environ, "PYTHONPATH": str(target), "TF_CPP_MIN_LOG_LEVEL": "2"}
    return target, env


def run_installed(installed, *command):
    target, env = installed
    return subprocess.run(command, capture_output=True, text=True, env=env,
                          cwd=str(target.parent), timeout=300)


def python_output(installed, code):
    """What `code` prints, run by a fresh Python that imports the installed package."""
    result = run_installed(installed, sys.executable, "-c", code)
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout


def test_official_configs_resolve_by_name_from_the_installed_package(installed):
    target, _ = installed
    shipped = sorted(name[:-5] for name in os.listdir(os.path.join(REPO_ROOT, "official_configs")))
    check = (
        "import json, os, sys\n"
        "import bert_tf\n"
        "from bert_tf.config import BertConfig, official_config_dir\n"
        "names = sorted(n[:-5] for n in os.listdir(official_config_dir()))\n"
        "print(json.dumps({'package': bert_tf.__file__, 'configs': official_config_dir(),\n"
        "                  'names': names,\n"
        "                  'sizes': {n: BertConfig.from_name(n).hidden_size for n in names}}))\n")
    found = json.loads(python_output(installed, check))
    assert found["package"] == str(target / "bert_tf" / "__init__.py")
    assert found["configs"] == str(target / "bert_tf" / "official_configs")
    assert found["names"] == shipped and len(shipped) >= 30
    for name in shipped:
        with open(os.path.join(REPO_ROOT, "official_configs", f"{name}.json")) as f:
            assert found["sizes"][name] == json.load(f)["hidden_size"]


@pytest.mark.parametrize("script", sorted(CONSOLE_SCRIPTS))
def test_console_script_helpshort_lists_its_flags(installed, script):
    target, _ = installed
    result = run_installed(installed, str(target / "bin" / script), "--helpshort")
    assert result.returncode == 0, result.stderr[-3000:]
    assert listed_flags(result.stdout) == tool_flags()[CONSOLE_SCRIPTS[script]]
    if script == "bert-tf-run-pretraining":
        assert "  --strategy: " in result.stdout
    if script == "bert-tf-run-classifier":
        assert "  --init_checkpoint: " in result.stdout


def test_the_installed_tools_are_the_installed_code(installed):
    # A tool's error line comes from the installed bert_tf.cli, from any directory.
    target, _ = installed
    result = run_installed(installed, str(target / "bin" / "bert-tf-build-vocab"),
                           "--input_file=missing-*.txt", "--output_file=vocab.txt",
                           "--verbosity=1")
    assert result.returncode == 1
    assert result.stderr.strip().splitlines()[-1] == (
        "build_vocab: error: --input_file: 'missing-*.txt' matches no file")
    assert f'File "{target / "bert_tf" / "cli" / "build_vocab.py"}"' in result.stderr


def test_the_installed_tokenizer_loads_its_shipped_code_point_tables(installed):
    # codepoint_tables.npz is package data: without it every tokenizer fails to start.
    target, _ = installed
    check = ("from bert_tf.text import codepoint_table\n"
             "from bert_tf.text.basic_tokenizer import BasicTokenizer\n"
             "print(codepoint_table.TABLES_FILE)\n"
             "words = BasicTokenizer(lower_case=True).split(['Héllo, Wörld!'])\n"
             "print([w.decode() for w in words.to_list()[0]])\n")
    path, words = python_output(installed, check).strip().splitlines()[-2:]
    assert path == str(target / "bert_tf" / "text" / "codepoint_tables.npz")
    assert words == str(["hello", ",", "world", "!"])


def test_the_installed_package_registers_its_keras_classes_through_its_own_hook(installed):
    # bert_tf_post_import is a top-level module of its own: without it `import bert_tf` fails.
    target, _ = installed
    check = ("import sys\n"
             "import bert_tf, bert_tf_post_import\n"
             "print(bert_tf_post_import.__file__)\n"
             "print('keras' in sys.modules, bert_tf_post_import._waiting[-1][0])\n")
    assert python_output(installed, check).splitlines()[-2:] == [
        str(target / "bert_tf_post_import.py"), "False keras"]
