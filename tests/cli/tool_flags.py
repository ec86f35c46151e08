"""The flags each tool defines, as its `define_flags()` defines them (shared groups included),
found in one fresh process; what the tools' help must list.

Example:
    >>> "init_checkpoint" in tool_flags()["run_classifier"]
    True
"""

import functools
import json
import subprocess
import sys

from tests.resources import REPO_ROOT

TOOLS = ["build_vocab", "convert_checkpoint", "create_pretraining_data", "encoder_demo",
         "export_savedmodel", "install_hub_model", "run_classifier", "run_multiple_choice",
         "run_ner", "run_pretraining", "run_squad", "serve"]

# Defines each tool's flags in turn, collects those of bert_tf.cli modules, and deletes them
# before the next tool (tools define flags of the same name).
_COLLECT = """
import importlib, json, sys
from absl import flags
found = {}
for tool in sys.argv[1:]:
    importlib.import_module("bert_tf.cli." + tool).define_flags()
    names = sorted(flag.name for module, module_flags in flags.FLAGS.flags_by_module_dict().items()
                   if module.startswith("bert_tf.cli.") for flag in module_flags)
    for name in names:
        delattr(flags.FLAGS, name)
    found[tool] = names
print(json.dumps(found))
"""


@functools.lru_cache(maxsize=None)
def tool_flags():
    """{tool: sorted flag names}."""
    result = subprocess.run([sys.executable, "-c", _COLLECT, *TOOLS], capture_output=True,
                            text=True, cwd=REPO_ROOT, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


def listed_flags(help_text):
    """The flags a help text lists: lines `  --name: ...` or `  --[no]name: ...`."""
    return sorted({line.split(":")[0].strip().removeprefix("--").removeprefix("[no]")
                   for line in help_text.splitlines() if line.startswith("  --")})
