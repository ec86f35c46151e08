"""Short model names for TF Hub: `hub.KerasLayer("bert_tf_base")` loads a locally installed model.

* `install_model(checkpoint)` exports an encoder and its preprocessor into the model directory
  (`$BERT_TF_HUB_DIR`, default ~/.cache/bert_tf/hub) under a name derived from its config
  (`default_model_name`); also `tools/install_hub_model.py`.
* tensorflow_hub knows those names in every process of an installed bert_tf, without importing
  bert_tf (`bert_tf_hub_names`); `register_resolver()` teaches them to it explicitly (needed only
  when running from a checkout that is not installed).

Example:
    >>> from bert_tf.hub import install_model
    >>> install_model("converted_dir")          # a BERT-Base checkpoint
    >>> encoder = hub.KerasLayer("bert_tf_base", trainable=True)
"""

from bert_tf_hub_names import (DamagedModelError, ModelNotInstalledError, register_resolver,
                               resolve_model_name)

from bert_tf.hub.install import install_model
from bert_tf.hub.model_dir import (DEFAULT_HUB_DIR, HUB_DIR_ENV, default_model_name, hub_dir,
                                   is_model_name, model_base_path)

__all__ = ["DEFAULT_HUB_DIR", "DamagedModelError", "HUB_DIR_ENV", "ModelNotInstalledError",
           "default_model_name", "hub_dir", "install_model", "is_model_name", "model_base_path",
           "register_resolver", "resolve_model_name"]
