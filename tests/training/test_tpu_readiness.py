"""What a TPU demands of the pre-training step, checked without a TPU.

`TPUStrategy` compiles each replica's step with XLA for fixed shapes, runs it on TPU cores that
have no string kernels, and pays a host round trip per call. So: every batch has fully static
shapes (per-replica batch, sequence length, predictions), tokenization stays in tf.data on the
host, the replica step (with its gradient-accumulation loop) lowers to one XLA computation, the
forward/backward pass is marked for XLA, several steps run per call in one in-graph loop, and
the global batch splits into per-replica batches the way `TPUStrategy` splits it. What only a
TPU shows (memory, speed, the TPU compiler's own limits) is not tested here.
"""

import numpy as np
import pytest
import tensorflow as tf

from bert_tf.data.pretraining.dynamic_masking_dataset import dynamic_masking_dataset
from bert_tf.data.pretraining.records_dataset import training_dataset
from bert_tf.text.bert_tokenizer import BertTokenizer
from tests.data.pretraining.records import write_pretraining_records
from tests.data.pretraining.toy_corpus import numbered_documents, write_corpus, write_vocab
from tests.training.test_pretraining_trainer import CONFIG, PREDICTIONS, SEQ, make_trainer

# A TPU v3-8 / v4-8 host drives 8 cores (replicas) from one input pipeline.
TPU_REPLICAS = 8
GLOBAL_BATCH = 64
PER_REPLICA_BATCH = GLOBAL_BATCH // TPU_REPLICAS
ACCUMULATION = 2

# Ops that need a CPU host: strings, Python callbacks, tf.data. None may run in the step.
HOST_ONLY_OP_TYPES = {"PyFunc", "EagerPyFunc", "PyFuncStateless", "IteratorGetNext",
                      "MakeIterator", "OptionalGetValue", "StringFormat", "PrintV2"}


def tpu_input_context(pipelines=1, pipeline_id=0):
    """The `InputContext` that `TPUStrategy.distribute_datasets_from_function` passes each
    host's dataset function."""
    return tf.distribute.InputContext(num_input_pipelines=pipelines, input_pipeline_id=pipeline_id,
                                      num_replicas_in_sync=TPU_REPLICAS)


@pytest.fixture(scope="module")
def record_files(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("records") / "train.tfrecord")
    write_pretraining_records(path, 96, SEQ, PREDICTIONS, vocab_size=CONFIG.vocab_size)
    return [path]


@pytest.fixture(scope="module")
def text_inputs(tmp_path_factory):
    directory = tmp_path_factory.mktemp("text")
    path = str(directory / "corpus.txt")
    write_corpus(path, numbered_documents([6] * 6, words_per_sentence=5) * 4)
    return [path], BertTokenizer(write_vocab(str(directory)), lower_case=True)


@pytest.fixture(scope="module")
def trainer():
    """A trainer that compiles with XLA and accumulates two micro-batches per step."""
    return make_trainer(global_batch_size=PER_REPLICA_BATCH, jit_compile=True,
                        gradient_accumulation_steps=ACCUMULATION)


@pytest.fixture(scope="module")
def features(record_files):
    return next(iter(training_dataset(record_files, GLOBAL_BATCH, SEQ, PREDICTIONS,
                                      tpu_input_context())))


def both_input_paths(record_files, text_inputs):
    files, tokenizer = text_inputs
    return {
        "records": training_dataset(record_files, GLOBAL_BATCH, SEQ, PREDICTIONS,
                                    tpu_input_context()),
        "raw text": dynamic_masking_dataset(files, GLOBAL_BATCH, SEQ, PREDICTIONS,
                                            tpu_input_context(), tokenizer=tokenizer),
    }


def graph_ops(concrete_function):
    """Every op of a traced function, those of the functions it calls (loop bodies, XLA
    clusters, gradients) included."""
    graph = concrete_function.graph
    ops = list(graph.get_operations())
    for function in graph.as_graph_def().library.function:
        ops.extend(function.node_def)
    return ops


def string_or_host_ops(concrete_function):
    """The names of the ops in a traced step that a TPU core cannot run."""
    found = []
    for op in graph_ops(concrete_function):
        op_type = op.type if hasattr(op, "type") else op.op
        dtypes = ([t.dtype for t in op.inputs] + [t.dtype for t in op.outputs]
                  if hasattr(op, "inputs") else
                  [tf.dtypes.as_dtype(v.type) for k, v in op.attr.items()
                   if v.WhichOneof("value") == "type"])
        if op_type in HOST_ONLY_OP_TYPES or tf.string in dtypes:
            found.append(f"{op.name} ({op_type})")
    return found


def test_batches_have_the_static_per_replica_shapes_tpus_compile_for(record_files, text_inputs):
    for name, dataset in both_input_paths(record_files, text_inputs).items():
        shapes = {key: spec.shape for key, spec in dataset.element_spec.items()}
        assert all(shape.is_fully_defined() for shape in shapes.values()), (name, shapes)
        assert shapes["input_word_ids"] == [PER_REPLICA_BATCH, SEQ], name
        assert shapes["masked_lm_positions"] == [PER_REPLICA_BATCH, PREDICTIONS], name
        assert tf.string not in {spec.dtype for spec in dataset.element_spec.values()}, name
        batch = next(iter(dataset))  # and the batches really are that shape
        assert batch["masked_lm_ids"].shape == [PER_REPLICA_BATCH, PREDICTIONS], name


def test_the_global_batch_splits_over_replicas_as_tpu_strategy_splits_it(record_files):
    context = tpu_input_context()
    assert context.get_per_replica_batch_size(GLOBAL_BATCH) == PER_REPLICA_BATCH
    # Two hosts (a v3-16 slice): each pipeline feeds its 4 replicas the same per-replica batch.
    dataset = training_dataset(record_files, GLOBAL_BATCH, SEQ, PREDICTIONS,
                               tpu_input_context(pipelines=2, pipeline_id=1))
    assert dataset.element_spec["input_word_ids"].shape[0] == PER_REPLICA_BATCH
    with pytest.raises(ValueError, match="`global_batch_size` 60 is not divisible by "
                                         "`num_replicas_in_sync` 8"):
        training_dataset(record_files, 60, SEQ, PREDICTIONS, context)
    # The trainer names the same rule for its own split into micro-batches.
    with pytest.raises(ValueError, match="batch size 4 must split evenly over 1 replica"
                                         r"\(s\) x 3 accumulation step"):
        make_trainer(global_batch_size=4, gradient_accumulation_steps=3)


def test_no_string_or_host_op_runs_inside_the_replica_step(trainer, features, text_inputs):
    specs = {key: tf.TensorSpec(value.shape, value.dtype) for key, value in features.items()}
    step = tf.function(trainer.replica_train_step).get_concrete_function(specs)
    assert string_or_host_ops(step) == []
    ops = {op.type if hasattr(op, "type") else op.op for op in graph_ops(step)}
    assert "While" in ops or "StatelessWhile" in ops  # the accumulation loop was inspected too
    # The inspection finds what tokenizing inside the step would bring in.
    _, tokenizer = text_inputs
    tokenizing = tf.function(lambda text: tf.reduce_sum(tokenizer.tokenize(text).flat_values))
    found = string_or_host_ops(tokenizing.get_concrete_function(tf.TensorSpec([None], tf.string)))
    # The string input, and string ops of the tokenizer's own functions (found in the library).
    assert "text (Placeholder)" in found and len(found) > 1, found


def test_the_replica_step_with_its_accumulation_loop_is_one_static_xla_computation(
        trainer, features):
    step = tf.function(trainer.replica_train_step, jit_compile=True)
    hlo = step.experimental_get_compiler_ir(features)(stage="hlo")
    micro_batch = PER_REPLICA_BATCH // ACCUMULATION
    # The MLM logits of one micro-batch, inside the accumulation while loop.
    assert f"f32[{micro_batch},{PREDICTIONS},{CONFIG.vocab_size}]" in hlo
    assert " while(" in hlo
    # Dynamic dimensions would show as bounded shapes ("<=") in the HLO.
    assert "<=" not in hlo
    # On CPU/GPU the forward/backward pass is compiled on its own: marked for XLA.
    gradients = trainer._gradients.get_concrete_function(
        {key: tf.TensorSpec(value.shape, value.dtype) for key, value in features.items()},
        tf.TensorSpec([], tf.float32), tf.TensorSpec([], tf.float32))
    assert gradients.function_def.attr["_XlaMustCompile"].b


def test_several_steps_run_per_host_call_in_one_in_graph_loop(record_files):
    trainer = make_trainer(global_batch_size=PER_REPLICA_BATCH)
    strategy = trainer.strategy
    iterator = iter(strategy.distribute_datasets_from_function(
        lambda context: training_dataset(record_files, PER_REPLICA_BATCH, SEQ, PREDICTIONS,
                                         context)))
    totals = trainer.train_steps(iterator, tf.constant(3))
    assert int(trainer.global_step.numpy()) == 3   # three optimizer steps in one call
    assert int(trainer.optimizer.iterations.numpy()) == 3
    assert float(totals[-1]) == 3 * PER_REPLICA_BATCH   # examples, summed in the graph
    trainer.train_steps(iterator, tf.constant(5))    # another count: the same graph
    assert int(trainer.global_step.numpy()) == 8
    assert trainer.train_steps.experimental_get_tracing_count() == 1
    traced = trainer.train_steps.get_concrete_function(iterator, tf.TensorSpec([], tf.int32))
    loops = [op for op in traced.graph.get_operations() if op.type in ("While", "StatelessWhile")]
    assert len(loops) == 1
    assert np.isfinite(totals.numpy()).all()
