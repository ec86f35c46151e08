"""The standard library's docstrings as a pre-training corpus: prose only, deterministic,
bounded."""

import inspect
import os

from bert_tf.data.pretraining.stdlib_corpus import (docstring_sentences, module_sentences,
                                        stdlib_directory, stdlib_documents, stdlib_sources)

DOCSTRING = inspect.cleandoc('''
    Return the thing.  It is computed lazily; see
    the notes below.

    Args:
        x: the input.
        y: ignored.

    >>> thing(1)
    2

    Notes
    -----
    A single word, or a+b*c==d(e) [f], is not prose.
    ''')


def test_only_prose_sentences_are_kept():
    assert docstring_sentences(DOCSTRING) == [
        "Return the thing.", "It is computed lazily; see the notes below."]


def test_module_sentences_follow_the_source_order(tmp_path):
    source = tmp_path / "module.py"
    source.write_text('"""The module is here."""\n\nclass A:\n    """The class is next."""\n\n'
                      '    def f(self):\n        """The method comes last."""\n\n'
                      'def g():\n    return 1\n')
    broken = tmp_path / "python2.py"
    broken.write_text('print "old syntax"\n')
    assert module_sentences(str(source)) == [
        "The module is here.", "The class is next.", "The method comes last."]
    assert module_sentences(str(broken)) == []


def test_documents_are_the_sorted_modules_without_tests_up_to_the_size():
    sources = stdlib_sources()
    relative = [os.path.relpath(path, stdlib_directory()) for path in sources]
    assert relative == sorted(relative) and "argparse.py" in relative
    assert not [path for path in relative if "test" in path.split(os.sep)[:-1]]
    documents = list(stdlib_documents(max_bytes=100_000))
    size = sum(len(s.encode()) + 1 for document in documents for s in document)
    last = sum(len(s.encode()) + 1 for s in documents[-1])
    assert 100_000 <= size < 100_000 + last   # stops at the module that passes the bound
    assert all(len(document) >= 2 for document in documents)
    assert documents == list(stdlib_documents(max_bytes=100_000))
    assert all("\n" not in sentence for document in documents for sentence in document)
