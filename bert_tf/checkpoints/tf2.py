"""This package's own checkpoint format, and restoring an encoder from any format.

The format is a TF2 object-based checkpoint of `tf.train.Checkpoint(encoder=encoder, ...)`:
the `BertEncoder` is always tracked under the key `encoder`. Converted checkpoints also carry
the pre-training heads they were converted from under `pretraining_heads` (plain variables
keyed by Google name), and training tools add what they like beside (`optimizer=`,
`model=`...): readers here only look at `encoder` and `pretraining_heads`.

On disk: `DIR/ckpt-N.index`, `DIR/ckpt-N.data-*`, `DIR/checkpoint` (the state file naming the
latest), `DIR/bert_config.json` and, when known, `DIR/vocab.txt`. Tools accept `DIR` (its
latest checkpoint) or an explicit prefix `DIR/ckpt-N`.

Example:
    >>> save_checkpoint("/tmp/mini", encoder, vocab_file="vocab.txt")
    '/tmp/mini/ckpt-1'
    >>> encoder = load_encoder("/tmp/mini")            # config from /tmp/mini/bert_config.json
    >>> report = restore_encoder(other_encoder, "/tmp/mini/ckpt-1")
"""

import dataclasses
import functools
import logging
import os
import shutil

import numpy as np
import tensorflow as tf

from bert_tf.checkpoints import loading
from bert_tf.checkpoints import names as names_lib
from bert_tf.checkpoints import sources
from bert_tf.config import BertConfig

logger = logging.getLogger("bert_tf.checkpoints")

ENCODER_KEY = "encoder"
HEADS_KEY = "pretraining_heads"
# Fine-tuning tools save the whole task model (encoder + head) under this key, beside `encoder`.
TASK_MODEL_KEY = "model"
_HEADS_ATTRIBUTE = "by_google_name"
CHECKPOINT_NAME = "ckpt"


@dataclasses.dataclass
class RestoreReport:
    """What `restore_encoder` did: the source `format` and resolved path, how many encoder
    weights it `loaded`, the pre-training `heads` the source also has (Google names), and the
    `unused` source tensors it found (also logged)."""

    format: str
    source: str
    loaded: int
    heads: list
    unused: list


class _ObjectGraph:
    """The object graph a TF2 checkpoint stores: walks child names from the root to a variable
    and returns its tensor key. Keys themselves depend on whatever else was saved beside the
    encoder (e.g. an optimizer holding the same variables), the edges do not."""

    def __init__(self, prefix):
        from tensorflow.core.protobuf import trackable_object_graph_pb2
        self.reader = tf.train.load_checkpoint(prefix)
        self.shapes = self.reader.get_variable_to_shape_map()
        self.graph = trackable_object_graph_pb2.TrackableObjectGraph()
        self.graph.ParseFromString(self.reader.get_tensor("_CHECKPOINTABLE_OBJECT_GRAPH"))

    def node_id(self, path):
        node_id = 0
        for name in path:
            node_id = next((c.node_id for c in self.graph.nodes[node_id].children
                            if c.local_name == name), None)
            if node_id is None:
                return None
        return node_id

    def node(self, path):
        node_id = self.node_id(path)
        return None if node_id is None else self.graph.nodes[node_id]

    @staticmethod
    def _value_key(node):
        return next((a.checkpoint_key for a in node.attributes if a.name == "VARIABLE_VALUE"),
                    None)

    def key(self, path):
        node = self.node(path)
        return None if node is None else self._value_key(node)

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

    def children(self, path):
        node = self.node(path)
        return [] if node is None else [(c.local_name, self.graph.nodes[c.node_id])
                                        for c in node.children]


def encoder_variable_paths(encoder):
    """`{google_name: (object path)}` of each encoder weight in `tf.train.Checkpoint(encoder=
    encoder)`'s object graph, e.g. `("encoder", "embeddings", "word_embeddings")`."""
    from tensorflow.python.checkpoint import graph_view
    root = tf.train.Checkpoint(**{ENCODER_KEY: encoder})
    objects, paths = graph_view.ObjectGraphView(root).breadth_first_traversal()
    path_by_id = {id(obj): tuple(ref.name for ref in paths[obj]) for obj in objects}
    result = {}
    for name, variable in names_lib.encoder_weights(encoder):
        path = path_by_id.get(id(variable)) or path_by_id.get(id(getattr(variable, "value", None)))
        if path is None:  # pragma: no cover - Keras stopped tracking its variables
            raise RuntimeError(f"{name} is not tracked by tf.train.Checkpoint")
        result[name] = path
    return result


@functools.lru_cache(maxsize=8)
def _paths_for_layers(num_hidden_layers):
    # Paths depend on the encoder's structure only, not its sizes: compute them on a tiny one.
    from bert_tf.models.bert_encoder import BertEncoder
    tiny = BertEncoder(BertConfig(vocab_size=2, hidden_size=2, num_hidden_layers=num_hidden_layers,
                                  num_attention_heads=1, intermediate_size=2,
                                  max_position_embeddings=2, type_vocab_size=1))
    return encoder_variable_paths(tiny)


def resolve_prefix(path):
    """The TF checkpoint prefix for `path`: a prefix as is, or a directory's latest checkpoint
    (its `checkpoint` state file), or the directory's only `*.index`."""
    fmt, resolved = sources.detect_format(path)
    if fmt == sources.HUGGING_FACE:
        raise sources.UnsupportedCheckpointError(f"{path} is a Hugging Face checkpoint, not a "
                                                 f"TF checkpoint")
    return resolved


def _read_heads(graph):
    heads = {}
    for name, node in graph.children((HEADS_KEY, _HEADS_ATTRIBUTE)):
        key = graph._value_key(node)
        if key:
            heads[name] = np.asarray(graph.reader.get_tensor(key), dtype=np.float32)
    return heads


def _locate(graph, paths):
    """`(keys, missing, unused)`: tensor key per Google name found, names not found, and the
    variable keys under `encoder` that no encoder weight took."""
    keys = {name: graph.key(path) for name, path in paths.items()}
    missing = [name for name, key in keys.items() if key is None]
    keys = {name: key for name, key in keys.items() if key is not None}
    unused = sorted(graph.keys_under((ENCODER_KEY,)) - set(keys.values()))
    return keys, missing, unused


def read_arrays(prefix, config):
    """`(arrays, ignored, unused)` of a bert_tf checkpoint, arrays keyed by Google name."""
    graph = _ObjectGraph(prefix)
    keys, _, unused = _locate(graph, _paths_for_layers(config.num_hidden_layers))
    arrays = {name: np.asarray(graph.reader.get_tensor(key), dtype=np.float32)
              for name, key in keys.items()}
    arrays.update(_read_heads(graph))
    taken = set(keys.values()) | graph.keys_under((HEADS_KEY,)) | set(unused)
    ignored = sorted(k for k in graph.shapes if k not in taken)
    return arrays, ignored, unused


def restore_encoder(encoder, path):
    """Restores every weight of `encoder` from `path`, the call behind every `--init_checkpoint`.

    Args:
      encoder: a `BertEncoder`; its own config decides which weights are needed (no config
        file is read).
      path: this package's checkpoint (a directory, whose latest checkpoint is used, or a
        prefix; anything saved as `tf.train.Checkpoint(encoder=..., <anything else>)`), or a
        Google TF1 checkpoint, or a Hugging Face directory / `model.safetensors`.

    Returns:
      A `RestoreReport`.

    Raises:
      CheckpointMismatchError listing every missing weight and shape mismatch (the encoder is
      then unchanged), FileNotFoundError / UnsupportedCheckpointError for bad paths.
    """
    fmt, resolved = sources.detect_format(path)
    if fmt == sources.BERT_TF:
        graph = _ObjectGraph(resolved)
        keys, missing, unused = _locate(graph, encoder_variable_paths(encoder))
        if missing:
            weights = dict(names_lib.encoder_weights(encoder))
            mismatched = [(name, tuple(weights[name].shape), tuple(graph.shapes[key]))
                          for name, key in keys.items()
                          if tuple(graph.shapes[key]) != tuple(weights[name].shape)]
            raise loading.CheckpointMismatchError(missing, mismatched, source=resolved)
        arrays = {name: graph.reader.get_tensor(key) for name, key in keys.items()}
        loaded = loading.load_encoder_weights(encoder, arrays, source=resolved)
        heads = sorted(_read_heads(graph))
    else:
        weights = sources.read_weights(resolved, config=encoder.config)
        loaded = loading.load_encoder_weights(encoder, weights.arrays, source=resolved)
        unused, heads = weights.unused, sorted(weights.heads)
    if unused:
        logger.warning("%s: %d tensor(s) not used by the encoder: %s", resolved, len(unused),
                       ", ".join(unused))
    return RestoreReport(format=fmt, source=resolved, loaded=len(loaded), heads=heads,
                         unused=list(unused))


def load_encoder(path, bert_config_file=None, dtype=None, config=None):
    """A `BertEncoder` built from the checkpoint's config (`config` if given, else
    `bert_config_file`, else `bert_config.json` / `config.json` beside the checkpoint) with
    every weight restored from `path`; `dtype` is its dtype policy (e.g. "mixed_bfloat16")."""
    from bert_tf.models.bert_encoder import BertEncoder
    if config is None:
        config = sources.read_config(path, bert_config_file)
    encoder = BertEncoder(config, dtype=dtype)
    restore_encoder(encoder, path)
    return encoder


def save_checkpoint(output_dir, encoder, heads=None, vocab_file=None):
    """Writes `encoder` (and `heads`, Google-named arrays) as this package's checkpoint.

    Writes `output_dir/ckpt-1.*`, the `checkpoint` state file, `bert_config.json` and a copy of
    `vocab_file`. Refuses a directory that already holds a checkpoint (nothing is overwritten).
    Returns the checkpoint prefix.
    """
    output_dir = os.fspath(output_dir)
    os.makedirs(output_dir, exist_ok=True)
    existing = [f for f in os.listdir(output_dir) if f == "checkpoint" or f.endswith(".index")]
    if existing:
        raise FileExistsError(f"{output_dir} already holds a checkpoint ({existing[0]}); "
                              f"choose an empty output directory")
    objects = {ENCODER_KEY: encoder}
    if heads:
        module = tf.Module(name=HEADS_KEY)
        setattr(module, _HEADS_ATTRIBUTE, {
            name: tf.Variable(np.asarray(value, np.float32), trainable=False,
                              name=name.replace("/", "_"))
            for name, value in sorted(heads.items())})
        objects[HEADS_KEY] = module
    checkpoint = tf.train.Checkpoint(**objects)
    manager = tf.train.CheckpointManager(checkpoint, output_dir, max_to_keep=1,
                                         checkpoint_name=CHECKPOINT_NAME)
    prefix = manager.save()
    write_model_files(output_dir, encoder.config, vocab_file)
    return prefix


def write_model_files(output_dir, config, vocab_file=None):
    """Writes `bert_config.json` (of `config`) and a copy of `vocab_file` into `output_dir`
    (created if needed): what makes the checkpoints there complete for every tool's
    `--init_checkpoint=output_dir`. A `vocab_file` already in place is left alone.

    Example:
        >>> write_model_files("/tmp/finetuned", encoder.config, "converted/vocab.txt")
    """
    os.makedirs(output_dir, exist_ok=True)
    config.to_json_file(os.path.join(output_dir, "bert_config.json"))
    if vocab_file:
        target = os.path.join(output_dir, "vocab.txt")
        if os.path.abspath(vocab_file) != os.path.abspath(target):
            shutil.copyfile(vocab_file, target)
