"""Installs an encoder and its preprocessor into the local model directory under short names.

`install_model` exports the encoder of a checkpoint (with its MLM head when the checkpoint has
one) as `<name>` and the matching text preprocessing as `<name>_preprocess`, as a new version
of both in `<model dir>/<name>/<version>/` (the same number for the two, and neither when
either fails); `hub.KerasLayer("<name>")` then loads them (see `bert_tf_hub_names`). Each
version also holds the size of every file written (`INSTALL_RECORD`), by which a name refuses a
version damaged since.

Without a name, the model's config names it (`model_dir.default_model_name`).

Example:
    >>> install_model("converted/uncased_L-12_H-768_A-12")        # Google's BERT-Base, converted
    {'bert_tf_base': '~/.cache/bert_tf/hub/bert_tf_base/1',
     'bert_tf_base_preprocess': '~/.cache/bert_tf/hub/bert_tf_base_preprocess/1'}
"""

import json
import re

import tensorflow as tf

from bert_tf_hub_names import SAVED_MODEL_FILE, saved_model_versions

from bert_tf import file_io
from bert_tf.checkpoints import (has_pretraining_heads, load_model, read_config,
                                 vocab_beside_checkpoint)
from bert_tf.checkpoints.sources import check_no_layer_left_out, stated_lower_case
from bert_tf.export import export_encoder, write_versions
from bert_tf.export.export_arguments import check_seq_length
from bert_tf.models.bert_encoder import BertEncoder
from bert_tf.models.bert_pretrainer import BertPretrainer
from bert_tf.text.vocab_size import check_vocab_size
from bert_tf.hub import model_dir
from bert_tf.export.preprocessor_export import export_preprocessor

# The sizes code built on an installed encoder may rely on (its outputs, the ids, positions and
# token types it takes), as BertConfig names them; the attention heads change no shape.
_SHAPE_FIELDS = ("num_hidden_layers", "hidden_size", "intermediate_size", "vocab_size",
                 "max_position_embeddings", "type_vocab_size")
_LAYER_VARIABLE = re.compile(r"layer_(\d+)/")
# Installs of one name at once: how many times one exports again when another took its version.
_INSTALL_ATTEMPTS = 3


def install_model(init_checkpoint, name=None, vocab_file=None,
                  do_lower_case=None, bert_config_file=None, seq_length=128, directory=None,
                  allow_architecture_change=False):
    """Exports `name` and `name + "_preprocess"` into the model directory, both or neither,
    under the same version number (see `write_versions`).

    Args:
        init_checkpoint: this package's checkpoint (as written by convert_checkpoint.py or a
            training tool), or a Google / Hugging Face one: directory or prefix.
        name: the short name, "bert_tf_..."; by default derived from the config
            ("bert_tf_base", "bert_tf_L4_H256", "bert_tf_L6_H384_A12_cased", ...).
        vocab_file: the vocabulary; defaults to the vocab.txt beside the checkpoint.
        do_lower_case: whether the vocabulary is uncased; by default the casing the
            tokenizer_config.json beside the checkpoint states (Hugging Face's, or one a
            conversion or fine-tuning run wrote), else True.
        bert_config_file: the config, when it is not beside the checkpoint.
        seq_length: the preprocessor's default packed length, at most the encoder's
            `max_position_embeddings`.
        directory: the model directory; defaults to `$BERT_TF_HUB_DIR` or ~/.cache/bert_tf/hub.
        allow_architecture_change: install even when the model's shapes (layers, hidden size,
            vocabulary...) differ from those of the name's newest version, which code built on
            that version relies on; refused otherwise (ValueError), before anything is written.

    Returns:
        `{name: SavedModel directory}` for the two models installed.
    """
    if name is not None:
        model_dir.model_base_path(name, directory)  # a bad name fails before any loading
        if name.endswith(model_dir.PREPROCESS_SUFFIX):
            # The encoder would become the newest version of another encoder's preprocessor.
            encoder_name = name[:-len(model_dir.PREPROCESS_SUFFIX)]
            raise ValueError(f"{name!r} is the name of {encoder_name!r}'s preprocessor: install "
                             f"the encoder as {encoder_name!r} (its preprocessor gets {name!r}), "
                             f"or choose a name that does not end in "
                             f"{model_dir.PREPROCESS_SUFFIX!r}.")
    config = read_config(init_checkpoint, bert_config_file)
    check_no_layer_left_out(init_checkpoint, config, bert_config_file, job="the install")
    check_seq_length(seq_length, config.max_position_embeddings)
    vocab_file = vocab_file or vocab_beside_checkpoint(init_checkpoint)
    # Ids past the embedding table would fail only later, in the user's model.
    check_vocab_size(config, vocab_file, bert_config_file or f"the config of {init_checkpoint}")
    if do_lower_case is None:
        do_lower_case = stated_lower_case(init_checkpoint, default=True)
    default_name = model_dir.default_model_name(config, do_lower_case)
    name = name or default_name
    preprocess_name = name + model_dir.PREPROCESS_SUFFIX
    bases = {installed: model_dir.model_base_path(installed, directory)
             for installed in (name, preprocess_name)}
    for base_path in bases.values():
        _check_writable(base_path)
    if not allow_architecture_change:
        _check_shape_kept(name, bases[name], config, init_checkpoint, default_name)
    model = load_model(init_checkpoint, BertPretrainer if has_pretraining_heads(init_checkpoint)
                       else BertEncoder, config=config)
    writers = {
        bases[name]: _recorded(lambda path: export_encoder(path, model, vocab_file,
                                                           do_lower_case)),
        bases[preprocess_name]: _recorded(lambda path: export_preprocessor(
            path, vocab_file, do_lower_case, seq_length=seq_length)),
    }
    for attempt in range(1, _INSTALL_ATTEMPTS + 1):
        try:
            paths = write_versions(writers)
            break
        except tf.errors.AlreadyExistsError:
            # Another install of the name took the version this one chose, while this one
            # exported (both had seen the same highest version); nothing of this one was kept.
            if attempt == _INSTALL_ATTEMPTS:
                raise FileExistsError(
                    f"Other installs of {name} took the version this one chose, {attempt} "
                    f"times while it exported; nothing of it was kept: install it again") from None
            if not allow_architecture_change:
                _check_shape_kept(name, bases[name], config, init_checkpoint, default_name)
    return {installed: paths[base] for installed, base in bases.items()}


def _check_writable(base_path):
    """OSError naming what keeps a version from being written under `base_path` (a file in the
    way, a read-only directory), before the model is loaded and exported in vain."""
    blocking = file_io.file_in_the_way(base_path)
    unwritable = None if blocking else file_io.unwritable_path(base_path)
    problem = (f"{blocking} is a file, not a directory" if blocking
               else unwritable and f"{unwritable} is not writable")
    if problem:
        raise (NotADirectoryError if blocking else PermissionError)(
            f"Cannot install into {base_path}: {problem}; choose another model directory "
            f"(--hub_dir or ${model_dir.HUB_DIR_ENV})")


def _describe(shape):
    return (f"L{shape['num_hidden_layers']} H{shape['hidden_size']} "
            f"I{shape['intermediate_size']} with {shape['vocab_size']} tokens, "
            f"{shape['max_position_embeddings']} positions, {shape['type_vocab_size']} token types")


def _check_shape_kept(name, base_path, config, init_checkpoint, default_name):
    """ValueError naming both shapes when the newest readable version of `name` is an encoder
    of other shapes than `config`'s: installed as its next version, the model would break the
    code built on that one (a vocabulary of another size, outputs of another size or number)."""
    for version in reversed(saved_model_versions(base_path, files=tf.io.gfile)):
        installed = _installed_shape(tf.io.gfile.join(base_path, str(version)))
        if installed is None:  # damaged, or not an encoder of this package: the next one
            continue
        new = {field: getattr(config, field) for field in _SHAPE_FIELDS}
        if installed != new:
            other_name = (f"another --name (e.g. {default_name})" if default_name != name
                          else "another --name")
            raise ValueError(
                f"{name} version {version} in {base_path} is {_describe(installed)}, but "
                f"{init_checkpoint} is {_describe(new)}: as the newest {name} it would break "
                f"code built on version {version}; install it under {other_name}, or pass "
                f"--allow_architecture_change to replace the architecture of {name}")
        return


def _installed_shape(version_dir):
    """`{shape field: size}` of the encoder SavedModel in `version_dir`, from the variables its
    saved_model.pb lists (no graph is loaded), or None when it lists no encoder of this
    package's (a preprocessor, another model) or cannot be read."""
    from google.protobuf.message import DecodeError
    from tensorflow.core.protobuf import saved_model_pb2

    saved_model = saved_model_pb2.SavedModel()
    try:
        with tf.io.gfile.GFile(tf.io.gfile.join(version_dir, SAVED_MODEL_FILE), "rb") as f:
            saved_model.ParseFromString(f.read())
    except (tf.errors.OpError, DecodeError):
        return None
    shapes = {node.variable.name: [dim.size for dim in node.variable.shape.dim]
              for meta_graph in saved_model.meta_graphs
              for node in meta_graph.object_graph_def.nodes
              if node.WhichOneof("kind") == "variable"}
    try:
        vocab_size, hidden_size = shapes["embeddings/word_embeddings"]
        return {"num_hidden_layers": len({match[1] for match in map(_LAYER_VARIABLE.match, shapes)
                                          if match}),
                "hidden_size": hidden_size, "vocab_size": vocab_size,
                "intermediate_size": shapes["layer_0/intermediate/kernel"][1],
                "max_position_embeddings": shapes["embeddings/position_embeddings"][0],
                "type_vocab_size": shapes["embeddings/token_type_embeddings"][0]}
    except (KeyError, ValueError, IndexError):
        return None


def _recorded(export):
    """`export` (called with a directory), then the install record of what it wrote there
    (`model_dir.INSTALL_RECORD`: every file's size), by which names refuse a damaged copy."""
    def export_and_record(version_dir):
        export(version_dir)
        sizes = {}
        for directory, _, files in tf.io.gfile.walk(version_dir):
            for file_name in files:
                path = tf.io.gfile.join(directory, file_name)
                relative = path[len(version_dir):].lstrip("/")
                sizes[relative] = tf.io.gfile.stat(path).length
        record = tf.io.gfile.join(version_dir, model_dir.INSTALL_RECORD)
        file_io.makedirs(record.rsplit("/", 1)[0])
        with file_io.open_file(record, "w") as f:
            json.dump({"files": sizes}, f, indent=1, sort_keys=True)
    return export_and_record
