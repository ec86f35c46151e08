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

import importlib

# Public name -> the module defining it, imported on first use: export_savedmodel defines its
# flags from `model_slices` and `export_arguments` before TensorFlow loads, which these modules
# import.
_EXPORTS = {"TASK_MODEL_CLASSES": "task_export", "export_encoder": "encoder_export",
            "export_preprocessor": "preprocessor_export", "export_task_model": "task_export",
            "latest_version_dir": "serving_layout", "load_task_model": "task_checkpoint",
            "write_version": "serving_layout", "write_versions": "serving_layout"}
__all__ = list(_EXPORTS)


def __getattr__(name):
    if name not in _EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{_EXPORTS[name]}"), name)
