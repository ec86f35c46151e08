"""The flags that name a checkpoint and the files beside it, shared by every tool that reads one
(the fine-tuning tools, export_savedmodel, install_hub_model): --init_checkpoint, and
--bert_config_file, --vocab_file, --do_lower_case, whose defaults come from the checkpoint.

Example (a tool's `define_flags`, then its `main`):
    define_checkpoint_flags("Checkpoint directory or prefix to export.")
    vocab_file = checkpoint_vocab_file_from_flags(FLAGS.init_checkpoint)
    do_lower_case = do_lower_case_from_flags(FLAGS.init_checkpoint)
"""

from absl import app, flags

from bert_tf.cli.config_flag import define_bert_config_file_flag
from bert_tf.cli.path_checks import input_file_problem

FLAGS = flags.FLAGS


def define_checkpoint_flags(init_checkpoint_help):
    """Defines --init_checkpoint (with the tool's own help) and the files beside it."""
    flags.DEFINE_string("init_checkpoint", None, init_checkpoint_help)
    define_bert_config_file_flag("The encoder's bert_config.json; defaults to the one beside "
                                 "--init_checkpoint.")
    flags.DEFINE_string("vocab_file", None, "vocab.txt; defaults to the one beside "
                        "--init_checkpoint, and must hold the same tokens when there is one.")
    define_do_lower_case_flag("init_checkpoint")


def define_do_lower_case_flag(checkpoint_flag, default=True):
    """Defines --do_lower_case, whose default is the casing stated beside --`checkpoint_flag`
    (see `do_lower_case_from_flags`), else `default` (None: not known)."""
    otherwise = "" if default is None else f", else {str(default).lower()}"
    flags.DEFINE_bool("do_lower_case", default, f"Lower-case and strip accents (uncased "
                      f"vocabularies); --nodo_lower_case for cased ones. Defaults to the casing "
                      f"the tokenizer_config.json beside --{checkpoint_flag} states (Hugging "
                      f"Face's, or a fine-tuning run's or conversion's) or the name of Google's "
                      f"download does (cased_L-12_H-768_A-12...){otherwise}, which a given "
                      f"value must not contradict.")


def checkpoint_vocab_file_from_flags(init_checkpoint):
    """--vocab_file, or the vocab.txt beside `init_checkpoint`; raises `app.UsageError` when
    --vocab_file is no readable file, or holds other tokens than the vocab.txt beside
    `init_checkpoint` (the ids would mean other words than the ones the weights learned)."""
    from bert_tf.checkpoints.sources import vocab_beside_checkpoint
    from bert_tf.text.vocab_size import vocab_difference

    if not FLAGS.vocab_file:
        return vocab_beside_checkpoint(init_checkpoint)
    if problem := input_file_problem("vocab_file", FLAGS.vocab_file):
        raise app.UsageError(problem)
    checkpoint_vocab = init_checkpoint and vocab_beside_checkpoint(init_checkpoint,
                                                                   required=False)
    if checkpoint_vocab and (difference := vocab_difference(checkpoint_vocab, FLAGS.vocab_file)):
        raise app.UsageError(f"--vocab_file is not the vocabulary of --init_checkpoint: "
                             f"{difference}; drop --vocab_file to use the checkpoint's")
    return FLAGS.vocab_file


def do_lower_case_from_flags(init_checkpoint, output_dir=None):
    """--do_lower_case when given, else the casing stated beside `init_checkpoint` or a run in
    `output_dir` (`lower_case_beside_checkpoint`), else the flag's default (True, or None for
    not known: `define_do_lower_case_flag`). Raises `app.UsageError` naming
    both when a given value contradicts a stated one, or the two disagree: text cased otherwise
    than in training turns into other word pieces."""
    from bert_tf.checkpoints.sources import lower_case_beside_checkpoint

    def casing(lower_case):
        return f"do_lower_case {str(lower_case).lower()}"

    run = output_dir and lower_case_beside_checkpoint(output_dir)
    initial = init_checkpoint and lower_case_beside_checkpoint(init_checkpoint)
    if run and initial and run[0] != initial[0]:
        raise app.UsageError(f"--output_dir {output_dir} holds a run of another model: "
                             f"{run[1]} says {casing(run[0])}, {initial[1]} says "
                             f"{casing(initial[0])}; use a new --output_dir")
    stated = run or initial
    if not FLAGS["do_lower_case"].present:
        return stated[0] if stated else FLAGS.do_lower_case
    if stated and stated[0] != FLAGS.do_lower_case:
        flag = f"--{'' if FLAGS.do_lower_case else 'no'}do_lower_case"
        raise app.UsageError(f"{flag} contradicts {stated[1]}, which says {casing(stated[0])} "
                             f"(the casing its model was trained with); drop {flag}")
    return FLAGS.do_lower_case
