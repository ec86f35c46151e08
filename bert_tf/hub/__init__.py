"""Short model names for TF Hub: `hub.KerasLayer("bert_tf_base")` loads a locally installed model.

* `install_model(checkpoint, name="bert_tf_base")` exports an encoder and its preprocessor into
  the model directory (`$BERT_TF_HUB_DIR`, default ~/.cache/bert_tf/hub); also
  `tools/install_hub_model.py`.
* `register_resolver()` teaches tensorflow_hub those names (needs tensorflow-hub installed).

Example:
    >>> from bert_tf.hub import install_model, register_resolver
    >>> install_model("converted_dir")
    >>> register_resolver()
    >>> encoder = hub.KerasLayer("bert_tf_base", trainable=True)
"""

from bert_tf.hub.install import install_model
from bert_tf.hub.model_dir import (DEFAULT_HUB_DIR, DEFAULT_MODEL_NAME, HUB_DIR_ENV, hub_dir,
                                   is_model_name, model_base_path)


def register_resolver():
    """Registers the tensorflow_hub resolver for bert_tf model names (imports tensorflow_hub)."""
    from bert_tf.hub.resolver import register_resolver as register
    register()


__all__ = ["DEFAULT_HUB_DIR", "DEFAULT_MODEL_NAME", "HUB_DIR_ENV", "hub_dir", "install_model",
           "is_model_name", "model_base_path", "register_resolver"]
