"""tools/serve.py in a subprocess, as a user runs it: started with flags, found through the
line it prints, its output kept for the tests to read.

Example:
    >>> process = ServeProcess("--model_base_path=/models/toy", "--port=0")
    >>> ready = process.ready()           # the ready line's match: name, port, rest
    >>> code, output = process.finish()   # after a SIGTERM
"""

import os
import queue
import re
import socket
import subprocess
import sys
import threading

from tests.resources import REPO_ROOT

SERVE = os.path.join(REPO_ROOT, "tools", "serve.py")
STARTUP_SECONDS = 120
READY_LINE = re.compile(r"Serving model '(?P<name>[^']+)' from .*: gRPC at 127\.0\.0\.1:"
                        r"(?P<port>\d+), (?:REST at http://127\.0\.0\.1:(?P<rest>\d+)|REST off)")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class ServeProcess:
    """tools/serve.py in a subprocess; `ready()` waits (bounded) for its ready line."""

    def __init__(self, *flags):
        self.process = subprocess.Popen(
            [sys.executable, SERVE, *flags], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            text=True, env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"})
        self.lines = queue.Queue()
        self.output = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.process.stdout:
            self.lines.put(line)
        self.lines.put(None)

    def ready(self):
        while True:
            line = self.lines.get(timeout=STARTUP_SECONDS)
            if line is None:
                return None
            self.output.append(line)
            match = READY_LINE.search(line)
            if match:
                return match

    def drain(self, quiet_seconds=2.0):
        """Moves what the process printed into `output`, until it prints nothing for
        `quiet_seconds`."""
        try:
            while (line := self.lines.get(timeout=quiet_seconds)) is not None:
                self.output.append(line)
        except queue.Empty:
            pass

    def finish(self, timeout=60):
        """Waits for the exit; returns (exit code, everything the process printed)."""
        code = self.process.wait(timeout=timeout)
        while (line := self.lines.get(timeout=timeout)) is not None:
            self.output.append(line)
        return code, "".join(self.output)

    def kill(self):
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=30)
