"""Where `hub.KerasLayer("bert_tf_...")` finds installed models: the local model directory.

The directory is `$BERT_TF_HUB_DIR`, or `~/.cache/bert_tf/hub` when that is unset. Each model
lives in `<dir>/<name>/<version>/` (TF Serving's layout, so `tools/serve.py` can serve it too);
a name resolves to its highest version. The rules live in the top-level module
`bert_tf_hub_names`, which tensorflow_hub uses without importing bert_tf; a model's default name,
which says what is inside, is `default_model_name`.

Example:
    >>> os.environ["BERT_TF_HUB_DIR"] = "/opt/bert_models"
    >>> model_base_path("bert_tf_base")
    '/opt/bert_models/bert_tf_base'
    >>> default_model_name(BertConfig.from_json_file("official_configs/bert_L4_H256.json"))
    'bert_tf_L4_H256'
"""

from bert_tf_hub_names import (DEFAULT_HUB_DIR, HUB_DIR_ENV, INSTALL_RECORD, PREPROCESS_SUFFIX,
                               hub_dir, is_model_name, model_base_path)

# (layers, hidden size, heads) of the two models of the BERT paper.
_PAPER_MODELS = {(12, 768, 12): "bert_tf_base", (24, 1024, 16): "bert_tf_large"}
# The compact models of Turc et al. (2019) have one attention head per 64 hidden units.
_COMPACT_HEAD_SIZE = 64

__all__ = ["DEFAULT_HUB_DIR", "HUB_DIR_ENV", "INSTALL_RECORD", "PREPROCESS_SUFFIX",
           "default_model_name", "hub_dir", "is_model_name", "model_base_path"]


def default_model_name(config, do_lower_case=True):
    """The name a model installs under unless told otherwise: "bert_tf_base" (L12 H768 A12),
    "bert_tf_large" (L24 H1024 A16), "bert_tf_L{L}_H{H}" for the compact family (A = H/64),
    else "bert_tf_L{L}_H{H}_A{A}"; "_cased" appended for a cased vocabulary.

    Example:
        >>> default_model_name(minilm_config, do_lower_case=True)    # 6 layers, 384, 12 heads
        'bert_tf_L6_H384_A12'
    """
    layers, hidden, heads = (config.num_hidden_layers, config.hidden_size,
                             config.num_attention_heads)
    name = _PAPER_MODELS.get((layers, hidden, heads))
    if name is None:
        name = f"bert_tf_L{layers}_H{hidden}"
        if heads * _COMPACT_HEAD_SIZE != hidden:
            name += f"_A{heads}"
    return name if do_lower_case else name + "_cased"
