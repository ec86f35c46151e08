import collections
import os
import re

import numpy as np
import pytest
import tensorflow as tf

from bert_tf.data.pretraining.records_dataset import (InputFileError, NotRecordsError,
                                              check_same_record_lengths, compression_type,
                                              count_records, evaluation_dataset,
                                              expand_input_files, find_unreadable_file,
                                              naming_bad_input_files, record_lengths,
                                              training_dataset)
from tests.data.pretraining.records import serialize_instance, write_pretraining_records

SEQ, PREDICTIONS = 16, 3


def context(pipelines, pipeline_id, replicas=None):
    return tf.distribute.InputContext(num_input_pipelines=pipelines, input_pipeline_id=pipeline_id,
                                      num_replicas_in_sync=replicas or pipelines)


def batches(dataset, count):
    return [{k: v.numpy() for k, v in b.items()} for b in dataset.take(count)]


@pytest.fixture(scope="module")
def records(tmp_path_factory):
    directory = tmp_path_factory.mktemp("records")
    written = {}
    for name, count, seed in (("a.tfrecord", 10, 1), ("b.tfrecord", 14, 2)):
        path = str(directory / name)
        written[path] = write_pretraining_records(path, count, SEQ, PREDICTIONS, seed=seed)
    return written


def record_index(records):
    """input_ids -> (file, index) for every written record (the generator makes them unique)."""
    index = {}
    for path, instances in records.items():
        for i, instance in enumerate(instances):
            index[tuple(instance["input_ids"])] = (path, i)
    assert len(index) == sum(len(v) for v in records.values())
    return index


def test_google_records_parse_to_the_models_inputs(records):
    files = sorted(records)
    instances = [i for f in files for i in records[f]]
    dataset = evaluation_dataset(files, 6, SEQ, PREDICTIONS, num_records=len(instances))
    assert {k: (tuple(s.shape), s.dtype) for k, s in dataset.element_spec.items()} == {
        "input_word_ids": ((6, SEQ), tf.int32), "input_mask": ((6, SEQ), tf.int32),
        "input_type_ids": ((6, SEQ), tf.int32), "masked_lm_positions": ((6, PREDICTIONS), tf.int32),
        "masked_lm_ids": ((6, PREDICTIONS), tf.int32),
        "masked_lm_weights": ((6, PREDICTIONS), tf.float32),
        "next_sentence_labels": ((6,), tf.int32)}
    first = batches(dataset, 1)[0]
    for row, instance in enumerate(instances[:6]):
        np.testing.assert_array_equal(first["input_word_ids"][row], instance["input_ids"])
        np.testing.assert_array_equal(first["input_type_ids"][row], instance["segment_ids"])
        np.testing.assert_array_equal(first["masked_lm_positions"][row],
                                      instance["masked_lm_positions"])
        np.testing.assert_array_equal(first["masked_lm_ids"][row], instance["masked_lm_ids"])
        np.testing.assert_array_equal(first["masked_lm_weights"][row],
                                      instance["masked_lm_weights"])
        assert first["next_sentence_labels"][row] == instance["next_sentence_labels"][0]


def test_training_stream_is_deterministic_and_starts_at_any_step(records):
    files = sorted(records)
    stream = batches(training_dataset(files, 4, SEQ, PREDICTIONS, seed=3), 9)
    again = batches(training_dataset(files, 4, SEQ, PREDICTIONS, seed=3), 9)
    resumed = batches(training_dataset(files, 4, SEQ, PREDICTIONS, seed=3, start_step=6), 3)
    for a, b in zip(stream, again):
        np.testing.assert_array_equal(a["input_word_ids"], b["input_word_ids"])
    for a, b in zip(stream[6:], resumed):
        np.testing.assert_array_equal(a["input_word_ids"], b["input_word_ids"])
    other_seed = batches(training_dataset(files, 4, SEQ, PREDICTIONS, seed=4), 9)
    assert any((a["input_word_ids"] != b["input_word_ids"]).any()
               for a, b in zip(stream, other_seed))
    # Every record shows up: the stream cycles through both files. 100 batches are ~17 passes
    # over the 24 records, so this holds whatever global seed earlier tests left behind.
    long_stream = batches(training_dataset(files, 4, SEQ, PREDICTIONS, seed=3), 100)
    seen = {tuple(ids) for b in long_stream for ids in b["input_word_ids"]}
    assert len(seen) == 10 + 14


def test_a_step_of_two_replicas_fed_by_one_pipeline_skips_two_batches(records):
    files = sorted(records)
    per_replica = batches(training_dataset(files, 4, SEQ, PREDICTIONS, context(1, 0, replicas=2),
                                           seed=0), 6)
    resumed = batches(training_dataset(files, 4, SEQ, PREDICTIONS, context(1, 0, replicas=2),
                                       seed=0, start_step=2), 2)
    assert per_replica[0]["input_word_ids"].shape == (2, SEQ)  # 4 examples over 2 replicas
    for a, b in zip(per_replica[4:], resumed):
        np.testing.assert_array_equal(a["input_word_ids"], b["input_word_ids"])


def test_pipelines_read_disjoint_files_or_records(records):
    index = record_index(records)
    files = sorted(records)
    for pipeline in (0, 1):  # two files, two pipelines: one file each
        sources = {index[tuple(ids)][0] for b in batches(training_dataset(
            files, 4, SEQ, PREDICTIONS, context(2, pipeline), seed=1), 12)
            for ids in b["input_word_ids"]}
        assert sources == {files[pipeline]}
    for pipeline in (0, 1):  # one file, two pipelines: alternate records
        rows = {index[tuple(ids)][1] for b in batches(training_dataset(
            files[1:], 4, SEQ, PREDICTIONS, context(2, pipeline), seed=1), 12)
            for ids in b["input_word_ids"]}
        # A subset: the shuffle spans epochs, so 24 draws need not show all 7 of them (with
        # TensorFlow's global seed 3, one of them is missing).
        assert len(rows) > 1 and rows <= set(range(pipeline, 14, 2))


def test_evaluation_covers_every_record_once_and_pads_the_last_batch(records):
    files = sorted(records)
    total = count_records(files)
    assert total == 24 and count_records(files, limit=15) == 15
    index = record_index(records)
    seen, padding, steps = collections.Counter(), 0, []
    for pipeline in (0, 1):
        got = batches(evaluation_dataset(files, 10, SEQ, PREDICTIONS, num_records=total,
                                         input_context=context(2, pipeline)), 100)
        steps.append(len(got))
        for batch in got:
            for ids, mask, weights in zip(batch["input_word_ids"], batch["input_mask"],
                                          batch["masked_lm_weights"]):
                if mask[0]:
                    seen[index[tuple(ids)]] += 1
                else:
                    padding += 1
                    assert not weights.any() and not mask.any()
    assert steps == [3, 3]  # 24 records + 6 padding = 3 global batches of 10, on each pipeline
    assert padding == 6 and len(seen) == 24 and set(seen.values()) == {1}


def test_input_file_globs(records, tmp_path):
    directory = os.path.dirname(sorted(records)[0])
    files = expand_input_files(f" {directory}/b.tfrecord , {directory}/*.tfrecord,")
    assert files == sorted(records)
    with pytest.raises(InputFileError, match=r"--input_file: '.*/nothing\*' matches no file"):
        expand_input_files(f"{directory}/a.tfrecord,{directory}/nothing*")
    with pytest.raises(InputFileError, match="--eval_input_file is empty"):
        expand_input_files(" ", flag="--eval_input_file")
    # A directory named for its files: "matches no file" alone did not say why.
    with pytest.raises(InputFileError, match=(
            rf"^--input_file: '{directory}' is a directory: name its files, e.g. "
            rf"'{directory}/\*'$")):
        expand_input_files(directory)


def test_input_file_globs_refuse_an_interrupted_create_pretraining_data_output(tmp_path):
    # What a killed create_pretraining_data --num_output_shards=2 leaves: each shard half
    # written under its temporary name, which --help's glob `data.tfrecord-*` matches.
    for shard in range(2):
        (tmp_path / f"data.tfrecord-0000{shard}-of-00002.incomplete").write_bytes(b"\0" * 9)
    with pytest.raises(InputFileError, match=(
            r"^--input_file: .*/data.tfrecord-00000-of-00002.incomplete \(and 1 more\) is an "
            r"unfinished output of a create_pretraining_data run that was interrupted; run it "
            r"again to complete it, or delete the file$")):
        expand_input_files(f"{tmp_path}/data.tfrecord-*")


def write_examples(path, instances):
    with tf.io.TFRecordWriter(str(path)) as writer:
        for instance in instances:
            writer.write(serialize_instance(instance))


def test_record_lengths_and_unexpected_features(records, tmp_path):
    good = records[sorted(records)[0]][0]
    assert record_lengths(sorted(records)[0]) == (SEQ, PREDICTIONS)
    missing = tmp_path / "missing.tfrecord"
    write_examples(missing, [{k: v for k, v in good.items() if k != "next_sentence_labels"}])
    with pytest.raises(InputFileError, match="missing.tfrecord: records lack the feature "
                                             "'next_sentence_labels'"):
        record_lengths(str(missing))
    integer_weights = dict(good, masked_lm_weights=[1, 1, 0])
    wrong_type = tmp_path / "wrong_type.tfrecord"
    with tf.io.TFRecordWriter(str(wrong_type)) as writer:
        features = {k: tf.train.Feature(int64_list=tf.train.Int64List(value=v))
                    for k, v in integer_weights.items()}
        writer.write(tf.train.Example(features=tf.train.Features(feature=features))
                     .SerializeToString())
    with pytest.raises(InputFileError, match="wrong_type.tfrecord: feature 'masked_lm_weights' "
                                             "is a int64_list, expected float_list"):
        record_lengths(str(wrong_type))
    empty = tmp_path / "empty.tfrecord"
    write_examples(empty, [])
    with pytest.raises(InputFileError, match="empty.tfrecord: holds no records"):
        record_lengths(str(empty))


def test_a_file_that_is_not_records_of_examples_is_named_in_one_line(records, tmp_path):
    text = tmp_path / "corpus.txt"
    text.write_text("The first sentence of a document.\nIts second sentence.\n" * 5)
    strings = tmp_path / "strings.tfrecord"  # records, but not of tf.train.Example
    with tf.io.TFRecordWriter(str(strings)) as writer:
        writer.write(b"not an example")
    # Its parse error quotes bytes that are not UTF-8: TensorFlow fails to decode its message.
    binary = tmp_path / "binary.tfrecord"
    with tf.io.TFRecordWriter(str(binary)) as writer:
        writer.write(b"\xff\xfe\x80 not an example")
    for path, first_record in ((text, "is corrupt or truncated"),
                               (strings, "is not a tf.train.Example"),
                               (binary, "is not a tf.train.Example")):
        expected = (f"{path} is not a TFRecord file of pre-training examples: its first "
                    f"record {first_record}")
        with pytest.raises(NotRecordsError, match=f"^{re.escape(expected)}$") as first:
            record_lengths(str(path))
        # Found by the input pipeline, when it is not the first file.
        files = sorted(records) + [str(path)]
        with pytest.raises(NotRecordsError, match=f"^{re.escape(expected)}$") as later:
            with naming_bad_input_files(files, SEQ, PREDICTIONS):
                batches(training_dataset(files, 4, SEQ, PREDICTIONS), 100)
        assert first.value.path == later.value.path == str(path)


@pytest.fixture
def damaged(records, tmp_path):
    """A truncated copy, a copy with a flipped byte, and a file of other-length records."""
    data = open(sorted(records)[1], "rb").read()
    truncated = tmp_path / "truncated.tfrecord"
    # Records are equal-sized here: cut inside the second half's first record, past its 12-byte
    # header (TensorFlow reads a file cut inside a header as a clean end of file).
    truncated.write_bytes(data[:len(data) // 2 + 20])
    corrupt = bytearray(data)
    corrupt[len(data) // 3] ^= 0xFF
    flipped = tmp_path / "flipped.tfrecord"
    flipped.write_bytes(bytes(corrupt))
    other_length = tmp_path / "seq32.tfrecord"
    write_pretraining_records(other_length, 5, max_seq_length=32, max_predictions_per_seq=3)
    return {"truncated": str(truncated), "flipped": str(flipped), "seq32": str(other_length)}


@pytest.mark.parametrize("kind", ["truncated", "flipped"])
def test_a_bad_file_is_named(records, damaged, kind):
    files = sorted(records) + [damaged[kind]]
    with pytest.raises(InputFileError, match=f"{damaged[kind]}: corrupt, truncated or not a "
                                             f"pre-training record file") as error:
        with naming_bad_input_files(files, SEQ, PREDICTIONS):
            batches(training_dataset(files, 4, SEQ, PREDICTIONS), 100)
    # TensorFlow's cause, without the op's context ("{{function_node ...}}", "[Op:...]").
    assert "{{" not in str(error.value) and "[Op:" not in str(error.value), str(error.value)


@pytest.mark.parametrize("odd_first", [False, True], ids=["odd_last", "odd_first"])
def test_the_file_of_other_record_lengths_is_named(records, damaged, odd_first):
    # The records are parsed with the lengths of the first file. When that is the odd one,
    # the good files are those that fail to parse: the error must still name the odd file.
    files = [damaged["seq32"]] + sorted(records) if odd_first else sorted(
        records) + [damaged["seq32"]]
    seq_length, predictions = record_lengths(files[0])
    expected = "^" + re.escape(
        f"{damaged['seq32']}: records have max_seq_length 32 and max_predictions_per_seq 3, but "
        f"2 other input file(s) have 16 and 3; one input must hold records of one length") + "$"
    with pytest.raises(InputFileError, match=expected):
        with naming_bad_input_files(files, seq_length, predictions):
            batches(training_dataset(files, 4, seq_length, predictions), 100)
    with pytest.raises(InputFileError, match=expected):
        check_same_record_lengths(files)
    check_same_record_lengths(sorted(records))     # one length: no error


def test_token_ids_beyond_the_vocab_size_name_the_limit_and_the_file(records, tmp_path):
    # The later file was made with a vocabulary of 60 ids, the model has 40: the embedding
    # lookup used to stop training with an error naming neither.
    other_vocab = str(tmp_path / "c.tfrecord")
    instances = write_pretraining_records(other_vocab, 12, SEQ, PREDICTIONS, vocab_size=60,
                                          seed=3)
    largest = max(max(i["input_ids"] + i["masked_lm_ids"]) for i in instances)
    assert largest >= 40
    files = sorted(records) + [other_vocab]
    for dataset in (training_dataset(files, 4, SEQ, PREDICTIONS, vocab_size=40),
                    evaluation_dataset(files, 4, SEQ, PREDICTIONS, 36, vocab_size=40)):
        with pytest.raises(tf.errors.InvalidArgumentError, match=re.escape(
                "token ids must be below vocab_size 40, found] [")):
            batches(dataset, 100)
        with pytest.raises(InputFileError, match="^" + re.escape(
                f"{other_vocab}: holds token id {largest}, but the model's vocab_size is 40: the "
                f"records were made with another vocabulary; use its config") + "$"):
            with naming_bad_input_files(files, SEQ, PREDICTIONS, vocab_size=40):
                batches(dataset, 100)
    # Ids below the limit pass unchanged.
    checked = batches(training_dataset(files, 4, SEQ, PREDICTIONS, seed=2, vocab_size=60), 20)
    unchecked = batches(training_dataset(files, 4, SEQ, PREDICTIONS, seed=2), 20)
    for got, expected in zip(checked, unchecked):
        np.testing.assert_array_equal(got["input_word_ids"], expected["input_word_ids"])


def test_count_records_names_a_truncated_file(records, damaged):
    with pytest.raises(InputFileError, match=f"{damaged['truncated']}: corrupt or truncated"):
        count_records(sorted(records) + [damaged["truncated"]])


def test_errors_not_caused_by_a_file_propagate_unchanged(records):
    with pytest.raises(tf.errors.InvalidArgumentError, match="not about files"):
        with naming_bad_input_files(sorted(records), SEQ, PREDICTIONS):
            tf.debugging.assert_equal(1, 2, message="not about files")


def test_gzip_files_are_read_by_name_or_by_magic_bytes(records, tmp_path):
    """`create_pretraining_data.py --gzip` keeps the --output_file name: a compressed file is
    recognised by its `.gz` suffix or its first bytes, file by file, in every reader."""
    plain = sorted(records)[0]
    instances = records[plain]
    options = tf.io.TFRecordOptions(compression_type="GZIP")
    compressed = {"named": str(tmp_path / "a.tfrecord.gz"), "unnamed": str(tmp_path / "a.tfrecord")}
    for path in compressed.values():
        with tf.io.TFRecordWriter(path, options) as writer:
            for instance in instances:
                writer.write(serialize_instance(instance))
        assert open(path, "rb").read(2) == b"\x1f\x8b"
    files = [compressed["unnamed"], plain, compressed["named"]]   # mixed, one after the other
    assert [compression_type(path) for path in files] == ["GZIP", "", "GZIP"]
    assert record_lengths(compressed["unnamed"]) == (SEQ, PREDICTIONS)
    assert count_records(files) == 3 * len(instances)
    evaluated = batches(evaluation_dataset(files, 5, SEQ, PREDICTIONS, 3 * len(instances)), 100)
    np.testing.assert_array_equal(
        np.concatenate([b["input_word_ids"] for b in evaluated]),
        [instance["input_ids"] for instance in instances * 3])
    trained = batches(training_dataset(files[:1], 5, SEQ, PREDICTIONS, seed=1), 40)
    assert {tuple(ids) for b in trained for ids in b["input_word_ids"]} == {
        tuple(instance["input_ids"]) for instance in instances}
    with naming_bad_input_files(files, SEQ, PREDICTIONS):     # no file is reported bad
        batches(training_dataset(files, 5, SEQ, PREDICTIONS), 20)
    assert find_unreadable_file(files, SEQ, PREDICTIONS) is None
