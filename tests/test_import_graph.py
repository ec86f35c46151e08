"""No import cycle in bert_tf: every module imports in a fresh process, and the graph of its
imports (module level or inside functions: a deferred import only hides a cycle) has no cycle.

Example of what fails: `bert_tf.models.x` importing `bert_tf.checkpoints.y` while
`bert_tf.checkpoints.y` imports `bert_tf.models.x`, even if one of them does so in a function.
"""

import ast
import os
import pkgutil
import subprocess
import sys

import bert_tf
from tests.resources import REPO_ROOT

PACKAGE_DIR = os.path.dirname(bert_tf.__file__)


def package_modules():
    """{module name: source path} of every module of bert_tf, packages included."""
    modules = {"bert_tf": os.path.join(PACKAGE_DIR, "__init__.py")}
    for info in pkgutil.walk_packages([PACKAGE_DIR], prefix="bert_tf."):
        path = os.path.join(info.module_finder.path, info.name.rsplit(".", 1)[-1])
        modules[info.name] = os.path.join(path, "__init__.py") if info.ispkg else path + ".py"
    return modules


def imported_modules(path, name, modules):
    """The bert_tf modules the source at `path` (module `name`) imports, anywhere in it."""
    package = name if path.endswith("__init__.py") else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(open(path, encoding="utf-8").read())):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                base = f"{parent}.{base}" if base else parent
            # `from package import module` imports the module; `from module import name`, it.
            found.update(f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base
                         for alias in node.names)
    return {module for module in found if module in modules and module != name}


def import_graph():
    modules = package_modules()
    return {name: imported_modules(path, name, modules) for name, path in modules.items()}


def find_cycle(graph):
    """One cycle of `graph` ({node: successors}) as a list of nodes, or None."""
    state = {}   # node -> "open" while on the current path, "done" after

    def visit(node, path):
        state[node] = "open"
        for successor in sorted(graph[node]):
            if state.get(successor) == "open":
                return path[path.index(successor):] + [successor]
            if successor not in state:
                cycle = visit(successor, path + [successor])
                if cycle:
                    return cycle
        state[node] = "done"
        return None

    for node in sorted(graph):
        if node not in state:
            cycle = visit(node, [node])
            if cycle:
                return cycle
    return None


def test_find_cycle_finds_cycles_and_only_cycles():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": set()}) is None
    assert find_cycle({"a": {"b", "c"}, "b": {"c"}, "c": set()}) is None   # a diamond
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]


def test_imports_are_resolved_to_modules():
    graph = import_graph()
    assert "bert_tf.data.tasks.squad_windows" in graph["bert_tf.data.tasks.squad"]
    assert "bert_tf.cli.fine_tuning_flags" in graph["bert_tf.cli.run_classifier"]
    assert "bert_tf.serving.model_server" in graph["bert_tf.serving"]


def test_the_import_graph_has_no_cycle():
    cycle = find_cycle(import_graph())
    assert cycle is None, "import cycle: " + " -> ".join(cycle)


def test_every_module_imports_in_a_fresh_process():
    modules = sorted(package_modules())
    script = ("import importlib, sys\n"
              "for name in sys.argv[1:]:\n"
              "    importlib.import_module(name)\n")
    result = subprocess.run([sys.executable, "-c", script, *modules], capture_output=True,
                            text=True, cwd=REPO_ROOT, timeout=600,
                            env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"})
    assert result.returncode == 0, result.stderr[-3000:]
