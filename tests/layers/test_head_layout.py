import numpy as np
import pytest
import tensorflow as tf

from bert_tf.layers.head_layout import merge_heads, split_heads
from bert_tf.layers.self_attention import BertSelfAttention
from tests.optimized_graph import optimized_op_types


@pytest.mark.parametrize("shape", [[1, 5, 12], [3, 7, 12], [2, 1, 12]])
@pytest.mark.parametrize("dynamic_shapes", [False, True])
@pytest.mark.parametrize("dtype", [tf.float32, tf.bfloat16])
def test_gathers_move_heads_as_the_transposes_do(shape, dynamic_shapes, dtype):
    rows = tf.cast(tf.reshape(tf.range(np.prod(shape)), shape), dtype)  # every element distinct
    spec = [tf.TensorSpec([None, None, 12], dtype)] if dynamic_shapes else None
    split = tf.function(lambda x: split_heads(x, 3, by_gather=True), input_signature=spec)
    by_head = split(rows)
    expected = np.transpose(rows.numpy().reshape(shape[0], shape[1], 3, 4), [0, 2, 1, 3])
    np.testing.assert_array_equal(by_head.numpy(), expected)
    np.testing.assert_array_equal(split_heads(rows, 3).numpy(), expected)

    spec = [tf.TensorSpec([None, 3, None, 4], dtype)] if dynamic_shapes else None
    merge = tf.function(lambda x: merge_heads(x, by_gather=True), input_signature=spec)
    np.testing.assert_array_equal(merge(by_head).numpy(), rows.numpy())
    np.testing.assert_array_equal(merge_heads(by_head).numpy(), rows.numpy())


def _op_count(ops, name):
    return ops[name] + ops["_Mkl" + name]


@pytest.mark.parametrize("batch, gathers", [(1, True), (4, False)])
def test_attention_moves_heads_by_gathers_on_few_rows_in_inference(batch, gathers):
    # 1 x 5 rows are fewer than the 12 hidden units: the query, key and value (2-D
    # projections) and the context move by gathers, no transposes. 4 x 5 are more: the
    # projections write the head-major layout themselves (the kernels reordered by transposes),
    # the context moves back by a transpose. Training keeps the transposes either way.
    layer = BertSelfAttention(hidden_size=12, num_heads=3)
    layer.build((None, None, 12))
    x = tf.random.stateless_normal([batch, 5, 12], seed=[1, 0])
    mask = tf.ones([batch, 5], tf.int32)
    ops = optimized_op_types(lambda x: layer(x, mask), x)
    if gathers:
        assert _op_count(ops, "Transpose") == 0, ops
        assert ops["GatherV2"] == 4, ops
    else:
        assert _op_count(ops, "Transpose") == 4 and ops["GatherV2"] == 0, ops
    ops = optimized_op_types(lambda x: layer(x, mask, training=True), x)
    assert _op_count(ops, "Transpose") == 4 and ops["GatherV2"] == 0, ops
