"""--bert_config_file: a bert_config.json, or the name of a config this package ships
("bert_mini"), which reads the same from a checkout and after a regular `pip install` (where
no `official_configs/` directory is beside the user's commands).

A file at the given path wins over a shipped config of that name, as a local directory wins
over a hub name. The flag's value is the file either way, so every message and record names
the file that was read.

Example (a tool's `define_flags`, then its checks):
    define_bert_config_file_flag("The model's bert_config.json.")
    if problem := bert_config_file_problem(FLAGS.bert_config_file):
        problems.append(problem)
"""

import difflib
import os

from absl import flags

from bert_tf.cli.path_checks import input_file_problem
from bert_tf.config import official_config_file, official_config_names
from bert_tf.file_io import file_kind


class _ConfigFileParser(flags.ArgumentParser):
    """Parses a path, or a shipped config's name into that config's file."""

    def parse(self, argument):
        if os.path.exists(argument):
            return argument
        return official_config_file(argument) or argument

    def flag_type(self):
        return "string"


def define_bert_config_file_flag(help_text):
    """Defines --bert_config_file with the tool's own `help_text` (what the config is for)."""
    flags.DEFINE(_ConfigFileParser(), "bert_config_file", None,
                 f"{help_text} A path, or the name of a shipped config: bert_tiny, bert_mini, "
                 f"bert_small, bert_medium, bert_base, bert_large, bert_L4_H256, ...",
                 serializer=flags.ArgumentSerializer())


def bert_config_file_problem(path):
    """What keeps `path`, the value of --bert_config_file (None: not given), from being a config
    file to read, with the shipped config a missing path may have meant; None if nothing does.

    Example:
        >>> bert_config_file_problem("official_configs/bert_mini.json")   # not in the cwd
        '--bert_config_file official_configs/bert_mini.json does not exist; the shipped config
        of that name is --bert_config_file=bert_mini'
    """
    problem = path and input_file_problem("bert_config_file", path)
    if not problem or file_kind(path) is not None:  # there, but not a readable file
        return problem
    names = official_config_names()
    name = os.path.basename(path).removesuffix(".json")
    if name in names:
        return f"{problem}; the shipped config of that name is --bert_config_file={name}"
    if name != path:  # a path, which was not meant as a name
        return problem
    if close := difflib.get_close_matches(name, names, n=1):
        return f"{problem}; did you mean the shipped config {close[0]}?"
    return f"{problem}, nor is it a shipped config's name ({', '.join(names)})"
