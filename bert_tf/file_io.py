"""Files by path, local or remote: a path with a scheme (`gs://bucket/dir`, `ram://...`, any
filesystem TensorFlow registers) goes through `tf.io.gfile`, which `open` and `os` cannot
reach; a local path keeps Python's own calls, so that its errors stay `OSError`s naming the
file (tf.io.gfile raises `tf.errors.NotFoundError`, which is not one).

Example:
    >>> makedirs("gs://my-bucket/pretrain")
    >>> with open_file("gs://my-bucket/pretrain/bert_config.json", "w") as f:
    ...     f.write(config.to_json_string())
"""

import contextlib
import errno
import fnmatch
import os
import shutil
import tempfile


def is_remote(path):
    """Whether `path` names a file of a filesystem other than the local one (it has a scheme)."""
    return "://" in os.fspath(path)


def file_keys(path):
    """Keys of the file `path`, however the path is written: its absolute form without `..`
    or symbolic links and, if it exists locally, its device and inode (hard links); a remote
    path is its own key. Paths that share a key name one file: writing the one destroys the
    other.

    Example:
        >>> bool(file_keys("corpus.txt") & file_keys("./data/../corpus.txt"))
        True
    """
    if is_remote(path):
        return {os.fspath(path)}
    try:
        status = os.stat(path)
    except OSError:  # not there (yet)
        return {os.path.realpath(path)}
    return {os.path.realpath(path), (status.st_dev, status.st_ino)}


def output_file_problems(output_files, input_files=()):
    """What would make writing `output_files` destroy a file or fail, one phrase each: an
    output file that is one of `input_files`, that is named twice, that is a directory, or
    whose directory cannot be made because a file is in its place.

    Example:
        >>> output_file_problems(["corpus.txt", "./out.txt", "out.txt"], ["corpus.txt"])
        ['output file corpus.txt is also an input file', 'output file out.txt is named twice']
    """
    inputs = set().union(*map(file_keys, input_files))
    problems, outputs = [], set()
    for path in output_files:
        keys = file_keys(path)
        if is_directory(path):
            problems.append(f"output file {path} is a directory")
        elif blocking := file_in_the_way(os.path.dirname(path)):
            problems.append(f"output file {path} cannot be written: {blocking} is a file, not "
                            f"a directory")
        elif keys & inputs:
            problems.append(f"output file {path} is also an input file")
        elif keys & outputs:
            problems.append(f"output file {path} is named twice")
        outputs |= keys
    return problems


def is_directory(path):
    """Whether `path` is a directory."""
    if is_remote(path):
        import tensorflow as tf

        return tf.io.gfile.isdir(path)
    return os.path.isdir(path)


def file_in_the_way(directory):
    """The file that keeps the local `directory` from being one to write into: `directory`
    itself, or its nearest existing ancestor, when that is not a directory; None if nothing is
    in the way (missing directories are made on the way) or the path is remote (an object there
    does not keep one of the same name from being a directory too).

    Example:
        >>> file_in_the_way("notes.txt/run1")   # notes.txt is a file
        'notes.txt'
    """
    if is_remote(directory):
        return None
    existing = _nearest_existing(directory)
    return None if not existing or os.path.isdir(existing) else existing


def _nearest_existing(path):
    """`path`, or its nearest ancestor that exists; "" when none of a relative path does."""
    while path and not os.path.exists(path):
        path = os.path.dirname(path)
    return path


def unwritable_path(directory, names=()):
    """The first local path that a job writing into `directory` cannot write: the directory
    (or, when it is missing, its nearest existing ancestor, where it would be made), then each
    entry of it whose name matches one of `names` (shell patterns, e.g. "predictions*.tsv"),
    which the job writes again in place; None when it can write them all, or the path is
    remote (its filesystem answers when written). Read-only files, directories and file
    systems, root's immutable files (`chattr +i`) and directories where nothing can be made
    (/proc, /sys: their permission bits let root write) all count.

    Example:
        >>> unwritable_path("run", ["eval_results.json"])   # after chmod a-w run/eval_results.json
        'run/eval_results.json'
    """
    if is_remote(directory):
        return None
    existing = _nearest_existing(directory) or os.curdir
    if not _can_make_entries(existing):
        return existing
    if existing != directory:
        return None  # nothing in it yet
    for name in sorted(os.listdir(directory)):
        path = os.path.join(directory, name)
        if (any(fnmatch.fnmatchcase(name, pattern) for pattern in names)
                and not os.access(path, os.W_OK | (os.X_OK if os.path.isdir(path) else 0))):
            return path
    return None


def _can_make_entries(directory):
    """Whether a directory can be made in `directory`, tried and removed at once: read-only
    modes, file systems and immutable directories refuse it, and so do pseudo file systems,
    whose permission bits let root write (`os.access` says yes to /proc; making /proc/foo says
    "No such file or directory")."""
    try:
        os.rmdir(tempfile.mkdtemp(prefix=".bert_tf-probe-", dir=directory))
    except OSError:
        return False
    return True


def file_kind(path):
    """What `path` names: "directory", "file" (a regular file), "other" (a device, a pipe:
    /dev/null reads as empty, a pipe blocks its reader) or None (nothing). A remote filesystem
    has only directories and files.

    Example:
        >>> [file_kind(path) for path in ("/tmp", "/etc/hostname", "/dev/null", "/none")]
        ['directory', 'file', 'other', None]
    """
    if is_directory(path):
        return "directory"
    if is_remote(path):
        import tensorflow as tf

        return "file" if tf.io.gfile.exists(path) else None
    if os.path.isfile(path):
        return "file"
    return "other" if os.path.exists(path) else None


def open_file(path, mode="r"):
    """`path` opened in `mode` ("r", "w", "rb", "wb"; text is UTF-8). A local file written
    ("w", "wb") is a new file that replaces `path` when it is closed, and goes when the `with`
    block writing it raises (`replacing`): a config or a result is whole or as it was, never
    cut short by a full disk or Ctrl-C."""
    if is_remote(path):
        import tensorflow as tf  # only then: reading a local config does not load TensorFlow

        # gs:// replaces an object on write, but TensorFlow's ram:// appends to an existing
        # file (writing "short" over "long content" read back "long contentshort", TF 2.21).
        if "w" in mode and tf.io.gfile.exists(path):
            tf.io.gfile.remove(path)
        return tf.io.gfile.GFile(path, mode)
    if "w" in mode:
        return _ReplacingFile(path, mode)
    return open(path, mode, encoding=None if "b" in mode else "utf-8")


class _Replacement:
    """The file written in place of the local `path` (see `replacing`): `temporary` beside
    it, or `path` itself when that is remote or no regular file (/dev/stdout is written as it
    is)."""

    def __init__(self, path):
        self.path = path
        self.target = os.path.realpath(path)  # through a symbolic link, which keeps naming it
        exists = os.path.exists(self.target)
        self.in_place = is_remote(path) or (exists and not os.path.isfile(self.target))
        if not self.in_place and exists and not os.access(self.target, os.W_OK):
            # A read-only file stays (a rename would replace it), as `open(path, "w")` says.
            raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), path)
        # Named for what it is: a `kill -9` leaves it.
        self.temporary = path if self.in_place else f"{self.target}.incomplete"

    def commit(self):
        if not self.in_place:
            if os.path.exists(self.target):
                shutil.copymode(self.target, self.temporary)
            os.replace(self.temporary, self.target)

    def discard(self, error):
        """Deletes the new file after `error`; an OSError naming no file, or the temporary
        one, names `path` instead (a write's "[Errno 28] No space left on device")."""
        if not self.in_place:
            with contextlib.suppress(OSError):
                os.remove(self.temporary)
        if isinstance(error, OSError) and error.filename in (None, self.temporary):
            error.filename = self.path


@contextlib.contextmanager
def replacing(path):
    """A path to write the new content of the file `path` to, for writers that take a path:
    a temporary file beside it, renamed to `path` when the block ends, and deleted when it
    raises (Ctrl-C, a full disk). `path` is never left half written as if complete, and a file
    there before stays whole until the new one is. A remote path (gs://...) is itself: its
    object appears whole when its writer closes.

    Example:
        >>> with replacing("run/test_predictions.txt") as temporary:
        ...     write_conll_predictions(temporary, sentences, tags)
    """
    replacement = _Replacement(path)
    try:
        yield replacement.temporary
        replacement.commit()
    except BaseException as error:
        replacement.discard(error)
        raise


class _ReplacingFile:
    """`open_file`'s local file opened for writing: the file of `replacing`, which replaces
    `path` when closed, unless the `with` block writing it raised."""

    def __init__(self, path, mode):
        self._replacement = _Replacement(path)
        try:
            self._file = open(self._replacement.temporary, mode,
                              encoding=None if "b" in mode else "utf-8")
        except OSError as error:
            self._replacement.discard(error)
            raise

    def __getattr__(self, name):
        return getattr(self._file, name)

    def __enter__(self):
        return self

    def __exit__(self, error_type, error, traceback):
        self._close(error)

    def close(self):
        self._close(None)

    def _close(self, error):
        if self._file.closed:
            return
        try:
            self._file.close()  # may fail too: the last write is flushed here
            if error is None:
                self._replacement.commit()
        except BaseException as close_error:
            self._replacement.discard(close_error)
            raise
        if error is not None:
            self._replacement.discard(error)


def makedirs(path):
    """Creates the directory `path` and its parents if missing."""
    if is_remote(path):
        import tensorflow as tf

        tf.io.gfile.makedirs(path)
    else:
        os.makedirs(path, exist_ok=True)


def copy_file(source, target):
    """Copies the file `source` to `target` (overwritten), either of them local or remote."""
    with open_file(source, "rb") as reader, open_file(target, "wb") as writer:
        writer.write(reader.read())


def remove_leftover_directories(directory, is_leftover):
    """Deletes the subdirectories of the local `directory` whose path `is_leftover` accepts
    (what an interrupted writer left there and nothing will finish); returns their paths. A
    missing `directory` has none.

    Example:
        >>> remove_leftover_directories("/runs/sst2", lambda path: path.endswith("_temp"))
        ['/runs/sst2/ckpt-200_temp']
    """
    if not os.path.isdir(directory):
        return []
    removed = []
    for name in sorted(os.listdir(directory)):
        path = os.path.join(directory, name)
        if os.path.isdir(path) and is_leftover(path):
            shutil.rmtree(path, ignore_errors=True)
            removed.append(path)
    return removed


def rename_directory(source, target):
    """Renames the directory `source` to `target` (which must not exist): in one step on a
    local disk; file by file on a remote filesystem, as gs:// itself does it (it has no
    directories), because TensorFlow's ram:// renames only the directory's own entry (the files
    stayed under `source`, TF 2.21)."""
    import tensorflow as tf

    if not is_remote(source):
        tf.io.gfile.rename(source, target)
        return
    for directory, _, files in tf.io.gfile.walk(source):
        moved_directory = target + directory[len(source):]
        tf.io.gfile.makedirs(moved_directory)
        for name in files:
            tf.io.gfile.rename(f"{directory}/{name}", f"{moved_directory}/{name}")
    tf.io.gfile.rmtree(source)
