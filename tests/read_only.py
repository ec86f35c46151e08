"""Making a file or directory read-only to the tests' processes, root's included: root writes
through file modes, so as root the path is made immutable (`chattr +i`), otherwise its write
bits are cleared. Either way `os.access(path, os.W_OK)` is then False and a write fails.

Example:
    >>> with read_only(tmp_path / "run" / "eval_results.json"):
    ...     result = run_tool("run_classifier.py", ...)
"""

import contextlib
import os
import stat
import subprocess

import pytest


@contextlib.contextmanager
def read_only(path):
    """Makes `path` read-only inside the block (and writable again after it, so that pytest
    can delete it); skips the test where root cannot make a file immutable (tmpfs, a container
    without CAP_LINUX_IMMUTABLE)."""
    path = os.fspath(path)
    if os.geteuid() != 0:
        mode = stat.S_IMODE(os.stat(path).st_mode)
        os.chmod(path, mode & ~0o222)
        try:
            yield
        finally:
            os.chmod(path, mode)
        return
    made = subprocess.run(["chattr", "+i", path], capture_output=True, text=True)
    if made.returncode:
        pytest.skip(f"root cannot make {path} read-only here: {made.stderr.strip()}")
    try:
        yield
    finally:
        subprocess.run(["chattr", "-i", path], check=True)
