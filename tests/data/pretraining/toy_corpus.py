"""A small hand-made vocabulary and corpus for the pre-training data tests.

The vocabulary has BERT's special tokens, a few words, a word split into pieces
(`unaffable` -> `un ##aff ##able`) and numbered words `w0`..`w199` for corpora whose every
sentence is recognisable from its ids.

Example:
    >>> path = write_vocab(tmp_path)
    >>> word_ids("the cat")
    [8, 9]
"""

import os

SPECIAL = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
WORDS = ["un", "##aff", "##able", "the", "cat", "sat", "on", "mat", ".", ","]
NUMBERED = [f"w{i}" for i in range(200)]
VOCAB = SPECIAL + WORDS + NUMBERED
PAD, UNK, CLS, SEP, MASK = range(5)
UN, AFF, ABLE = (VOCAB.index(t) for t in ("un", "##aff", "##able"))
FIRST_NUMBERED = VOCAB.index("w0")


def word_ids(text):
    """Ids of space-separated vocabulary tokens."""
    return [VOCAB.index(token) for token in text.split()]


def write_vocab(directory):
    path = os.path.join(str(directory), "vocab.txt")
    with open(path, "w", encoding="utf-8") as f:
        f.writelines(token + "\n" for token in VOCAB)
    return path


def numbered_documents(sentences_per_document, words_per_sentence):
    """Documents of sentences of consecutive numbered words, every word once in the corpus
    (text and ids): `[["w0 w1", "w2 w3"], ["w4 w5"]]` for `([2, 1], 2)`."""
    documents, next_word = [], 0
    for count in sentences_per_document:
        document = []
        for _ in range(count):
            document.append(" ".join(f"w{next_word + i}" for i in range(words_per_sentence)))
            next_word += words_per_sentence
        documents.append(document)
    if next_word > len(NUMBERED):
        raise ValueError(f"the toy vocabulary has {len(NUMBERED)} numbered words, not "
                         f"{next_word}")
    return documents


def write_corpus(path, documents):
    """Writes documents (lists of sentences) in the input format: one sentence per line, a
    blank line between documents."""
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n\n".join("\n".join(document) for document in documents) + "\n")
    return str(path)
