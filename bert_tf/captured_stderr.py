"""`CapturedStderr`: what a block writes to file descriptor 2, kept back for the caller to show
or not. TensorFlow's C++ code logs to the descriptor directly, past Python's `sys.stderr`, so
only the descriptor itself keeps its lines off a console.

Example:
    >>> captured = CapturedStderr()
    >>> with captured:
    ...     import tensorflow                # its start-up lines go to a temporary file
    >>> sys.stderr.write(captured.text)      # all of them, or those the caller chooses
"""

import os
import sys
import tempfile


class CapturedStderr:
    """File descriptor 2 (and Python's sys.stderr with it) into a temporary file; its `text`
    once the block ends."""

    def __enter__(self):
        sys.stderr.flush()
        self.file = tempfile.TemporaryFile()
        self.saved = os.dup(2)
        os.dup2(self.file.fileno(), 2)
        return self

    def __exit__(self, *exc_info):
        try:
            sys.stderr.flush()
        except OSError:
            # The temporary file cannot grow (a full disk, a file-size limit): what did not fit
            # is lost, but descriptor 2 must come back, or the tool's error line would go to
            # the file too and the console would show nothing.
            pass
        finally:
            os.dup2(self.saved, 2)
            os.close(self.saved)
            self.file.seek(0)
            self.text = self.file.read().decode("utf-8", "replace")
            self.file.close()
