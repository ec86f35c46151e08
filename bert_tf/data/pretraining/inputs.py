"""From a corpus to everything pre-training reads: text files, a vocabulary and TFRecords.

`prepare_pretraining_inputs(directory, documents, ...)` writes, under `directory`:

    corpus/train.txt, corpus/heldout.txt   the documents cut into passages, in the pre-training
                                           text format; every `heldout_every`-th passage is
                                           held out
    vocab.txt                              WordPiece, learned from (a sample of) train.txt
    records/train-seq128-pred20-mask0.15/train.tfrecord-*
    records/heldout-seq128/heldout.tfrecord
                                           `create_pretraining_data.py`'s records, in
                                           directories named after their settings
    bert_config.json                       the named config with the learned vocabulary's size

Each step writes its output completely or not at all and is skipped when that output exists,
so an interrupted or repeated preparation redoes only what is missing (`documents` is not
even read when the corpus files exist). The steps are those of the tools: the vocabulary is
`tools/build_vocab.py`'s (`bert_tf.text.vocab`), the records `tools/create_pretraining_data.py`'s
(`records_writer`).

Example:
    >>> inputs = prepare_pretraining_inputs("/tmp/prepared", stdlib_documents(3 << 20),
    ...                                     config_name="bert_tiny", vocab_size=8192)
    >>> inputs.train_records
    ['/tmp/prepared/records/train-seq128-pred20-mask0.15/train.tfrecord-00000-of-00002', ...]
"""

import dataclasses
import logging
import math
import os
import shutil
import time

from bert_tf.config import BertConfig
from bert_tf.data.pretraining.masking import MASKED_LM_PROB
from bert_tf.data.pretraining.records_writer import write_pretraining_data
from bert_tf.data.pretraining.prose import passages, write_documents
from bert_tf.text.vocab import count_words, learn_vocab, save_vocab
from bert_tf.text.vocab_size import sized_to_vocab

logger = logging.getLogger("bert_tf.data")

_TRAIN_SHARDS = 2
# Instances are made in chunks of this much text, each by a worker process (fewer, larger
# chunks would leave a core idle on a corpus of a few MB).
_CHUNK_BYTES = 1 << 20


@dataclasses.dataclass(frozen=True)
class PretrainingInputs:
    """The files `prepare_pretraining_inputs` wrote."""
    train_text: str
    heldout_text: str
    vocab_file: str
    bert_config_file: str
    train_records: list
    heldout_records: list


def _timed(message, step):
    started = time.monotonic()
    result = step()
    logger.info("%s (%.1f s)", message, time.monotonic() - started)
    return result


def _split_corpus(documents, corpus_dir, heldout_every, max_passage_sentences):
    """Writes train.txt and heldout.txt (the corpus directory appears complete or not at all)."""
    staging = f"{corpus_dir}.incomplete"
    shutil.rmtree(staging, ignore_errors=True)
    os.makedirs(staging)
    cut = list(passages(documents, max_passage_sentences))
    counts = [write_documents([p for i, p in enumerate(cut, 1) if i % heldout_every],
                              os.path.join(staging, "train.txt")),
              write_documents([p for i, p in enumerate(cut, 1) if i % heldout_every == 0],
                              os.path.join(staging, "heldout.txt"))]
    os.rename(staging, corpus_dir)
    return counts


def _learn_vocab(text_file, vocab_file, vocab_size, do_lower_case, sample_bytes, iterations):
    def sample_lines():
        read = 0
        with open(text_file, "rb") as f:
            for line in f:
                yield line
                read += len(line)
                if read >= sample_bytes:
                    return

    counts = count_words(sample_lines(), lower_case=do_lower_case)
    vocab = learn_vocab(counts, vocab_size, num_iterations=iterations)
    save_vocab(vocab, f"{vocab_file}.incomplete")
    os.replace(f"{vocab_file}.incomplete", vocab_file)
    return len(vocab)


def _max_predictions(max_seq_length, masked_lm_prob):
    """Room for every prediction `masked_lm_prob` makes in a full sequence."""
    return math.ceil(max_seq_length * masked_lm_prob)


def _write_records(text, records_dir, file_names, vocab_file, do_lower_case, seed, num_workers,
                   instance_options):
    """Writes `text`'s instances into `records_dir/file_names` (all of them or none)."""
    staging = f"{records_dir}.incomplete"
    shutil.rmtree(staging, ignore_errors=True)
    # Starting a worker process (and TensorFlow in it) costs seconds: not worth it for a
    # single chunk.
    workers = (num_workers if num_workers is not None
               else 0 if os.path.getsize(text) <= _CHUNK_BYTES else os.cpu_count())
    statistics = write_pretraining_data(
        [text], [os.path.join(staging, name) for name in file_names], vocab_file, do_lower_case,
        random_seed=seed, num_workers=workers, max_chunk_bytes=_CHUNK_BYTES,
        progress_stream=None, **instance_options)
    logger.info("%s: %s", os.path.basename(text), statistics.report().replace("\n", " "))
    os.makedirs(os.path.dirname(records_dir), exist_ok=True)
    os.rename(staging, records_dir)


def prepare_pretraining_inputs(directory, documents, *, config_name, vocab_size,
                               do_lower_case=True, max_seq_length=128,
                               max_predictions_per_seq=None, masked_lm_prob=MASKED_LM_PROB,
                               dupe_factor=5, heldout_every=20,
                               max_passage_sentences=200, vocab_sample_bytes=4 << 20,
                               vocab_iterations=4, num_workers=None, seed=12345):
    """Writes what pre-training needs under `directory` (see the module docstring); returns
    the `PretrainingInputs`.

    Args:
      documents: an iterable of documents, each a list of sentences (str); read only when
        the corpus files do not exist yet.
      config_name: a config of `official_configs/` (`BertConfig.from_name`); its
        `vocab_size` becomes the learned vocabulary's.
      vocab_size: the most tokens of the learned vocabulary (`learn_vocab`).
      do_lower_case: an uncased vocabulary and tokenization.
      max_seq_length, max_predictions_per_seq, masked_lm_prob, dupe_factor: the training
        records' `create_pretraining_data.py` flags; `max_predictions_per_seq` defaults to
        `ceil(max_seq_length * masked_lm_prob)` (20 for 128 and 15 %). The held-out records
        get one copy and the paper's masking (`MASKED_LM_PROB`, with that default), whatever
        the training records use: held-out accuracies then compare across masking rates
        (`tools/run_pretraining.py` reads them with their own lengths).
      heldout_every: every this many passages, one is held out.
      max_passage_sentences: documents are cut into passages of at most this many sentences.
      vocab_sample_bytes: the vocabulary is learned from the first this many bytes of text.
      vocab_iterations: the learner's refinement passes per frequency threshold it tries
        (tf.text's `num_iterations`, 4 in `tools/build_vocab.py`; 2 takes half the time).
      num_workers: processes making the records (default: one per core).
      seed: the records' random seed.
    """
    if heldout_every < 2:
        raise ValueError(f"heldout_every must be at least 2, got {heldout_every}")
    if max_predictions_per_seq is None:
        max_predictions_per_seq = _max_predictions(max_seq_length, masked_lm_prob)
    os.makedirs(directory, exist_ok=True)
    corpus_dir = os.path.join(directory, "corpus")
    vocab_file = os.path.join(directory, "vocab.txt")
    # Named after their settings: preparing other lengths (e.g. a short-sequence first phase)
    # in the same directory adds records beside these and never returns the wrong ones.
    train_dir = os.path.join(directory, "records", f"train-seq{max_seq_length}-"
                             f"pred{max_predictions_per_seq}-mask{masked_lm_prob:g}")
    heldout_dir = os.path.join(directory, "records", f"heldout-seq{max_seq_length}")
    config_file = os.path.join(directory, "bert_config.json")
    if not os.path.isdir(corpus_dir):
        train, heldout = _timed("Wrote the corpus", lambda: _split_corpus(
            documents, corpus_dir, heldout_every, max_passage_sentences))
        if not heldout:
            shutil.rmtree(corpus_dir)
            raise ValueError(f"The corpus has {train} passages: too few to hold out one in "
                             f"{heldout_every}")
    train_text = os.path.join(corpus_dir, "train.txt")
    if not os.path.exists(vocab_file):
        _timed("Learned the vocabulary", lambda: _learn_vocab(
            train_text, vocab_file, vocab_size, do_lower_case, vocab_sample_bytes,
            vocab_iterations))
    train_names = [f"train.tfrecord-{i:05d}-of-{_TRAIN_SHARDS:05d}" for i in range(_TRAIN_SHARDS)]
    if not os.path.isdir(train_dir):
        _timed("Wrote the training records", lambda: _write_records(
            train_text, train_dir, train_names, vocab_file, do_lower_case, seed, num_workers,
            dict(max_seq_length=max_seq_length, max_predictions_per_seq=max_predictions_per_seq,
                 masked_lm_prob=masked_lm_prob, dupe_factor=dupe_factor)))
    heldout_text = os.path.join(corpus_dir, "heldout.txt")
    if not os.path.isdir(heldout_dir):
        _timed("Wrote the held-out records", lambda: _write_records(
            heldout_text, heldout_dir, ["heldout.tfrecord"], vocab_file, do_lower_case, seed,
            num_workers, dict(max_seq_length=max_seq_length, masked_lm_prob=MASKED_LM_PROB,
                              max_predictions_per_seq=_max_predictions(max_seq_length,
                                                                       MASKED_LM_PROB),
                              dupe_factor=1)))
    if not os.path.exists(config_file):
        config = sized_to_vocab(BertConfig.from_name(config_name), vocab_file)
        config.to_json_file(f"{config_file}.incomplete")
        os.replace(f"{config_file}.incomplete", config_file)
    return PretrainingInputs(
        train_text=train_text, heldout_text=heldout_text, vocab_file=vocab_file,
        bert_config_file=config_file,
        train_records=[os.path.join(train_dir, name) for name in train_names],
        heldout_records=[os.path.join(heldout_dir, "heldout.tfrecord")])
