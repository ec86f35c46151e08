"""The reference the in-graph tokenizer is held to, and the real texts it is checked on.

The reference is Hugging Face `tokenizers.BertWordPieceTokenizer` (clean_text, CJK splitting,
accent stripping that follows lower-casing: Google's FullTokenizer algorithm in Rust).

Example:
    >>> hf = hf_tokenizer(vocab_path, lower_case=True)
    >>> texts = shared_texts()["gutenberg"]      # raw bytes lines and their decoded str
"""

import glob
import json
import os

from tokenizers import BertWordPieceTokenizer

from tests.resources import minilm_dir, shared_data_path


def minilm_vocab():
    """The uncased vocabulary of the real MiniLM model (30522 tokens)."""
    return os.path.join(minilm_dir(), "vocab.txt")


def hf_tokenizer(vocab_path, lower_case):
    return BertWordPieceTokenizer(vocab_path, lowercase=lower_case, clean_text=True,
                                  handle_chinese_chars=True, strip_accents=None)


def hf_ids(tokenizer, texts):
    """Word-piece ids of each text, without [CLS]/[SEP]."""
    return [encoding.ids for encoding in tokenizer.encode_batch(texts, add_special_tokens=False)]


def _lines(path):
    # Some of the files are latin-1, not UTF-8. The reference reads text with invalid bytes
    # replaced by U+FFFD; the tokenizer under test gets the raw bytes.
    raw = open(path, "rb").read().split(b"\n")
    return raw, [line.decode("utf-8", errors="replace") for line in raw]


class Texts:
    """Parallel lists: `raw` (bytes, as stored) and `text` (str, decoded with errors="replace")."""

    def __init__(self):
        self.raw, self.text = [], []

    def add(self, raw, text):
        self.raw.extend(raw)
        self.text.extend(text)


def shared_texts():
    """Every text of ../shared/data by data set: each line of the Gutenberg books and the GLUE
    TSVs (SST-2, MRPC, CoLA, RTE), SQuAD contexts, questions and answers, CoNLL-2003 words."""
    texts = {}
    gutenberg = Texts()
    for path in sorted(glob.glob(os.path.join(shared_data_path("gutenberg"), "*.txt"))):
        gutenberg.add(*_lines(path))
    texts["gutenberg"] = gutenberg
    for task in ("SST-2", "MRPC", "CoLA", "RTE"):
        glue = Texts()
        for split in ("train", "dev"):
            glue.add(*_lines(shared_data_path(f"{task}/{split}.tsv")))
        texts[task] = glue
    squad = Texts()
    with open(shared_data_path("squad/dev-v1.1.json"), encoding="utf-8") as f:
        for article in json.load(f)["data"]:
            for paragraph in article["paragraphs"]:
                strings = [paragraph["context"]]
                for qa in paragraph["qas"]:
                    strings.append(qa["question"])
                    strings.extend(answer["text"] for answer in qa["answers"])
                squad.add([s.encode("utf-8") for s in strings], strings)
    texts["SQuAD"] = squad
    conll = Texts()
    for split in ("train", "valid"):
        raw, text = _lines(shared_data_path(f"conll2003/{split}.txt"))
        conll.add([line.split(b" ")[0] for line in raw], [line.split(" ")[0] for line in text])
    texts["CoNLL-2003"] = conll
    return texts
