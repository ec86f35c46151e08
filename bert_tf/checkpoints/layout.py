"""The object layout of this package's TF2 checkpoints: the one description every writer and
reader uses.

A checkpoint is `tf.train.Checkpoint(**objects)` where `objects` holds, by key:

  encoder            the `BertEncoder` (always; what every `--init_checkpoint` reader restores)
  pretraining_heads  a module whose `by_google_name` dict holds the heads' variables keyed by
                     Google name (`cls/predictions/...`), so that a converted Google checkpoint
                     and a pre-training job write the same thing
  model              a fine-tuned task model (encoder + head), written by fine-tuning
  model_classes      beside `model`: an object without variables whose children are named after
                     the task model's class and its task bases (`BertClassifier`,
                     `BertTokenClassifier`, ...), since a sentence classifier's head and a
                     token classifier's have the same names and shapes (older checkpoints
                     lack it)
  optimizer          the optimizer with its slots and iteration count (training jobs)
  global_step        the pre-training step counter
  dropout_rng        the dropout layers' random-number states (resumed jobs draw the same masks)

On disk: `DIR/ckpt-N.index`, `DIR/ckpt-N.data-*`, `DIR/checkpoint` (the state file naming the
latest), `DIR/bert_config.json` and, when known, `DIR/vocab.txt` and `DIR/tokenizer_config.json`
(the casing, `{"do_lower_case": ...}`).

Example:
    >>> checkpoint = training_checkpoint(encoder=encoder, task_model=classifier,
    ...                                  optimizer=optimizer)
    >>> manager = checkpoint_manager(checkpoint, "/tmp/sst2", max_to_keep=2)
    >>> ObjectGraph(manager.save()).key(task_model_path("classifier", "bias"))
    'model/classifier/bias/.ATTRIBUTES/VARIABLE_VALUE'
"""

import functools
import logging
import os
import re

import tensorflow as tf

from bert_tf.checkpoints import names as names_lib
from bert_tf.checkpoints.damaged_files import open_tf_checkpoint
from bert_tf.config import BertConfig
from bert_tf.file_io import remove_leftover_directories
from bert_tf.models.bert_encoder import BertEncoder
from bert_tf.models.bert_task_model import BertTaskModel

logger = logging.getLogger("bert_tf.checkpoints")

ENCODER_KEY = "encoder"
HEADS_KEY = "pretraining_heads"
HEADS_ATTRIBUTE = "by_google_name"
HEADS_PATH = (HEADS_KEY, HEADS_ATTRIBUTE)
TASK_MODEL_KEY = "model"
TASK_MODEL_CLASSES_KEY = "model_classes"
OPTIMIZER_KEY = "optimizer"
STEP_KEY = "global_step"
DROPOUT_RNG_KEY = "dropout_rng"
CHECKPOINT_NAME = "ckpt"
# Beside the checkpoints: what makes a directory complete for every tool's --init_checkpoint.
CONFIG_FILE = "bert_config.json"
VOCAB_FILE = "vocab.txt"
# Hugging Face's tokenizer settings; its `do_lower_case` states the casing the vocabulary was
# built and the model trained with (conversions and fine-tuning runs write one too).
TOKENIZER_CONFIG_FILE = "tokenizer_config.json"


def training_checkpoint(encoder, heads=None, task_model=None, optimizer=None, step=None,
                        dropout_rng=None):
    """The `tf.train.Checkpoint` of the layout above, for writing and for restoring.

    Args:
      encoder: the `BertEncoder`.
      heads: `{google_name: variable}` of the pre-training heads (variables or arrays;
        arrays become non-trainable variables, what a conversion writes).
      task_model: a fine-tuned task model sharing `encoder`.
      optimizer, step: a training job's optimizer and step counter.
      dropout_rng: the variables holding the dropout layers' random-number states.
    """
    objects = {ENCODER_KEY: encoder}
    if heads:
        module = tf.Module(name=HEADS_KEY)
        setattr(module, HEADS_ATTRIBUTE, {
            name: value if hasattr(value, "assign")
            else tf.Variable(value, dtype=tf.float32, trainable=False,
                             name=name.replace("/", "_"))
            for name, value in sorted(heads.items())})
        objects[HEADS_KEY] = module
    for key, value in ((TASK_MODEL_KEY, task_model), (OPTIMIZER_KEY, optimizer),
                       (STEP_KEY, step), (DROPOUT_RNG_KEY, dropout_rng)):
        if value is not None:
            objects[key] = value
    class_names = task_model_classes(type(task_model))
    if class_names:
        # Child objects without variables: restoring a checkpoint written without them (a
        # run resumed after an upgrade) still matches every object that has values.
        marker = tf.Module(name=TASK_MODEL_CLASSES_KEY)
        for name in class_names:
            setattr(marker, name, tf.Module(name=name))
        objects[TASK_MODEL_CLASSES_KEY] = marker
    return tf.train.Checkpoint(**objects)


def task_model_classes(model_class):
    """The names of `model_class` and of its bases that are task models, most derived first:
    what a checkpoint records of a task model (`TASK_MODEL_CLASSES_KEY`).

    Example:
        >>> task_model_classes(BertTokenClassifier)
        ['BertTokenClassifier']
    """
    return [cls.__name__ for cls in model_class.__mro__
            if issubclass(cls, BertTaskModel) and cls is not BertTaskModel]


def checkpoint_manager(checkpoint, directory, max_to_keep):
    """A `tf.train.CheckpointManager` writing `directory/ckpt-N`, after removing what an
    interrupted save left there (`remove_interrupted_saves`)."""
    remove_interrupted_saves(directory)
    return tf.train.CheckpointManager(checkpoint, directory, max_to_keep=max_to_keep,
                                      checkpoint_name=CHECKPOINT_NAME)


# TensorFlow writes `ckpt-N` into `ckpt-N_temp/` and renames the files into place at the end;
# a job killed (or a disk filling up) in between leaves that directory behind, as large as a
# checkpoint, which nothing else ever deletes.
_INTERRUPTED_SAVE = re.compile(re.escape(CHECKPOINT_NAME) + r"-\d+_temp")


def is_interrupted_save(path):
    """Whether `path` is the directory a save that never finished left (`ckpt-N_temp`), which
    `checkpoint_manager` removes.

    Example:
        >>> is_interrupted_save("/tmp/sst2/ckpt-3_temp"), is_interrupted_save("/tmp/notes_temp")
        (True, False)
    """
    return bool(_INTERRUPTED_SAVE.fullmatch(os.path.basename(path))) and os.path.isdir(path)


def remove_interrupted_saves(directory):
    """Deletes the `ckpt-N_temp` directories of saves that never finished in `directory`;
    returns their paths. Only this package's checkpoint names are touched."""
    removed = remove_leftover_directories(directory, is_interrupted_save)
    if removed:
        logger.warning("Removed %d checkpoint save(s) interrupted earlier: %s", len(removed),
                       ", ".join(removed))
    return removed


def heads_path(google_name):
    """The object path of a pre-training head variable."""
    return HEADS_PATH + (google_name,)


def task_model_path(*attributes):
    """The object path of an attribute of the task model, e.g. `("model", "classifier", "bias")`."""
    return (TASK_MODEL_KEY,) + attributes


class ObjectGraph:
    """The object graph a TF2 checkpoint stores: walks child names from the root to a variable
    and returns its tensor key. Keys themselves depend on whatever else was saved beside the
    encoder (e.g. an optimizer holding the same variables), the edges do not.

    Example:
        >>> graph = ObjectGraph("/tmp/mini/ckpt-1")
        >>> graph.has((ENCODER_KEY,)), graph.key(heads_path("cls/predictions/output_bias"))
        (True, 'pretraining_heads/by_google_name/cls.Spredictions.Soutput_bias/...')
    """

    def __init__(self, prefix, reader=None):
        from tensorflow.core.protobuf import trackable_object_graph_pb2
        self.prefix = prefix
        self.reader = reader or open_tf_checkpoint(prefix)
        self.shapes = self.reader.get_variable_to_shape_map()
        self.graph = trackable_object_graph_pb2.TrackableObjectGraph()
        if "_CHECKPOINTABLE_OBJECT_GRAPH" in self.shapes:
            self.graph.ParseFromString(self.reader.get_tensor("_CHECKPOINTABLE_OBJECT_GRAPH"))

    def node_id(self, path):
        if not self.graph.nodes:
            return None
        node_id = 0
        for name in path:
            node_id = next((c.node_id for c in self.graph.nodes[node_id].children
                            if c.local_name == name), None)
            if node_id is None:
                return None
        return node_id

    def has(self, path):
        return self.node_id(path) is not None

    @staticmethod
    def _value_key(node):
        return next((a.checkpoint_key for a in node.attributes if a.name == "VARIABLE_VALUE"),
                    None)

    def key(self, path):
        """The tensor key of the variable at `path`, or None."""
        node_id = self.node_id(path)
        return None if node_id is None else self._value_key(self.graph.nodes[node_id])

    def keys_under(self, path):
        """Every variable key reachable from `path`."""
        start = self.node_id(path)
        seen, stack, keys = set(), [] if start is None else [start], set()
        while stack:
            node_id = stack.pop()
            if node_id in seen:
                continue
            seen.add(node_id)
            node = self.graph.nodes[node_id]
            key = self._value_key(node)
            if key:
                keys.add(key)
            stack += [c.node_id for c in node.children]
        return keys

    def child_names(self, path):
        node_id = self.node_id(path)
        return [] if node_id is None else [c.local_name
                                           for c in self.graph.nodes[node_id].children]

    def array(self, key):
        return self.reader.get_tensor(key)


def variable_paths(checkpoint, variables):
    """`[object path or None]` of each of `variables` in `checkpoint`'s object graph, e.g.
    `("encoder", "embeddings", "word_embeddings")`; None for a variable the graph does not
    track (Keras keeps dropout's random-number state in variables no layer tracks)."""
    from tensorflow.python.checkpoint import graph_view
    objects, paths = graph_view.ObjectGraphView(checkpoint).breadth_first_traversal()
    path_by_id = {id(obj): tuple(ref.name for ref in paths[obj]) for obj in objects}
    # A Keras 3 variable is tracked itself or through the tf.Variable it wraps.
    return [path_by_id.get(id(variable)) or path_by_id.get(id(getattr(variable, "value", None)))
            for variable in variables]


def encoder_variable_paths(encoder):
    """`{google_name: object path}` of each encoder weight in this layout."""
    names, variables = zip(*names_lib.encoder_weights(encoder))
    paths = variable_paths(tf.train.Checkpoint(**{ENCODER_KEY: encoder}), variables)
    if None in paths:  # pragma: no cover - Keras stopped tracking its variables
        raise RuntimeError(f"{names[paths.index(None)]} is not tracked by tf.train.Checkpoint")
    return dict(zip(names, paths))


@functools.lru_cache(maxsize=8)
def encoder_paths_for_layers(num_hidden_layers):
    """`encoder_variable_paths` of any encoder with `num_hidden_layers` layers: paths depend on
    the encoder's structure only, not its sizes, so they are computed on a tiny one."""
    tiny = BertEncoder(BertConfig(vocab_size=2, hidden_size=2, num_hidden_layers=num_hidden_layers,
                                  num_attention_heads=1, intermediate_size=2,
                                  max_position_embeddings=2, type_vocab_size=1))
    return encoder_variable_paths(tiny)
