"""Pre-training text from TFDS: a real text dataset written with TFDS's own writer from the
Gutenberg books (one book = one example, three shard files) reads as the same documents, records
and batches as the same text in the pre-training text format; wikipedia/c4 shapes from
`tfds.testing.mock_data`; errors named."""

import os

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_datasets as tfds

from bert_tf.data.pretraining.corpus import CorpusStatistics, read_document_chunks
from bert_tf.data.pretraining.dynamic_masking_dataset import dynamic_masking_dataset
from bert_tf.data.pretraining.prose import read_book
from bert_tf.data.pretraining.records_writer import write_pretraining_data
from bert_tf.data.tfds.catalog import TfdsInputError
from bert_tf.data.tfds.pretraining_text import TfdsText, document_sentences
from bert_tf.text.bert_tokenizer import BertTokenizer
from tests.data.tfds.gutenberg import (BOOKS, GUTENBERG_TFDS_NAME, book_paths,
                                       write_as_text_files, write_gutenberg_tfds)
from tests.resources import minilm_dir


@pytest.fixture(scope="module")
def gutenberg(tmp_path_factory):
    """(TfdsText of the prepared Gutenberg dataset, the book paths)."""
    data_dir = write_gutenberg_tfds(str(tmp_path_factory.mktemp("tfds")))
    return TfdsText(GUTENBERG_TFDS_NAME, "train", data_dir), book_paths()


@pytest.fixture(scope="module")
def as_text_files(gutenberg, tmp_path_factory):
    """The same documents in the pre-training text format: one text file per TFDS file."""
    return write_as_text_files(gutenberg[0], tmp_path_factory.mktemp("text"))


@pytest.fixture(scope="module")
def tokenizer():
    return BertTokenizer(os.path.join(minilm_dir(), "vocab.txt"), lower_case=True)


def test_one_example_is_one_document_of_the_books_sentences(gutenberg):
    source, paths = gutenberg
    assert len(source.files) == 3
    statistics = CorpusStatistics()
    documents = [document for chunk in read_document_chunks(
        source.files, 1 << 30, statistics, read_lines=source.lines) for document in chunk]
    expected = [read_book(path, CorpusStatistics()) for path in paths]
    assert sorted(documents) == sorted(expected)      # the prose rule, book by book
    assert statistics.files == 3 and statistics.invalid_utf8_lines == {}
    assert statistics.lines == sum(len(document) + 1 for document in expected)
    # The records' bytes with TFRecord's framing: the files' sizes, as progress counts them
    # (create_pretraining_data's progress ended at 90.8 % of a TFDS split).
    assert statistics.bytes == sum(os.path.getsize(path) for path in source.files)


def test_records_equal_those_of_the_same_text(gutenberg, as_text_files, tokenizer, tmp_path):
    source, _ = gutenberg
    vocab = os.path.join(minilm_dir(), "vocab.txt")
    options = dict(num_workers=0, progress_stream=None, max_seq_length=64,
                   max_predictions_per_seq=10, dupe_factor=1, max_chunk_bytes=100_000)
    from_tfds = write_pretraining_data(source.files, [str(tmp_path / "tfds.tfrecord")], vocab,
                                       True, read_lines=source.lines, **options)
    from_text = write_pretraining_data(as_text_files, [str(tmp_path / "text.tfrecord")], vocab,
                                       True, **options)
    records = [list(tf.data.TFRecordDataset(str(tmp_path / f"{name}.tfrecord"))
                    .as_numpy_iterator()) for name in ("tfds", "text")]
    assert from_tfds.instances == from_text.instances == len(records[0]) > 500
    assert records[0] == records[1]
    assert from_tfds.documents == from_text.documents == len(BOOKS)


@pytest.mark.parametrize("pipeline", [0, 1])
def test_dynamic_masking_batches_equal_those_of_the_same_text(gutenberg, as_text_files,
                                                              tokenizer, pipeline):
    source, _ = gutenberg
    # Two input pipelines of a multi-worker job: each reads its own TFDS files.
    context = tf.distribute.InputContext(num_input_pipelines=2, input_pipeline_id=pipeline,
                                         num_replicas_in_sync=2)

    def batches(files, **read):
        dataset = dynamic_masking_dataset(files, 16, 64, 10, context, seed=7,
                                          tokenizer=tokenizer, shuffle_buffer=100, **read)
        return [batch for _, batch in zip(range(3), dataset.as_numpy_iterator())]

    from_tfds = batches(source.files, read_lines=source.line_dataset)
    from_text = batches(as_text_files)
    for tfds_batch, text_batch in zip(from_tfds, from_text, strict=True):
        assert tfds_batch.keys() == text_batch.keys()
        for name in tfds_batch:
            np.testing.assert_array_equal(tfds_batch[name], text_batch[name], err_msg=name)
    assert from_tfds[0]["input_word_ids"].shape == (8, 64)


@pytest.mark.parametrize("tfds_name,version,features", [
    ("wikipedia/20230601.en", "1.0.0", ["text", "title"]),
    ("c4/en", "3.1.0", ["content-length", "content-type", "text", "timestamp", "url"]),
])
def test_catalog_text_datasets_shapes(tmp_path, tfds_name, version, features):
    # No local copy of Wikipedia or C4: examples of their catalog features from mock_data,
    # written where the catalog's builder reads them.
    with tfds.testing.mock_data(num_examples=5):
        builder = tfds.builder(tfds_name)
        examples = list(tfds.as_numpy(tfds.load(tfds_name, split="train")))
    assert sorted(builder.info.features) == features
    name, config = tfds_name.split("/")
    tfds.dataset_builders.store_as_tfds_dataset(
        name=name, config=config, version=version, features=builder.info.features,
        split_datasets={"train": [(str(i), example) for i, example in enumerate(examples)]},
        data_dir=str(tmp_path))
    source = TfdsText(tfds_name, "train", str(tmp_path))
    statistics = CorpusStatistics()
    lines = [line for path in source.files for line, _ in source.lines(path, statistics)]
    expected = [line for example in examples
                for line in [*(s + "\n" for s in document_sentences(example["text"].decode())),
                             "\n"]]
    assert sorted(lines) == sorted(expected) and lines.count("\n") == 5
    with pytest.raises(TfdsInputError, match=rf"{tfds_name}/{version} has no feature 'body' "
                                             rf"\(--tfds_text_key\); its features are "):
        TfdsText(tfds_name, "train", str(tmp_path), text_key="body")
    with pytest.raises(TfdsInputError, match=r"--tfds_split 'train\[:10%\]': pre-training "
                                             r"reads whole splits"):
        TfdsText(tfds_name, "train[:10%]", str(tmp_path))


def test_a_text_key_that_is_no_text_feature_is_refused(tmp_path):
    features = tfds.features.FeaturesDict({
        "sentence": tfds.features.Text(), "label": tfds.features.ClassLabel(num_classes=2),
        "words": tfds.features.Sequence(tfds.features.Text())})
    tfds.dataset_builders.store_as_tfds_dataset(
        name="labelled_text", version="1.0.0", features=features, data_dir=str(tmp_path),
        split_datasets={"train": [("0", {"sentence": "A fine film.", "label": 1,
                                         "words": ["A", "fine", "film."]})]})
    for key, kind in (("label", "ClassLabel"), ("words", "Sequence")):
        with pytest.raises(TfdsInputError, match=(
                rf"^TFDS dataset labelled_text/1.0.0: feature '{key}' \(--tfds_text_key\) is "
                rf"{kind}, not one text per example; its text features are sentence$")):
            TfdsText("labelled_text", "train", str(tmp_path), text_key=key)
    assert TfdsText("labelled_text", "train", str(tmp_path), text_key="sentence").files


def test_document_sentences_follow_the_prose_rule():
    text = "Mr. Knightley left.  It rained!\nStill raining.\n\nA new paragraph"
    assert document_sentences(text) == ["Mr. Knightley left.", "It rained!",
                                        "Still raining.", "A new paragraph"]
