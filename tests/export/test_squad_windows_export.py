"""The squad SavedModel reads a long context in windows as run_squad does: the same packed
windows as `squad_features`, the same answer as `squad_postprocess` decoding the same model's
logits (synthetic texts, and real dev questions when ../shared is present), an answer found past
the first window, at most `max_windows` windows for any context, and empty or odd inputs."""

import json
import random

import keras
import numpy as np
import pytest
import tensorflow as tf

from bert_tf.data.tasks.squad import SquadExample, squad_features
from bert_tf.export import export_task_model
from bert_tf.export.text_inputs import MAX_BYTES_PER_TOKEN, RawTextPacker
from bert_tf.metrics.squad_postprocess import best_spans, decode_answer
from bert_tf.text.bert_tokenizer import BertTokenizer
from tests.export.task_examples import new_task_model
from tests.export.tiny_models import VOCAB, encoder_inputs
from tests.resources import shared_data_path

SEQ = 64
# Windows of 49 to 61 context tokens (64 - 3 - question), 16 apart: 8 of them read 161 to 173.
WINDOWS = {"max_query_length": 12, "doc_stride": 16, "max_windows": 8}
MAX_ANSWER_LENGTH = 6
WORDS = VOCAB[5:] + ["café", "東京", "😀", "naïve", "Zürich"]


def synthetic_texts(seed, counts):
    rng = random.Random(seed)
    return [" ".join(rng.choice(WORDS) for _ in range(count)) for count in counts]


# Contexts of 1 to 8 windows (and an empty one), questions of up to 20 words (cut at 12 pieces).
CONTEXTS = synthetic_texts(0, [0, 2, 30, 50, 70, 85, 95, 100, 105, 118])
QUESTIONS = ["what is the film?", "", *synthetic_texts(1, [20, 1, 3, 5, 8, 12, 2]), "Zürich?"]


@pytest.fixture(scope="module")
def squad_model():
    """A random span labeler without position embeddings: what it answers depends on the words
    around, not on where a window puts them (with them, this one answers in the first window)."""
    keras.utils.set_random_seed(2)
    return zeroed(new_task_model("squad"), "position_embeddings")


def zeroed(model, *suffixes):
    """`model` (built) with its weights whose path ends in one of `suffixes` set to 0."""
    model(encoder_inputs([[2, 3]], SEQ))
    for weight in model.weights:
        if weight.path.endswith(suffixes):
            weight.assign(tf.zeros_like(weight))
    return model


def exported(model, vocab_file, directory, **arguments):
    """`serving_default` of `model`'s squad export with these tests' windows."""
    path = str(directory / "1")
    export_task_model(path, "squad", model, vocab_file, do_lower_case=True, seq_length=SEQ,
                      max_answer_length=MAX_ANSWER_LENGTH, **WINDOWS, **arguments)
    return tf.saved_model.load(path).signatures["serving_default"]


@pytest.fixture(scope="module")
def serving(tmp_path_factory, squad_model, vocab_file):
    return exported(squad_model, vocab_file, tmp_path_factory.mktemp("squad_windows"))


def movie_finder():
    """A span labeler whose only answer is the token "movie": its start and end logits are 16
    there and 0 everywhere else (the encoder passes the word embedding through unchanged, and
    every other token embeds to 0)."""
    model = zeroed(new_task_model("squad"), "attention_output/kernel", "attention_output/bias",
                   "output_dense/kernel", "output_dense/bias", "position_embeddings",
                   "token_type_embeddings")
    pattern = np.resize([1.0, -1.0], model.encoder.config.hidden_size)  # its own layer norm
    for weight in model.weights:
        if weight.path.endswith("word_embeddings"):
            weight.assign(np.outer(np.array(VOCAB) == "movie", pattern))
        elif weight.path.endswith("span_logits/kernel"):
            weight.assign(np.stack([pattern, pattern], axis=1))
    return model


def run_squad_features(vocab_file, questions, contexts):
    examples = [SquadExample(str(i), question, context)
                for i, (question, context) in enumerate(zip(questions, contexts))]
    return squad_features(examples, BertTokenizer(vocab_file, lower_case=True), SEQ,
                          WINDOWS["doc_stride"], WINDOWS["max_query_length"], is_training=False,
                          progress_every=None)


def assert_answers_as_run_squad(serving, model, vocab_file, questions, contexts):
    """The export's outputs against run_squad's pipeline on the same model (an exhaustive
    search: n_best_size = SEQ). Returns, per example with an answer, its window and whether
    the answer lies past the end of the first window (which alone could not have found it)."""
    features = run_squad_features(vocab_file, questions, contexts)
    assert np.bincount(features.example_index).max() <= WINDOWS["max_windows"]   # none is cut
    logits = {name: value.numpy() for name, value in model(
        {name: tf.constant(value) for name, value in features.inputs.items()},
        training=False).items()}
    outputs = {name: value.numpy() for name, value in serving(
        question=tf.constant(questions), context=tf.constant(contexts)).items()}
    answered = []
    for i, context in enumerate(contexts):
        rows = np.flatnonzero(features.example_index == i)
        windows = [{"start_logits": logits["start_logits"][row],
                    "end_logits": logits["end_logits"][row],
                    "token_offsets": features.token_offsets[row],
                    "token_is_max_context": features.token_is_max_context[row]} for row in rows]
        text = decode_answer(context.encode(), windows, n_best_size=SEQ,
                             max_answer_length=MAX_ANSWER_LENGTH)["text"]
        assert outputs["answer"][i].decode().strip() == text, i
        np.testing.assert_allclose(outputs["null_score"][i], min(
            window["start_logits"][0] + window["end_logits"][0] for window in windows),
            atol=1e-5)
        spans = [(start_logit + end_logit, window, start, end)
                 for window, feature in enumerate(windows)
                 for start, end, start_logit, end_logit in best_spans(
                     **feature, n_best_size=SEQ, max_answer_length=MAX_ANSWER_LENGTH)]
        if not spans:
            assert (outputs["answer_start"][i], outputs["answer_end"][i]) == (-1, -1), i
            continue
        # The first of the best, as decode_answer ranks them (a stable sort, windows in order).
        score, window, start, end = max(spans, key=lambda span: span[0])
        offsets = windows[window]["token_offsets"]
        assert (outputs["answer_start"][i], outputs["answer_end"][i]) == (
            offsets[start, 0], offsets[end, 1]), i
        assert outputs["window"][i] == window, i
        np.testing.assert_allclose(outputs["score"][i], score, atol=1e-4)
        # The logits the export answered from are those of run_squad's window.
        for name in ("start_logits", "end_logits"):
            np.testing.assert_allclose(outputs[name][i], windows[window][name], atol=1e-5)
        first_window_end = windows[0]["token_offsets"][:, 1].max()
        answered.append((window, offsets[start, 0] >= first_window_end))
    return answered


def test_windows_are_packed_as_run_squad_packs_them(vocab_file):
    packer = RawTextPacker(vocab_file, do_lower_case=True, seq_length=SEQ)
    inputs, tokens, window_starts = packer.pack_windows(
        tf.constant(QUESTIONS), tf.constant(CONTEXTS), **WINDOWS)
    features = run_squad_features(vocab_file, QUESTIONS, CONTEXTS)
    assert window_starts.row_lengths().numpy().tolist() == np.bincount(
        features.example_index).tolist() == [1, 1, 1, 2, 4, 5, 6, 7, 6, 8]
    for name, value in features.inputs.items():
        np.testing.assert_array_equal(inputs[name], value, err_msg=name)
    np.testing.assert_array_equal(tokens["start_offset"], features.token_offsets[..., 0])
    np.testing.assert_array_equal(tokens["end_offset"], features.token_offsets[..., 1])
    np.testing.assert_array_equal(tokens["max_context"], features.token_is_max_context)


def test_answers_are_run_squads_on_every_window(serving, squad_model, vocab_file):
    answered = assert_answers_as_run_squad(serving, squad_model, vocab_file, QUESTIONS, CONTEXTS)
    assert len(answered) == len(CONTEXTS) - 1                  # all but the empty context
    # Answers from later windows, some past the first window's end (one window misses them).
    assert any(window > 0 for window, _ in answered)
    assert any(past_first for _, past_first in answered), answered


def test_an_answer_only_in_a_later_window_is_found(vocab_file, tmp_path):
    model = movie_finder()
    serving = exported(model, vocab_file, tmp_path)
    contexts = ["hello world, " * 40 + "a good movie, the end.", "a movie", "hello " * 100]
    questions = ["what is the film?"] * 3
    answered = assert_answers_as_run_squad(serving, model, vocab_file, questions, contexts)
    # "movie" is token 122 of 128; windows of 56 tokens start 16 apart: the last one (5, tokens
    # 80-127) alone holds it.
    assert answered[:2] == [(5, True), (0, False)]
    outputs = serving(question=tf.constant(questions), context=tf.constant(contexts))
    assert outputs["answer"].numpy().tolist() == [b"movie", b"movie", b"hello"]
    np.testing.assert_allclose(outputs["score"].numpy()[:2], [32, 32], atol=1e-4)


def test_real_dev_questions_are_answered_as_run_squad_answers_them(serving, squad_model,
                                                                   vocab_file):
    with open(shared_data_path("squad/dev-v1.1.json"), encoding="utf-8") as f:
        paragraphs = [paragraph for article in json.load(f)["data"]
                      for paragraph in article["paragraphs"]]
    tokenizer = BertTokenizer(vocab_file, lower_case=True)
    lengths = tokenizer.tokenize_to_pieces(tf.constant(
        [paragraph["context"] for paragraph in paragraphs])).row_lengths().numpy()
    # A question each about the first 16 paragraphs that take 3 to 7 windows ([UNK] for most
    # words with the tiny vocabulary; the windows, offsets and non-ASCII text are SQuAD's).
    chosen = [paragraph for paragraph, length in zip(paragraphs, lengths)
              if 90 <= length <= 140][:16]
    assert len(chosen) == 16
    answered = assert_answers_as_run_squad(
        serving, squad_model, vocab_file, [paragraph["qas"][0]["question"] for paragraph in chosen],
        [paragraph["context"] for paragraph in chosen])
    assert len(answered) == 16 and any(past_first for _, past_first in answered), answered


def test_a_huge_context_costs_max_windows_windows(serving, vocab_file):
    words = "Hello, unaffable world! " * (10_000_000 // 24)          # 10 MB, 2.9 M tokens
    packer = RawTextPacker(vocab_file, do_lower_case=True, seq_length=SEQ)
    inputs, tokens, window_starts = packer.pack_windows(
        tf.constant(["what?", "a"]), tf.constant([words, words[:48]]), **WINDOWS)
    # 8 windows of 59 tokens, 16 apart, then the short context's one window.
    assert window_starts.to_list() == [[0, 16, 32, 48, 64, 80, 96, 112], [0]]
    assert inputs["input_word_ids"].shape == [9, SEQ]
    # Tokenized: only the bytes 8 windows can read (of 61 tokens next to an empty question), so
    # a word after as many spaces is not read.
    spaced = "hello" + " " * (7 * 16 + 61) * MAX_BYTES_PER_TOKEN + "world"
    _, tokens, window_starts = packer.pack_windows(tf.constant(["what?"]), tf.constant([spaced]),
                                                   **WINDOWS)
    assert window_starts.to_list() == [[0]]
    assert tokens["start_offset"].numpy().max() == 0                   # "hello" alone
    # Served, it answers as its first 600 bytes (175 tokens: more than the 171 read) do.
    long = serving(question=tf.constant(["what?"]), context=tf.constant([words]))
    short = serving(question=tf.constant(["what?"]), context=tf.constant([words[:600]]))
    for name in long:
        np.testing.assert_array_equal(long[name], short[name], err_msg=name)


def test_the_server_takes_a_batch_of_questions_whatever_their_windows(squad_model, vocab_file,
                                                                     tmp_path):
    """The export says what a string can cost (`sequences_per_string` = max_windows, 8 here) and
    runs its windows in slices (`max_tokens_per_call`): the server takes 3 questions, up to 24
    windows, at a --max_batch_size of 16 (it refused them before the slices), and refuses more
    questions than that."""
    from bert_tf.serving import ServingError
    from bert_tf.serving.servable import Servable

    exported(squad_model, vocab_file, tmp_path)
    servable = Servable(str(tmp_path / "1"), 1, max_batch_size=16, batch_timeout_micros=0,
                        num_batch_threads=1)
    try:
        signature = servable.signature("serving_default")
        texts = np.array(["what?", "who?", "why?"], object)
        assert signature.run({"question": texts, "context": texts})["answer"].shape == (3,)
        many = np.array(["what?"] * 17, object)
        with pytest.raises(ServingError, match=r"^Batch of 17 rows is larger than the maximum"):
            signature.run({"question": many, "context": many})
    finally:
        servable.unload()


def test_an_empty_batch_and_empty_texts(serving):
    outputs = serving(question=tf.constant([], tf.string), context=tf.constant([], tf.string))
    assert {name: value.shape.as_list() for name, value in outputs.items()} == {
        "answer": [0], "answer_start": [0], "answer_end": [0], "score": [0], "window": [0],
        "null_score": [0], "start_logits": [0, SEQ], "end_logits": [0, SEQ]}
    outputs = serving(question=tf.constant(["", "what?"]), context=tf.constant(["", ""]))
    assert outputs["answer"].numpy().tolist() == [b"", b""]
    assert outputs["answer_start"].numpy().tolist() == outputs["answer_end"].numpy().tolist() == [
        -1, -1]
    assert outputs["window"].numpy().tolist() == [0, 0]


def test_a_squad_v2_export_answers_nothing_where_run_squad_does(squad_model, vocab_file,
                                                                tmp_path):
    """With `null_score_diff_threshold`, "" where "no answer" beats the best span by more than
    it, as run_squad's v2.0 decoding; the threshold chosen to fall between the examples."""
    features = run_squad_features(vocab_file, QUESTIONS, CONTEXTS)
    logits = squad_model({name: tf.constant(value) for name, value in features.inputs.items()},
                         training=False)
    decoded = []
    for i, context in enumerate(CONTEXTS):
        windows = [{"start_logits": logits["start_logits"][row].numpy(),
                    "end_logits": logits["end_logits"][row].numpy(),
                    "token_offsets": features.token_offsets[row],
                    "token_is_max_context": features.token_is_max_context[row]}
                   for row in np.flatnonzero(features.example_index == i)]
        decoded.append(lambda threshold, context=context, windows=windows: decode_answer(
            context.encode(), windows, n_best_size=SEQ, max_answer_length=MAX_ANSWER_LENGTH,
            version_2_with_negative=True, null_score_diff_threshold=threshold))
    differences = sorted(answer(0.0)["null_score_diff"] for answer in decoded)
    threshold = float(np.mean(differences[4:6]))  # 5 answered by a span, 5 not (one empty)
    serving = exported(squad_model, vocab_file, tmp_path, null_score_diff_threshold=threshold)
    outputs = serving(question=tf.constant(QUESTIONS), context=tf.constant(CONTEXTS))
    texts = [answer(threshold)["text"] for answer in decoded]
    assert [text.decode().strip() for text in outputs["answer"].numpy()] == texts
    assert texts.count("") == 5
    unanswered = [i for i, text in enumerate(texts) if not text]
    assert outputs["answer_start"].numpy()[unanswered].tolist() == [-1] * 5
    # `score` stays the best span's, "" or not: null_score - score is run_squad's null_odds.
    with_span = [i for i, answer in enumerate(decoded) if np.isfinite(
        answer(threshold)["null_score_diff"])]
    np.testing.assert_allclose(
        (outputs["null_score"] - outputs["score"]).numpy()[with_span],
        [decoded[i](threshold)["null_score_diff"] for i in with_span], atol=1e-4)
    assert len(with_span) == 9

