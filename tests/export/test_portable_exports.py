"""Exports of a bfloat16 model on a CPU with AMX: in this process its feed-forward GELU runs as
an XLA loop after the AMX matmul, but the graphs the SavedModel serves hold no XLA function
(TF Serving binaries may lack XLA). AMX is set for the test, so it runs on any CPU."""

import os

import numpy as np
import pytest
import tensorflow as tf
from tensorflow.core.protobuf import saved_model_pb2

from bert_tf import BertEncoder
from bert_tf.export import export_encoder, export_task_model
from bert_tf.models.bert_classifier import BertClassifier
from tests.amx_forms import assume_amx_bfloat16, xla_compiled
from tests.export.tiny_models import encoder_inputs, tiny_config


@pytest.fixture
def amx(monkeypatch):
    assume_amx_bfloat16(monkeypatch)


def xla_functions_served(export_dir):
    """The XLA-compiled functions the SavedModel's signatures reach (through calls and
    control flow), by name."""
    saved_model = saved_model_pb2.SavedModel()
    with open(os.path.join(export_dir, "saved_model.pb"), "rb") as f:
        saved_model.ParseFromString(f.read())
    graph = saved_model.meta_graphs[0].graph_def
    library = {function.signature.name: function for function in graph.library.function}
    pending = [attr.func.name for node in graph.node for attr in node.attr.values()]
    reached = set()
    while pending:
        name = pending.pop()
        if name in reached or name not in library:
            continue
        reached.add(name)
        pending += [attr.func.name for node in library[name].node_def
                    for attr in node.attr.values()]
    return xla_compiled(library[name] for name in reached)


def bfloat16_encoder():
    encoder = BertEncoder(tiny_config(num_hidden_layers=1), dtype="mixed_bfloat16")
    inputs = encoder_inputs([[2, 5, 6, 3], [2, 7, 3]], seq_length=8)
    encoder(inputs)
    return encoder, inputs


def test_the_process_itself_runs_the_gelu_as_xla(amx):
    encoder, inputs = bfloat16_encoder()
    graph = tf.function(lambda x: encoder(x, training=False)).get_concrete_function(
        inputs).graph.as_graph_def()
    assert xla_compiled(graph.library.function)


def test_task_export_serves_no_xla_function(amx, tmp_path, vocab_file):
    encoder, _ = bfloat16_encoder()
    model = BertClassifier(encoder, num_classes=2)
    for skip_padding in (False, True):
        path = str(tmp_path / f"skip_{skip_padding}")
        export_task_model(path, "classifier", model, vocab_file, do_lower_case=True,
                          seq_length=16, skip_padding=skip_padding)
        assert xla_functions_served(path) == []
        served = tf.saved_model.load(path).signatures["serving_default"](
            text=tf.constant(["hello world", "a good movie"]))
        np.testing.assert_allclose(served["probabilities"].numpy().sum(axis=1), 1, atol=1e-5)


def test_encoder_export_serves_no_xla_function(amx, tmp_path, vocab_file):
    encoder, inputs = bfloat16_encoder()
    path = str(tmp_path / "encoder")
    export_encoder(path, encoder, vocab_file, do_lower_case=True)
    assert xla_functions_served(path) == []
    loaded = tf.saved_model.load(path)
    # The served graph computes the same as the Keras encoder (up to where bfloat16 rounds the
    # GELU's input: in this process it runs apart from its matmul, in the export inside it).
    np.testing.assert_allclose(loaded(inputs, training=False)["pooled_output"],
                               encoder(inputs, training=False)["pooled_output"], atol=0.05)
