"""Checks of the paths that a tool's flags name, made before anything is read or written, in
the user's words ("--output_dir notes.txt is a file, not a directory") rather than those of
the call that would fail later ("[Errno 17] File exists: 'notes.txt'"). What a path names, on
the local disk or a remote filesystem (gs://...), is asked of `bert_tf.file_io`.

Example (a tool's flag checks):
    if problem := output_dir_problem("output_dir", FLAGS.output_dir):
        problems.append(problem)
"""

from bert_tf.file_io import file_in_the_way, file_kind, is_remote, unwritable_path


def output_dir_problem(flag, path):
    """What keeps `path`, the value of --`flag`, from being a directory to write into (created
    if missing); None if nothing does. Paths of other file systems (gs://...) are not checked.

    Example:
        >>> output_dir_problem("output_dir", "notes.txt/run1")   # notes.txt is a file
        '--output_dir notes.txt/run1: notes.txt is a file, not a directory'
    """
    blocking = file_in_the_way(path)
    if blocking is None:
        return None
    where = path if blocking == path else f"{path}: {blocking}"
    return f"--{flag} {where} is a file, not a directory"


def unwritable_output_problem(flag, path, names=()):
    """What keeps a job from writing into `path`, the value of --`flag`, and into its entries
    matching `names` (shell patterns: the files the job writes again in place); None if
    nothing does. Asked before the job starts, not found at its first save after hours of
    training. Paths of other file systems (gs://...) are not checked.

    Example:
        >>> unwritable_output_problem("output_dir", "run", ["eval_results.json"])   # read-only
        '--output_dir run: run/eval_results.json is not writable; make it writable or use
        another --output_dir'
    """
    blocking = unwritable_path(path, names)
    if blocking is None:
        return None
    where = path if blocking == path else f"{path}: {blocking}"
    return f"--{flag} {where} is not writable; make it writable or use another --{flag}"


def run_output_dir_problem(path, outputs=()):
    """What keeps a training run from writing --output_dir `path`; None if nothing does. Every
    training tool asks it before anything is read or written: a file in the way
    (`output_dir_problem`), files of the names a run writes but no run of this package they
    belong to (`existing_run.other_files_problem`), a directory or file the run cannot write
    (`unwritable_output_problem`). `outputs` are the tool's own files beside every run's
    (shell patterns, e.g. "predictions*.tsv").

    Example:
        >>> run_output_dir_problem("notes", ["predictions*.tsv"])   # holds predictions.tsv
        '--output_dir notes holds predictions.tsv but no run of bert_tf (no run.json), and this
        run would overwrite it; use another --output_dir'
    """
    # Here, not at the top: existing_run loads TensorFlow, which a tool's --help does not need.
    from bert_tf.training.existing_run import WRITTEN_FILES, other_files_problem

    return (output_dir_problem("output_dir", path)
            or other_files_problem(path, outputs)
            or unwritable_output_problem("output_dir", path, WRITTEN_FILES + tuple(outputs)))


def input_file_problem(flag, path):
    """What keeps `path`, the value of --`flag`, from being a file to read; None if nothing
    does.

    Example:
        >>> input_file_problem("vocab_file", "model")   # a directory
        '--vocab_file model is a directory, not a file'
    """
    problem = file_problem(path)
    return problem and f"--{flag} {problem}"


def file_problem(path, kind="file"):
    """What keeps `path` from being a `kind` ("file", "text file", ...) to read, in words that
    start with the path (a flag naming several files says its name once); None if nothing does.
    A remote file is not opened: its reader names what keeps it from being read.

    Example:
        >>> file_problem("/dev/null", "text file")
        '/dev/null is not a regular file'
    """
    kind_found = file_kind(path)
    if kind_found == "directory":
        return f"{path} is a directory, not a {kind}"
    if kind_found is None:
        return f"{path} does not exist"
    if kind_found == "other":
        return f"{path} is not a regular file"
    if not is_remote(path):
        try:
            open(path, "rb").close()
        except OSError as error:
            return f"{path} cannot be read ({error.strerror})"
    return None
