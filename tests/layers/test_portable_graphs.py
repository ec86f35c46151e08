"""The feed-forward GELU's form in bfloat16 inference on AMX, and `portable_graphs()` keeping
XLA out of the graphs exports trace.

AMX is decided per machine, so the tests set it (`tests.amx_forms.assume_amx_bfloat16`): they
check which form a graph holds and that both forms compute the same, on any CPU.
"""

import numpy as np
import pytest
import tensorflow as tf

from bert_tf.layers.onednn import onednn_enabled
from bert_tf.layers.portable_graphs import portable_graphs
from bert_tf.layers.real_tokens import real_tokens_only
from bert_tf.layers.transformer_block import BertTransformerBlock
from tests.amx_forms import assume_amx_bfloat16, xla_compiled


def _block_and_inputs(dtype="mixed_bfloat16", seq=6):
    block = BertTransformerBlock(hidden_size=16, num_heads=2, intermediate_size=64, dtype=dtype)
    x = tf.random.stateless_normal([2, seq, 16], seed=[3, 4])
    mask = tf.constant([[1] * seq, [1] * 4 + [0] * (seq - 4)], tf.int32)
    block(x, mask)  # builds the weights
    return block, x, mask


def _xla_functions(block, x, mask):
    """How many functions of the traced inference graph XLA must compile."""
    graph = tf.function(lambda x, m: block(x, m, training=False)).get_concrete_function(
        x, mask).graph.as_graph_def()
    return len(xla_compiled(graph.library.function))


def test_bfloat16_inference_on_amx_runs_the_gelu_apart_except_in_portable_graphs(monkeypatch):
    assume_amx_bfloat16(monkeypatch)
    block, x, mask = _block_and_inputs()
    assert _xla_functions(block, x, mask) == 1     # the GELU's loop after the AMX matmul
    with portable_graphs():
        assert _xla_functions(block, x, mask) == 0
    with real_tokens_only():  # rows of a new count every batch: XLA would compile each
        assert _xla_functions(block, x, mask) == 0


@pytest.mark.parametrize("amx, dtype", [(False, "mixed_bfloat16"), (True, "float32")])
def test_elsewhere_the_gelu_stays_in_the_matmul(monkeypatch, amx, dtype):
    assume_amx_bfloat16(monkeypatch, amx)
    block, x, mask = _block_and_inputs(dtype, seq=65)  # 130 rows: more than `FEW_ROWS`
    assert _xla_functions(block, x, mask) == 0


def test_without_amx_few_rows_run_the_gelu_apart_too(monkeypatch):
    """Batch 1 x 128 is 128 rows: at most `FEW_ROWS` the AMX forms are the faster on any CPU."""
    assume_amx_bfloat16(monkeypatch, available=False)
    block, x, mask = _block_and_inputs(seq=64)  # 128 rows
    assert _xla_functions(block, x, mask) == (1 if onednn_enabled() else 0)
    with portable_graphs():
        assert _xla_functions(block, x, mask) == 0


def test_both_forms_compute_the_same(monkeypatch):
    assume_amx_bfloat16(monkeypatch)
    block, x, mask = _block_and_inputs()
    apart = block(x, mask, training=False)
    with portable_graphs():
        fused = tf.function(lambda x, m: block(x, m, training=False))(x, mask)
    # Apart, the matmul's output is rounded to bfloat16 before the GELU; in the epilogue the
    # GELU sees the float32 sum: one bfloat16 rounding (2^-8 relative) apart, on LayerNorm'd
    # outputs of order 1.
    np.testing.assert_allclose(np.asarray(apart, np.float32), np.asarray(fused, np.float32),
                               atol=0.05)
    assert not np.allclose(np.asarray(apart, np.float32), 0)
