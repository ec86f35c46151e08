"""README's commands run as written.

The walkthrough sets its paths once (`MINILM`, `DATA`, `TEXT`, `WORK`, `STEPS`) with defaults a
newcomer keeps; its test overrides only those variables (20 steps, two books, a temporary
directory) so the same commands go from raw text through vocabulary, records, pre-training,
fine-tuning and export to a served model answering REST and gRPC, then on to "Export and
serving" (exports, models installed by name) and the Python blocks that use what it made. The
other Python blocks run on their own, with `.venv/bin/` read as this Python's directory and
`/tmp/` as a temporary one.
"""

import ast
import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import tempfile

import pytest

from bert_tf.hub import HUB_DIR_ENV
from tests.resources import REPO_ROOT, minilm_dir, shared_data_path

WALKTHROUGH_HEADING = "## Walkthrough"
EXPORT_HEADING = "## Export and serving"
# README's ```python blocks, each by a string only it holds: those that run on their own, the
# serving section's gRPC client, and those that use what the walkthrough and "Export and
# serving" made, with what they print.
STANDALONE = ['from_name("bert_mini")   # or', "restore_weights(", "tokenize_with_offsets(",
              "classifier.fit("]
SERVING_CLIENT = "stub.Classify("
AFTER_THE_WALKTHROUGH = {'hub.KerasLayer("bert_tf_L6_H384_A12"': r"loss: \d",
                         "encoder.mlm": r"loss: \d",
                         "keras.layers.TFSMLayer": r"\[\[\d\.\d+,? +\d\.\d+\]\]"}


def readme_text():
    with open(os.path.join(REPO_ROOT, "README.md"), encoding="utf-8") as readme:
        return readme.read()


def code_blocks(text, language):
    """The fenced code blocks of `text` whose info string is `language` ("" for the shell's),
    in order. Fences pair up line by line: a block of another language is skipped whole, its
    closing fence not read as the opening of the next."""
    blocks, current, opening = [], None, None
    for line in text.splitlines(keepends=True):
        if current is None and line.startswith("```"):
            current, opening = [], line[3:].strip()
        elif current is not None and line.rstrip("\n") == "```":
            if opening == language:
                blocks.append("".join(current))
            current = None
        elif current is not None:
            current.append(line)
    return blocks


def shell_blocks(heading):
    """The shell code blocks of README's section `heading` (its subsections included)."""
    text = readme_text()
    start = text.index(heading)
    end = text.find("\n## ", start + len(heading))
    blocks = code_blocks(text[start:end if end >= 0 else None], "")
    assert blocks, f"README's section {heading!r} has no shell block"
    return blocks


def as_run_here(code, tmp_path):
    """`code` with README's `.venv/bin/` as this Python's directory and `/tmp/` as `tmp_path`."""
    return (code.replace(".venv/bin/", os.path.dirname(sys.executable) + "/")
            .replace("/tmp/", f"{tmp_path}/"))


def run_bash(script, env, timeout):
    """Runs `script` as README's reader would paste it into bash (`-euo pipefail`), from the
    checkout; returns the CompletedProcess (text output). In a session of its own, which is
    killed whole at the end: a server a failing block started in the background would
    otherwise outlive it, holding the output pipes open, and the test would wait for it."""
    with tempfile.TemporaryFile("w+") as stdout, tempfile.TemporaryFile("w+") as stderr:
        process = subprocess.Popen(["bash", "-euo", "pipefail", "-c", script], cwd=REPO_ROOT,
                                   env=env, stdout=stdout, stderr=stderr, text=True,
                                   start_new_session=True)
        try:
            returncode = process.wait(timeout=timeout)
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait()
        stdout.seek(0)
        stderr.seek(0)
        return subprocess.CompletedProcess(process.args, returncode, stdout.read(), stderr.read())


def run_python(code, cwd, env=None):
    run = subprocess.run([sys.executable, "-c", code], cwd=cwd, capture_output=True, text=True,
                         env=env, timeout=900)
    assert run.returncode == 0, run.stderr[-3000:]
    return run.stdout


def test_walkthrough_then_export_and_serving_run_as_written(tmp_path):
    minilm_dir()  # the walkthrough fine-tunes the installed MiniLM
    data = os.path.dirname(os.path.dirname(shared_data_path("SST-2/dev.tsv")))
    books = [shared_data_path("gutenberg/blake-poems.txt"),
             shared_data_path("gutenberg/shakespeare-macbeth.txt")]
    work = tmp_path / "walkthrough"
    environment = dict(os.environ, DATA=data, TEXT=",".join(books), WORK=str(work), STEPS="20",
                       **{HUB_DIR_ENV: str(tmp_path / "hub")})
    # The walkthrough, then "Export and serving"'s first block with its variables.
    script = "".join(shell_blocks(WALKTHROUGH_HEADING)) + shell_blocks(EXPORT_HEADING)[0]
    run = run_bash(script, environment, timeout=2100)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-5000:]

    with open(work / "sst2" / "eval_results.json", encoding="utf-8") as results:
        evaluation = json.load(results)
    assert evaluation["num_examples"] == 872, evaluation
    assert os.path.exists(work / "models" / "pretrained")
    # The REST answer, then the gRPC client's line: two labels and two probability rows.
    rest_answer = re.search(r'^\{"predictions": .*$', run.stdout, re.M)  # one line of JSON
    assert rest_answer, run.stdout
    predictions = json.loads(rest_answer.group(0))
    assert len(predictions["predictions"]) == 2
    assert re.search(r"\[b'(positive|negative)' b'(positive|negative)'\]", run.stdout), run.stdout
    assert "Installed bert_tf_L6_H384_A12 " in run.stdout, run.stdout[-3000:]
    assert "Installed bert_tf_L4_H256 " in run.stdout, run.stdout[-3000:]

    # The serving section's commands: the server, REST calls, its gRPC client, the server's end.
    start, stop = shell_blocks("### Serving: gRPC and REST")
    client = python_block_with(SERVING_CLIENT)
    script = f"{start}{sys.executable} - <<'EOF'\n{client}EOF\n{stop}"
    serving = run_bash(script, environment, timeout=900)
    assert serving.returncode == 0, serving.stdout[-3000:] + serving.stderr[-5000:]
    assert re.search(r'^\{"results": \[\[\["(negative|positive)", 0\.\d+\]', serving.stdout,
                     re.M), serving.stdout
    assert '"signature_def"' in serving.stdout, serving.stdout  # the metadata
    label_score = r"\('(negative|positive)', 0\.\d+\)"
    assert re.search(rf"^\[{label_score}, {label_score}\]$", serving.stdout, re.M), serving.stdout

    # The Python blocks that use those exports and names.
    for marker, printed in AFTER_THE_WALKTHROUGH.items():
        output = run_python(python_block_with(marker), tmp_path, environment)
        assert re.search(printed, output), f"{marker}: {output[-2000:]}"


def python_block_with(marker):
    """README's one ```python block that contains `marker`."""
    found = [block for block in code_blocks(readme_text(), "python") if marker in block]
    assert len(found) == 1, f"{len(found)} python blocks of README contain {marker!r}"
    return found[0]


@pytest.mark.parametrize("marker", STANDALONE)
def test_python_block_runs_as_written(tmp_path, marker):
    minilm_dir()  # blocks load the installed MiniLM
    if marker == "restore_weights(":  # after "Pretrained weights"' conversion, as in README
        convert = as_run_here(shell_blocks("## Pretrained weights")[0], tmp_path)
        run = run_bash(convert, dict(os.environ, MINILM=minilm_dir()), timeout=900)
        assert run.returncode == 0, run.stderr[-3000:]
    run_python(as_run_here(python_block_with(marker), tmp_path), REPO_ROOT)
    if marker == "tokenize_with_offsets(":
        assert os.path.exists(tmp_path / "bert_preprocess" / "saved_model.pb")


def test_every_python_block_is_run_by_a_test():
    for block in code_blocks(readme_text(), "python"):
        markers = [m for m in [*STANDALONE, SERVING_CLIENT, *AFTER_THE_WALKTHROUGH] if m in block]
        assert len(markers) == 1, f"README's python block run by {len(markers)} tests:\n{block}"


def _install_requires():
    """setup.py's install_requires, read without running setup.py."""
    with open(os.path.join(REPO_ROOT, "setup.py"), encoding="utf-8") as f:
        tree = ast.parse(f.read())
    for node in ast.walk(tree):
        if isinstance(node, ast.keyword) and node.arg == "install_requires":
            return [ast.literal_eval(element) for element in node.value.elts]
    raise AssertionError("setup.py has no install_requires")


def _requirement_name(requirement):
    return re.split(r"[<>=~!\[ ;]", requirement.strip('"'), maxsplit=1)[0].lower()


def test_tpu_install_line_installs_every_requirement_but_tensorflow():
    """The TPU line lists bert_tf's requirements itself (so that pip never installs the
    `tensorflow` distribution over tensorflow-tpu): it must follow setup.py."""
    with open(os.path.join(REPO_ROOT, "README.md"), encoding="utf-8") as readme:
        text = readme.read()
    section = text[text.index("### TPU"):]
    line = re.search(r"^```\n(pip install .*)$", section, flags=re.M).group(1)
    with_requirements, without_requirements = line.split(" && ")
    named = {_requirement_name(word) for word in with_requirements.split()[2:]}
    assert "tensorflow-tpu" in named and "tensorflow" not in named, line
    for requirement in _install_requires():
        name = _requirement_name(requirement)
        if name not in ("tensorflow", "tensorflow-text"):
            assert name in named, f"README's TPU line does not install {requirement}"
    assert without_requirements.startswith("pip install --no-deps "), line
    assert '"tensorflow-text==2.20.*"' in without_requirements and without_requirements.endswith(" -e ."), line
