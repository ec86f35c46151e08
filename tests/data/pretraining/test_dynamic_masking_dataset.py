"""Pre-training batches from raw text: the TFRecord reader's batches, built from sentences of
one document, masked anew each epoch, deterministic and resumable."""

import os
import re
import threading

import numpy as np
import pytest
import tensorflow as tf

from bert_tf.data.pretraining.dynamic_masking_dataset import (check_arguments,
                                                               dynamic_masking_dataset)
from bert_tf.data.pretraining.records_dataset import training_dataset
from bert_tf.text.bert_tokenizer import BertTokenizer
from tests.data.pretraining.records import write_pretraining_records
from tests.data.pretraining.toy_corpus import (CLS, FIRST_NUMBERED, PAD, SEP, VOCAB,
                                               numbered_documents)
from tests.resources import minilm_dir, shared_data_path

SEQ_LENGTH, PREDICTIONS, BATCH = 24, 4, 8
# Documents of 2-word sentences; every word once. Blank lines of several kinds of whitespace
# separate them, and one line in latin-1 (skipped) sits inside a document.
DOCUMENTS = numbered_documents([5, 1, 7, 3, 6, 2, 8, 4, 5, 9], 2)
SEPARATORS = ["", " \t", "\u3000", "\xa0", ""]


def write_text(path, documents, first_separator=0):
    lines = []
    for index, document in enumerate(documents):
        if index:
            lines.append(SEPARATORS[(first_separator + index) % len(SEPARATORS)])
        lines.extend(document)
    data = "\n".join(lines).encode() + b"\n"
    if first_separator == 0:
        data = data.replace(b"w1\n", b"w1\nw199 na\xefve\n", 1)   # latin-1 in document 0
    path.write_bytes(data)
    return str(path)


@pytest.fixture(scope="module")
def tokenizer():
    return BertTokenizer(VOCAB, lower_case=True)


@pytest.fixture(scope="module")
def text_file(tmp_path_factory):
    return write_text(tmp_path_factory.mktemp("text") / "corpus.txt", DOCUMENTS)


def take(dataset, count):
    return [{k: v.numpy() for k, v in batch.items()} for batch in dataset.take(count)]


@pytest.fixture(scope="module")
def pair_dataset(text_file, tokenizer):
    return dynamic_masking_dataset([text_file], BATCH, SEQ_LENGTH, PREDICTIONS, seed=1,
                                   tokenizer=tokenizer, shuffle_buffer=20)


@pytest.fixture(scope="module")
def pair_batches(pair_dataset):
    return take(pair_dataset, 20)        # about five epochs of the 50 sentences


def word(token):
    return token - FIRST_NUMBERED


def document_of(token):
    sentence = word(token) // 2
    return next(d for d, document in enumerate(DOCUMENTS)
                if sentence < sum(len(x) for x in DOCUMENTS[:d + 1]))


def examples(batches):
    """Per example: (unmasked tokens without padding, segment ids, label, predictions)."""
    for batch in batches:
        for i in range(BATCH):
            length = int(batch["input_mask"][i].sum())
            assert (batch["input_mask"][i] == [1] * length + [0] * (SEQ_LENGTH - length)).all()
            tokens = batch["input_word_ids"][i].copy()
            n = int(batch["masked_lm_weights"][i].sum())
            positions = batch["masked_lm_positions"][i, :n]
            tokens[positions] = batch["masked_lm_ids"][i, :n]
            assert (tokens[length:] == PAD).all()
            yield (tokens[:length].tolist(), batch["input_type_ids"][i, :length].tolist(),
                   int(batch["next_sentence_labels"][i]), positions.tolist())


def consecutive_sentences(tokens):
    """Checks that `tokens` are whole consecutive sentences of one document."""
    words = [word(t) for t in tokens]
    assert words == list(range(words[0], words[0] + len(words)))
    assert words[0] % 2 == 0 and len(words) % 2 == 0
    assert len({document_of(t) for t in tokens}) == 1


def test_batches_are_the_tfrecord_readers(tmp_path, pair_dataset):
    records = str(tmp_path / "records.tfrecord")
    write_pretraining_records(records, 16, SEQ_LENGTH, PREDICTIONS)
    from_records = training_dataset([records], BATCH, SEQ_LENGTH, PREDICTIONS)
    assert pair_dataset.element_spec == from_records.element_spec     # names, dtypes, shapes


def test_pairs_are_sentences_and_labels_say_whether_b_follows_a(pair_batches):
    labels = []
    for tokens, segment_ids, label, positions in examples(pair_batches):
        first_sep = tokens.index(SEP)
        a, b = tokens[1:first_sep], tokens[first_sep + 1:-1]
        assert tokens[0] == CLS and tokens[-1] == SEP and SEP not in b
        assert segment_ids == [0] * (len(a) + 2) + [1] * (len(b) + 1)
        # Each segment is at most half of the 21 pieces: here 5 sentences of 2 words.
        assert 2 <= len(a) <= 10 and 2 <= len(b) <= 10
        consecutive_sentences(a)
        consecutive_sentences(b)
        if label:
            assert document_of(b[0]) != document_of(a[0])
        else:
            assert word(b[0]) == word(a[-1]) + 1 and document_of(b[0]) == document_of(a[0])
        assert len(positions) == min(PREDICTIONS, max(1, round(len(tokens) * 0.15)))
        assert not {tokens[p] for p in positions} & {CLS, SEP}
        assert FIRST_NUMBERED + 199 not in tokens             # from the latin-1 line
        labels.append(label)
    # Segments of up to 5 sentences: the documents of 6-9 sentences make one pair each, with
    # a random B half of the time; the 6 others a single segment, which always gets one:
    # 0.5 * 4/10 + 6/10.
    assert abs(np.mean(labels) - 0.8) < 0.1


def test_masks_change_from_epoch_to_epoch(pair_batches):
    masks = {}
    for tokens, _, label, positions in examples(pair_batches):
        if not label:
            masks.setdefault(tuple(tokens), set()).add(tuple(positions))
    assert max(len(seen) for seen in masks.values()) > 1
    # Every sentence comes back in later epochs.
    assert len(masks) < sum(1 for _ in examples(pair_batches)) / 2


def test_same_seed_same_stream_and_resume_continues_it(pair_batches, text_file, tokenizer):
    resumed = take(dynamic_masking_dataset([text_file], BATCH, SEQ_LENGTH, PREDICTIONS, seed=1,
                                           start_step=5, tokenizer=tokenizer,
                                           shuffle_buffer=20), 3)
    for expected, batch in zip(pair_batches[5:8], resumed):
        for name in expected:
            np.testing.assert_array_equal(batch[name], expected[name], err_msg=name)


@pytest.fixture(scope="module")
def single_segment_pipelines(tmp_path_factory, tokenizer):
    """Two input pipelines over two files (half of the documents each), without next-sentence
    prediction."""
    directory = tmp_path_factory.mktemp("files")
    files = [write_text(directory / "a.txt", DOCUMENTS[:5], first_separator=1),
             write_text(directory / "b.txt", DOCUMENTS[5:], first_separator=1)]
    batches = []
    for pipeline in range(2):
        context = tf.distribute.InputContext(num_input_pipelines=2, input_pipeline_id=pipeline,
                                             num_replicas_in_sync=2)
        batches.append(take(dynamic_masking_dataset(
            files, 2 * BATCH, SEQ_LENGTH, PREDICTIONS, context, seed=3, tokenizer=tokenizer,
            next_sentence=False, shuffle_buffer=20), 8))
    return batches


def test_single_segments_fill_the_sequence_within_a_document(single_segment_pipelines):
    for batches in single_segment_pipelines:
        for tokens, segment_ids, label, _ in examples(batches):
            assert tokens[0] == CLS and tokens[-1] == SEP and tokens.count(SEP) == 1
            assert segment_ids == [0] * len(tokens) and label == 0
            consecutive_sentences(tokens[1:-1])
            # Sentences are gathered up to 22 pieces (11 sentences) or the document's end.
            document = document_of(tokens[1])
            document_end = 2 * sum(len(d) for d in DOCUMENTS[:document + 1]) - 1
            assert len(tokens) == SEQ_LENGTH or word(tokens[-2]) == document_end


def test_pipelines_read_disjoint_files_and_all_of_them(single_segment_pipelines):
    words = [{word(t) for tokens, _, _, _ in examples(batches) for t in tokens[1:-1]}
             for batches in single_segment_pipelines]
    first_half = 2 * sum(len(d) for d in DOCUMENTS[:5])
    total = 2 * sum(len(d) for d in DOCUMENTS)
    assert sorted(words[0] | words[1]) == list(range(total))
    assert words[0] == set(range(first_half))          # pipeline 0 reads the first file
    assert not words[0] & words[1]


def long_line_file(tmp_path):
    """A 60-word line (a paragraph or a book per line: 6 segments of 10 at SEQ_LENGTH 24),
    then a document of one 4-word sentence."""
    path = tmp_path / "long.txt"
    path.write_text(" ".join(f"w{i}" for i in range(60)) + "\n\nw60 w61 w62 w63\n")
    return str(path)


def test_a_line_longer_than_a_segment_is_truncated_as_its_own_segment(tmp_path, tokenizer):
    # As the original's create_pretraining_data.py: an A/B on the convergence bench's text
    # (one sentence per line) lost 2-5 points of held-out accuracy with such lines cut.
    batches = take(dynamic_masking_dataset([long_line_file(tmp_path)], BATCH, SEQ_LENGTH,
                                           PREDICTIONS, seed=5, tokenizer=tokenizer,
                                           shuffle_buffer=8), 4)
    # Each example pairs the two documents' segments: the line's start, truncated to make room
    # for the other document's sentence (the packer's round robin), and that sentence.
    long_start, short = list(range(17)), [60, 61, 62, 63]
    pairs = []
    for tokens, _, label, _ in examples(batches):
        first_sep = tokens.index(SEP)
        pairs.append(([word(t) for t in tokens[1:first_sep]],
                      [word(t) for t in tokens[first_sep + 1:-1]], label))
    assert {(a == long_start, b == short) for a, b, _ in pairs} == {(True, True), (False, False)}
    assert all(pair in [(long_start, short, 1), (short, long_start, 1)] for pair in pairs)


def test_a_line_longer_than_a_segment_is_cut_into_segments(tmp_path, tokenizer):
    # With cut_long_sentences (--cut_long_lines), no word of such a line is lost.
    batches = take(dynamic_masking_dataset([long_line_file(tmp_path)], BATCH, SEQ_LENGTH,
                                           PREDICTIONS, seed=5, tokenizer=tokenizer,
                                           shuffle_buffer=8, cut_long_sentences=True), 4)
    seen = set()
    for tokens, _, label, _ in examples(batches):
        first_sep = tokens.index(SEP)
        a, b = [word(t) for t in tokens[1:first_sep]], [word(t) for t in tokens[first_sep + 1:-1]]
        assert len(a) <= 10 and len(b) <= 10          # each segment fits in its half
        seen.update(a)
        if not label:
            assert a + b == list(range(a[0], a[0] + len(a + b)))
            seen.update(b)
    assert seen == set(range(64))


def test_bad_arguments_are_named(text_file, tokenizer):
    with pytest.raises(ValueError, match="max_seq_length must be at least 5"):
        dynamic_masking_dataset([text_file], 8, 4, 2, tokenizer=tokenizer)
    with pytest.raises(ValueError, match="at least one text file"):
        dynamic_masking_dataset([], 8, 16, 2, tokenizer=tokenizer)
    for predictions in (0, -1):
        with pytest.raises(ValueError, match=f"^max_predictions_per_seq must be at least 1, got "
                                             f"{predictions}.$"):
            dynamic_masking_dataset([text_file], 8, 16, predictions, tokenizer=tokenizer)


@pytest.mark.parametrize("next_sentence", [True, False], ids=["pairs", "segments"])
def test_files_without_tokens_are_an_error_naming_them(tmp_path, tokenizer, next_sentence):
    # Empty, blank lines only, control characters only, latin-1 only (skipped lines): the
    # endless stream of these files used to wait forever for its first example.
    contents = [b"", " \t\n\u3000\n".encode(), b"\x01\x02\n\n\x03\n",
                "w1 na\xefve\n".encode("latin-1")]
    files = []
    for index, content in enumerate(contents):
        (tmp_path / f"{index}.txt").write_bytes(content)
        files.append(str(tmp_path / f"{index}.txt"))
    message = (f"^{re.escape(', '.join(files[:3]))} and 1 more files: no pre-training example "
               f"can be made: no line has tokens")
    with pytest.raises(ValueError, match=message):
        dynamic_masking_dataset(files, BATCH, SEQ_LENGTH, PREDICTIONS, tokenizer=tokenizer,
                                next_sentence=next_sentence)
    # What a tool checks before it writes anything.
    with pytest.raises(ValueError, match=message):
        check_arguments(files, SEQ_LENGTH, PREDICTIONS, next_sentence, tokenizer=tokenizer)
    check_arguments(files[:1], SEQ_LENGTH, PREDICTIONS, next_sentence)   # not read without it


def test_building_the_stream_opens_no_file_to_check_it(text_file, tokenizer, monkeypatch):
    # The files come checked (corpus.expand_text_files): run_pretraining's early check and
    # each input pipeline's opened every file twice more, many reads of a gs:// corpus.
    opened, gfile = [], tf.io.gfile.GFile
    monkeypatch.setattr(tf.io.gfile, "GFile",
                        lambda name, mode="r": opened.append(name) or gfile(name, mode))
    check_arguments([text_file], SEQ_LENGTH, PREDICTIONS)
    dynamic_masking_dataset([text_file], BATCH, SEQ_LENGTH, PREDICTIONS, tokenizer=tokenizer)
    assert opened == []


def test_pairs_need_a_second_segment_or_a_second_document(tmp_path, tokenizer):
    def dataset(*texts, next_sentence=True):
        files = []
        for index, text in enumerate(texts):
            (tmp_path / f"{index}.txt").write_text(text, encoding="utf-8")
            files.append(str(tmp_path / f"{index}.txt"))
        return dynamic_masking_dataset(files, BATCH, SEQ_LENGTH, PREDICTIONS, seed=2,
                                       tokenizer=tokenizer, next_sentence=next_sentence,
                                       shuffle_buffer=4)

    def labels(*texts, next_sentence=True):
        return set(take(dataset(*texts, next_sentence=next_sentence), 1)[0][
            "next_sentence_labels"])

    # One document of 4 pieces: a single segment (up to 10 pieces), which has no B of its own
    # and no other document to take a random B from.
    short = "w1 w2\nw3 w4\n"
    with pytest.raises(ValueError, match=re.escape(
            f"{tmp_path / '0.txt'}: no pre-training example can be made: they hold a single "
            f"document and it makes a single segment (sentences are gathered up to 10 pieces)")):
        dataset(short)
    assert labels(short, next_sentence=False) == {0}
    assert labels(short, "w5 w6\n") == {1}         # a random B from another document
    assert labels("w1 w2 w3 w4 w5 w6\nw7 w8 w9 w10 w11 w12\n") == {0}   # two segments


def test_a_pipeline_without_examples_names_its_files(tmp_path, tokenizer):
    (tmp_path / "a.txt").write_text("")
    (tmp_path / "b.txt").write_text("w1 w2\nw3 w4\n\nw5 w6\n")
    files = [str(tmp_path / "a.txt"), str(tmp_path / "b.txt")]
    contexts = [tf.distribute.InputContext(num_input_pipelines=2, input_pipeline_id=pipeline,
                                           num_replicas_in_sync=2) for pipeline in range(2)]
    with pytest.raises(ValueError, match=f"^{re.escape(files[0])} " + re.escape(
            "(read by input pipeline 0 of 2 alone: each reads its own share of the 2 files): "
            "no pre-training example can be made: no line has tokens")):
        dynamic_masking_dataset(files, 2 * BATCH, SEQ_LENGTH, PREDICTIONS, contexts[0],
                                tokenizer=tokenizer)
    batch = take(dynamic_masking_dataset(files, 2 * BATCH, SEQ_LENGTH, PREDICTIONS, contexts[1],
                                         tokenizer=tokenizer, shuffle_buffer=4), 1)[0]
    assert batch["input_word_ids"].shape == (BATCH, SEQ_LENGTH)


def first_batches(dataset, count, seconds=60):
    """The first `count` batches of `dataset`, or a failure when they take over `seconds` (a
    stream that waits forever for an example)."""
    batches = []
    reader = threading.Thread(target=lambda: batches.extend(take(dataset, count)), daemon=True)
    reader.start()
    reader.join(seconds)
    assert len(batches) == count, f"no {count} batches within {seconds} s"
    return batches


@pytest.mark.parametrize("text", [
    "w1 w2\n\nw3 w4\n",                         # two documents of one segment each
    "w1 w2 w3 w4 w5 w6\nw7 w8 w9 w10 w11 w12\nw13 w14 w15 w16 w17 w18\n",  # three segments
], ids=["two-documents", "three-segments"])
def test_pipelines_sharing_a_file_each_get_every_other_example(tmp_path, tokenizer, text):
    # Two pairs per pass, sharded between two pipelines, gave each the same pair every pass:
    # the pipeline whose pair has no B (and no other document to take one from) waited forever.
    (tmp_path / "one.txt").write_text(text)
    files = [str(tmp_path / "one.txt")]
    single = first_batches(dynamic_masking_dataset(files, BATCH, SEQ_LENGTH, PREDICTIONS,
                                                   seed=4, tokenizer=tokenizer,
                                                   shuffle_buffer=4), 2)
    shares = [first_batches(dynamic_masking_dataset(
        files, 2 * BATCH, SEQ_LENGTH, PREDICTIONS,
        tf.distribute.InputContext(num_input_pipelines=2, input_pipeline_id=pipeline,
                                   num_replicas_in_sync=2),
        seed=4, tokenizer=tokenizer, shuffle_buffer=4), 1) for pipeline in range(2)]
    # The examples of one pipeline, taken in turns from two (masks aside: each is masked by
    # its own pipeline).
    expected = [example[:3] for example in examples(single)]
    for pipeline, batches in enumerate(shares):
        assert [example[:3] for example in examples(batches)] == expected[pipeline::2]


def test_gutenberg_with_a_real_vocabulary():
    book = shared_data_path("gutenberg/chesterton-ball.txt")
    tokenizer = BertTokenizer(os.path.join(minilm_dir(), "vocab.txt"), lower_case=True)
    batches = take(dynamic_masking_dataset([book], 32, 128, 20, tokenizer=tokenizer,
                                           whole_word_mask=True, shuffle_buffer=1000), 4)
    for batch in batches:
        weights = batch["masked_lm_weights"]
        assert weights.sum() > 32 and set(np.unique(weights)) <= {0.0, 1.0}
        assert set(batch["next_sentence_labels"]) == {0, 1}
        assert (batch["input_word_ids"][:, 0] == tokenizer.token_id("[CLS]")).all()
        mask_id = tokenizer.token_id("[MASK]")
        masked = np.take_along_axis(batch["input_word_ids"], batch["masked_lm_positions"], 1)
        assert 0.6 < (masked[weights > 0] == mask_id).mean() <= 1.0
        # Whole words: a predicted "##" piece has its word's previous piece predicted too.
        for positions, labels, row_weights in zip(batch["masked_lm_positions"],
                                                  batch["masked_lm_ids"], weights):
            predicted = set(positions[row_weights > 0].tolist())
            for position, label in zip(positions[row_weights > 0], labels[row_weights > 0]):
                if tokenizer.vocab[label].startswith("##"):
                    assert position - 1 in predicted
