"""Pre-training batches straight from raw text, masked anew each time they are read.

The alternative to TFRecords from `tools/create_pretraining_data.py`: the same text files (one
sentence per line, blank lines between documents) go through tokenization, pairing and masking
inside the `tf.data` pipeline, so every epoch sees the corpus with fresh masks (RoBERTa's
"dynamic masking", Liu et al., 2019) and nothing is written to disk. The batches are those of
`records_dataset.training_dataset` (same names, dtypes and static shapes), so the trainer
takes either.

Per file, in order: lines -> documents (a blank line or the end of the file ends one; lines
that are not valid UTF-8 are skipped, as the offline tool does, but uncounted: run_pretraining
warns of those at the files' start, `corpus.invalid_utf8_at_start`) -> word pieces
(`BertTokenizer`, many lines per call) -> segments (consecutive sentences of one document,
gathered up to a target length, so that text is cut at sentence boundaries; a sentence longer
than the target is a segment of its own, which the packer truncates, as the original's
`create_pretraining_data.py` truncates a line longer than a sequence; with
`cut_long_sentences`, it is cut into segments of the target length instead, so that no text
of a paragraph or book per line is lost) -> pairs of consecutive segments of a document. The
files are then interleaved and the pairs shuffled.

Next-sentence prediction, when on: each segment target is half a sequence; for half of the
pairs (and for a document's last segment, which has no successor) B is replaced by the first
segment of another pair of the shuffled window, when that is another document, label 1. The
offline algorithm differs in details that need the whole document at hand: it splits a
sequence-long chunk at a random sentence, draws 10 % shorter targets (`short_seq_prob`) and
takes B from a random sentence of the other document. With next-sentence prediction off each
sequence is one segment, `[CLS] A [SEP]`, filling the sequence, and `next_sentence_labels` is
always 0 (the trainer's next-sentence loss then learns nothing useful and should be off).

Masking is `masking.mask_batch` (15 %, 80/10/10, optionally whole words), with stateless
random numbers: the stream depends only on the files, the seed and the number of input
pipelines, and a job resumed at `start_step` continues it exactly.

Example:
    >>> tokenizer = BertTokenizer("vocab.txt", lower_case=True)
    >>> files = expand_text_files("corpus/*.txt")
    >>> dataset = dynamic_masking_dataset(files, 32, 128, 20, tokenizer=tokenizer)
    >>> sorted(next(iter(dataset)))
    ['input_mask', 'input_type_ids', 'input_word_ids', 'masked_lm_ids', 'masked_lm_positions',
     'masked_lm_weights', 'next_sentence_labels']
"""

import tensorflow as tf

from bert_tf.data.pretraining.corpus import file_names
from bert_tf.data.pretraining.masking import MASKED_LM_PROB, MaskedLmVocab, mask_batch
from bert_tf.text.bert_packer import BertPacker

# Python's str.isspace() characters: a line of only these is blank (the original strips them).
_BLANK_LINE = r"[\s\p{Z}\x{1c}-\x{1f}\x{85}]*"
_LINES_PER_TOKENIZER_CALL = 256
# Files read at once (their pairs interleave), and pairs shuffled across.
_PARALLEL_FILES = 8
_SHUFFLE_BUFFER_PAIRS = 10000
# Random next segments are taken from another pair of a window of this many shuffled pairs.
_NEXT_SENTENCE_WINDOW = 64
# Documents of different files must never be equal: a document's key is file * 2**32 + its
# index in the file.
_DOCUMENTS_PER_FILE = 2**32
# Stream ids for stateless_fold_in: the random next segments and the masks of one seed.
_NEXT_SENTENCE_STREAM, _MASKING_STREAM = 1, 2
# Every function given to tf.data here is plain TensorFlow ops: AutoGraph would only spend
# seconds per function converting them.
_plain = tf.autograph.experimental.do_not_convert


def check_arguments(files, max_seq_length, max_predictions_per_seq, next_sentence=True, *,
                    tokenizer=None, read_lines=None, cut_long_sentences=False):
    """Raises the ValueError `dynamic_masking_dataset` would for these arguments (a tool calls
    it before it writes anything: its output directory would otherwise hold a run already).
    With the `tokenizer` (and `read_lines`, `cut_long_sentences`) of the dataset, that includes
    files from which no example can be made: they are read up to the first example they make.

    Example:
        >>> check_arguments(["corpus.txt"], 128, 0)
        ValueError: max_predictions_per_seq must be at least 1, got 0.
    """
    min_length = 5 if next_sentence else 3
    if max_seq_length < min_length:
        raise ValueError(f"max_seq_length must be at least {min_length} ([CLS], [SEP]s and one "
                         f"piece per segment), got {max_seq_length}.")
    # 0 would train the next-sentence head alone, silently; below, a shape error in the graph.
    if max_predictions_per_seq < 1:
        raise ValueError(f"max_predictions_per_seq must be at least 1, got "
                         f"{max_predictions_per_seq}.")
    if not files:
        raise ValueError("dynamic_masking_dataset needs at least one text file.")
    if tokenizer is not None:
        segment_length = _segment_length(max_seq_length, next_sentence)
        _check_examples_come(
            _indexed_files(files).flat_map(_file_units(
                tokenizer, max_seq_length, next_sentence, read_lines, cut_long_sentences)),
            file_names(files), next_sentence, segment_length, cut_long_sentences)


def dynamic_masking_dataset(files, global_batch_size, max_seq_length, max_predictions_per_seq,
                            input_context=None, seed=0, start_step=0, *, tokenizer,
                            next_sentence=True, masked_lm_prob=MASKED_LM_PROB,
                            whole_word_mask=False, shuffle_buffer=_SHUFFLE_BUFFER_PAIRS,
                            read_lines=None, cut_long_sentences=False):
    """An endless stream of per-replica pre-training batches made from text `files`.

    Files from which no example can be made (no line with tokens; with next-sentence
    prediction, a single document of a single segment) are a ValueError naming them.

    Args:
      files: text files, the same sorted list on every worker (`corpus.expand_text_files`,
        which refuses records and GZIP files: read as text, they would make garbage
        examples).
      global_batch_size: examples per training step over all replicas.
      max_seq_length, max_predictions_per_seq: the shapes of the batches.
      input_context: as in `training_dataset`: pipelines read disjoint files when there are at
        least as many files as pipelines, and disjoint examples of the same files otherwise.
      seed: the seed of the file order, shuffling, pairing and masking.
      start_step: the global step the stream starts at (resuming skips what was fed).
      tokenizer: the `BertTokenizer` of the model's vocabulary.
      next_sentence: build `[CLS] A [SEP] B [SEP]` pairs with next-sentence labels (BERT), or
        single segments (RoBERTa).
      masked_lm_prob, whole_word_mask: as `create_pretraining_data.py`'s flags.
      shuffle_buffer: pairs shuffled across.
      read_lines: a file's lines as a dataset of strings, from its path (a string tensor);
        default `tf.data.TextLineDataset` (`bert_tf.data.tfds.pretraining_text` reads TFDS
        shards).
      cut_long_sentences: cut a line longer than a segment's target into segments of that
        length (nothing lost; pairs then break mid-sentence) instead of truncating it as its
        own segment (the default, as the original: on the convergence bench's
        one-sentence-per-line text the cut cost 2-5 points of held-out masked-LM accuracy at
        the same step, see docs/PERFORMANCE.md). A corpus of a book per line needs it.
    """
    check_arguments(files, max_seq_length, max_predictions_per_seq, next_sentence)
    vocab = MaskedLmVocab(tokenizer.vocab)
    num_pipelines = input_context.num_input_pipelines if input_context else 1
    pipeline_id = input_context.input_pipeline_id if input_context else 0
    replicas_per_pipeline = (input_context.num_replicas_in_sync // num_pipelines
                             if input_context else 1)
    batch_size = (input_context.get_per_replica_batch_size(global_batch_size)
                  if input_context else global_batch_size)
    segment_length = _segment_length(max_seq_length, next_sentence)
    indexed_files = _indexed_files(files)
    shard_files = len(files) >= num_pipelines
    if shard_files:
        indexed_files = indexed_files.shard(num_pipelines, pipeline_id)
    units_of_file = _file_units(tokenizer, max_seq_length, next_sentence, read_lines,
                                cut_long_sentences)

    # The files repeat forever: without this check, files that make no example would leave the
    # stream waiting for one forever. It reads this pipeline's share of the files (their first
    # lines, again when a tool's check_arguments read them all before it wrote anything).
    read_files = file_names(files[pipeline_id::num_pipelines] if shard_files else files)
    if shard_files and num_pipelines > 1:
        read_files += (f" (read by input pipeline {pipeline_id} of {num_pipelines} alone: "
                       f"each reads its own share of the {len(files)} files)")
    _check_examples_come(indexed_files.flat_map(units_of_file), read_files, next_sentence,
                         segment_length, cut_long_sentences)
    indexed_files = indexed_files.shuffle(len(files), seed=seed).repeat()
    units = indexed_files.interleave(
        units_of_file, cycle_length=min(len(files), _PARALLEL_FILES),
        num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
    units = units.shuffle(shuffle_buffer, seed=seed + 1)
    if next_sentence:
        units = units.ragged_batch(_NEXT_SENTENCE_WINDOW).enumerate().map(_plain(
            lambda index, window: _with_random_next(
                window, tf.random.experimental.stateless_fold_in(
                    [seed, _NEXT_SENTENCE_STREAM], index)))).unbatch()
    else:
        units = units.map(_plain(lambda segment, document: (segment, tf.constant(0, tf.int32))))
    if not shard_files:
        # Every pipeline makes the same examples and keeps its share of them. Sharding the
        # pairs instead gave each pipeline the same pairs every pass when a pass made a
        # multiple of the pipelines' number: a pipeline given only a document's last pair (no
        # B of its own), and no other document to take a B from, waited forever.
        units = units.shard(num_pipelines, pipeline_id)

    packer = BertPacker(max_seq_length, vocab.cls_id, vocab.sep_id, vocab.pad_id)

    @_plain
    def pack_and_mask(index, unit):
        segments, labels = unit[:-1], unit[-1]
        packed = packer(list(segments))
        masked = mask_batch(packed["input_word_ids"], packed["input_mask"], vocab,
                            masked_lm_prob, max_predictions_per_seq, whole_word_mask,
                            tf.random.experimental.stateless_fold_in([seed, _MASKING_STREAM],
                                                                     index))
        batch = {"input_mask": packed["input_mask"], "input_type_ids": packed["input_type_ids"],
                 "next_sentence_labels": labels, **masked}
        return {name: tf.ensure_shape(value, [batch_size, *value.shape[1:]])
                for name, value in batch.items()}

    batches = units.ragged_batch(batch_size, drop_remainder=True).enumerate()
    # Each step takes one batch per replica this pipeline feeds; the batch index (and so its
    # masks) is counted before skipping, so a resumed stream is the uninterrupted one.
    batches = batches.skip(start_step * replicas_per_pipeline)
    batches = batches.map(pack_and_mask, num_parallel_calls=tf.data.AUTOTUNE)
    return batches.prefetch(tf.data.AUTOTUNE)


def _segment_length(max_seq_length, next_sentence):
    """The target length of a segment: half of the pair's room (`[CLS] A [SEP] B [SEP]`), or
    all of it."""
    return (max_seq_length - 3) // 2 if next_sentence else max_seq_length - 2


def _indexed_files(files):
    """A dataset of `(index, path)` of `files`."""
    return tf.data.Dataset.from_tensor_slices(
        (tf.range(len(files), dtype=tf.int64), tf.constant(files)))


def _file_units(tokenizer, max_seq_length, next_sentence, read_lines, cut_long_sentences):
    """`(file index, path) -> dataset` of the units of a file: pairs `(A, B, document key, has
    B)` with next-sentence prediction, segments `(ids, document key)` without."""
    segment_length = _segment_length(max_seq_length, next_sentence)
    # Truncated, a sentence keeps at most a sequence's room: the packer would drop the rest.
    piece_length = segment_length if cut_long_sentences else max_seq_length - 2

    @_plain
    def units_of_file(file_index, path):
        sentences = _sentences(path, file_index, tokenizer, piece_length, cut_long_sentences,
                               read_lines)
        segments = _segments(sentences, segment_length)
        return _pairs(segments) if next_sentence else segments

    return units_of_file


def _check_examples_come(units, read_files, next_sentence, segment_length,
                         cut_long_sentences):
    """Raises a ValueError naming `read_files` (the files, as a message names them) when a
    pass over their `units` (segments, or pairs `(A, B, document key, has B)`) makes no
    example. Reads as far as the first unit that makes one: a segment, a pair with its B, or a
    pair of a second document (whose A can be a random B)."""
    first_document = None
    for unit in units:
        if not next_sentence:
            return
        _, _, document, has_b = (value.numpy() for value in unit)
        if has_b or first_document not in (None, document):
            return
        first_document = document
    if first_document is None:
        why = ("no line has tokens (the files are empty or blank, or their text is not "
               "UTF-8)")
    else:
        why = (f"they hold a single document and it makes a single segment (sentences are "
               f"gathered up to {segment_length} pieces): sentence pairs need a second document "
               f"(after a blank line) or a longer one, or no next-sentence prediction")
        if not cut_long_sentences:
            why += (f"; a line longer than {segment_length} pieces is one segment, truncated "
                    f"(run_pretraining --cut_long_lines cuts it into segments)")
    raise ValueError(f"{read_files}: no pre-training example can be made: {why}")


def _sentences(path, file_index, tokenizer, max_length, cut, read_lines=None):
    """`(document key, word-piece ids)` of the non-blank, valid-UTF-8 lines with tokens of a
    file, in order, each line longer than `max_length` pieces cut into pieces of that length
    or truncated to it (`_sentence_pieces`)."""
    lines = read_lines(path) if read_lines else tf.data.TextLineDataset(path)
    lines = lines.filter(_plain(lambda line: tf.equal(
        tf.strings.unicode_transcode(line, "UTF-8", "UTF-8", errors="replace"), line)))

    @_plain
    def number_documents(document, line):
        blank = tf.strings.regex_full_match(line, _BLANK_LINE)
        document += tf.cast(blank, tf.int64)
        return document, (document, line, blank)

    lines = lines.scan(tf.constant(0, tf.int64), number_documents)
    lines = lines.filter(_plain(lambda document, line, blank: ~blank))
    sentences = lines.batch(_LINES_PER_TOKENIZER_CALL).map(_plain(
        lambda documents, texts, _: _sentence_pieces(
            file_index * _DOCUMENTS_PER_FILE + documents, tokenizer.tokenize_to_pieces(texts),
            max_length, cut)))
    # The map makes each unbatched row a dense tensor (tf.data keeps it a RaggedTensor else).
    return sentences.unbatch().map(_plain(lambda document, ids: (document, ids)))


def _sentence_pieces(documents, ids, max_length, cut):
    """`(documents, ids)` of a batch of sentences (`ids` ragged), each sentence longer than
    `max_length` pieces cut into consecutive pieces of `max_length` (the last one shorter),
    with its document key repeated, or, unless `cut`, truncated to its first piece; sentences
    without pieces are dropped.

    Example (`max_length` 2): ids `[[1, 2, 3], [], [4]]` -> `[[1, 2], [3], [4]]` cut,
    `[[1, 2], [4]]` truncated."""
    lengths = ids.row_lengths()
    if not cut:
        kept = lengths > 0
        return tf.boolean_mask(documents, kept), tf.ragged.boolean_mask(ids[:, :max_length], kept)
    counts = (lengths + max_length - 1) // max_length
    rows = tf.repeat(tf.range(tf.size(counts, out_type=tf.int64)), counts)
    index_in_row = tf.range(tf.size(rows, out_type=tf.int64)) - tf.gather(
        tf.cumsum(counts, exclusive=True), rows)
    piece_lengths = tf.minimum(tf.cast(max_length, tf.int64),
                               tf.gather(lengths, rows) - index_in_row * max_length)
    return (tf.gather(documents, rows),
            tf.RaggedTensor.from_row_lengths(ids.flat_values, piece_lengths))


def _with_end(dataset, *end):
    """`dataset` followed by one element `end` that flushes a scan's state."""
    return dataset.concatenate(tf.data.Dataset.from_tensors(end))


def _segments(sentences, target_length):
    """`(ids, document key)` of runs of consecutive sentences of one document, each as long
    as fits in `target_length` (a single longer sentence is a segment of its own)."""
    empty = tf.zeros([0], tf.int32)

    @_plain
    def gather(state, sentence):
        document, tokens = state
        new_document, ids = sentence
        emit = (tf.size(tokens) > 0) & ((new_document != document) | (
            tf.size(tokens) + tf.size(ids) > target_length))
        tokens_after = tf.cond(emit, lambda: ids, lambda: tf.concat([tokens, ids], 0))
        return (new_document, tokens_after), (emit, tokens, document)

    segments = _with_end(sentences, tf.constant(-1, tf.int64), empty).scan(
        (tf.constant(-1, tf.int64), empty), gather)
    return segments.filter(_plain(lambda emit, tokens, document: emit)).map(
        _plain(lambda emit, tokens, document: (tokens, document)))


def _pairs(segments):
    """`(A, B, document key, has B)`: each segment with the one after it in its document as
    B, or, at a document's end, with no B."""
    empty = tf.zeros([0], tf.int32)

    @_plain
    def pair(state, segment):
        a, a_document, has_a = state
        tokens, document = segment
        has_b = has_a & tf.equal(document, a_document)
        emitted = (has_a, a, tf.cond(has_b, lambda: tokens, lambda: empty), a_document, has_b)
        # A used B: start afresh. Otherwise this segment waits for its own B.
        next_state = tf.cond(has_b, lambda: (empty, tf.constant(-1, tf.int64), False),
                             lambda: (tokens, document, tf.size(tokens) > 0))
        return next_state, emitted

    pairs = _with_end(segments, empty, tf.constant(-1, tf.int64)).scan(
        (empty, tf.constant(-1, tf.int64), False), pair)
    return pairs.filter(_plain(lambda emit, a, b, document, has_b: emit)).map(
        _plain(lambda emit, a, b, document, has_b: (a, b, document, has_b)))


def _with_random_next(window, seed):
    """`(A, B, label)` for a window of shuffled pairs: for half of them, and for those without
    B, B becomes the A of the next pair (cyclically), label 1, if that is another document;
    a pair without B that finds none is dropped."""
    a, b, documents, has_b = window
    count = tf.shape(documents)[0]
    other = (tf.range(count) + 1) % count
    coin = tf.random.stateless_uniform([count], seed) < 0.5
    random_next = (coin | ~has_b) & tf.not_equal(tf.gather(documents, other), documents)
    choices = tf.concat([b, tf.gather(a, other)], axis=0)
    b = tf.gather(choices, tf.where(random_next, count + tf.range(count), tf.range(count)))
    keep = random_next | has_b
    return (tf.ragged.boolean_mask(a, keep), tf.ragged.boolean_mask(b, keep),
            tf.boolean_mask(tf.cast(random_next, tf.int32), keep))
