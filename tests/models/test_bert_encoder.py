import os

import keras
import numpy as np
import pytest
import tensorflow as tf

from bert_tf import BertConfig, BertEncoder
from bert_tf.models.bert_encoder import _GRAPH_INFERENCE
from tests.harness import assert_outputs_close
from tests.models.numpy_bert import numpy_bert_forward, numpy_weights

SMALL = BertConfig(vocab_size=50, hidden_size=32, num_hidden_layers=3, num_attention_heads=4,
                   intermediate_size=64, max_position_embeddings=24, layer_norm_eps=1e-7)


def make_inputs(batch, seq, seed=0, vocab=50):
    rng = np.random.default_rng(seed)
    ids = rng.integers(1, vocab, size=(batch, seq)).astype(np.int32)
    lengths = rng.integers(1, seq + 1, size=batch)
    lengths[0] = seq
    mask = (np.arange(seq)[None] < lengths[:, None]).astype(np.int32)
    type_ids = ((np.arange(seq)[None] >= lengths[:, None] // 2) * mask).astype(np.int32)
    return {"input_word_ids": tf.constant(ids * mask), "input_mask": tf.constant(mask),
            "input_type_ids": tf.constant(type_ids)}


@pytest.fixture(scope="module")
def encoder():
    keras.utils.set_random_seed(1)
    return BertEncoder(SMALL)


def test_output_dict_and_shapes(encoder):
    outputs = encoder(make_inputs(3, 7))
    assert set(outputs) == {"sequence_output", "pooled_output", "encoder_outputs"}
    assert outputs["sequence_output"].shape == (3, 7, 32)
    assert outputs["pooled_output"].shape == (3, 32)
    assert [o.shape for o in outputs["encoder_outputs"]] == [(3, 7, 32)] * 3
    np.testing.assert_array_equal(outputs["encoder_outputs"][-1], outputs["sequence_output"])


def test_every_weight_starts_from_its_own_random_values(encoder):
    # One Keras initializer instance shared by several weights gives them the same values (the
    # same leading values for a larger one): query, key and value kernels used to start equal.
    drawn = [(w.path, np.asarray(w).ravel()) for w in encoder.weights if np.asarray(w).std() > 0]
    assert len(drawn) == 3 + SMALL.num_hidden_layers * 6 + 1  # embeddings, kernels, pooler
    for i, (name, values) in enumerate(drawn):
        for other, other_values in drawn[i + 1:]:
            n = min(values.size, other_values.size)
            assert not np.array_equal(values[:n], other_values[:n]), (name, other)


def test_initial_weights_repeat_with_the_keras_seed():
    weights = []
    for _ in range(2):
        keras.utils.set_random_seed(7)
        weights.append(BertEncoder(SMALL).get_weights())
    for first, second in zip(*weights):
        np.testing.assert_array_equal(first, second)


def test_matches_an_independent_numpy_bert(encoder):
    inputs = make_inputs(4, 11, seed=3)
    expected = numpy_bert_forward(numpy_weights(encoder), SMALL, *(
        inputs[k].numpy() for k in ("input_word_ids", "input_mask", "input_type_ids")))
    assert_outputs_close(encoder(inputs), expected, atol=2e-5)


def test_padding_does_not_change_real_token_outputs(encoder):
    inputs = make_inputs(1, 6, seed=5)
    padded = {k: tf.pad(v, [[0, 0], [0, 5]]) for k, v in inputs.items()}
    short, long = encoder(inputs), encoder(padded)
    np.testing.assert_allclose(long["sequence_output"][:, :6], short["sequence_output"], atol=1e-5)
    np.testing.assert_allclose(long["pooled_output"], short["pooled_output"], atol=1e-5)


def op_by_op(encoder, inputs):
    """`encoder(inputs)` executed eagerly op by op (`run_eagerly`), not as its graph."""
    encoder.run_eagerly = True
    try:
        return encoder(inputs)
    finally:
        encoder.run_eagerly = False


@pytest.mark.parametrize("seq", [1, 5, 24])
def test_eager_graph_and_xla_agree_at_any_length(encoder, seq):
    inputs = make_inputs(2, seq, seed=seq)
    eager = op_by_op(encoder, inputs)
    graph = tf.function(encoder)(inputs)
    xla = tf.function(encoder, jit_compile=True)(inputs)
    assert_outputs_close(encoder(inputs), eager, atol=1e-5)
    assert_outputs_close(graph, eager, atol=1e-5)
    assert_outputs_close(xla, eager, atol=1e-5)


def test_eager_inference_runs_one_graph_for_every_shape():
    keras.utils.set_random_seed(2)
    encoder = BertEncoder(SMALL)
    for batch, seq in ((2, 5), (3, 9), (1, 17), (4, 3), (2, 5)):
        inputs = make_inputs(batch, seq, seed=seq)
        assert_outputs_close(encoder(inputs), op_by_op(encoder, inputs), atol=1e-5)
    numpy_inputs = {k: v.numpy() for k, v in make_inputs(2, 6).items()}
    assert_outputs_close(encoder(numpy_inputs), op_by_op(encoder, numpy_inputs), atol=1e-5)
    # Shapes after the second relax to [None, None]: one more trace serves them all.
    assert _GRAPH_INFERENCE[encoder].experimental_get_tracing_count() <= 3
    # Gradients flow through it, and a tape does not make it trace again.
    with tf.GradientTape() as tape:
        pooled = encoder(make_inputs(2, 5))["pooled_output"]
    gradient = tape.gradient(pooled, encoder.pooler.kernel)
    assert gradient is not None and np.abs(gradient.numpy()).sum() > 0
    assert _GRAPH_INFERENCE[encoder].experimental_get_tracing_count() <= 3


def test_eager_inference_graph_is_not_exported(tmp_path):
    def saved_attributes(encoder, name):
        module = tf.Module()
        module.encoder = encoder
        tf.saved_model.save(module, str(tmp_path / name))
        return set(dir(tf.saved_model.load(str(tmp_path / name)).encoder))

    encoder = BertEncoder(SMALL)
    before = saved_attributes(encoder, "before")
    encoder(make_inputs(2, 5))
    assert saved_attributes(encoder, "after") == before


def test_too_long_input_is_a_clear_error(encoder):
    with pytest.raises(ValueError, match="exceeds max_position_embeddings 24"):
        encoder(make_inputs(1, 25))
    dynamic = tf.function(encoder, input_signature=[{
        k: tf.TensorSpec([None, None], tf.int32) for k in
        ("input_word_ids", "input_mask", "input_type_ids")}])
    with pytest.raises(tf.errors.InvalidArgumentError, match="exceeds max_position_embeddings"):
        dynamic(make_inputs(1, 25))


@pytest.mark.parametrize("change, message", [
    (lambda inputs: {**inputs, "input_mask": inputs["input_mask"][:, :-1]},
     r"must all have the same shape, got input_word_ids \(2, 6\), input_mask \(2, 5\)"),
    (lambda inputs: {**inputs, "input_type_ids": inputs["input_type_ids"][:1]},
     r"must all have the same shape.*input_type_ids \(1, 6\)"),
    (lambda inputs: {k: v[0] for k, v in inputs.items()}, r"must be \[batch, seq\] tensors"),
    (lambda inputs: {k: v[:, :0] for k, v in inputs.items()}, r"no positions \(shape \(2, 0\)\)"),
    (lambda inputs: {k: tf.RaggedTensor.from_tensor(v, lengths=[6, 3])
                     for k, v in inputs.items()}, r"are ragged: pad every input"),
])
def test_inputs_that_are_not_one_batch_are_clear_errors(encoder, change, message):
    # A mask of another length used to be ignored without a word; the others failed deep in
    # the graph.
    inputs = change(make_inputs(2, 6))
    with pytest.raises(ValueError, match=message):
        encoder(inputs)
    with pytest.raises(ValueError, match=message):
        tf.function(encoder)(inputs)


@pytest.mark.parametrize("key, shape", [("input_mask", (1, 2)), ("input_type_ids", (1, 1))])
def test_inputs_of_another_shape_fail_in_a_graph_traced_for_any_shape(key, shape):
    # As exported and served: the shapes unknown when traced, a [1, 2] mask with [1, 5] ids
    # broadcast to an all-ones mask and the call answered.
    encoder = BertEncoder(SMALL)  # its own: the module's keeps the traces other tests expect
    dynamic = tf.function(encoder, input_signature=[{
        k: tf.TensorSpec([None, None], tf.int32) for k in
        ("input_word_ids", "input_mask", "input_type_ids")}])
    inputs = {**make_inputs(1, 5), key: tf.ones(shape, tf.int32)}
    with pytest.raises(tf.errors.InvalidArgumentError,
                       match=f"must all have the same shape: {key} against input_word_ids"):
        dynamic(inputs)
    np.testing.assert_allclose(dynamic(make_inputs(1, 5))["pooled_output"],
                               encoder(make_inputs(1, 5))["pooled_output"], atol=1e-5)


def test_a_config_that_is_not_one_and_a_non_float_dtype_are_named():
    # A file name or a config name failed on "'str' object has no attribute 'vocab_size'".
    with pytest.raises(TypeError, match=r"takes a BertConfig or its dict, got str 'bert_tiny': "
                                        r"load one with BertConfig.from_json_file"):
        BertEncoder("bert_tiny")
    with pytest.raises(ValueError, match="dtype must be a float policy .* got 'int32'"):
        BertEncoder(SMALL, dtype="int32")


def test_keras_file_round_trip(encoder, tmp_path):
    path = os.path.join(tmp_path, "encoder.keras")
    encoder.save(path)
    restored = keras.models.load_model(path)
    assert isinstance(restored, BertEncoder) and restored.config == SMALL
    inputs = make_inputs(2, 9)
    assert_outputs_close(restored(inputs), encoder(inputs), atol=0)


def test_config_dict_accepted_and_get_config_round_trips(encoder):
    clone = BertEncoder.from_config(encoder.get_config())
    assert clone.config == SMALL and len(clone.weights) == len(encoder.weights)


@pytest.mark.parametrize("policy", ["mixed_bfloat16", "bfloat16"])
def test_bfloat16_keeps_layer_norm_float32(encoder, policy):
    # mixed_bfloat16 casts float32 weights on each use; bfloat16 (for inference) stores them as
    # bfloat16 once: the matmuls see the same operands, LayerNorm stays float32 either way.
    # (Softmax computes in float32 too: see BertSelfAttention._softmax_dtype.)
    mixed = BertEncoder(SMALL, dtype=policy)
    mixed.set_weights(encoder.get_weights())
    block = mixed.transformer_blocks[0]
    assert block.intermediate.compute_dtype == "bfloat16"
    assert block.intermediate.kernel.dtype == ("float32" if policy == "mixed_bfloat16"
                                               else "bfloat16")
    assert block.attention_layer_norm.compute_dtype == "float32"
    assert block.attention_layer_norm.gamma.dtype == "float32"
    assert mixed.embeddings.layer_norm.compute_dtype == "float32"
    inputs = make_inputs(4, 16, seed=7)
    low, full = mixed(inputs), encoder(inputs)
    assert low["pooled_output"].dtype == tf.float32
    a, b = low["pooled_output"].numpy(), full["pooled_output"].numpy()
    cosine = (a * b).sum(-1) / np.linalg.norm(a, axis=-1) / np.linalg.norm(b, axis=-1)
    assert cosine.min() > 0.999, cosine


@pytest.mark.parametrize("policy", ["mixed_bfloat16", "bfloat16"])
def test_dtype_policy_survives_config_and_keras_file(encoder, policy, tmp_path):
    mixed = BertEncoder(SMALL, dtype=policy)
    mixed.save(tmp_path / "encoder.keras")
    for restored in (BertEncoder.from_config(mixed.get_config()),
                     keras.models.load_model(tmp_path / "encoder.keras")):
        assert restored.transformer_blocks[0].intermediate.dtype_policy.name == policy
    inputs = make_inputs(2, 9)
    assert_outputs_close(restored(inputs), mixed(inputs), atol=0)


def test_a_frozen_encoder_stays_frozen_through_config_and_keras_file(tmp_path):
    # A model around the encoder trains the variables whose own flag is set: those of a frozen
    # encoder rebuilt from its config used to be trainable.
    frozen = BertEncoder(SMALL)
    frozen.trainable = False
    frozen.save(tmp_path / "encoder.keras")
    for restored in (BertEncoder(SMALL, trainable=False),
                     BertEncoder.from_config(frozen.get_config()),
                     keras.models.load_model(tmp_path / "encoder.keras")):
        assert not restored.trainable
        assert [v.path for v in restored.weights if v.trainable] == []


def test_layers_frozen_on_their_own_stay_frozen_through_a_keras_file(tmp_path):
    encoder = BertEncoder(SMALL)
    encoder.embeddings.trainable = False
    encoder.transformer_blocks[0].trainable = False
    encoder.save(tmp_path / "encoder.keras")
    restored = keras.models.load_model(tmp_path / "encoder.keras")
    assert ([v.path for v in restored.trainable_weights]
            == [v.path for v in encoder.trainable_weights])
    assert not restored.embeddings.trainable and restored.transformer_blocks[1].trainable


def test_dropout_is_active_only_in_training(encoder):
    inputs = make_inputs(2, 8)
    a = encoder(inputs, training=True)["sequence_output"]
    b = encoder(inputs, training=True)["sequence_output"]
    assert not np.allclose(a, b)
    assert_outputs_close(encoder(inputs, training=False), encoder(inputs))
