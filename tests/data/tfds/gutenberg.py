"""A small real TFDS text dataset: Gutenberg books written with TFDS's own writer
(`store_as_tfds_dataset`), one book = one example (`title`, `text`), in three shard files; and
the same documents in the pre-training text format, one text file per shard.

Example:
    >>> source = TfdsText(GUTENBERG_TFDS_NAME, "train", write_gutenberg_tfds(data_dir))
    >>> text_files = write_as_text_files(source, directory)
"""

import tensorflow as tf
import tensorflow_datasets as tfds

from bert_tf.data.pretraining.corpus import CorpusStatistics, utf8_lines
from bert_tf.data.pretraining.prose import write_documents
from bert_tf.data.tfds.pretraining_text import document_sentences
from tests.resources import shared_data_path

GUTENBERG_TFDS_NAME = "gutenberg_books"
BOOKS = ["blake-poems.txt", "shakespeare-caesar.txt", "shakespeare-macbeth.txt",
         "chesterton-thursday.txt"]


def book_paths():
    return [shared_data_path(f"gutenberg/{name}") for name in BOOKS]


def book_text(path):
    """The book as one string: its UTF-8 lines (what `prose.read_book` reads)."""
    return "".join(line for line, _ in utf8_lines(path, CorpusStatistics()))


def write_gutenberg_tfds(data_dir):
    """Prepares "gutenberg_books" (split train, 3 files) in `data_dir`; returns `data_dir`."""
    features = tfds.features.FeaturesDict({"title": tfds.features.Text(),
                                           "text": tfds.features.Text()})
    examples = [(name, {"title": name, "text": book_text(path)})
                for name, path in zip(BOOKS, book_paths())]
    tfds.dataset_builders.store_as_tfds_dataset(
        name=GUTENBERG_TFDS_NAME, version="1.0.0", features=features,
        split_datasets={"train": examples}, data_dir=data_dir,
        download_config=tfds.download.DownloadConfig(num_shards=3))
    return data_dir


def write_as_text_files(source, directory):
    """The documents of `source` (a `TfdsText`) in the pre-training text format, one file per
    TFDS file, in the same order; returns the paths."""
    files = []
    for index, path in enumerate(source.files):
        texts = tf.data.TFRecordDataset(path).map(
            lambda record: source.features.deserialize_example(record)[source.text_key])
        documents = [document_sentences(text.decode()) for text in texts.as_numpy_iterator()]
        files.append(str(directory / f"shard-{index}.txt"))
        write_documents(documents, files[-1])
    return files
