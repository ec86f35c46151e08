"""A small English corpus every Python installation carries: the standard library's docstrings.

The embedded default job of `tools/run_pretraining.py` must run on a fresh machine without
data or network, so its text comes from the Python installation itself: the docstrings of
the standard library's modules, classes and functions (a few MB of English prose). Each module
is one document; its docstrings, in source order, are cut into sentences (`prose`), leaving out
what is not prose: doctest examples, indented blocks (code, argument tables), RST underlines
and fragments of fewer than three words.

The modules are read in sorted order, the test suites left out, and the result is a
deterministic function of the Python installation (the same on every machine with the same
Python version).

Example:
    >>> documents = list(stdlib_documents(max_bytes=3 << 20))
    >>> documents[0][:2]
    ['Abstract Base Classes (ABCs) according to PEP 3119.', ...]
"""

import ast
import os
import sysconfig

from bert_tf.data.pretraining.prose import paragraphs, split_sentences

# Directories (anywhere in a path) that hold tests, demos or third-party packages.
_SKIPPED_DIRECTORIES = frozenset(("test", "tests", "idle_test", "site-packages",
                                  "dist-packages", "__pycache__", "turtledemo"))
_MIN_WORDS = 3
# A "sentence" with fewer letters than this share of its non-space characters is code or a
# table row.
_MIN_LETTER_SHARE = 0.6


def stdlib_directory():
    """Where this Python's standard library lives."""
    return sysconfig.get_paths()["stdlib"]


def stdlib_sources(directory=None):
    """The standard library's `.py` files (tests excluded), sorted by path."""
    directory = directory or stdlib_directory()
    sources = []
    for root, subdirectories, files in os.walk(directory):
        subdirectories[:] = [d for d in subdirectories if d not in _SKIPPED_DIRECTORIES]
        sources.extend(os.path.join(root, name) for name in files if name.endswith(".py"))
    return sorted(sources, key=lambda path: os.path.relpath(path, directory))


def _docstrings(tree):
    """The docstrings of a module, its classes and functions, in source order."""
    nodes = (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)

    def visit(node):
        if isinstance(node, nodes):
            docstring = ast.get_docstring(node, clean=True)
            if docstring:
                yield docstring
        for child in ast.iter_child_nodes(node):
            yield from visit(child)

    return visit(tree)


def _is_prose(paragraph_lines):
    return not any(line[:1].isspace() or line.lstrip().startswith((">>>", "..."))
                   or not any(c.isalnum() for c in line) for line in paragraph_lines)


def _is_sentence(text):
    non_space = [c for c in text if not c.isspace()]
    letters = sum(c.isalpha() for c in non_space)
    return len(text.split()) >= _MIN_WORDS and letters >= _MIN_LETTER_SHARE * len(non_space)


def docstring_sentences(docstring):
    """The prose sentences of one (cleaned) docstring."""
    blocks, block = [], []
    for line in docstring.splitlines() + [""]:
        if line.strip():
            block.append(line)
        elif block:
            blocks.append(block)
            block = []
    return [sentence for block in blocks if _is_prose(block)
            for paragraph in paragraphs(block) for sentence in split_sentences(paragraph)
            if _is_sentence(sentence)]


def module_sentences(path):
    """The prose sentences of the docstrings of one source file ([] if it does not parse)."""
    with open(path, "rb") as f:
        source = f.read()
    try:
        tree = ast.parse(source, filename=path)
    except (SyntaxError, ValueError):  # e.g. lib2to3's Python 2 fixtures
        return []
    return [sentence for docstring in _docstrings(tree)
            for sentence in docstring_sentences(docstring)]


def stdlib_documents(max_bytes, directory=None):
    """Yields one document (a list of sentences, at least two) per standard-library module,
    in sorted order, until about `max_bytes` of text (UTF-8) have been yielded."""
    total = 0
    for path in stdlib_sources(directory):
        sentences = module_sentences(path)
        if len(sentences) < 2:
            continue
        yield sentences
        total += sum(len(s.encode("utf-8")) + 1 for s in sentences)
        if total >= max_bytes:
            return
