"""SQuAD v1.1 / v2.0 files to the windowed inputs of a span labeler, and back to the context.

Three steps, as in Google's `run_squad.py`:

* `read_squad_file(path, articles)`: the file's articles (optionally a slice of them, e.g. the
  first 38 for training and the rest for evaluation), with a clear `SquadFormatError` naming the
  file, the place and the missing key for anything that is not a SQuAD file.
* `squad_examples(articles, path, is_training, ...)`: one `SquadExample` per question. A training
  question keeps its first answer, checked against the context at `answer_start`; when the text
  is not there the question is skipped and counted (`SkippedQuestions`), never trained on a
  shifted span.
* `squad_features(examples, tokenizer, ...)`: each question becomes one or more
  `[CLS] question [SEP] context window [SEP]` sequences ("features"): the question cut to
  `max_query_length` word pieces, the context split into windows that start `doc_stride` pieces
  apart. Every context token keeps its byte offsets in the context (from
  `BertTokenizer.tokenize_with_offsets`), so the answer span maps to tokens exactly (the
  character `answer_start` is converted to UTF-8 bytes) and predicted spans map back to the
  context's own text. A training label is the answer's token span in the window, or `[CLS]`
  (position 0) when the window does not hold the whole answer or the question has none (v2.0).
  An answer that starts or ends inside a word piece (e.g. a dev answer "8" cut out of "20–18",
  where "18" is one piece) has no exact token span: it is skipped and counted instead of
  trained on a wider one.

Example:
    >>> articles = read_squad_file("dev-v1.1.json", article_slice("0:38"))
    >>> skipped = SkippedQuestions()
    >>> examples = squad_examples(articles, "dev-v1.1.json", is_training=True, skipped=skipped)
    >>> features = squad_features(examples, BertTokenizer("vocab.txt", True), 384, 128, 64,
    ...                           is_training=True, skipped=skipped)
    >>> len(examples), features.inputs["input_word_ids"].shape, skipped.total
    (8582, (8811, 384), 30)
"""

import collections
import dataclasses
import json
import logging

import numpy as np
import tensorflow as tf

from bert_tf.data.tasks.squad_windows import (CLS_POSITION, SPECIAL_TOKENS, check_windows,
                                              context_windows, max_context_mask)

logger = logging.getLogger("bert_tf.data")

# Byte offsets of tokens that are not from the context ([CLS], question, [SEP], padding), as
# `bert_tf.metrics.squad_postprocess.best_spans` expects them.
NOT_IN_CONTEXT = -1
# Texts tokenized, and questions windowed, per call: big enough to amortize the op launches,
# small enough to report progress on long files.
_TOKENIZE_CHUNK = 512


class SquadFormatError(ValueError):
    """A SQuAD file that cannot be used as asked; the message names the file and the place."""


@dataclasses.dataclass(frozen=True)
class SquadExample:
    """One question about one context.

    `answer_text` / `answer_start` (a character offset into `context`) are the answer trained
    on (the first one of the file, checked to be at `answer_start`); None when not training or
    when the question is unanswerable (`is_impossible`, SQuAD v2.0).
    """
    qas_id: str
    question: str
    context: str
    answer_text: str = None
    answer_start: int = None
    is_impossible: bool = False


class SkippedQuestions:
    """Counts the training questions left out, by reason, with a few of their ids.

    Example:
        >>> skipped.add("answer text not found at answer_start", "5733be284776f41900661182")
        >>> skipped.total, skipped.summary()
    """

    def __init__(self):
        self.ids = collections.defaultdict(list)

    def add(self, reason, qas_id):
        self.ids[reason].append(qas_id)

    @property
    def total(self):
        return sum(len(ids) for ids in self.ids.values())

    def counts(self):
        return {reason: len(ids) for reason, ids in self.ids.items()}

    def summary(self):
        """One line per reason: count and up to 3 example question ids."""
        return "; ".join(f"{reason}: {len(ids)} (e.g. {', '.join(ids[:3])})"
                         for reason, ids in self.ids.items())


def article_slice(text):
    """A Python-style slice of articles from "start:stop" (either may be empty, e.g. "38:");
    "" or None means all articles."""
    if not text:
        return slice(None)
    parts = text.split(":")
    try:
        if len(parts) != 2:
            raise ValueError
        start, stop = (int(part) if part.strip() else None for part in parts)
    except ValueError:
        raise SquadFormatError(f"An article range is 'start:stop' (e.g. '0:38' or '38:'), got "
                               f"{text!r}") from None
    return slice(start, stop)


def read_squad_file(path, articles=slice(None)):
    """The list of articles of the SQuAD JSON file `path` (each a dict with `paragraphs`),
    restricted to the `articles` slice. Raises `SquadFormatError` for a missing or unreadable
    file, invalid JSON or a top level that is not `{"data": [...]}`."""
    try:
        with open(path, encoding="utf-8-sig") as f:  # a byte order mark, as Windows writes
            dataset = json.load(f)
    except FileNotFoundError:
        raise SquadFormatError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise SquadFormatError(f"{path}: a directory, not a SQuAD JSON file") from None
    except UnicodeDecodeError as e:
        raise SquadFormatError(f"{path}: not UTF-8 text (byte {e.start}): a SQuAD file is "
                               f"UTF-8 JSON") from None
    except json.JSONDecodeError as e:
        raise SquadFormatError(f"{path}: not valid JSON at line {e.lineno}, column {e.colno}: "
                               f"{e.msg} (a SQuAD file is one JSON object with a 'data' list)"
                               ) from None
    if not isinstance(dataset, dict) or not isinstance(dataset.get("data"), list):
        raise SquadFormatError(f"{path}: not a SQuAD file: expected a JSON object with key "
                               f"'data' holding the list of articles")
    if not dataset["data"]:
        raise SquadFormatError(f"{path}: its 'data' list holds no article")
    selected = dataset["data"][articles]
    if not selected:
        raise SquadFormatError(f"{path}: the article range {articles.start}:{articles.stop} "
                               f"selects none of its {len(dataset['data'])} articles")
    return selected


def _field(mapping, key, kind, where):
    """`mapping[key]`, which must be a `kind`; else a SquadFormatError naming `where`."""
    if not isinstance(mapping, dict) or key not in mapping:
        raise SquadFormatError(f"{where} has no '{key}'")
    value = mapping[key]
    if not isinstance(value, kind):
        kinds = kind if isinstance(kind, tuple) else (kind,)
        raise SquadFormatError(f"{where}: '{key}' must be {' or '.join(k.__name__ for k in kinds)}"
                               f", got {type(value).__name__}")
    return value


def squad_examples(articles, path, is_training, version_2_with_negative=False,
                   require_answers=False, skipped=None):
    """One `SquadExample` per question of `articles` (from `read_squad_file(path)`).

    Args:
        articles: the articles to read.
        path: the file they came from, for error messages.
        is_training: keep and check each question's first answer.
        version_2_with_negative: SQuAD v2.0: questions may be unanswerable (`is_impossible`,
            or no answers); in v1.1 mode such a question is an error.
        require_answers: every question must have its answers (e.g. for `--do_eval`).
        skipped: a `SkippedQuestions` that counts the training questions whose answer is not at
            its `answer_start`.

    Raises `SquadFormatError` naming the file, the question id and the key for missing or
    malformed fields, an empty context or question, and repeated question ids.
    """
    skipped = SkippedQuestions() if skipped is None else skipped
    examples, seen = [], set()
    for article_index, article in enumerate(articles):
        title = article.get("title", "") if isinstance(article, dict) else ""
        where = f"{path}: article {article_index}" + (f" ({title})" if title else "")
        for paragraph_index, paragraph in enumerate(_field(article, "paragraphs", list, where)):
            paragraph_where = f"{where}, paragraph {paragraph_index}"
            context = _field(paragraph, "context", str, paragraph_where)
            qas = _field(paragraph, "qas", list, paragraph_where)
            if not context.strip():
                first = qas[0].get("id") if qas and isinstance(qas[0], dict) else None
                raise SquadFormatError(f"{paragraph_where}: empty context" +
                                       (f" (question {first})" if first else ""))
            for question_index, qa in enumerate(qas):
                # A string, as in SQuAD's files: the official evaluation looks predictions
                # up by the id exactly as the file has it.
                qas_id = _field(qa, "id", str, f"{paragraph_where}, question {question_index}")
                qa_where = f"{paragraph_where}, question {qas_id}"
                if qas_id in seen:
                    raise SquadFormatError(f"{qa_where}: the id is used by an earlier question")
                seen.add(qas_id)
                question = _field(qa, "question", str, qa_where)
                if not question.strip():
                    raise SquadFormatError(f"{qa_where}: empty question")
                example = _example(qa, qas_id, question, context, qa_where, is_training,
                                   version_2_with_negative, require_answers, skipped)
                if example is not None:
                    examples.append(example)
    return examples


def _example(qa, qas_id, question, context, where, is_training, version_2_with_negative,
             require_answers, skipped):
    is_impossible = bool(qa.get("is_impossible", False))
    if not (is_training or require_answers):
        return SquadExample(qas_id, question, context, is_impossible=is_impossible)
    answers = _field(qa, "answers", list, where)
    if is_impossible or not answers:
        if not version_2_with_negative:
            raise SquadFormatError(
                f"{where} has no answer ({'is_impossible' if is_impossible else 'empty answers'}"
                f"): unanswerable questions need --version_2_with_negative (SQuAD v2.0)")
        return SquadExample(qas_id, question, context, is_impossible=True)
    for answer_index, answer in enumerate(answers):
        answer_where = f"{where}, answer {answer_index}"
        _field(answer, "text", str, answer_where)
        _field(answer, "answer_start", int, answer_where)
    if not is_training:
        return SquadExample(qas_id, question, context)
    # Google's run_squad.py trains on one answer per question; a dev file lists several.
    text, start = answers[0]["text"], answers[0]["answer_start"]
    if not text.strip() or not 0 <= start or context[start:start + len(text)] != text:
        skipped.add("answer text not found at answer_start", qas_id)
        return None
    return SquadExample(qas_id, question, context, text, start)


@dataclasses.dataclass
class SquadFeatures:
    """The windowed sequences of a list of examples, as NumPy arrays with one row per feature.

    Attributes:
        inputs: the encoder's `input_word_ids`, `input_mask`, `input_type_ids`, int32
            `[features, max_seq_length]`.
        example_index: `[features]`, the example (question) each feature belongs to.
        token_offsets: int32 `[features, max_seq_length, 2]`, each token's (start, end) UTF-8
            byte offsets in its example's context, `NOT_IN_CONTEXT` (-1) for other tokens.
        token_is_max_context: bool `[features, max_seq_length]`: the window where the token has
            the most context (only such tokens may start an answer; see `max_context_mask`).
        start_positions, end_positions: training labels `[features]` (`[CLS]` = 0 when the
            window has no answer); None when not training.
    """
    inputs: dict
    example_index: np.ndarray
    token_offsets: np.ndarray
    token_is_max_context: np.ndarray
    start_positions: np.ndarray = None
    end_positions: np.ndarray = None

    def __len__(self):
        return len(self.example_index)

    def labels(self):
        """The span labeler's training targets, keyed by its outputs."""
        return {"start_logits": self.start_positions, "end_logits": self.end_positions}


def _tokenize(texts, tokenizer, what, progress_every=None):
    """Per text: `(ids, starts, ends)` lists over its word pieces (byte offsets)."""
    results = []
    for begin in range(0, len(texts), _TOKENIZE_CHUNK):
        chunk = tf.constant(texts[begin:begin + _TOKENIZE_CHUNK])
        ids, starts, ends = (t.merge_dims(1, 2).to_list()
                             for t in tokenizer.tokenize_with_offsets(chunk))
        results.extend(zip(ids, starts, ends))
        if progress_every and len(results) % progress_every < _TOKENIZE_CHUNK:
            logger.info("Tokenized %d/%d %s", len(results), len(texts), what)
    return results


def _answer_tokens(example, context_bytes, starts, ends):
    """The (first, last) context tokens of the answer, or the reason why it has no exact span."""
    byte_start = len(example.context[:example.answer_start].encode("utf-8"))
    byte_end = byte_start + len(example.answer_text.encode("utf-8"))
    covering = [i for i, (start, end) in enumerate(zip(starts, ends))
                if start < byte_end and end > byte_start]
    if not covering:
        return None, "answer has no word pieces"
    first, last = covering[0], covering[-1]
    text = context_bytes[starts[first]:ends[last]].decode("utf-8")
    if text != example.answer_text.strip():
        return None, "answer starts or ends inside a word piece"
    return (first, last), None


def squad_features(examples, tokenizer, max_seq_length, doc_stride, max_query_length,
                   is_training, skipped=None, progress_every=1000):
    """Windows `examples` into `SquadFeatures` (see the module docstring).

    Args:
        examples: `SquadExample`s (from `squad_examples`).
        tokenizer: a `BertTokenizer` (its `[CLS]`/`[SEP]` ids are used).
        max_seq_length: length of each packed sequence.
        doc_stride: distance between the starts of consecutive context windows, in pieces.
        max_query_length: questions are cut to this many word pieces.
        is_training: compute `start_positions`/`end_positions`; questions whose answer has no
            exact token span are left out and counted in `skipped`.
        skipped: a `SkippedQuestions`.
        progress_every: log a counter every this many questions (None: never).
    """
    check_windows(max_seq_length, doc_stride, max_query_length)
    skipped = SkippedQuestions() if skipped is None else skipped
    cls_id, sep_id = tokenizer.token_id("[CLS]"), tokenizer.token_id("[SEP]")
    # Questions about one paragraph share its context: tokenize each context once.
    contexts = list(dict.fromkeys(example.context for example in examples))
    context_tokens = dict(zip(contexts, _tokenize(contexts, tokenizer, "contexts",
                                                  progress_every)))
    question_tokens = _tokenize([example.question for example in examples], tokenizer,
                                "questions", progress_every)

    # (index, query, answer tokens) of the examples kept.
    kept = []
    for index, example in enumerate(examples):
        answer = None
        if is_training and not example.is_impossible:
            _, starts, ends = context_tokens[example.context]
            answer, reason = _answer_tokens(example, example.context.encode("utf-8"), starts,
                                            ends)
            if answer is None:
                skipped.add(reason, example.qas_id)
                continue
        kept.append((index, question_tokens[index][0][:max_query_length], answer))

    rows = collections.defaultdict(list)
    for begin in range(0, len(kept), _TOKENIZE_CHUNK):
        chunk = kept[begin:begin + _TOKENIZE_CHUNK]
        window_starts, window_lengths = context_windows(
            [len(context_tokens[examples[index].context][0]) for index, _, _ in chunk],
            [max_seq_length - len(query) - SPECIAL_TOKENS for _, query, _ in chunk], doc_stride)
        owned = max_context_mask(window_starts, window_lengths)
        # Flat lists over the chunk's windows: with RaggedTensor.to_list() of the nested mask,
        # the 10,570 dev questions took 20 s at max_seq_length 128 instead of 2.5 s.
        first_windows = window_starts.row_splits.numpy().tolist()
        chunk_starts = window_starts.values.numpy().tolist()
        chunk_lengths = window_lengths.values.numpy().tolist()
        chunk_owned = np.split(owned.flat_values.numpy(), owned.values.row_splits.numpy()[1:-1])
        for (index, query, answer), first, stop in zip(chunk, first_windows, first_windows[1:]):
            ids, starts, ends = context_tokens[examples[index].context]
            for window_start, length, is_max_context in zip(
                    chunk_starts[first:stop], chunk_lengths[first:stop], chunk_owned[first:stop]):
                doc_offset = len(query) + 2     # [CLS] question [SEP]
                window = slice(window_start, window_start + length)
                word_ids = [cls_id, *query, sep_id, *ids[window], sep_id]
                offsets = np.full((max_seq_length, 2), NOT_IN_CONTEXT, np.int32)
                offsets[doc_offset:doc_offset + length, 0] = starts[window]
                offsets[doc_offset:doc_offset + length, 1] = ends[window]
                max_context = np.zeros(max_seq_length, bool)
                max_context[doc_offset:doc_offset + length] = is_max_context
                padding = [0] * (max_seq_length - len(word_ids))
                rows["input_word_ids"].append(word_ids + padding)
                rows["input_mask"].append([1] * len(word_ids) + padding)
                rows["input_type_ids"].append([0] * doc_offset + [1] * (length + 1) + padding)
                rows["example_index"].append(index)
                rows["token_offsets"].append(offsets)
                rows["token_is_max_context"].append(max_context)
                if is_training:
                    start = end = CLS_POSITION
                    if answer and window_start <= answer[0] and answer[1] < window_start + length:
                        start, end = (position - window_start + doc_offset for position in answer)
                    rows["start_positions"].append(start)
                    rows["end_positions"].append(end)
        done = begin + len(chunk)
        if progress_every and done % progress_every < _TOKENIZE_CHUNK:
            logger.info("Windowed %d/%d questions (%d features)", done, len(kept),
                        len(rows["example_index"]))

    def array(name, dtype, shape):
        return np.asarray(rows[name], dtype).reshape(shape)

    seq = (-1, max_seq_length)
    return SquadFeatures(
        inputs={name: array(name, np.int32, seq)
                for name in ("input_word_ids", "input_mask", "input_type_ids")},
        example_index=array("example_index", np.int64, (-1,)),
        token_offsets=array("token_offsets", np.int32, (-1, max_seq_length, 2)),
        token_is_max_context=array("token_is_max_context", bool, seq),
        start_positions=array("start_positions", np.int32, (-1,)) if is_training else None,
        end_positions=array("end_positions", np.int32, (-1,)) if is_training else None)
