import keras
import numpy as np
import pytest
import tensorflow as tf

from bert_tf.layers import self_attention
from bert_tf.layers.activations import fused_gelu, get_activation, unfused_activation
from bert_tf.layers.embeddings import BertEmbeddings
from bert_tf.layers.onednn import onednn_enabled
from bert_tf.layers.self_attention import BertSelfAttention
from bert_tf.layers.transformer_block import BertTransformerBlock
from tests.amx_forms import assume_amx_bfloat16
from tests.harness import check_layer, ops_feeding
from tests.optimized_graph import optimized_op_types


def test_embeddings_layer():
    ids = tf.constant([[5, 6, 7, 0], [1, 2, 0, 0]])
    check_layer(BertEmbeddings, dict(vocab_size=10, hidden_size=8, max_position_embeddings=6),
                call_args=(ids, tf.zeros_like(ids)), expected_shape=(2, 4, 8))


def test_self_attention_layer():
    check_layer(BertSelfAttention, dict(hidden_size=8, num_heads=2),
                call_args=(tf.random.normal([2, 5, 8]), tf.constant([[1] * 5, [1, 1, 1, 0, 0]])),
                expected_shape=(2, 5, 8))


def test_transformer_block_layer():
    check_layer(BertTransformerBlock, dict(hidden_size=8, num_heads=2, intermediate_size=16),
                call_args=(tf.random.normal([2, 5, 8]), tf.ones([2, 5], tf.int32)),
                expected_shape=(2, 5, 8))


@pytest.mark.parametrize("training", [False, True])
def test_transformer_block_first_token_output_is_the_first_row(training):
    # The first row comes from its own one-row query (so that fetching only it prunes the
    # other rows' work); without dropout it equals the full output's first row.
    block = BertTransformerBlock(hidden_size=8, num_heads=2, intermediate_size=16)
    x = tf.random.stateless_normal([3, 5, 8], seed=[4, 0])
    mask = tf.constant([[1] * 5, [1, 1, 1, 0, 0], [1, 0, 0, 0, 0]])
    output, first = block(x, mask, training=training, with_first_token=True)
    assert first.shape == (3, 8)
    np.testing.assert_allclose(first, output[:, 0], atol=1e-6)
    np.testing.assert_allclose(output, block(x, mask, training=training), atol=1e-6)


@pytest.mark.skipif(not onednn_enabled(), reason="the fusion is oneDNN's")
@pytest.mark.parametrize("signature", [[2, 512, 128], [None, 512, 128], [None, None, 128]])
def test_transformer_block_layer_norms_are_onednn_kernels_where_the_rows_are_known_many(
        signature):
    # 512 positions of 128 units reach MIN_FUSED_ELEMENTS whatever the batch: oneDNN's kernel
    # for both LayerNorms, though the block reshapes them to rows `[None, 128]`; with the
    # length unknown too, the rows may be few (a short text): Keras' ops.
    block = BertTransformerBlock(hidden_size=128, num_heads=2, intermediate_size=256)
    x = tf.random.stateless_normal([2, 512, 128], seed=[6, 0])
    mask = tf.ones([2, 512], tf.int32)
    expected = block(x, mask, training=True)  # builds it; no dropout: inference's output
    attend = tf.function(lambda x, mask: block(x, mask), input_signature=[
        tf.TensorSpec(signature), tf.TensorSpec(signature[:2], tf.int32)])
    ops = optimized_op_types(attend, x, mask)
    assert ops["_MklLayerNorm"] == (2 if signature[1] else 0), ops
    np.testing.assert_allclose(attend(x, mask), expected, atol=2e-5)


@pytest.mark.parametrize("training", [False, True])
def test_embeddings_start_the_residual_stream_in_float32(training):
    # Under mixed precision the output is the float32 LayerNorm's (dropout 0), not rounded to
    # bfloat16: it is the first block's residual.
    layers = [BertEmbeddings(vocab_size=10, hidden_size=8, max_position_embeddings=6,
                             dtype=dtype) for dtype in ("float32", "mixed_bfloat16")]
    for layer in layers:
        layer.build()
    layers[1].set_weights(layers[0].get_weights())
    ids = tf.constant([[1, 2, 3, 4]])
    expected, output = [layer(ids, tf.zeros_like(ids), training=training) for layer in layers]
    assert output.dtype == tf.float32
    np.testing.assert_allclose(output, expected, atol=1e-5)


@pytest.mark.parametrize("training", [False, True])
@pytest.mark.parametrize("dtype", ["mixed_bfloat16", "bfloat16"])
def test_transformer_block_keeps_the_residual_stream_in_float32(dtype, training):
    # With both branches' output projections zero, the block is LayerNorm(LayerNorm(x)): under
    # mixed precision it must equal the float32 block's, not that of x rounded to bfloat16
    # (which Keras' input autocast did: ~1e-2 off after the two LayerNorms).
    def block_with_zero_branches(dtype):
        block = BertTransformerBlock(hidden_size=8, num_heads=2, intermediate_size=16,
                                     dtype=dtype)
        block.build((None, None, 8))
        for dense in (block.attention_output, block.output_dense):
            for weight in (dense.kernel, dense.bias):
                weight.assign(tf.zeros_like(weight))
        return block

    x = tf.random.stateless_normal([2, 5, 8], seed=[7, 0]) + 3.0  # off bfloat16's grid
    mask = tf.ones([2, 5], tf.int32)
    block = block_with_zero_branches(dtype)
    output = block(x, mask, training=training)
    assert output.dtype == tf.float32
    assert block.compute_output_spec(keras.KerasTensor((2, 5, 8)),
                                     keras.KerasTensor((2, 5), "int32")).dtype == "float32"
    np.testing.assert_allclose(output, block_with_zero_branches("float32")(x, mask),
                               atol=1e-5)


def _ancestor_output_shapes(tensors):
    """Static shapes of every op output that `tensors` depend on (data and control inputs)."""
    return {tuple(output.shape.as_list()) for op in ops_feeding(t.op for t in tensors)
            for output in op.outputs if output.shape.rank is not None}


@pytest.mark.parametrize("training", [False, True])
def test_fetching_only_the_first_token_needs_no_other_rows_feed_forward(training):
    # What graph pruning relies on: the first row and its gradients never read the
    # feed-forward of the other rows (`[batch * seq, intermediate]`), in training too (where
    # the row has its own dropout masks instead of being the full output's first row).
    block = BertTransformerBlock(hidden_size=8, num_heads=2, intermediate_size=16,
                                 hidden_dropout_rate=0.1, attention_dropout_rate=0.1)
    x = tf.random.stateless_normal([3, 5, 8], seed=[4, 0])
    mask = tf.ones([3, 5], tf.int32)
    block(x, mask)

    @tf.function
    def first_token_and_gradients(x):
        with tf.GradientTape() as tape:
            _, first = block(x, mask, training=training, with_first_token=True)
            loss = tf.reduce_sum(first)
        return [first, *tape.gradient(loss, block.trainable_variables)]

    graph = first_token_and_gradients.get_concrete_function(x).graph
    shapes = _ancestor_output_shapes(graph.outputs)
    assert [3, 16] in map(list, shapes)  # the first row's own feed-forward
    assert (15, 16) not in shapes  # no feed-forward over all 3 x 5 rows


def test_attention_ignores_masked_positions():
    layer = BertSelfAttention(hidden_size=8, num_heads=2)
    x = tf.random.normal([1, 5, 8])
    mask = tf.constant([[1, 1, 1, 0, 0]])
    perturbed = tf.concat([x[:, :3], tf.random.normal([1, 2, 8]) * 100.0], axis=1)
    np.testing.assert_allclose(layer(x, mask)[:, :3], layer(perturbed, mask)[:, :3], atol=1e-5)


def _textbook_attention(layer, x, mask):
    """Multi-head attention as the paper writes it: 2-D projections, heads by reshape."""
    batch, seq, hidden = x.shape
    heads, size = layer.num_heads, layer.head_size

    def project(dense):
        y = tf.matmul(tf.reshape(x, [-1, hidden]), dense.kernel) + dense.bias
        return tf.transpose(tf.reshape(y, [batch, seq, heads, size]), [0, 2, 1, 3])
    scores = tf.matmul(project(layer.query), project(layer.key), transpose_b=True) / size ** 0.5
    scores += (1.0 - tf.cast(mask[:, None, None, :], tf.float32)) * -10000.0
    context = tf.matmul(tf.nn.softmax(scores), project(layer.value))
    return tf.reshape(tf.transpose(context, [0, 2, 1, 3]), [batch, seq, hidden])


@pytest.mark.parametrize("jit_compile", [False, True])
def test_attention_and_its_gradients_equal_the_textbook_formulation(jit_compile):
    layer = BertSelfAttention(hidden_size=12, num_heads=3)
    x = tf.random.stateless_normal([2, 5, 12], seed=[1, 0])
    mask = tf.constant([[1] * 5, [1, 1, 1, 0, 0]])
    weights = tf.random.stateless_normal([2, 5, 12], seed=[2, 0])
    layer(x, mask)

    @tf.function(jit_compile=jit_compile)
    def outputs_and_gradients(attention):
        with tf.GradientTape() as tape:
            tape.watch(x)
            outputs = attention(x)
            objective = tf.reduce_sum(outputs * weights)
        return outputs, tape.gradient(objective, [x] + layer.trainable_variables)

    # training=True: the training path (dropout rate 0) and TensorFlow's gradients of it.
    ours = outputs_and_gradients(lambda x: layer(x, mask, training=True))
    textbook = outputs_and_gradients(lambda x: _textbook_attention(layer, x, mask))
    np.testing.assert_allclose(ours[0], textbook[0], atol=1e-5)
    for variable, a, b in zip(["inputs"] + [v.path for v in layer.trainable_variables],
                              ours[1], textbook[1], strict=True):
        np.testing.assert_allclose(a, b, atol=1e-5, err_msg=variable)


@pytest.mark.parametrize("training", [False, True])
@pytest.mark.parametrize("batch", [1, 4])
@pytest.mark.parametrize("dynamic_shapes", [False, True])
def test_attention_projection_layouts_agree(batch, dynamic_shapes, training):
    # Inference projects to heads by whichever layout copies less: 1 x 5 rows is fewer than
    # the 12 hidden units (2-D matmul, activations reordered), 4 x 5 more (kernel reordered);
    # with unknown shapes the choice is a tf.cond. Training always takes the 2-D form.
    # Inference leaves the key bias out (softmax removes it): the biases are not zero here.
    layer = BertSelfAttention(hidden_size=12, num_heads=3)
    layer.build((None, None, 12))
    for i, dense in enumerate((layer.query, layer.key, layer.value)):
        dense.bias.assign(tf.random.stateless_normal([12], seed=[10 + i, 0]))
    x = tf.random.stateless_normal([batch, 5, 12], seed=[3, 0])
    mask = tf.constant([[1, 1, 1, 0, 0]] * batch)
    signature = ([tf.TensorSpec([None, None, 12]), tf.TensorSpec([None, None], tf.int32)]
                 if dynamic_shapes else None)
    attend = tf.function(lambda x, mask: layer(x, mask, training=training),
                         input_signature=signature)
    np.testing.assert_allclose(attend(x, mask), _textbook_attention(layer, x, mask), atol=1e-5)


@pytest.mark.parametrize("dynamic_shapes", [False, True])
def test_one_head_attention_equals_the_textbook_formulation_in_inference(dynamic_shapes):
    # One head takes the 2-D projection: the broadcasting batched matmul with a kernel batch of
    # 1 (`[8, 1, 16, 64] @ [1, 64, 64]`) corrupts the heap in TensorFlow 2.21's oneDNN kernel,
    # which aborted this test's process before.
    layer = BertSelfAttention(hidden_size=64, num_heads=1)
    layer.build((None, None, 64))
    x = tf.random.stateless_normal([8, 16, 64], seed=[5, 0])
    mask = tf.sequence_mask(tf.range(16, 8, -1), 16, dtype=tf.int32)
    signature = ([tf.TensorSpec([None, None, 64]), tf.TensorSpec([None, None], tf.int32)]
                 if dynamic_shapes else None)
    attend = tf.function(lambda x, mask: layer(x, mask), input_signature=signature)
    np.testing.assert_allclose(attend(x, mask), _textbook_attention(layer, x, mask), atol=1e-5)


def _attention_and_inputs(dtype):
    # Stateless draws: an op seed alone gives values that depend on the process' earlier draws
    # (here, on which tests a pytest worker ran before), and bfloat16's error on large scores
    # depends on the values.
    layer = BertSelfAttention(hidden_size=64, num_heads=4, dtype=dtype)
    layer.build((None, None, 64))
    for i, dense in enumerate((layer.query, layer.key, layer.value)):
        dense.kernel.assign(tf.random.stateless_normal([64, 64], [20 + i, 0], stddev=0.3))
        dense.bias.assign(tf.random.stateless_normal([64], [30 + i, 0]))
    x = tf.random.stateless_normal([4, 24, 64], [4, 0])
    mask = tf.sequence_mask([24, 20, 9, 1], 24, dtype=tf.int32)
    return layer, x, mask


@pytest.mark.skipif(not onednn_enabled(), reason="bfloat16 softmax is used with oneDNN only")
def test_bfloat16_inference_softmax_equals_float32_softmax_rounded(monkeypatch):
    # With oneDNN, inference feeds the bfloat16 scores to softmax directly; its probabilities
    # are float32 softmax's rounded to bfloat16, so the attended values are the same bits.
    layer, x, mask = _attention_and_inputs("mixed_bfloat16")
    direct = tf.function(lambda x: layer(x, mask))(x)
    monkeypatch.setattr(self_attention, "onednn_enabled", lambda: False)  # float32 softmax
    through_float32 = tf.function(lambda x: layer(x, mask))(x)
    assert direct.dtype == tf.bfloat16
    np.testing.assert_array_equal(direct.numpy().astype(np.float32),
                                  through_float32.numpy().astype(np.float32))


@pytest.mark.skipif(not onednn_enabled(), reason="the fusion is oneDNN's")
@pytest.mark.parametrize("dtype", ["float32", "mixed_bfloat16"])
def test_scores_scale_and_mask_run_in_the_matmul(dtype, monkeypatch):
    # Without the AMX matmul form, whose projections are fused batched matmuls too.
    assume_amx_bfloat16(monkeypatch, available=False)
    layer, x, mask = _attention_and_inputs(dtype)
    ops = optimized_op_types(lambda x: layer(x, mask), x)
    # The scores' matmul fused with `* scale + mask_bias`; the context's stays plain.
    assert ops["_MklFusedBatchMatMulV2"] == 1, ops


@pytest.mark.parametrize("padding", [True, False])
def test_on_amx_the_scaled_query_attends_as_the_scaled_scores(padding, monkeypatch):
    # bfloat16 inference on AMX: the query's projection carries `1 / sqrt(head_size)`, and the
    # scores' matmul adds the mask only to a batch with padding (a tf.cond on the mask).
    assume_amx_bfloat16(monkeypatch)
    layer, x, mask = _attention_and_inputs("mixed_bfloat16")
    mask = mask if padding else tf.ones_like(mask)

    def attend():
        attended, first = tf.function(lambda x: layer(x, mask, with_first_token=True))(x)
        return tf.cast(attended, tf.float32).numpy(), tf.cast(first, tf.float32).numpy()

    attended, first = attend()
    monkeypatch.setattr(BertSelfAttention, "_query_carries_the_scale", lambda *args: False)
    scaled_scores = attend()
    # head_size 16: the scale, 1/4, is exact in bfloat16, so the two forms round alike.
    np.testing.assert_allclose(attended, scaled_scores[0], atol=1e-3 * np.abs(attended).max())
    np.testing.assert_allclose(first, scaled_scores[1], atol=1e-3 * np.abs(attended).max())
    np.testing.assert_allclose(first, attended[:, 0], atol=2e-2 * np.abs(attended).max())
    # Against float32 (these weights' large scores: up to 2.7 % of the largest output off).
    expected = _textbook_attention(layer, x, mask).numpy()
    np.testing.assert_allclose(attended, expected, atol=4e-2 * np.abs(expected).max())


@pytest.mark.skipif(not onednn_enabled(), reason="the fusion is oneDNN's")
def test_on_amx_the_scores_of_a_batch_without_padding_are_a_bare_matmul(monkeypatch):
    # oneDNN's AMX batched matmul with the scale and mask as post-ops runs at half the bare
    # one's rate, so the scale moved into the query's projection and the mask behind a cond.
    assume_amx_bfloat16(monkeypatch)
    layer, x, mask = _attention_and_inputs("mixed_bfloat16")
    ops = optimized_op_types(lambda x: layer(x, mask), x)
    # Fused: the query's and value's projections and the scores of a padded batch; bare: the
    # scores of a batch without padding and the context's matmul.
    assert ops["_MklFusedBatchMatMulV2"] == 3, ops
    assert ops["BatchMatMulV2"] + ops["_MklBatchMatMulV2"] == 2, ops


def test_embeddings_reject_sequences_longer_than_the_position_table():
    layer = BertEmbeddings(vocab_size=10, hidden_size=8, max_position_embeddings=4)
    ids = tf.zeros([1, 5], tf.int32)
    with pytest.raises(ValueError, match="Sequence length 5 exceeds max_position_embeddings 4"):
        layer(ids, ids)


def test_embeddings_gather_only_after_checking_a_dynamic_length():
    # Beside the check, the gathers allocated [batch, seq, hidden] for any length before it
    # failed: 1 GB for a served request of a million ids.
    layer = BertEmbeddings(vocab_size=10, hidden_size=8, max_position_embeddings=4)
    function = tf.function(lambda ids: layer(ids, tf.zeros_like(ids))).get_concrete_function(
        tf.TensorSpec([None, None], tf.int32))
    nodes = {node.name: node for node in function.graph.as_graph_def().node}
    gathers = [node for node in nodes.values() if node.op == "ResourceGather"]
    assert len(gathers) == 2
    for gather in gathers:
        controls = [nodes[name[1:]].op for name in gather.input if name.startswith("^")]
        assert controls == ["Assert"], gather


def test_embeddings_read_only_the_gathered_rows_of_their_tables():
    # A dense read (`ReadVariableOp`) of a table whose rows an optimizer has scattered copies
    # the whole table on every call; `ResourceGather` reads the rows alone.
    layer = BertEmbeddings(vocab_size=10, hidden_size=8, max_position_embeddings=4)
    ids = tf.constant([[1, 2, 3]])
    function = tf.function(lambda ids: layer(ids, tf.zeros_like(ids)))
    ops = [node.op for node in function.get_concrete_function(ids).graph.as_graph_def().node]
    assert ops.count("ResourceGather") == 2, ops
    assert "GatherV2" not in ops, ops


def test_gelu_is_the_exact_erf_form():
    x = np.linspace(-4, 4, 17).astype(np.float32)
    erf = np.vectorize(__import__("math").erf)
    expected = 0.5 * x * (1.0 + erf(x / np.sqrt(2.0)))
    np.testing.assert_allclose(get_activation("gelu")(tf.constant(x)), expected, atol=1e-6)
    with pytest.raises(ValueError, match="Unknown activation 'gelu2'"):
        get_activation("gelu2")


@pytest.mark.parametrize("dtype,tolerance", [(tf.float32, 1e-5), (tf.bfloat16, 2e-2)])
def test_fused_gelu_and_its_gradient_match_tensorflow_exact_gelu(dtype, tolerance):
    x = tf.constant(np.random.default_rng(0).normal(scale=3.0, size=[64, 48]), tf.float32)
    upstream = tf.constant(np.random.default_rng(1).normal(size=[64, 48]), tf.float32)

    def value_and_gradient(gelu, inputs):
        with tf.GradientTape() as tape:
            tape.watch(inputs)
            outputs = gelu(inputs)
        return [tf.cast(t, tf.float32) for t in
                (outputs, tape.gradient(outputs, inputs, tf.cast(upstream, inputs.dtype)))]

    # The reference in float32: the fused version computes in float32 whatever its input.
    expected = value_and_gradient(lambda v: tf.nn.gelu(v, approximate=False), x)
    got = value_and_gradient(tf.function(fused_gelu), tf.cast(x, dtype))
    for g, e in zip(got, expected):
        np.testing.assert_allclose(g, e, rtol=tolerance, atol=tolerance)


def test_unfused_activation_is_the_xla_loop_only_for_the_exact_gelu():
    assert unfused_activation("gelu", "bfloat16") is fused_gelu
    assert unfused_activation("gelu", "float32") is fused_gelu
    assert unfused_activation("gelu", "float16") is get_activation("gelu")
    assert unfused_activation("gelu_new", "bfloat16") is get_activation("gelu_new")


def test_transformer_block_trains_with_the_fused_gelu_and_layer_norms_in_bfloat16():
    block = BertTransformerBlock(hidden_size=8, num_heads=2, intermediate_size=32,
                                 dtype="mixed_bfloat16")
    x = tf.random.stateless_normal([2, 5, 8], seed=[1, 2])
    mask = tf.ones([2, 5], tf.int32)
    with tf.GradientTape() as tape:
        training_output = block(x, mask, training=True)
    gradients = tape.gradient(training_output, block.trainable_variables)
    assert all(g is not None for g in gradients)
    # Without dropout, training and inference (TensorFlow's GELU and LayerNorm) differ only by
    # rounding.
    np.testing.assert_allclose(tf.cast(training_output, tf.float32),
                               tf.cast(block(x, mask, training=False), tf.float32), atol=5e-2)
