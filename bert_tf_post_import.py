"""Code run right after a module is imported, without importing it (a post-import hook).

`call_after_import(name, callback)` calls `callback()` now if the module `name` is imported,
else right after the import that runs it: a finder first on `sys.meta_path` answers for that
module with its real spec (from the finders after it), whose loader runs the module, then the
callbacks. The finder leaves `sys.meta_path` once no callback waits, and stays until then, so a
mere `importlib.util.find_spec(name)` probe does not use it up.

Two users: `bert_tf_hub_names` registers its resolver when tensorflow_hub is imported, from a
`.pth` line run at interpreter start-up, and `bert_tf.keras_objects` registers the package's
Keras classes when Keras is imported after `import bert_tf`. So this module imports only the
standard library and lives outside the `bert_tf` package, whose import sets KERAS_BACKEND.

Example:
    >>> call_after_import("keras", lambda: print("Keras is here"))
    >>> import keras
    Keras is here
"""

import sys

# (module name, callback, package to wait for or None), not called yet, in the order given.
_waiting = []
# The names of the modules this module's loaders are running.
_running = []


def call_after_import(name, callback, wait_for=None):
    """Calls `callback()` once the module `name` is imported: now if it is, else right after
    the import that runs it (an error it raises fails that import).

    `wait_for`, a package: when `name` is imported by one of its modules, that module is half
    run (the callback could not import what it defines yet), so the callback waits until no
    import of that package's modules is running. The wait covers modules imported from this
    call on, not one running now.

    Example:
        >>> call_after_import("keras", register_classes, wait_for="bert_tf")
    """
    _waiting.append((name, callback, wait_for))
    _call_ready()
    if _waiting and not any(isinstance(f, _PostImportFinder) for f in sys.meta_path):
        sys.meta_path.insert(0, _PostImportFinder())


def _in_package(name, package):
    return package is not None and (name == package or name.startswith(package + "."))


def _call_ready():
    """Calls the callbacks whose module is imported and whose package no longer imports."""
    for entry in list(_waiting):
        name, callback, package = entry
        ready = (name in sys.modules and name not in _running
                 and not any(_in_package(running, package) for running in _running))
        if ready and entry in _waiting:  # a callback called before may have called it
            _waiting.remove(entry)
            callback()
    if not _waiting:
        sys.meta_path[:] = [f for f in sys.meta_path if not isinstance(f, _PostImportFinder)]


class _CallAfterExec:
    """Wraps a module's loader: runs the module, then the callbacks that became ready."""

    def __init__(self, loader):
        self._loader = loader

    def create_module(self, spec):
        return self._loader.create_module(spec)

    def exec_module(self, module):
        # The module keeps its own loader, as if imported without this one.
        module.__loader__ = module.__spec__.loader = self._loader
        _running.append(module.__name__)
        try:
            self._loader.exec_module(module)
        finally:
            _running.remove(module.__name__)  # not pop(): another thread may import too
        _call_ready()

    def __getattr__(self, name):
        return getattr(self._loader, name)


class _PostImportFinder:
    """A `sys.meta_path` finder answering only for the modules a callback waits for (or for the
    imports of its `wait_for` package), with their real spec and a `_CallAfterExec` loader."""

    def __init__(self):
        self._searching = set()  # names whose real spec the finders after this one give

    def find_spec(self, fullname, path=None, target=None):
        if fullname in self._searching or not any(
                fullname == name or _in_package(fullname, package)
                for name, _, package in _waiting):
            return None
        import importlib.util
        self._searching.add(fullname)
        try:
            spec = importlib.util.find_spec(fullname)
        finally:
            self._searching.discard(fullname)
        if spec is not None and spec.loader is not None:
            spec.loader = _CallAfterExec(spec.loader)
        return spec
