"""README's walkthrough runs as written: its shell blocks, in order, in one bash process.

The walkthrough sets its paths once (`MINILM`, `DATA`, `TEXT`, `WORK`, `STEPS`) with defaults a
newcomer keeps; this test overrides only those variables (20 steps, two books, a temporary
directory) so the same commands go from raw text through vocabulary, records, pre-training,
fine-tuning and export to a served model answering REST and gRPC.
"""

import json
import os
import re
import subprocess

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
    assert evaluation["eval_examples"] == 872, evaluation
    assert os.path.exists(work / "models" / "pretrained")
    # The REST answer, then the gRPC client's line: two labels and two probability rows.
    predictions = json.loads(re.search(r'^\{"predictions".*$', run.stdout, re.M).group(0))
    assert len(predictions["predictions"]) == 2
    assert re.search(r"\[b'(positive|negative)' b'(positive|negative)'\]", run.stdout), run.stdout
