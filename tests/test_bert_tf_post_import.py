"""`bert_tf_post_import`: a callback runs right after its module is imported, or after the
import of a module of its `wait_for` package that imported it; the finder leaves no trace.
Checked with throwaway modules written to a directory put on `sys.path`."""

import importlib.util
import sys

import pytest

import bert_tf_post_import
from bert_tf_post_import import _PostImportFinder, call_after_import


@pytest.fixture
def make_modules(tmp_path, monkeypatch):
    """Writes `{module name: source}` under tmp_path, importable for the test only."""
    monkeypatch.syspath_prepend(str(tmp_path))
    written = []

    def make(sources):
        for name, source in sources.items():
            path = tmp_path.joinpath(*name.split("."))
            if any(other.startswith(name + ".") for other in sources):  # a package
                path.mkdir()
                path = path / "__init__.py"
            else:
                path = path.with_suffix(".py")
            path.write_text(source)
            written.append(name)

    yield make
    importlib.invalidate_caches()
    for name in written:
        sys.modules.pop(name, None)
    # No callback of a test is left waiting (the hub name hook's may be: it is not ours).
    assert not [entry for entry in bert_tf_post_import._waiting if entry[0] in written]


def finders():
    return sum(isinstance(finder, _PostImportFinder) for finder in sys.meta_path)


def test_the_callback_runs_right_after_the_import_and_the_module_keeps_its_loader(make_modules):
    make_modules({"post_import_a": "VALUE = 42\n"})
    seen = []
    call_after_import("post_import_a", lambda: seen.append(sys.modules["post_import_a"].VALUE))
    assert seen == [] and finders() == 1
    # A look-up that imports nothing leaves the hook in place for the import that follows.
    assert importlib.util.find_spec("post_import_a") is not None
    assert seen == [] and "post_import_a" not in sys.modules

    import post_import_a
    assert seen == [42]
    assert type(post_import_a.__loader__).__name__ == "SourceFileLoader"
    assert post_import_a.__spec__.loader is post_import_a.__loader__


def test_a_module_imported_already_calls_back_at_once(make_modules):
    make_modules({"post_import_b": ""})
    import post_import_b  # noqa: F401
    seen = []
    call_after_import("post_import_b", lambda: seen.append("called"))
    assert seen == ["called"]


def test_two_callbacks_of_one_module_both_run_in_order(make_modules):
    make_modules({"post_import_c": ""})
    seen = []
    call_after_import("post_import_c", lambda: seen.append(1))
    call_after_import("post_import_c", lambda: seen.append(2))
    import post_import_c  # noqa: F401
    assert seen == [1, 2]


def test_a_callback_waits_for_the_import_of_its_package_that_imported_the_module(make_modules):
    # post_pkg.user imports the module first, then defines NAME: a callback importing NAME
    # right after the module would hit a half-run post_pkg.user (ImportError).
    make_modules({"post_import_dep": "",
                  "post_pkg": "",
                  "post_pkg.user": "import post_import_dep\nNAME = 'defined'\n",
                  "post_pkg.registry": "from post_pkg.user import NAME\n"})
    seen = []

    def register():
        from post_pkg.registry import NAME
        seen.append(NAME)

    import post_pkg  # noqa: F401  (as bert_tf's own __init__ asks for the hook)
    call_after_import("post_import_dep", register, wait_for="post_pkg")
    import post_pkg.user  # noqa: F401
    assert seen == ["defined"]


def test_without_waiting_the_same_imports_fail(make_modules):
    # The control experiment of the test above.
    make_modules({"post_import_dep2": "",
                  "post_pkg2": "",
                  "post_pkg2.user": "import post_import_dep2\nNAME = 'defined'\n",
                  "post_pkg2.registry": "from post_pkg2.user import NAME\n"})
    call_after_import("post_import_dep2", lambda: importlib.import_module("post_pkg2.registry"))
    with pytest.raises(ImportError, match="partially initialized module 'post_pkg2.user'"):
        import post_pkg2.user  # noqa: F401
