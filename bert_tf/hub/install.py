"""Installs an encoder and its preprocessor into the local model directory under short names.

`install_model` exports the encoder of a checkpoint (with its MLM head when the checkpoint has
one) as `<name>` and the matching text preprocessing as `<name>_preprocess`, each as a new
version in `<model dir>/<name>/<version>/`; `hub.KerasLayer("<name>")` then loads them (see
`resolver.py`).

Example:
    >>> install_model("converted/uncased_L-12_H-768_A-12")        # Google's BERT-Base, converted
    {'bert_tf_base': '~/.cache/bert_tf/hub/bert_tf_base/1',
     'bert_tf_base_preprocess': '~/.cache/bert_tf/hub/bert_tf_base_preprocess/1'}
"""

from bert_tf.export import export_encoder, load_pretrained, vocab_beside_checkpoint, write_version
from bert_tf.hub import model_dir
from bert_tf.export.preprocessor_export import export_preprocessor


def install_model(init_checkpoint, name=model_dir.DEFAULT_MODEL_NAME, vocab_file=None,
                  do_lower_case=True, bert_config_file=None, seq_length=128, directory=None):
    """Exports `name` and `name + "_preprocess"` into the model directory.

    Args:
        init_checkpoint: this package's checkpoint (as written by convert_checkpoint.py or a
            training tool), or a Google / Hugging Face one: directory or prefix.
        name: the short name, "bert_tf_..." (default "bert_tf_base").
        vocab_file: the vocabulary; defaults to the vocab.txt beside the checkpoint.
        do_lower_case: whether the vocabulary is uncased.
        bert_config_file: the config, when it is not beside the checkpoint.
        seq_length: the preprocessor's default packed length.
        directory: the model directory; defaults to `$BERT_TF_HUB_DIR` or ~/.cache/bert_tf/hub.

    Returns:
        `{name: SavedModel directory}` for the two models installed.
    """
    encoder_base = model_dir.model_base_path(name, directory)
    preprocess_name = name + model_dir.PREPROCESS_SUFFIX
    preprocess_base = model_dir.model_base_path(preprocess_name, directory)
    vocab_file = vocab_file or vocab_beside_checkpoint(init_checkpoint)
    model = load_pretrained(init_checkpoint, bert_config_file, mlm="if_present")
    return {
        name: write_version(encoder_base, lambda path: export_encoder(
            path, model, vocab_file, do_lower_case)),
        preprocess_name: write_version(preprocess_base, lambda path: export_preprocessor(
            path, vocab_file, do_lower_case, seq_length=seq_length)),
    }
