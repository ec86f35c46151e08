"""Running a tool as a user does: a fresh process with this checkout's bert_tf and none of
the logging settings the other tool tests pass (tests/tools/tool_runs.py sets
TF_CPP_MIN_LOG_LEVEL), so that what the user would see is what the test sees.

Example:
    >>> result = run_as_user("build_vocab.py", "--input_file=a.txt", "--output_file=v.txt")
    >>> assert result.stderr == ""
"""

import os
import subprocess

from tests.resources import REPO_ROOT
from tests.tools.tool_runs import tool_command


def run_as_user(tool, *flags, timeout=900):
    """Runs `tools/<tool>` with `flags`; returns the CompletedProcess (text output)."""
    env = {name: value for name, value in os.environ.items() if name != "TF_CPP_MIN_LOG_LEVEL"}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [REPO_ROOT, env.get("PYTHONPATH")]))
    return subprocess.run(tool_command(tool, *flags), capture_output=True, text=True, env=env,
                          timeout=timeout)
