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

import tensorflow as tf

from bert_tf import file_io
from bert_tf.checkpoints import (has_pretraining_heads, load_model, read_config,
                                 vocab_beside_checkpoint)
from bert_tf.checkpoints.sources import stated_lower_case
from bert_tf.export import export_encoder, write_versions
from bert_tf.export.text_inputs import check_seq_length
from bert_tf.models.bert_encoder import BertEncoder
from bert_tf.models.bert_pretrainer import BertPretrainer
from bert_tf.text.vocab_size import check_vocab_size
from bert_tf.hub import model_dir
from bert_tf.export.preprocessor_export import export_preprocessor


def install_model(init_checkpoint, name=None, vocab_file=None,
                  do_lower_case=None, bert_config_file=None, seq_length=128, directory=None):
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
    check_seq_length(seq_length, config.max_position_embeddings)
    vocab_file = vocab_file or vocab_beside_checkpoint(init_checkpoint)
    # Ids past the embedding table would fail only later, in the user's model.
    check_vocab_size(config, vocab_file, bert_config_file or f"the config of {init_checkpoint}")
    if do_lower_case is None:
        do_lower_case = stated_lower_case(init_checkpoint, default=True)
    model = load_model(init_checkpoint, BertPretrainer if has_pretraining_heads(init_checkpoint)
                       else BertEncoder, config=config)
    name = name or model_dir.default_model_name(config, do_lower_case)
    preprocess_name = name + model_dir.PREPROCESS_SUFFIX
    bases = {installed: model_dir.model_base_path(installed, directory)
             for installed in (name, preprocess_name)}
    paths = write_versions({
        bases[name]: _recorded(lambda path: export_encoder(path, model, vocab_file,
                                                           do_lower_case)),
        bases[preprocess_name]: _recorded(lambda path: export_preprocessor(
            path, vocab_file, do_lower_case, seq_length=seq_length)),
    })
    return {installed: paths[base] for installed, base in bases.items()}


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
