"""Reading pre-training TFRecords, as written by Google's `create_pretraining_data.py`.

Each record is a `tf.train.Example` with Google's feature names (the contract):
`input_ids, input_mask, segment_ids` int64 `[max_seq_length]`; `masked_lm_positions,
masked_lm_ids` int64 `[max_predictions_per_seq]`; `masked_lm_weights` float
`[max_predictions_per_seq]`; `next_sentence_labels` int64 `[1]` (1 = random next sentence).

Batches come out with the model's names and dtypes: int32 `input_word_ids`, `input_mask`,
`input_type_ids` `[batch, max_seq_length]`, `masked_lm_positions`, `masked_lm_ids` `[batch,
max_predictions_per_seq]`, float32 `masked_lm_weights`, int32 `next_sentence_labels [batch]`.
Every shape is static (`drop_remainder`), which TPUs and XLA need, and all string work
(reading, parsing) happens here, in the host's input pipeline, never in the replicated step.

Files may be GZIP-compressed (`create_pretraining_data.py --gzip`), each on its own: a file is
read as GZIP when its name ends in `.gz` or it starts with the GZIP magic bytes.

Example:
    >>> files = expand_input_files("data/part-*.tfrecord,extra/*.tfrecord")
    >>> max_seq_length, max_predictions = record_lengths(files[0])
    >>> dataset = training_dataset(files, 32, max_seq_length, max_predictions)
    >>> next(iter(dataset))["input_word_ids"].shape
    TensorShape([32, 128])
"""

import collections
import contextlib
import os

import numpy as np
import tensorflow as tf
from google.protobuf import message

from bert_tf.file_io import is_remote
from bert_tf.op_errors import bare_message

# Google's TFRecord feature -> the name the model reads.
_MODEL_NAMES = {
    "input_ids": "input_word_ids",
    "input_mask": "input_mask",
    "segment_ids": "input_type_ids",
    "masked_lm_positions": "masked_lm_positions",
    "masked_lm_ids": "masked_lm_ids",
    "masked_lm_weights": "masked_lm_weights",
    "next_sentence_labels": "next_sentence_labels",
}
_SEQUENCE_FEATURES = ("input_ids", "input_mask", "segment_ids")
_PREDICTION_FEATURES = ("masked_lm_positions", "masked_lm_ids", "masked_lm_weights")
_FLOAT_FEATURES = ("masked_lm_weights",)

# Google's run_pretraining.py shuffles with a buffer of 100 records after interleaving files;
# a larger buffer mixes better across the interleaved files at a few MB of host memory.
_SHUFFLE_BUFFER_RECORDS = 1000
_MAX_PARALLEL_FILES = 8
# The most problems of input globs one error names.
_PROBLEMS_NAMED = 5
# What create_pretraining_data names an output file until all of them are complete
# (`records_writer`): a run killed before then leaves it behind, part written.
INCOMPLETE_SUFFIX = ".incomplete"
# RFC 1952: ID1 ID2 and CM=8 (deflate), the only method GZIP defines. A plain TFRecord file
# starts with its first record's length as a little-endian uint64: it would have to be
# exactly 0x...088b1f bytes long (over 500 kB) to look like this.
GZIP_MAGIC = b"\x1f\x8b\x08"


class InputFileError(ValueError):
    """A pre-training input file is missing, unreadable or does not have the expected features."""


class NotRecordsError(InputFileError):
    """A pre-training input file that is not a TFRecord file of `tf.train.Example`s: text, say.
    `path` is the file, for callers that name the flag or input it came from.

    Example:
        >>> NotRecordsError("corpus.txt is not a TFRecord file ...", "corpus.txt").path
        'corpus.txt'
    """

    def __init__(self, message, path):
        super().__init__(message)
        self.path = path


def feature_spec(max_seq_length, max_predictions_per_seq):
    """The `tf.io.parse_example` spec of a pre-training record (Google's `name_to_features`)."""
    spec = {name: tf.io.FixedLenFeature([max_seq_length], tf.int64)
            for name in _SEQUENCE_FEATURES}
    for name in _PREDICTION_FEATURES:
        dtype = tf.float32 if name in _FLOAT_FEATURES else tf.int64
        spec[name] = tf.io.FixedLenFeature([max_predictions_per_seq], dtype)
    spec["next_sentence_labels"] = tf.io.FixedLenFeature([1], tf.int64)
    return spec


def _unfinished_outputs(files):
    """The problem of `files` that create_pretraining_data left unfinished, if any (see
    `expand_input_files`)."""
    unfinished = [path for path in files if path.endswith(INCOMPLETE_SUFFIX)]
    if not unfinished:
        return []
    more = f" (and {len(unfinished) - 1} more)" if len(unfinished) > 1 else ""
    return [f"{unfinished[0]}{more} is an unfinished output of a create_pretraining_data run "
            f"that was interrupted; run it again to complete it, or delete the file"]


def expand_input_files(patterns, flag="--input_file", kind="TFRecord files",
                       file_problems=_unfinished_outputs):
    """The sorted files matching comma-separated glob `patterns` (Google's `--input_file`).

    Sorted, so every worker of a multi-worker job sees the same list and shards it the same
    way. What keeps the patterns from naming files to read is an `InputFileError` naming all
    of it at once after `flag`: a pattern matching nothing (a typo must not silently train on
    fewer files), a directory named for its files, a match that is no regular file (a device
    reads as empty, a pipe blocks its reader), and what `file_problems(files)` finds (phrases
    that start with the file). By default that is a match that an interrupted
    create_pretraining_data left unfinished (`FILE-00000-of-00008.incomplete` matches
    `FILE-*`): training would read its first part, then fail at its cut-off last record.
    `corpus.expand_text_files` checks text instead; `kind` names the files expected.

    Example:
        >>> expand_input_files("data/part-*.tfrecord,data/extra.tfrecord")
        InputFileError: --input_file: 'data/extra.tfrecord' matches no file
    """
    patterns = [p.strip() for p in (patterns or "").split(",") if p.strip()]
    if not patterns:  # "" or " , ": the list would be empty
        raise InputFileError(f"{flag} is empty: give comma-separated globs of {kind}")
    files, problems = set(), []
    for pattern in patterns:
        # tf.io.gfile: the same globs on gs:// (Cloud TPU jobs read their data there).
        found = tf.io.gfile.glob(pattern)
        matches = [m for m in found if not tf.io.gfile.isdir(m)]
        if len(found) == 1 and not matches:
            problems.append(f"{found[0]!r} is a directory: name its files, e.g. "
                            f"{tf.io.gfile.join(found[0], '*')!r}")
        elif not matches:
            problems.append(f"{pattern!r} matches no file")
        files.update(matches)
    files, regular = sorted(files), []
    for path in files:
        if is_remote(path) or os.path.isfile(path):  # a remote filesystem has files and dirs
            regular.append(path)
        else:
            problems.append(f"{path} is not a regular file")
    problems += file_problems(regular)
    if len(problems) > _PROBLEMS_NAMED:  # thousands of shards: the line must stay readable
        problems[_PROBLEMS_NAMED:] = [f"{len(problems) - _PROBLEMS_NAMED} more problems"]
    if problems:
        raise InputFileError(f"{flag}: {'; '.join(problems)}")
    return files


def compression_type(path):
    """"GZIP" for a GZIP-compressed TFRecord file (named `*.gz` or starting with GZIP's magic
    bytes), else "" (`tf.data.TFRecordDataset`'s `compression_type`)."""
    if path.endswith(".gz"):
        return "GZIP"
    try:
        with tf.io.gfile.GFile(path, "rb") as f:
            start = f.read(len(GZIP_MAGIC))
    except (OSError, tf.errors.OpError) as e:
        raise InputFileError(f"{path}: cannot read the TFRecord file ({e})") from e
    return "GZIP" if start == GZIP_MAGIC else ""


def read_records(path):
    """The serialized records of one TFRecord file, compressed or not."""
    return tf.data.TFRecordDataset(path, compression_type(path))


def _files_with_compression(files):
    """A dataset of `(path, compression_type)`, what `tf.data.TFRecordDataset` takes."""
    return tf.data.Dataset.from_tensor_slices((files, [compression_type(path) for path in files]))


def _read_records_of_files(files):
    """The records of `files`, one after the other, each file with its own compression."""
    return _files_with_compression(files).flat_map(tf.data.TFRecordDataset)


def record_lengths(path):
    """`(max_seq_length, max_predictions_per_seq)` read from the first record of `path`,
    after checking that it has every feature of the contract with the right type. A file that
    is no TFRecord file of examples (text, say) is a `NotRecordsError`."""
    not_records = f"{path} is not a TFRecord file of pre-training examples: its first record"
    try:
        first = next(iter(read_records(path).take(1)), None)
    except tf.errors.DataLossError as e:  # "corrupted record at 0 (Is this even a TFRecord..."
        raise NotRecordsError(f"{not_records} is corrupt or truncated", path) from e
    except tf.errors.OpError as e:
        raise InputFileError(f"{path}: not a readable TFRecord file ({bare_message(e)})") from e
    if first is None:
        raise InputFileError(f"{path}: holds no records")
    try:
        example = tf.train.Example.FromString(first.numpy())
    except message.DecodeError as e:
        raise NotRecordsError(f"{not_records} is not a tf.train.Example", path) from e
    features = example.features.feature
    lengths = {}
    for name in _MODEL_NAMES:
        if name not in features:
            raise InputFileError(f"{path}: records lack the feature {name!r}; pre-training "
                                 f"records need {sorted(_MODEL_NAMES)}")
        kind = features[name].WhichOneof("kind")
        expected = "float_list" if name in _FLOAT_FEATURES else "int64_list"
        if kind != expected:
            raise InputFileError(f"{path}: feature {name!r} is a {kind}, expected {expected}")
        lengths[name] = len(getattr(features[name], kind).value)
    if (len({lengths[n] for n in _SEQUENCE_FEATURES}) != 1
            or len({lengths[n] for n in _PREDICTION_FEATURES}) != 1
            or lengths["next_sentence_labels"] != 1):
        raise InputFileError(f"{path}: inconsistent feature lengths {lengths}")
    return lengths["input_ids"], lengths["masked_lm_positions"]


def _largest_token_id(input_ids, masked_lm_ids):
    """The largest token id of a batch of records: of its input ids and masked-LM labels."""
    return tf.maximum(tf.reduce_max(input_ids), tf.reduce_max(masked_lm_ids))


def _parse_batch(serialized, max_seq_length, max_predictions_per_seq, vocab_size=None):
    parsed = tf.io.parse_example(serialized, feature_spec(max_seq_length, max_predictions_per_seq))
    if vocab_size is not None:
        # Ids the embedding cannot look up: the CPU's gather would stop the step with an error
        # naming neither the file nor the vocab_size (a GPU's returns zeros); this names the
        # limit, and naming_bad_input_files the file. Its cost is lost in the noise: 4096
        # records of 128 tokens, batches of 32, 4 alternating turns of 1500 batches, gave
        # 1276-1803 batches/s without it and 1251-1950 with it (2 shared vCPUs, Xeon).
        largest = _largest_token_id(parsed["input_ids"], parsed["masked_lm_ids"])
        tf.debugging.Assert(largest < vocab_size, [
            f"token ids must be below vocab_size {vocab_size}, found", largest])
    # TPUs have no int64 arithmetic, and int32 halves the host-to-device traffic.
    batch = {_MODEL_NAMES[name]: (value if value.dtype == tf.float32 else tf.cast(value, tf.int32))
             for name, value in parsed.items()}
    batch["next_sentence_labels"] = batch["next_sentence_labels"][:, 0]
    return batch


def _per_replica_batch_size(global_batch_size, input_context):
    if input_context is None:
        return global_batch_size
    return input_context.get_per_replica_batch_size(global_batch_size)


def training_dataset(files, global_batch_size, max_seq_length, max_predictions_per_seq,
                     input_context=None, seed=0, start_step=0, vocab_size=None):
    """An endless, shuffled stream of per-replica batches for training.

    The stream is a deterministic function of (`files`, `seed`, the number of input pipelines)
    and TensorFlow's global seed, which tf.data's shuffles combine with `seed` (the tools set
    it from their --seed): that is what makes resuming exact. A job restarted at global step
    `start_step` rebuilds the same stream and skips the batches this pipeline fed before, at
    the level of raw records (they are read but not parsed). tf.distribute's iterators cannot
    be checkpointed, and skipping needs nothing but the step, on every strategy and every
    worker.

    Args:
      files: TFRecord files (`expand_input_files`), the same sorted list on every worker.
      global_batch_size: examples per training step over all replicas.
      input_context: the `tf.distribute.InputContext` given to the dataset function of
        `strategy.distribute_datasets_from_function` (None: one pipeline, one replica).
        Pipelines read disjoint files when there are at least as many files as pipelines, and
        disjoint records of the same files otherwise.
      seed: the shuffling seed.
      start_step: the global step the stream starts at.
      vocab_size: the model's; a token id not below it stops the stream with an
        InvalidArgumentError saying so (`naming_bad_input_files` names its file).
    """
    num_pipelines = input_context.num_input_pipelines if input_context else 1
    pipeline_id = input_context.input_pipeline_id if input_context else 0
    replicas_per_pipeline = (input_context.num_replicas_in_sync // num_pipelines
                             if input_context else 1)
    shard_files = len(files) >= num_pipelines
    if shard_files:
        files = files[pipeline_id::num_pipelines]
    # As Google's run_pretraining.py: shuffle the files, read several at once, shuffle records.
    filenames = _files_with_compression(files).shuffle(len(files), seed=seed).repeat()
    records = filenames.interleave(
        tf.data.TFRecordDataset, cycle_length=min(len(files), _MAX_PARALLEL_FILES),
        num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
    if not shard_files:
        records = records.shard(num_pipelines, pipeline_id)
    records = records.shuffle(_SHUFFLE_BUFFER_RECORDS, seed=seed + 1)
    batches = records.batch(_per_replica_batch_size(global_batch_size, input_context),
                            drop_remainder=True)
    # Each step takes one batch per replica this pipeline feeds.
    batches = batches.skip(start_step * replicas_per_pipeline)
    batches = batches.map(
        lambda s: _parse_batch(s, max_seq_length, max_predictions_per_seq, vocab_size),
        num_parallel_calls=tf.data.AUTOTUNE)
    return batches.prefetch(tf.data.AUTOTUNE)


def count_records(files, limit=None):
    """The number of records in `files` (stopping at `limit`); an unreadable file is an
    `InputFileError` naming it."""
    total = 0
    for path in files:
        remaining = None if limit is None else limit - total
        if remaining is not None and remaining <= 0:
            break
        records = read_records(path)
        if remaining is not None:
            records = records.take(remaining)
        try:
            total += int(records.reduce(np.int64(0), lambda count, _: count + 1))
        except tf.errors.OpError as e:
            raise InputFileError(f"{path}: corrupt or truncated TFRecord file "
                                 f"({bare_message(e)})") from e
    return total


def _padding_record(max_seq_length, max_predictions_per_seq):
    # An all-zero input_mask marks a padding example: a real one always has [CLS]. Its
    # masked_lm_weights are 0 too, so it adds nothing to any loss or metric.
    features = {name: tf.train.Feature(float_list=tf.train.FloatList(value=[0.0] * length))
                if name in _FLOAT_FEATURES else
                tf.train.Feature(int64_list=tf.train.Int64List(value=[0] * length))
                for name, length in (
                    [(n, max_seq_length) for n in _SEQUENCE_FEATURES]
                    + [(n, max_predictions_per_seq) for n in _PREDICTION_FEATURES]
                    + [("next_sentence_labels", 1)])}
    return tf.train.Example(features=tf.train.Features(feature=features)).SerializeToString()


def evaluation_dataset(files, global_batch_size, max_seq_length, max_predictions_per_seq,
                       num_records, input_context=None, vocab_size=None):
    """The first `num_records` records of `files`, in order, as per-replica batches.

    The last global batch is completed with padding examples (all-zero `input_mask`, zero
    `masked_lm_weights`) rather than dropped, so every record counts, shapes stay static,
    and every pipeline runs the same number of steps (a multi-worker job must). Pipelines
    take disjoint records. `vocab_size`: as in `training_dataset`.
    """
    num_pipelines = input_context.num_input_pipelines if input_context else 1
    pipeline_id = input_context.input_pipeline_id if input_context else 0
    padding = -num_records % global_batch_size
    records = _read_records_of_files(files).take(num_records).concatenate(
        tf.data.Dataset.from_tensors(_padding_record(max_seq_length, max_predictions_per_seq))
        .repeat(padding))
    records = records.shard(num_pipelines, pipeline_id)
    batches = records.batch(_per_replica_batch_size(global_batch_size, input_context),
                            drop_remainder=True)
    batches = batches.map(
        lambda s: _parse_batch(s, max_seq_length, max_predictions_per_seq, vocab_size),
        num_parallel_calls=tf.data.AUTOTUNE)
    return batches.prefetch(tf.data.AUTOTUNE)


def check_same_record_lengths(files):
    """Raises `InputFileError` naming the first file whose records have other lengths
    (`max_seq_length`, `max_predictions_per_seq`) than most files' (a tie: than the first
    file's). Records of one input are parsed with one shape; each file's first record stands
    for the file.
    """
    lengths = {path: record_lengths(path) for path in files}
    counts = collections.Counter(lengths.values())
    if len(counts) < 2:
        return
    common = max(counts, key=lambda shape: (counts[shape], shape == lengths[files[0]]))
    odd = [path for path in files if lengths[path] != common]
    more = f" (and {len(odd) - 1} more file(s) that differ)" if len(odd) > 1 else ""
    raise InputFileError(
        f"{odd[0]}: records have max_seq_length {lengths[odd[0]][0]} and "
        f"max_predictions_per_seq {lengths[odd[0]][1]}, but {counts[common]} other input "
        f"file(s) have {common[0]} and {common[1]}{more}; one input must hold records of one "
        f"length")


def find_unreadable_file(files, max_seq_length, max_predictions_per_seq, vocab_size=None):
    """`(path, problem)` of the first file that cannot be read and parsed, or that holds a
    token id not below `vocab_size` (when given), else None.

    Example:
        >>> find_unreadable_file(["a.tfrecord", "b.tfrecord"], 128, 20, vocab_size=30522)
        ('b.tfrecord', "holds token id 30600, but the model's vocab_size is 30522: ...")
    """
    for path in files:
        batches = read_records(path).batch(1024).map(
            lambda s: _parse_batch(s, max_seq_length, max_predictions_per_seq))
        largest = -1
        try:
            for batch in batches:
                largest = max(largest, int(_largest_token_id(batch["input_word_ids"],
                                                              batch["masked_lm_ids"])))
        except tf.errors.OpError as e:
            return path, (f"corrupt, truncated or not a pre-training record file "
                          f"({bare_message(e)})")
        if vocab_size is not None and largest >= vocab_size:
            return path, (f"holds token id {largest}, but the model's vocab_size is "
                          f"{vocab_size}: the records were made with another vocabulary; use "
                          f"its config")
    return None


@contextlib.contextmanager
def naming_bad_input_files(files, max_seq_length, max_predictions_per_seq, vocab_size=None):
    """Turns a read or parse error of the input pipeline, or its token id check against
    `vocab_size` (see `training_dataset`), into an `InputFileError` naming the file.

    TensorFlow's own message ("corrupted record at 39", "truncated record") does not say which
    of the possibly thousands of files is bad. On such an error, the files are re-read one by
    one to find it (a file that is no TFRecord file of examples is a `NotRecordsError`); errors
    not caused by a file propagate unchanged. Files whose records have other lengths than the
    rest are named first: the lengths the records are parsed with come from one file, which may
    be the odd one, and then the others fail to parse.
    """
    try:
        yield
    # A record that is no tf.train.Example fails to parse with a message quoting its bytes,
    # which TensorFlow then fails to decode as UTF-8: that UnicodeDecodeError is the same error.
    except (tf.errors.DataLossError, tf.errors.InvalidArgumentError, UnicodeDecodeError) as error:
        check_same_record_lengths(files)
        bad = find_unreadable_file(files, max_seq_length, max_predictions_per_seq, vocab_size)
        if bad is None:
            raise
        path, problem = bad
        raise InputFileError(f"{path}: {problem}") from error
