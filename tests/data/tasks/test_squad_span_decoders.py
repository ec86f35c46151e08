"""The two SQuAD span decoders must not drift apart: the in-graph one of the squad SavedModel
(`bert_tf.export.task_export.best_spans`) and the NumPy one `run_squad.py` uses
(`bert_tf.metrics.squad_postprocess.best_spans`) pick the same best span with the same score.

The NumPy decoder pairs only the `n_best_size` best starts with the `n_best_size` best ends (as
BERT does); with `n_best_size` >= the sequence length its search is exhaustive like the graph's."""

import numpy as np
import pytest
import tensorflow as tf

from bert_tf.export.task_export import best_spans as graph_best_spans
from bert_tf.metrics.squad_postprocess import best_spans as numpy_best_spans

SEQ = 24


def _random_batch(rng, batch=16):
    start_logits = rng.normal(scale=3.0, size=(batch, SEQ)).astype(np.float32)
    end_logits = rng.normal(scale=3.0, size=(batch, SEQ)).astype(np.float32)
    # Each example: [CLS] + a question + a context of random length + [SEP] + padding.
    context_starts = rng.integers(2, 8, size=batch)
    context_ends = rng.integers(context_starts + 1, SEQ, size=batch)
    positions = np.arange(SEQ)
    candidates = (positions >= context_starts[:, None]) & (positions < context_ends[:, None])
    return start_logits, end_logits, candidates


@pytest.mark.parametrize("max_answer_length", [1, 3, 30])
def test_same_best_span_and_score_on_random_logits(max_answer_length):
    rng = np.random.default_rng(max_answer_length)
    start_logits, end_logits, candidates = _random_batch(rng)
    start, end, score, found = (t.numpy() for t in graph_best_spans(
        tf.constant(start_logits), tf.constant(end_logits), tf.constant(candidates),
        tf.constant(candidates), max_answer_length))
    assert found.all()
    for i in range(len(start_logits)):
        # Offsets >= 0 mark the context tokens, as run_squad's features do.
        offsets = np.where(candidates[i][:, None], np.arange(SEQ)[:, None].repeat(2, 1), -1)
        spans = numpy_best_spans(start_logits[i], end_logits[i], offsets, n_best_size=SEQ,
                                 max_answer_length=max_answer_length)
        best_start, best_end, start_logit, end_logit = spans[0]
        assert (best_start, best_end) == (start[i], end[i]), i
        assert start_logit + end_logit == pytest.approx(score[i], abs=1e-5)
        assert best_end - best_start < max_answer_length


def test_neither_finds_a_span_without_context_tokens():
    rng = np.random.default_rng(0)
    start_logits, end_logits, candidates = _random_batch(rng, batch=2)
    candidates[:] = False
    *_, found = graph_best_spans(tf.constant(start_logits), tf.constant(end_logits),
                                 tf.constant(candidates), tf.constant(candidates), 30)
    assert not found.numpy().any()
    assert numpy_best_spans(start_logits[0], end_logits[0], np.full((SEQ, 2), -1),
                            n_best_size=SEQ) == []
