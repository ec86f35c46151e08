"""The check of the answer flags that run_squad and export_savedmodel both take, with Google's
run_squad.py names: --max_answer_length, --version_2_with_negative, --null_score_diff_threshold.

Example (a tool's flag checks, before anything is loaded):
    check_answer_flags(FLAGS.version_2_with_negative)
"""

from absl import flags

from bert_tf.data.tasks.squad_windows import check_answer_rules

FLAGS = flags.FLAGS


def check_answer_flags(version_2_with_negative):
    """Raises a one-line ValueError unless the answer flags make rules (`check_answer_rules`)
    and --null_score_diff_threshold is given only for SQuAD v2.0 (`version_2_with_negative`):
    v1.1 answers the best span whatever the threshold, so one given there is a mistake.

    Example:
        >>> check_answer_flags(version_2_with_negative=False)   # --null_score_diff_threshold=1
        ValueError: --null_score_diff_threshold applies with --version_2_with_negative.
    """
    check_answer_rules(FLAGS.max_answer_length, FLAGS.null_score_diff_threshold,
                       tool_flags={})
    # The library has no v2.0 switch (a threshold is v2.0): only a flag can be given in vain.
    if FLAGS["null_score_diff_threshold"].present and not version_2_with_negative:
        raise ValueError("--null_score_diff_threshold applies with --version_2_with_negative.")
