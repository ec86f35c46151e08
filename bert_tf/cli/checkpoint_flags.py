"""The flags that name a checkpoint and the files beside it, shared by every tool that reads one
(the fine-tuning tools, export_savedmodel, install_hub_model): --init_checkpoint, and
--bert_config_file, --vocab_file, --do_lower_case, whose defaults come from the checkpoint.

Example (a tool's `define_flags`):
    define_checkpoint_flags("Checkpoint directory or prefix to export.")
"""

from absl import flags


def define_checkpoint_flags(init_checkpoint_help):
    """Defines --init_checkpoint (with the tool's own help) and the files beside it."""
    flags.DEFINE_string("init_checkpoint", None, init_checkpoint_help)
    flags.DEFINE_string("bert_config_file", None, "The encoder's bert_config.json; defaults to "
                        "the one beside --init_checkpoint.")
    flags.DEFINE_string("vocab_file", None, "vocab.txt; defaults to the one beside "
                        "--init_checkpoint.")
    flags.DEFINE_bool("do_lower_case", True, "Lower-case and strip accents (uncased "
                      "vocabularies); --nodo_lower_case for cased ones.")
