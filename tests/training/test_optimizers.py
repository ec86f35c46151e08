import collections
import os
import subprocess
import sys
import types

import keras
import numpy as np
import pytest
import tensorflow as tf

from bert_tf import BertClassifier, BertConfig, BertEncoder
from bert_tf.models.bert_pretrainer import BertPretrainer
from bert_tf.training.lamb import Lamb
from bert_tf.training.optimizers import FusedAdamW, create_optimizer
from bert_tf.training.schedule import WarmupPolynomialDecay
from tests.harness import ops_feeding
from tests.resources import REPO_ROOT

TINY = BertConfig(vocab_size=20, hidden_size=8, num_hidden_layers=1, num_attention_heads=2,
                  intermediate_size=16, max_position_embeddings=8)


def numpy_lamb(weights, gradients, adapt, lr=0.1, beta_1=0.9, beta_2=0.999, epsilon=1e-6,
               weight_decay_rate=0.01):
    """You et al. 2019, Algorithm 2 (with Adam's bias correction), one variable, all steps."""
    w = weights.astype(np.float64)
    m = np.zeros_like(w)
    v = np.zeros_like(w)
    for t, g in enumerate(gradients, start=1):
        m = beta_1 * m + (1 - beta_1) * g
        v = beta_2 * v + (1 - beta_2) * g * g
        update = (m / (1 - beta_1 ** t)) / (np.sqrt(v / (1 - beta_2 ** t)) + epsilon)
        if adapt:
            update = update + weight_decay_rate * w
            update = np.linalg.norm(w) / np.linalg.norm(update) * update
        w = w - lr * update
    return w


def test_lamb_matches_the_paper_and_spares_excluded_variables():
    rng = np.random.default_rng(0)
    kernel = keras.Variable(rng.normal(size=(3, 4)).astype(np.float32), name="kernel")
    bias = keras.Variable(rng.normal(size=(4,)).astype(np.float32), name="bias")
    gradients = [[rng.normal(size=(3, 4)), rng.normal(size=(4,))] for _ in range(3)]
    optimizer = Lamb(learning_rate=0.1, weight_decay_rate=0.01)
    optimizer.exclude_from_weight_decay(var_list=[bias])
    start = [kernel.numpy(), bias.numpy()]
    for step in gradients:
        optimizer.apply([tf.constant(g, tf.float32) for g in step], [kernel, bias])
    np.testing.assert_allclose(kernel.numpy(), numpy_lamb(start[0], [g[0] for g in gradients],
                                                          adapt=True), rtol=1e-5)
    np.testing.assert_allclose(bias.numpy(), numpy_lamb(start[1], [g[1] for g in gradients],
                                                        adapt=False), rtol=1e-5)


def test_lamb_refuses_keras_decoupled_weight_decay():
    with pytest.raises(ValueError, match="weight_decay_rate"):
        Lamb(weight_decay=0.01)


@pytest.fixture(scope="module")
def variables():
    keras.utils.set_random_seed(0)
    return BertPretrainer(BertEncoder(TINY)).trainable_variables


def spared(variable):
    # Google's rule, by hand: LayerNorm (gamma/beta) and biases get no weight decay.
    return variable.path.endswith(("/gamma", "/beta", "bias"))


@pytest.mark.parametrize("name,shrink", [("adamw", 1 - 0.5 * 0.1), ("lamb", 1 - 0.5)])
def test_no_weight_decay_on_layer_norm_and_biases(variables, name, shrink):
    # Zero gradients: only weight decay moves a variable (AdamW: w *= 1 - lr * rate; LAMB's
    # trust ratio turns the decay term rate * w into a step of length lr * ||w||).
    originals = [v.numpy() for v in variables]
    optimizer = create_optimizer(name, 0.5, variables, weight_decay_rate=0.1)
    optimizer.apply([tf.zeros_like(v) for v in variables], variables)
    # Per layer 6 biases + 2 LayerNorms; embeddings' LayerNorm, pooler bias; heads' 5.
    assert sum(spared(v) for v in variables) == 10 * TINY.num_hidden_layers + 3 + 5
    for variable, original in zip(variables, originals):
        expected = original if spared(variable) else original * shrink
        np.testing.assert_allclose(variable.numpy(), expected, rtol=1e-6, err_msg=variable.path)
        variable.assign(original)


@pytest.mark.parametrize("summed_by_train_step", [True, False])
def test_gradients_are_clipped_by_their_global_norm(variables, summed_by_train_step):
    # One replica: the clipping's scale is applied inside each variable's update loop.
    rng = np.random.default_rng(1)
    gradients = [tf.constant(rng.normal(size=v.shape), tf.float32) for v in variables]
    norm = float(tf.linalg.global_norm(gradients))
    optimizer = create_optimizer("adamw", 0.0, variables, weight_decay_rate=0.0, clip_norm=0.5,
                                 summed_by_train_step=summed_by_train_step)
    assert optimizer._clips_in_update_step()
    optimizer.apply(gradients, variables)
    # Adam's first moment after one step is (1 - beta_1) * the (clipped) gradient.
    momentums = optimizer._momentums
    for gradient, momentum in zip(gradients, momentums):
        np.testing.assert_allclose(momentum.numpy(), 0.1 * gradient.numpy() * 0.5 / norm,
                                   rtol=1e-5, atol=1e-9)


def test_gradients_summed_after_apply_are_clipped_before_the_sum(variables, monkeypatch):
    # Under Model.fit with several replicas Keras clips each replica's gradient, then sums:
    # the scale cannot wait for the update loop, which reads the sum.
    optimizer = create_optimizer("adamw", 0.0, variables, clip_norm=0.5,
                                 summed_by_train_step=False)
    monkeypatch.setattr(optimizer, "_distribution_strategy",
                        types.SimpleNamespace(num_replicas_in_sync=2))
    assert not optimizer._clips_in_update_step()
    rng = np.random.default_rng(3)
    gradients = [tf.constant(rng.normal(size=v.shape), tf.float32) for v in variables]
    for clipped, expected in zip(optimizer._clip_gradients(gradients),
                                 tf.clip_by_global_norm(gradients, 0.5)[0], strict=True):
        np.testing.assert_allclose(clipped, expected, rtol=1e-5, atol=1e-9)


def test_a_non_finite_gradient_norm_makes_every_clipped_update_nan():
    # Keras' rule for global-norm clipping: NaN everywhere, so that the loss shows it.
    variables = [keras.Variable(np.ones((2, 3), np.float32), name="kernel"),
                 keras.Variable(np.ones(3, np.float32), name="bias")]
    optimizer = create_optimizer("adamw", 0.1, variables, clip_norm=1.0)
    optimizer.apply([tf.constant([[1.0, np.inf, 0.0]] * 2), tf.ones(3)], variables)
    for variable in variables:
        assert np.isnan(variable.numpy()).all(), variable.path


def test_float16_gets_dynamic_loss_scaling(variables):
    optimizer = create_optimizer("lamb", 1e-3, variables, loss_scaling=True)
    assert isinstance(optimizer, keras.optimizers.LossScaleOptimizer)
    assert isinstance(optimizer.inner_optimizer, Lamb)
    assert float(optimizer.scale_loss(tf.constant(1.0))) == 2.0 ** 15


def test_unknown_optimizer_is_named(variables):
    with pytest.raises(ValueError, match="Unknown optimizer 'sgd'"):
        create_optimizer("sgd", 1e-3, variables)


def numpy_adamw(weights, gradients, learning_rates, decay, beta_1=0.9, beta_2=0.999,
                epsilon=1e-6, weight_decay=0.01):
    """Loshchilov & Hutter's AdamW with Kingma & Ba's Algorithm 1 (epsilon added to the
    bias-corrected sqrt(v)), the decay applied first as Keras does, one variable, all steps."""
    w = weights.astype(np.float64)
    m = np.zeros_like(w)
    v = np.zeros_like(w)
    for t, (g, lr) in enumerate(zip(gradients, learning_rates), start=1):
        if decay:
            w = w - lr * weight_decay * w
        m = beta_1 * m + (1 - beta_1) * g
        v = beta_2 * v + (1 - beta_2) * g * g
        w = w - lr * (m / (1 - beta_1 ** t)) / (np.sqrt(v / (1 - beta_2 ** t)) + epsilon)
    return w


@pytest.mark.parametrize("summed_by_train_step", [False, True])
def test_fused_adamw_takes_the_steps_of_the_adam_paper(summed_by_train_step):
    # Gradients of ~1e-6, the size of an attention kernel's at initialisation: there the
    # epsilon's placement decides the step, and Keras' AdamW (epsilon on the raw sqrt(v)) ends
    # elsewhere.
    rng = np.random.default_rng(0)
    initial = {"dense/kernel": rng.normal(size=(4, 3)), "dense/bias": rng.normal(size=3)}
    gradients = [{name: 1e-6 * rng.normal(size=value.shape) for name, value in initial.items()}
                 for _ in range(5)]
    schedule = keras.optimizers.schedules.PolynomialDecay(0.1, 5, 0.01)
    learning_rates = [float(schedule(step)) for step in range(5)]
    results = []
    for make in (lambda variables: create_optimizer(
                     "adamw", schedule, variables, clip_norm=None,
                     summed_by_train_step=summed_by_train_step),
                 lambda variables: keras.optimizers.AdamW(
                     learning_rate=schedule, weight_decay=0.01, epsilon=1e-6)):
        variables = [keras.Variable(value.astype(np.float32), name=name.split("/")[1])
                     for name, value in initial.items()]
        optimizer = make(variables)
        if not isinstance(optimizer, FusedAdamW):  # Keras' own: the same exclusion
            optimizer.exclude_from_weight_decay(var_list=[variables[1]])
        for step in gradients:
            optimizer.apply([tf.constant(step[name], tf.float32) for name in initial],
                            variables)
        results.append([v.numpy() for v in variables])
    fused, keras_adamw = results
    for name, value, decay in zip(initial, fused, (True, False)):
        expected = numpy_adamw(initial[name], [g[name] for g in gradients], learning_rates,
                               decay)
        np.testing.assert_allclose(value, expected, rtol=1e-5, atol=1e-6, err_msg=name)
    assert not np.allclose(fused[0], keras_adamw[0], rtol=1e-3, atol=1e-3)
    assert not np.allclose(fused[0], initial["dense/kernel"])  # it did move


def test_fused_adamw_builds_its_hyperparameters_once_per_step_not_per_variable():
    # Each op costs its trace time (~0.9 ms), and MiniLM has 105 variables: the step's casts
    # stay as many for 6 variables as for 2, and each variable adds only its own update's ops
    # (7 now; 18 when every update built its own hyperparameters).
    def traced_ops(num_variables):
        variables = [keras.Variable(np.ones((3,), np.float32), name=f"kernel_{i}")
                     for i in range(num_variables)]
        optimizer = create_optimizer("adamw", 1e-3, variables, clip_norm=1.0)
        optimizer.build(variables)
        apply = tf.function(lambda: optimizer.apply([tf.ones((3,))] * num_variables, variables))
        graph = apply.get_concrete_function().graph
        return collections.Counter(op.type for op in graph.get_operations())

    two, six = traced_ops(2), traced_ops(6)
    assert six["Cast"] == two["Cast"]
    assert sum(six.values()) - sum(two.values()) <= 4 * 12


def test_fused_adamw_refuses_amsgrad():
    with pytest.raises(ValueError, match="amsgrad"):
        FusedAdamW(amsgrad=True)


def _sparse_and_dense_runs(name, clip_norm):
    """Three steps of `name`'s optimizer on an embedding table and a kernel, the table's
    gradient given as IndexedSlices with repeated rows (a token that occurs twice in the batch)
    and, in the second run, as its dense form: the table's start and both runs' variables."""
    rng = np.random.default_rng(2)
    table = rng.normal(size=(10, 4)).astype(np.float32)
    kernel = rng.normal(size=(4, 3)).astype(np.float32)
    steps = [(tf.constant(rows), tf.constant(rng.normal(size=(len(rows), 4)), tf.float32),
              tf.constant(rng.normal(size=(4, 3)), tf.float32))
             for rows in ([1, 7, 1, 3], [7, 2, 2], [5])]
    first_rows, first_gradients, first_kernel_gradient = steps[0]
    dense_norm = float(tf.linalg.global_norm([
        tf.convert_to_tensor(tf.IndexedSlices(first_gradients, first_rows, tf.constant([10, 4]))),
        first_kernel_gradient]))
    assert dense_norm > 0.5  # with clip_norm 0.5 the clipping is active
    results = []
    for sparse in (True, False):
        variables = [keras.Variable(table, name="word_embeddings"),
                     keras.Variable(kernel, name="kernel")]
        optimizer = create_optimizer(name, 0.1, variables, clip_norm=clip_norm,
                                     summed_by_train_step=False)
        apply = tf.function(lambda gradients: optimizer.apply(gradients, variables))
        for rows, row_gradients, kernel_gradient in steps:
            table_gradient = tf.IndexedSlices(row_gradients, rows, tf.constant([10, 4]))
            apply([table_gradient if sparse else tf.convert_to_tensor(table_gradient),
                   kernel_gradient])
        results.append([v.numpy() for v in variables])
    return table, *results


@pytest.mark.parametrize("clip_norm", [0.5, None])
def test_sparse_embedding_gradient_is_clipped_and_applied_as_its_dense_form(clip_norm):
    # Its norm and its update must be those of the dense gradient, also for rows a step does
    # not touch but earlier steps did (their moments move them).
    table, from_sparse, from_dense = _sparse_and_dense_runs("adamw", clip_norm)
    for sparse_value, dense_value in zip(from_sparse, from_dense):
        np.testing.assert_allclose(sparse_value, dense_value, rtol=1e-6, atol=1e-7)
    never = [0, 4, 6, 8, 9]  # rows no step touched: weight decay only, three times
    np.testing.assert_allclose(from_sparse[0][never], table[never] * (1 - 0.1 * 0.01) ** 3,
                               rtol=1e-6)
    assert not np.allclose(from_sparse[0][1], table[1] * (1 - 0.1 * 0.01) ** 3)  # moved by m


@pytest.mark.parametrize("clip_norm", [0.5, None])
def test_lamb_takes_a_sparse_gradient_as_its_dense_form(clip_norm):
    # Model.fit hands LAMB the word embeddings' gradient as IndexedSlices; its trust ratio is
    # the whole table's, so the update must be the dense gradient's exactly.
    table, from_sparse, from_dense = _sparse_and_dense_runs("lamb", clip_norm)
    for sparse_value, dense_value in zip(from_sparse, from_dense):
        np.testing.assert_allclose(sparse_value, dense_value, rtol=1e-6, atol=1e-7)
    assert not np.allclose(from_sparse[0], table)


def _called_functions(graph, name_part):
    return [op for op in graph.get_operations()
            if op.type in ("StatefulPartitionedCall", "PartitionedCall")
            and name_part in op.get_attr("f").name]


def test_the_embedding_rows_zero_gradient_step_waits_for_the_gradient():
    # It needs no gradient, so nothing else would keep it from taking a core in the middle of
    # the forward and backward pass (see `_adamw_rows_update`). Values are unchanged: the sparse
    # test above checks them.
    table = keras.Variable(np.ones((10, 4), np.float32), name="word_embeddings")
    kernel = keras.Variable(np.ones((4, 3), np.float32), name="kernel")
    optimizer = create_optimizer("adamw", 0.1, [table, kernel], summed_by_train_step=False)

    @tf.function
    def step(rows, row_values):
        gradient = tf.IndexedSlices(row_values * 2, rows, tf.constant([10, 4]))
        optimizer.apply([gradient, tf.ones([4, 3])], [table, kernel])

    graph = step.get_concrete_function(tf.TensorSpec([2], tf.int32),
                                       tf.TensorSpec([2, 4], tf.float32)).graph
    decay, = _called_functions(graph, "adamw_decay")
    gradient_values = graph.get_operation_by_name("row_values")
    assert gradient_values in ops_feeding([decay])
    step(tf.constant([1, 3]), tf.ones([2, 4]))
    assert np.allclose(table.numpy()[0], 1 - 0.1 * 0.01)  # the decay ran (an untouched row)


LOAD_OPTIMIZER_STATE = """
import sys
import keras
import numpy as np
import bert_tf
for path in sys.argv[1:]:
    model = keras.models.load_model(path)
    optimizer = model.optimizer
    np.savez(path + ".npz", **{v.path: v.numpy() for v in optimizer.variables},
             learning_rate=float(optimizer.learning_rate), class_name=type(optimizer).__name__,
             not_decayed=[v.path for v in model.trainable_variables
                          if not optimizer._use_weight_decay(v)])
"""


def test_a_model_compiled_with_an_optimizer_of_bert_tf_loads_with_its_state(tmp_path):
    # In a fresh process, as a user resuming a fine-tuning from a `.keras` file would.
    inputs = {"input_word_ids": np.array([[2, 7, 9, 3], [2, 5, 5, 3]], np.int32),
              "input_mask": np.ones([2, 4], np.int32),
              "input_type_ids": np.zeros([2, 4], np.int32)}
    saved = {}
    for name in ("adamw", "lamb"):
        keras.utils.set_random_seed(0)
        model = BertClassifier(BertEncoder(TINY), num_classes=2)
        model(inputs)
        optimizer = create_optimizer(name, WarmupPolynomialDecay(1e-2, 10, 2),
                                     model.trainable_variables, summed_by_train_step=False)
        model.compile(optimizer=optimizer, loss=keras.losses.SparseCategoricalCrossentropy(
            from_logits=True))
        model.fit(inputs, np.array([0, 1]), epochs=3, verbose=0)
        saved[str(tmp_path / f"{name}.keras")] = optimizer, sorted(
            v.path for v in model.trainable_variables if not optimizer._use_weight_decay(v))
        model.save(str(tmp_path / f"{name}.keras"))
    env = {**os.environ, "PYTHONPATH": REPO_ROOT, "TF_CPP_MIN_LOG_LEVEL": "3"}
    result = subprocess.run([sys.executable, "-c", LOAD_OPTIMIZER_STATE, *saved],
                            capture_output=True, text=True, timeout=300, env=env)
    assert result.returncode == 0, result.stderr[-3000:]
    for path, (optimizer, not_decayed) in saved.items():
        loaded = dict(np.load(path + ".npz"))
        assert loaded.pop("class_name") == type(optimizer).__name__
        # LayerNorm and the biases stay without weight decay (Keras' exclusions are not saved).
        assert sorted(loaded.pop("not_decayed")) == not_decayed
        assert any("layer_norm" in p for p in not_decayed) and any(
            p.endswith("bias") for p in not_decayed)
        assert loaded.pop("learning_rate") == pytest.approx(float(optimizer.learning_rate))
        expected = {v.path: v.numpy() for v in optimizer.variables}
        assert set(loaded) == set(expected)
        assert expected[f"{optimizer.name}/iteration"] == 3
        for key, value in expected.items():
            np.testing.assert_array_equal(loaded[key], value, err_msg=key)
