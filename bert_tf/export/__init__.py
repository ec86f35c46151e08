"""SavedModels for TF Serving and TF Hub: the encoder, its MLM head, and fine-tuned task models.

* `export_encoder`: a TF Hub reusable encoder (fine-tunable with `hub.KerasLayer`).
* `export_task_model`: a task model taking raw strings (`serving_default`).
* `export_preprocessor`: the text preprocessing alone, TF Hub-style (`<name>_preprocess`).
* `write_version`: TF Serving's `<model_base_path>/<version>/` layout, written atomically;
  `write_versions` for several models together.
* `load_task_model`: a fine-tuned model by its task name (`--export_type`); the encoder comes
  from `bert_tf.checkpoints.load_model`.

Example:
    >>> encoder = bert_tf.checkpoints.load_model("converted_dir")
    >>> write_version("/models/bert", lambda path: export_encoder(
    ...     path, encoder, "converted_dir/vocab.txt", do_lower_case=True))
    '/models/bert/1'
"""

from bert_tf.export.encoder_export import export_encoder
from bert_tf.export.preprocessor_export import export_preprocessor
from bert_tf.export.serving_layout import latest_version_dir, write_version, write_versions
from bert_tf.export.task_checkpoint import load_task_model
from bert_tf.export.task_export import TASK_MODEL_CLASSES, export_task_model

__all__ = ["TASK_MODEL_CLASSES", "export_encoder", "export_preprocessor", "export_task_model",
           "latest_version_dir", "load_task_model", "write_version", "write_versions"]
