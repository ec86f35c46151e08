"""The one way to load weights: an encoder, a pre-training model or a fine-tuned task model, from
any checkpoint format (Google TF1, Hugging Face safetensors, this package's TF2).

* `restore_weights(model, path)` fills a model you built: a `BertEncoder` gets the encoder's
  weights (what every `--init_checkpoint` does), a `BertPretrainer` the encoder's and the
  pre-training heads', a task model (`BertClassifier`...) everything a fine-tuning job saved.
* `load_model(path, model_class)` builds the model from the config beside the checkpoint
  (a task head's number of classes from the checkpoint itself) and restores it.

Every load is all-or-nothing: a checkpoint that does not fit raises `CheckpointMismatchError`
listing every problem, and the model is unchanged.

Example:
    >>> encoder = load_model("converted_dir")                      # BertEncoder
    >>> pretrainer = load_model("uncased_L-2_H-128_A-2", BertPretrainer)
    >>> classifier = load_model("/tmp/sst2_finetuned", BertClassifier)
    >>> restore_weights(my_classifier.encoder, "converted_dir").loaded
    199
"""

import dataclasses
import inspect
import logging

from bert_tf.checkpoints import layout, loading, sources, tf2
from bert_tf.checkpoints import names as names_lib
from bert_tf.checkpoints.damaged_files import open_tf_checkpoint
from bert_tf.checkpoints.errors import UnsupportedCheckpointError
from bert_tf.models.bert_encoder import BertEncoder
from bert_tf.models.bert_pretrainer import BertPretrainer
from bert_tf.models.bert_task_model import BertTaskModel

logger = logging.getLogger("bert_tf.checkpoints")

HEADS_CHOICES = (True, False, "if_present")


@dataclasses.dataclass
class RestoreReport:
    """What `restore_weights` did: the source `format` and resolved path, how many weights it
    `loaded`, the pre-training head names the source has (`heads`), those it loaded
    (`heads_loaded`), and the source tensors it did not use (`unused`, also logged)."""

    format: str
    source: str
    loaded: int
    heads: list
    heads_loaded: list
    unused: list


def resolve_prefix(path):
    """The TF checkpoint prefix for `path` (a prefix as is, or a directory's latest
    checkpoint); UnsupportedCheckpointError for a Hugging Face checkpoint."""
    fmt, resolved = sources.detect_format(path)
    if fmt == sources.HUGGING_FACE:
        raise UnsupportedCheckpointError(f"{path} is a Hugging Face checkpoint, not a "
                                         f"TF checkpoint")
    return resolved


def has_pretraining_heads(path):
    """Whether the checkpoint at `path` holds the pre-training heads (`cls/...`), from its
    names only (no tensor is read)."""
    fmt, resolved = sources.detect_format(path)
    if fmt == sources.BERT_TF:
        return layout.ObjectGraph(resolved).has(layout.HEADS_PATH)
    if fmt == sources.GOOGLE:
        return any(name.startswith("cls/") for name in
                   open_tf_checkpoint(resolved).get_variable_to_shape_map())
    return any(key.startswith("cls.") for key in sources.safetensors_keys(resolved))


def _bert_tf_encoder_arrays(graph, encoder):
    """The encoder's arrays out of this package's checkpoint, found through the object graph
    (not the names, which depend on what else was saved); mismatch error listing all."""
    keys, missing, unused = tf2.locate_encoder(graph, layout.encoder_variable_paths(encoder))
    if missing:
        weights = dict(names_lib.encoder_weights(encoder))
        mismatched = [(name, tuple(weights[name].shape), tuple(graph.shapes[key]))
                      for name, key in keys.items()
                      if tuple(graph.shapes[key]) != tuple(weights[name].shape)]
        raise loading.CheckpointMismatchError(missing, mismatched, source=graph.prefix)
    return {name: graph.array(key) for name, key in keys.items()}, unused


def _task_model_graph(fmt, resolved):
    """The object graph of a checkpoint holding a fine-tuned task model, else ValueError."""
    graph = layout.ObjectGraph(resolved) if fmt == sources.BERT_TF else None
    if graph is None or not graph.has((layout.TASK_MODEL_KEY,)):
        raise ValueError(
            f"{resolved} holds no fine-tuned task model (no `{layout.TASK_MODEL_KEY}` object; a "
            f"pre-trained or converted checkpoint has only the encoder). Load a checkpoint "
            f"written by fine-tuning, or restore only `model.encoder` from this one.")
    return graph


def _check_task_model_class(graph, model_class, model_name):
    """ValueError naming both when the checkpoint records a task model of a class unrelated to
    `model_class` (a checkpoint that records none passes: its shapes are checked later)."""
    saved = graph.child_names((layout.TASK_MODEL_CLASSES_KEY,))
    if saved and not set(saved) & set(layout.task_model_classes(model_class)):
        asked = model_class.__name__
        raise ValueError(f"{graph.prefix} holds a fine-tuned {saved[0]}, not a {model_name}"
                         + (f" ({asked})." if model_name != asked else "."))


def _fitting_task_model_weights(model, fmt, resolved, model_name):
    """`(graph, [(variable, name, key)])` of the task model's weights in the checkpoint, after
    checking, without reading any value, that it holds this kind of task model with every
    weight at its shape (else ValueError / CheckpointMismatchError)."""
    graph = _task_model_graph(fmt, resolved)
    _check_task_model_class(graph, type(model), model_name)
    # Every variable of the model is looked up (and its shape compared) before any is
    # assigned, so that a checkpoint of another task or config leaves the model unchanged.
    # The optimizer's slots and counters, if saved, are not needed.
    paths = layout.variable_paths(layout.training_checkpoint(model.encoder, task_model=model),
                                  model.weights)
    tracked = [(variable, "/".join(path), graph.key(path))
               for variable, path in zip(model.weights, paths) if path is not None]
    missing = [name for _, name, key in tracked if key is None]
    mismatched = [(name, tuple(variable.shape), tuple(graph.shapes[key]))
                  for variable, name, key in tracked
                  if key is not None and tuple(graph.shapes[key]) != tuple(variable.shape)]
    if missing or mismatched:
        raise loading.CheckpointMismatchError(
            missing, mismatched, source=resolved,
            hint=f"Its `{layout.TASK_MODEL_KEY}` does not match a {model_name} with this config.")
    return graph, tracked


def check_task_model_fits(model, path):
    """Raises what `restore_weights(model, path)` would for a checkpoint of another task model
    (the class it records, a missing weight, another shape), reading no weight.

    Example:
        >>> check_task_model_fits(classifier, "run/ckpt-3")   # a BertTokenClassifier's
        ValueError: run/ckpt-3 holds a fine-tuned BertTokenClassifier, not a BertClassifier.
    """
    _fitting_task_model_weights(model, *sources.detect_format(path), type(model).__name__)


def _restore_task_model(model, fmt, resolved, model_name):
    graph, tracked = _fitting_task_model_weights(model, fmt, resolved, model_name)
    loaded = loading.assign_weights([(variable, name) for variable, name, _ in tracked],
                                    {name: graph.array(key) for _, name, key in tracked},
                                    source=resolved)
    return RestoreReport(format=fmt, source=resolved, loaded=len(loaded), heads=[],
                         heads_loaded=[], unused=[])


def restore_weights(model, path, pretraining_heads="if_present", model_name=None):
    """Restores `model` from the checkpoint at `path`, all-or-nothing.

    Args:
      model: a `BertEncoder` (its encoder weights), a `BertPretrainer` (encoder and heads) or
        a `BertTaskModel` subclass (the whole fine-tuned model: only this package's
        checkpoints written by fine-tuning have one). Its own config decides which weights
        are needed; no config file is read.
      path: a directory (its latest checkpoint) or prefix of this package's, a Google TF1
        checkpoint, or a Hugging Face directory / `model.safetensors`.
      pretraining_heads: for a `BertPretrainer`: True (the heads must be in the checkpoint),
        "if_present" (a checkpoint without any, e.g. a bare `BertModel`, leaves them freshly
        initialised, logged; one with only some is an error) or False (encoder only).
      model_name: what error messages call the model (default: its class name).

    Returns:
      A `RestoreReport`.

    Raises:
      CheckpointMismatchError listing every missing weight and shape mismatch, ValueError for
      a task model from a checkpoint without one, FileNotFoundError /
      UnsupportedCheckpointError / DamagedCheckpointError for bad paths and files.
    """
    if pretraining_heads not in HEADS_CHOICES:
        raise ValueError(f"pretraining_heads must be one of {HEADS_CHOICES}, got "
                         f"{pretraining_heads!r}")
    fmt, resolved = sources.detect_format(path)
    if isinstance(model, BertTaskModel):
        return _restore_task_model(model, fmt, resolved, model_name or type(model).__name__)
    encoder = model.encoder if isinstance(model, BertPretrainer) else model
    if fmt == sources.BERT_TF:
        graph = layout.ObjectGraph(resolved)
        arrays, unused = _bert_tf_encoder_arrays(graph, encoder)
        head_names = sorted(graph.child_names(layout.HEADS_PATH))
        if isinstance(model, BertPretrainer) and pretraining_heads and head_names:
            arrays.update({name: graph.array(graph.key(layout.heads_path(name)))
                           for name in head_names})
    else:
        weights = sources.read_weights(resolved, config=encoder.config)
        arrays, unused, head_names = weights.arrays, weights.unused, sorted(weights.heads)
    pairs = [(variable, name) for name, variable in names_lib.encoder_weights(encoder)]
    heads_loaded = []
    if isinstance(model, BertPretrainer) and (pretraining_heads is True or (
            pretraining_heads and head_names)):
        heads_loaded = list(names_lib.PRETRAINING_HEAD_NAMES)
        pairs += [(variable, name) for name, variable in names_lib.pretraining_head_weights(model)]
    elif isinstance(model, BertPretrainer) and pretraining_heads:
        logger.warning("%s has no pre-training heads (cls/...): they keep their random "
                       "initialisation", resolved)
    # Heads asked for where there are none: the checkpoint, not the config, is the wrong one.
    hint = ("It has no pre-training heads (cls/...) at all, only an encoder: load a "
            "BertEncoder from it, or pass pretraining_heads=\"if_present\"."
            if heads_loaded and not head_names else None)
    # One all-or-nothing assignment: a bad checkpoint leaves the whole model unchanged.
    loaded = loading.assign_weights(pairs, arrays, source=resolved, hint=hint)
    if unused:
        logger.warning("%s: %d tensor(s) not used by the encoder: %s", resolved, len(unused),
                       ", ".join(loading.listed(unused)))
    return RestoreReport(format=fmt, source=resolved, loaded=len(loaded), heads=head_names,
                         heads_loaded=heads_loaded, unused=list(unused))


def _classifier_classes(path):
    """The number of classes of the classification layer (`classifier`) a fine-tuned
    `BertClassifier` / `BertTokenClassifier` saved: the length of its bias."""
    fmt, resolved = sources.detect_format(path)
    graph = _task_model_graph(fmt, resolved)
    key = graph.key(layout.task_model_path("classifier", "bias"))
    if key is None:
        raise ValueError(f"{resolved}: its `{layout.TASK_MODEL_KEY}` has no classification "
                         f"layer (`classifier`), so it has no number of classes to read.")
    return graph.shapes[key][0]


def load_model(path, model_class=BertEncoder, *, config=None, bert_config_file=None,
               dtype=None, pretraining_heads=True, model_name=None, **model_arguments):
    """`model_class` built over a `BertEncoder` of the checkpoint's config, restored from `path`.

    Args:
      path: see `restore_weights`.
      model_class: `BertEncoder`, `BertPretrainer` or a task model class (`BertClassifier`...;
        its head's `num_classes`, when it takes one and none is given, is read from the
        checkpoint; a given one must match).
      config, bert_config_file: the encoder's `BertConfig`, or its JSON file; by default the
        `bert_config.json` / `config.json` beside the checkpoint.
      dtype: the encoder's dtype policy, e.g. "mixed_bfloat16".
      pretraining_heads: see `restore_weights` (default: a `BertPretrainer` needs its heads).
      model_name: what error messages call the model, e.g. "squad model" (default: the class
        name).
      **model_arguments: passed to `model_class` (e.g. `dropout_rate`).
    """
    if issubclass(model_class, BertTaskModel):  # the wrong task is named before any loading
        _check_task_model_class(_task_model_graph(*sources.detect_format(path)), model_class,
                                model_name or model_class.__name__)
    if config is None:
        config = sources.read_config(path, bert_config_file)
    encoder = BertEncoder(config, dtype=dtype)
    if model_class is BertEncoder:
        model = encoder
    else:
        if "num_classes" in inspect.signature(model_class).parameters:
            found = _classifier_classes(path)
            asked = model_arguments.setdefault("num_classes", found)
            if asked != found:
                raise ValueError(f"{path} has a {model_name or model_class.__name__} head "
                                 f"with {found} classes, but {asked} were asked for.")
        model = model_class(encoder, **model_arguments)
    restore_weights(model, path, pretraining_heads=pretraining_heads, model_name=model_name)
    return model
