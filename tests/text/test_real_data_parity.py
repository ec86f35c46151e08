"""Ids equal the reference on every text of ../shared/data, uncased and cased.

The uncased vocabulary is the real MiniLM one; the cased one (tests/text/data/
gutenberg_cased_vocab.txt, 3130 tokens: a word piece needs 10 occurrences) was learned
with this package's tool from four of the
books (two of them latin-1), so the other texts also exercise [UNK] and rare splits:
    G=../shared/data/gutenberg; python tools/build_vocab.py --nodo_lower_case --vocab_size=5000 \\
        --input_file=$G/austen-persuasion.txt,$G/chesterton-ball.txt,$G/shakespeare-caesar.txt,$G/blake-poems.txt \\
        --output_file=tests/text/data/gutenberg_cased_vocab.txt
Texts go through tf.data in batches, as in training; the tokenizer gets the raw bytes of each
line (latin-1 files included) and the reference the same line decoded with errors="replace".
"""

import os

import pytest
import tensorflow as tf

from bert_tf.text.bert_tokenizer import BertTokenizer
from tests.text.reference import hf_ids, hf_tokenizer, minilm_vocab, shared_texts

CASED_VOCAB = os.path.join(os.path.dirname(__file__), "data", "gutenberg_cased_vocab.txt")


@pytest.fixture(scope="module")
def texts():
    return shared_texts()


def tokenize_all(tokenizer, raw_texts, batch_size=2048):
    dataset = tf.data.Dataset.from_tensor_slices(tf.constant(raw_texts, tf.string)).batch(
        batch_size).map(lambda t: tokenizer.tokenize(t).merge_dims(1, 2),
                        num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
    return [row for batch in dataset for row in batch.to_list()]


@pytest.mark.parametrize("lower_case", [True, False], ids=["uncased_minilm", "cased_built"])
def test_every_text_matches_the_reference(texts, lower_case):
    vocab = minilm_vocab() if lower_case else CASED_VOCAB
    tokenizer, hf = BertTokenizer(vocab, lower_case), hf_tokenizer(vocab, lower_case)
    report = []
    for name, data in texts.items():
        got, expected = tokenize_all(tokenizer, data.raw), hf_ids(hf, data.text)
        mismatches = [i for i, (g, e) in enumerate(zip(got, expected)) if g != e]
        report.append(f"{name}: {len(data.raw)} texts, {len(mismatches)} mismatches"
                      + (f", first {data.text[mismatches[0]][:100]!r}" if mismatches else ""))
        assert len(got) == len(expected) == len(data.raw)
    assert all(" 0 mismatches" in line for line in report), "\n".join(report)
    # The data really exercises the vocabulary: many different pieces and some [UNK]s.
    assert sum(len(data.raw) for data in texts.values()) > 400_000
