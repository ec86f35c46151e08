"""CapturedStderr in a fresh process, where sys.stderr writes to file descriptor 2 (pytest
replaces it in its own)."""

import subprocess
import sys

from tests.resources import REPO_ROOT

# Python's lines (buffered in sys.stderr) and C++'s (written to descriptor 2), interleaved.
PROGRAM = """
import os, sys
from bert_tf.captured_stderr import CapturedStderr
print("before", file=sys.stderr, end=" ")
with CapturedStderr() as captured:
    print("a Python line", file=sys.stderr)
    os.write(2, b"E0000 a C++ log line\\n")
    print("the last, \\xe9", file=sys.stderr)
print("after", file=sys.stderr)
print(repr(captured.text))
"""


def test_what_a_block_writes_to_stderr_is_kept_back_in_order():
    result = subprocess.run([sys.executable, "-c", PROGRAM], capture_output=True, text=True,
                            cwd=REPO_ROOT, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stderr == "before after\n"
    assert result.stdout == repr("a Python line\nE0000 a C++ log line\nthe last, \xe9\n") + "\n"


# A temporary file that cannot grow past 16 bytes (as on a full disk).
FULL_DISK_PROGRAM = """
import resource, signal, sys
from bert_tf.captured_stderr import CapturedStderr
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # writes past the limit fail with EFBIG instead
resource.setrlimit(resource.RLIMIT_FSIZE, (16, 16))
try:
    with CapturedStderr():
        print("a line longer than the file may grow", file=sys.stderr)
except OSError as error:
    print(f"tool: error: {error}", file=sys.stderr)
"""


def test_stderr_comes_back_when_the_temporary_file_cannot_grow():
    result = subprocess.run([sys.executable, "-c", FULL_DISK_PROGRAM], capture_output=True,
                            text=True, cwd=REPO_ROOT, timeout=60)
    assert (result.returncode, result.stderr) == (0, "tool: error: [Errno 27] File too large\n")
