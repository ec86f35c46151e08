"""The TensorFlow Datasets flags of the tools: a prepared TFDS dataset as the data source instead
of files.

Fine-tuning tools (run_classifier, run_squad, run_ner, run_multiple_choice): `--tfds_name`
(`glue/<config>`, `squad/v1.1`, `squad/v2.0`, `conll2003`, `hellaswag`), `--tfds_data_dir`, and
`--tfds_train_split`, `--tfds_eval_split`, `--tfds_predict_split` (TFDS's `train`,
`validation`, `test`).
Pre-training tools (create_pretraining_data, run_pretraining): `--tfds_name`
(`wikipedia/20230601.en`, `c4/en`, ...), `--tfds_data_dir`, `--tfds_split`, `--tfds_text_key`.

Nothing is downloaded: the dataset must be prepared in `--tfds_data_dir` beforehand
(`tfds build`, or `python -m bert_tf.data.tfds.local_preparation` from local files).

Example (in a fine-tuning tool):
    define_fine_tuning_tfds_flags("glue/<config>")      # in its define_flags()
    ...
    if FLAGS.tfds_name:
        split = tfds_split_flags()["eval"]              # "validation" unless given
"""

from absl import flags

FLAGS = flags.FLAGS

_DATA_DIR_HELP = ("The TFDS data dir holding the prepared --tfds_name (default: TFDS's, "
                  "~/tensorflow_datasets); nothing is downloaded.")


def define_fine_tuning_tfds_flags(names):
    """--tfds_name (help naming `names`, e.g. "glue/<config>"), --tfds_data_dir and the split
    flag of each mode."""
    flags.DEFINE_string("tfds_name", None, f"Read the data from this TensorFlow Datasets "
                        f"dataset ({names}) instead of files.")
    flags.DEFINE_string("tfds_data_dir", None, _DATA_DIR_HELP)
    flags.DEFINE_string("tfds_train_split", "train", "TFDS split for --do_train.")
    flags.DEFINE_string("tfds_eval_split", "validation", "TFDS split for --do_eval (MNLI: "
                        "validation means validation_matched and validation_mismatched).")
    flags.DEFINE_string("tfds_predict_split", "test", "TFDS split for --do_predict (MNLI: "
                        "test_matched and test_mismatched).")


def define_pretraining_tfds_flags():
    """--tfds_name, --tfds_data_dir, --tfds_split and --tfds_text_key of pre-training text."""
    flags.DEFINE_string("tfds_name", None, "Read the text from this TensorFlow Datasets "
                        "dataset (e.g. wikipedia/20230601.en, c4/en; one example = one "
                        "document) instead of --input_file.")
    flags.DEFINE_string("tfds_data_dir", None, _DATA_DIR_HELP)
    flags.DEFINE_string("tfds_split", "train", "The TFDS split (a whole split) to read.")
    flags.DEFINE_string("tfds_text_key", "text", "The text feature of --tfds_name.")


def tfds_split_flags():
    """`{"train": --tfds_train_split, "eval": --tfds_eval_split, "predict":
    --tfds_predict_split}`."""
    return {mode: FLAGS[f"tfds_{mode}_split"].value for mode in ("train", "eval", "predict")}

