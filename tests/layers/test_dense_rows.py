import keras
import numpy as np
import pytest
import tensorflow as tf

from bert_tf.layers import dense_rows as dense_rows_module
from bert_tf.layers import onednn
from bert_tf.layers.dense_rows import dense_rows, matmul_plus_bias
from bert_tf.layers.onednn import onednn_enabled
from tests.optimized_graph import optimized_op_types


def _dense(units_in, units, dtype):
    layer = keras.layers.Dense(units, dtype=dtype)
    layer.build((None, units_in))
    layer.bias.assign(tf.random.stateless_normal([units], seed=[1, 0]))
    return layer


@pytest.fixture(autouse=True)
def whole_matmuls(monkeypatch):
    """Each matmul whole, as on one core: the row halves are tested on their own (below)."""
    monkeypatch.setattr(dense_rows_module, "cores_for_two_ops_at_once", lambda: False)


@pytest.fixture(params=[False, True], ids=["matmul_biasadd", "amx_form"])
def amx_form(request, monkeypatch):
    """Both forms of `matmul_plus_bias`, whatever this CPU is and however many rows."""
    monkeypatch.setattr(
        dense_rows_module, "amx_matmul_forms",
        lambda dtype, rows, training: request.param and tf.as_dtype(dtype) == tf.bfloat16)
    return request.param


@pytest.mark.parametrize("dtype", ["float32", "mixed_bfloat16"])
def test_equals_the_keras_layer_with_its_gradients(amx_form, dtype):
    layer = _dense(24, 40, dtype)
    rows = tf.random.stateless_normal([7, 24], seed=[2, 0])

    def outputs_and_gradients(apply):
        with tf.GradientTape() as tape:
            tape.watch(rows)
            outputs = tf.cast(apply(tf.cast(rows, layer.compute_dtype)), tf.float32)
            objective = tf.reduce_sum(outputs ** 2)
        return [outputs, *tape.gradient(objective, [rows] + layer.trainable_variables)]

    ours = outputs_and_gradients(tf.function(lambda x: dense_rows(layer, x)))
    ours_training = outputs_and_gradients(tf.function(lambda x: dense_rows(layer, x, training=True)))
    keras_layer = outputs_and_gradients(layer)
    # bfloat16 rounds at 2^-8 of each operand: a gradient summed over rows can cancel, so its
    # elements are compared at that fraction of the largest.
    tolerance = 1e-5 if dtype == "float32" else 1e-2
    for a, a_training, b in zip(ours, ours_training, keras_layer, strict=True):
        np.testing.assert_allclose(a, b, rtol=tolerance, atol=tolerance * np.abs(b).max())
        np.testing.assert_allclose(a_training, b, rtol=tolerance, atol=tolerance * np.abs(b).max())


def test_activation_is_applied_and_bias_may_be_left_out(amx_form):
    layer = _dense(8, 4, "mixed_bfloat16")
    rows = tf.cast(tf.random.stateless_normal([3, 8], seed=[3, 0]), tf.bfloat16)
    expected = tf.nn.relu(layer(rows)).numpy().astype(np.float32)
    for training in (False, True):
        np.testing.assert_allclose(
            dense_rows(layer, rows, tf.nn.relu, training).numpy().astype(np.float32), expected,
            atol=1e-2)
    kernel = tf.cast(layer.kernel, tf.bfloat16)
    np.testing.assert_array_equal(matmul_plus_bias(rows, kernel), tf.matmul(rows, kernel))


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_scale_multiplies_the_output_and_its_gradients(amx_form, dtype):
    # `(rows @ kernel + bias) * scale`: in the AMX form the scale is the epilogue's multiply
    # (what the attention's query uses); the gradients follow it in training.
    rows = tf.cast(tf.random.stateless_normal([6, 16], seed=[4, 0]), dtype)
    kernel = tf.cast(tf.random.stateless_normal([16, 8], seed=[5, 0]), dtype)
    bias = tf.cast(tf.random.stateless_normal([8], seed=[6, 0]), dtype)
    upstream = tf.cast(tf.random.stateless_normal([6, 8], seed=[7, 0]), dtype)

    def outputs_and_gradients(apply):
        with tf.GradientTape() as tape:
            tape.watch([rows, kernel, bias])
            outputs = apply(rows, kernel, bias)
            objective = tf.reduce_sum(tf.cast(outputs * upstream, tf.float32))
        return [tf.cast(t, tf.float32) for t in
                [outputs, *tape.gradient(objective, [rows, kernel, bias])]]

    expected = outputs_and_gradients(lambda r, k, b: (tf.matmul(r, k) + b) * 0.25)
    for training in (False, True):
        ours = outputs_and_gradients(tf.function(
            lambda r, k, b: matmul_plus_bias(r, k, b, training, scale=0.25)))
        for a, b in zip(ours, expected, strict=True):
            tolerance = 1e-5 if dtype == "float32" else 1e-2
            np.testing.assert_allclose(a, b, rtol=tolerance, atol=tolerance * np.abs(b).max())
    np.testing.assert_allclose(tf.cast(matmul_plus_bias(rows, kernel, scale=0.25), tf.float32),
                               tf.cast(tf.matmul(rows, kernel) * 0.25, tf.float32), rtol=1e-5)


_doubled_by_xla = tf.function(lambda x: x * 2, jit_compile=True)


@pytest.mark.skipif(not onednn_enabled(), reason="the fusion is oneDNN's")
def test_the_amx_form_is_one_fused_onednn_matmul(amx_form):
    layer = _dense(64, 96, "mixed_bfloat16")
    ops = optimized_op_types(lambda x: dense_rows(layer, x),
                             tf.cast(tf.random.normal([32, 64]), tf.bfloat16))
    if amx_form:  # the multiply by 1 and the bias add as the matmul's post-ops
        assert ops["_MklFusedBatchMatMulV2"] == 1 and not {"Mul", "AddV2"} & set(ops), ops
    else:
        assert ops["_FusedMatMul"] == 1, ops  # oneDNN's inner product, once TF places it
    # Training: the same forward, its gradient as 2-D matmuls (a batched matmul's own gradient
    # is the slower).
    def gradients(x):
        with tf.GradientTape() as tape:
            tape.watch(x)
            # Rows from an XLA function, as training's LayerNorm and GELU hand them on.
            outputs = dense_rows(layer, _doubled_by_xla(x), training=True)
        return [outputs, *tape.gradient(outputs, [x, layer.kernel])]

    ops = optimized_op_types(gradients, tf.cast(tf.random.normal([32, 64]), tf.bfloat16))
    if amx_form:
        assert ops["_MklFusedBatchMatMulV2"] == 1 and ops["MatMul"] == 2, ops
        assert not {"BatchMatMulV2", "_MklBatchMatMulV2"} & set(ops), ops
    else:
        assert ops["_FusedMatMul"] == 1 and ops["MatMul"] == 2, ops


@pytest.mark.skipif(not onednn_enabled(), reason="the forms are oneDNN's")
@pytest.mark.parametrize("rows, training, batched", [
    (128, False, True), (129, False, False), (None, False, False), (32, True, False)])
def test_without_amx_inference_on_few_rows_takes_the_batched_form(monkeypatch, rows, training,
                                                                  batched):
    """Batch 1's rows: the batched form is the faster there on any CPU (`few_bfloat16_rows`);
    more rows, rows unknown when traced, and training keep the inner product without AMX."""
    monkeypatch.setattr(onednn, "amx_bfloat16_matmuls", lambda dtype: False)
    layer = _dense(64, 96, "mixed_bfloat16")

    def apply(x):
        if rows is None:  # the row count unknown when traced
            x = tf.raw_ops.PlaceholderWithDefault(input=x, shape=[None, 64])
        return dense_rows(layer, x, training=training)

    x = tf.cast(tf.random.normal([rows or 16, 64]), tf.bfloat16)
    ops = optimized_op_types(apply, x)
    assert (ops["_MklFusedBatchMatMulV2"] == 1) is batched, ops
    assert (ops["_FusedMatMul"] == 1) is not batched, ops
    np.testing.assert_allclose(np.asarray(apply(x), np.float32),
                               np.asarray(layer(x), np.float32), rtol=1e-2, atol=1e-2)


def test_bfloat16_training_sums_the_bias_gradient_in_float32(amx_form):
    # BiasAdd's own gradient (`BiasAddGrad`) sums bfloat16 in bfloat16: over 2048 rows its
    # column sums drift far beyond bfloat16's rounding of the float32 sum.
    layer = _dense(32, 64, "mixed_bfloat16")
    rows = tf.cast(tf.random.stateless_normal([2048, 32], seed=[5, 0]), tf.bfloat16)
    upstream = tf.cast(tf.random.stateless_normal([2048, 64], seed=[6, 0]), tf.bfloat16)
    with tf.GradientTape() as tape:
        outputs = dense_rows(layer, rows, training=True)
        objective = tf.reduce_sum(tf.cast(outputs * upstream, tf.float32))
    bias_gradient = tape.gradient(objective, layer.bias)
    expected = tf.reduce_sum(tf.cast(upstream, tf.float32), axis=0).numpy()
    np.testing.assert_allclose(bias_gradient, expected, rtol=1e-2,
                               atol=1e-2 * np.abs(expected).max())


@pytest.fixture
def two_cores_and_1mb_of_l2(monkeypatch):
    monkeypatch.setattr(dense_rows_module, "cores_for_two_ops_at_once", lambda: True)
    monkeypatch.setattr(onednn, "_l2_cache_bytes", lambda: 1 << 20)


@pytest.mark.skipif(not onednn_enabled(), reason="the rule is TensorFlow's oneDNN kernels'")
@pytest.mark.parametrize("rows, units_in, units, training, halves", [
    (32, 384, 384, False, True),       # 0.66 MB in float32: one thread in TensorFlow
    (128, 384, 384, False, True),
    (128, 384, 1536, False, False),    # 3.3 MB: every thread already
    (15, 384, 384, False, False),      # too few rows to halve
    (128, 384, 384, True, False)])     # training: the gradient stays one matmul's
def test_rows_a_matmul_would_run_on_one_thread_run_as_two_halves(
        two_cores_and_1mb_of_l2, rows, units_in, units, training, halves):
    layer = _dense(units_in, units, "float32")
    x = tf.random.stateless_normal([rows, units_in], seed=[7, 0])
    for apply in (lambda x: dense_rows(layer, x, training=training),
                  lambda x: dense_rows(layer, x, keras.activations.gelu, training=training),
                  lambda x: matmul_plus_bias(x, layer.kernel, training=training)):
        ops = optimized_op_types(apply, x)
        assert ops["_FusedMatMul"] + ops["MatMul"] == (2 if halves else 1), ops
        assert (ops["ConcatV2"] == 1) is halves, ops
        np.testing.assert_allclose(apply(x), _whole(apply, x), rtol=1e-6, atol=1e-6)


@pytest.mark.skipif(not onednn_enabled(), reason="the rule is TensorFlow's oneDNN kernels'")
def test_an_odd_count_of_rows_splits_unevenly_and_the_amx_form_stays_whole(
        two_cores_and_1mb_of_l2, monkeypatch):
    layer = _dense(384, 384, "float32")
    x = tf.random.stateless_normal([33, 384], seed=[8, 0])
    apply = lambda x: dense_rows(layer, x)  # noqa: E731
    np.testing.assert_allclose(apply(x), _whole(apply, x), rtol=1e-6, atol=1e-6)
    monkeypatch.setattr(dense_rows_module, "amx_matmul_forms", lambda dtype, rows, training: True)
    bfloat16_layer = _dense(384, 384, "bfloat16")
    ops = optimized_op_types(lambda x: dense_rows(bfloat16_layer, x), tf.cast(x, tf.bfloat16))
    assert ops["_MklFusedBatchMatMulV2"] == 1 and not ops["ConcatV2"], ops


def _whole(apply, x):
    """`apply(x)` with every matmul whole."""
    real = dense_rows_module.cores_for_two_ops_at_once
    dense_rows_module.cores_for_two_ops_at_once = lambda: False
    try:
        return apply(x)
    finally:
        dense_rows_module.cores_for_two_ops_at_once = real
