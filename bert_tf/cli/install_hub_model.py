"""Installs a BERT encoder under a short name, so that `hub.KerasLayer("bert_tf_base")` works.

Exports the encoder of --init_checkpoint (with its MLM head when the checkpoint has one) as
`<name>` and the matching text preprocessing as `<name>_preprocess`, into the local model
directory: --hub_dir, else $BERT_TF_HUB_DIR, else ~/.cache/bert_tf/hub. Each install adds a new
version of both (`<dir>/<name>/<version>/`, one number for the two; neither if either fails);
names resolve to the highest. A model of other shapes than the name's newest version (layers,
hidden size, vocabulary...) is refused unless --allow_architecture_change. Without --name the
config names the model: bert_tf_base (L12 H768 A12), bert_tf_large (L24 H1024 A16),
bert_tf_L{L}_H{H} for the compact models (A = H/64), else bert_tf_L{L}_H{H}_A{A}; "_cased" for
a cased model (--nodo_lower_case, or the casing the tokenizer_config.json beside
--init_checkpoint or the name of Google's download states).
Any process that imports tensorflow_hub then resolves the names, without importing bert_tf.

Example (Google's BERT-Base, uncased; or any checkpoint convert_checkpoint.py wrote):
    bert-tf-install-hub-model --init_checkpoint=uncased_L-12_H-768_A-12
    python -c 'import tensorflow_hub as hub; hub.KerasLayer("bert_tf_base")'
"""

from absl import app, flags

from bert_tf.cli.app import run_tool
from bert_tf.cli.checkpoint_flags import (checkpoint_vocab_file_from_flags,
                                          define_checkpoint_flags, do_lower_case_from_flags)
from bert_tf.cli.config_flag import bert_config_file_problem

FLAGS = flags.FLAGS


def define_flags():
    define_checkpoint_flags("Checkpoint directory or prefix: this package's, Google's or "
                            "Hugging Face's.")
    flags.DEFINE_string("name", None, "Short model name, bert_tf_... (its preprocessor gets "
                        "<name>_preprocess); default: from the config (bert_tf_base, "
                        "bert_tf_L4_H256, bert_tf_L6_H384_A12_cased, ...).")
    flags.DEFINE_integer("seq_length", 128, "The preprocessor's packed sequence length: 3 to "
                         "the encoder's max_position_embeddings.")
    flags.DEFINE_string("hub_dir", None, "Model directory; defaults to $BERT_TF_HUB_DIR or "
                        "~/.cache/bert_tf/hub.")
    flags.DEFINE_boolean("allow_architecture_change", False, "Install even when the model's "
                         "shapes (layers, hidden size, vocabulary, ...) differ from those of "
                         "the name's newest version, breaking code built on it.")
    flags.mark_flags_as_required(["init_checkpoint"])


def main():
    from bert_tf.hub import install_model

    if problem := bert_config_file_problem(FLAGS.bert_config_file):
        raise app.UsageError(problem)
    installed = install_model(
        FLAGS.init_checkpoint, name=FLAGS.name,
        vocab_file=checkpoint_vocab_file_from_flags(FLAGS.init_checkpoint),
        do_lower_case=do_lower_case_from_flags(FLAGS.init_checkpoint),
        bert_config_file=FLAGS.bert_config_file,
        seq_length=FLAGS.seq_length, directory=FLAGS.hub_dir,
        allow_architecture_change=FLAGS.allow_architecture_change)
    for name, path in installed.items():
        print(f"Installed {name} at {path}")
    return 0


def run():
    run_tool(main, define_flags)
