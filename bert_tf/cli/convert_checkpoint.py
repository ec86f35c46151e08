"""Converts a Google or Hugging Face BERT checkpoint into bert_tf's own TF2 checkpoint.

The source format is detected: a Google TF1 checkpoint prefix (`.../bert_model.ckpt`) or the
directory Google's download unpacks to, or a Hugging Face directory / `model.safetensors`
(PyTorch `pytorch_model.bin` pickles are refused). The config is `bert_config.json` or
`config.json` beside the checkpoint unless `--bert_config_file` names one. DIR receives
`ckpt-1.*` + `checkpoint` (tf.train.Checkpoint(encoder=..., pretraining_heads=...)),
`bert_config.json`, `vocab.txt` when the source has one, and `tokenizer_config.json` with the
casing when it is known (`--[no]do_lower_case`, or Hugging Face's `tokenizer_config.json`); every
tool's `--init_checkpoint` takes DIR and follows that casing.

Example:
    bert-tf-convert-checkpoint --checkpoint=cased_L-12_H-768_A-12/bert_model.ckpt \\
        --output_dir=/tmp/bert_base_cased --nodo_lower_case
"""

from absl import app, flags

from bert_tf.cli.app import run_tool
from bert_tf.cli.checkpoint_flags import define_do_lower_case_flag, do_lower_case_from_flags
from bert_tf.cli.config_flag import bert_config_file_problem, define_bert_config_file_flag
from bert_tf.cli.path_checks import output_dir_problem

FLAGS = flags.FLAGS


def define_flags():
    flags.DEFINE_string("checkpoint", None, "Google checkpoint prefix or directory, or Hugging "
                        "Face directory / model.safetensors.")
    flags.DEFINE_string("output_dir", None, "New or empty directory to write the TF2 checkpoint "
                        "into (one holding any file is refused).")
    define_bert_config_file_flag("bert_config.json to use instead of the one beside the "
                                 "checkpoint.")
    define_do_lower_case_flag("checkpoint", default=None)
    flags.mark_flags_as_required(["checkpoint", "output_dir"])


def main():
    from bert_tf.checkpoints import convert_checkpoint

    problems = [output_dir_problem("output_dir", FLAGS.output_dir),
                bert_config_file_problem(FLAGS.bert_config_file)]
    if problems := [problem for problem in problems if problem]:
        raise app.UsageError("; ".join(problems))
    result = convert_checkpoint(FLAGS.checkpoint, FLAGS.output_dir, FLAGS.bert_config_file,
                                do_lower_case_from_flags(FLAGS.checkpoint))
    c = result.config
    print(f"Converted {result.format} checkpoint {result.source}")
    print(f"  config: L={c.num_hidden_layers} H={c.hidden_size} A={c.num_attention_heads} "
          f"I={c.intermediate_size} vocab={c.vocab_size} ({result.parameters:,} parameters)")
    print(f"  encoder weights: {result.encoder_weights}")
    print(f"  pre-training heads: {len(result.heads)}"
          + (f" ({', '.join(result.heads)})" if result.heads else ""))
    print(f"  vocab: {result.vocab_file or 'none found beside the checkpoint'}")
    print("  casing: " + ("not known (--[no]do_lower_case records it)"
                           if result.do_lower_case is None
                           else f"do_lower_case {str(result.do_lower_case).lower()}"))
    if result.ignored:
        print(f"  ignored (optimizer slots, counters, buffers): {len(result.ignored)}")
    if result.unused:
        print(f"  UNUSED source tensors ({len(result.unused)}): {', '.join(result.unused)}")
    print(f"Wrote {result.prefix} (+ bert_config.json"
          f"{', vocab.txt' if result.vocab_file else ''}"
          f"{'' if result.do_lower_case is None else ', tokenizer_config.json'}) "
          f"in {FLAGS.output_dir}")
    return 0


def run():
    run_tool(main, define_flags)
