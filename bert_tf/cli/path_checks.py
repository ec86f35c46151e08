"""Checks of the paths that a tool's flags name, made before anything is read or written, in
the user's words ("--output_dir notes.txt is a file, not a directory") rather than those of
the call that would fail later ("[Errno 17] File exists: 'notes.txt'").

Example (a tool's flag checks):
    if problem := output_dir_problem("output_dir", FLAGS.output_dir):
        problems.append(problem)
"""

import os


def output_dir_problem(flag, path):
    """What keeps `path`, the value of --`flag`, from being a directory to write into (created
    if missing); None if nothing does. Paths of other file systems (gs://...) are not checked.

    Example:
        >>> output_dir_problem("output_dir", "notes.txt/run1")   # notes.txt is a file
        '--output_dir notes.txt/run1: notes.txt is a file, not a directory'
    """
    existing = path  # the path, or its nearest ancestor that exists
    while existing and not os.path.exists(existing):
        existing = os.path.dirname(existing)
    if not existing or os.path.isdir(existing):
        return None
    where = path if existing == path else f"{path}: {existing}"
    return f"--{flag} {where} is a file, not a directory"


def input_file_problem(flag, path):
    """What keeps `path`, the value of --`flag`, from being a file to read; None if nothing
    does.

    Example:
        >>> input_file_problem("vocab_file", "model")   # a directory
        '--vocab_file model is a directory, not a file'
    """
    if os.path.isdir(path):
        return f"--{flag} {path} is a directory, not a file"
    if not os.path.isfile(path):
        return f"--{flag} {path} does not exist"
    return None
