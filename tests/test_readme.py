"""README's walkthrough runs as written: its shell blocks, in order, in one bash process.

The walkthrough sets its paths once (`MINILM`, `DATA`, `TEXT`, `WORK`, `STEPS`) with defaults a
newcomer keeps; this test overrides only those variables (20 steps, two books, a temporary
directory) so the same commands go from raw text through vocabulary, records, pre-training,
fine-tuning and export to a served model answering REST and gRPC.
"""

import ast
import json
import os
import re
import subprocess
import sys

from bert_tf.hub import HUB_DIR_ENV
from tests.hub.tiny_install import install_tiny_model
from tests.resources import REPO_ROOT, minilm_dir, shared_data_path

WALKTHROUGH_HEADING = "## Walkthrough"


def walkthrough_script(readme_text):
    """The shell code blocks of README's walkthrough section, in order, as one script."""
    start = readme_text.index(WALKTHROUGH_HEADING)
    end = readme_text.find("\n## ", start + len(WALKTHROUGH_HEADING))
    section = readme_text[start:end if end >= 0 else None]
    blocks = re.findall(r"^```\n(.*?)^```$", section, flags=re.S | re.M)
    assert blocks, "README's walkthrough has no shell block"
    return "".join(blocks)


def test_walkthrough_runs_as_written(tmp_path):
    minilm_dir()  # the walkthrough fine-tunes the installed MiniLM
    data = os.path.dirname(os.path.dirname(shared_data_path("SST-2/dev.tsv")))
    books = [shared_data_path("gutenberg/blake-poems.txt"),
             shared_data_path("gutenberg/shakespeare-macbeth.txt")]
    with open(os.path.join(REPO_ROOT, "README.md"), encoding="utf-8") as readme:
        script = walkthrough_script(readme.read())
    work = tmp_path / "walkthrough"
    environment = dict(os.environ, DATA=data, TEXT=",".join(books), WORK=str(work), STEPS="20")
    run = subprocess.run(["bash", "-euo", "pipefail", "-c", script], cwd=REPO_ROOT,
                         env=environment, capture_output=True, text=True, timeout=1500)
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


def _python_block_with(marker):
    """README's one ```python block that contains `marker`."""
    with open(os.path.join(REPO_ROOT, "README.md"), encoding="utf-8") as readme:
        blocks = re.findall(r"^```python\n(.*?)^```$", readme.read(), flags=re.S | re.M)
    found = [block for block in blocks if marker in block]
    assert len(found) == 1, f"{len(found)} python blocks of README contain {marker!r}"
    return found[0]


def test_the_masked_lm_block_runs_as_written(tmp_path_factory, tmp_path):
    """The `encoder.mlm` block is whole (its own imports) and loads a name README installs: here
    a tiny model with an MLM head installed under that name, the block run as a script."""
    block = _python_block_with("encoder.mlm")
    name = re.search(r'hub\.load\("(\w+)"\)', block).group(1)
    directory = install_tiny_model(tmp_path_factory, name)[0]
    run = subprocess.run([sys.executable, "-c", block], cwd=tmp_path, capture_output=True,
                         text=True, env=dict(os.environ, **{HUB_DIR_ENV: directory}), timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]
    assert re.search(r"loss: \d", run.stdout), run.stdout[-2000:]


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
