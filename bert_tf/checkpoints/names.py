"""The one naming table: every `BertEncoder` and pre-training head weight and its name in
Google's BERT checkpoints.

Google's TF1 names (`bert/encoder/layer_0/attention/self/query/kernel`...) are the package's
canonical weight names: every reader returns arrays keyed by them, in Google's layout (dense
kernels `[in, out]`). Hugging Face names are *derived* from them by rule (`hf_names`), never
listed separately, so a weight added here is read from both formats.

Example:
    >>> [name for name, _ in pretraining_head_weights(pretrainer)][:1]
    ['cls/predictions/transform/dense/kernel']
    >>> [name for name, _ in encoder_weights(encoder)][:2]
    ['bert/embeddings/word_embeddings', 'bert/embeddings/position_embeddings']
    >>> hf_names("bert/encoder/layer_0/attention/output/LayerNorm/gamma")
    ['bert.encoder.layer.0.attention.output.LayerNorm.weight',
     'bert.encoder.layer.0.attention.output.LayerNorm.gamma']
"""

import re

# (Google name, attribute path on the BertEncoder) for the embeddings and the pooler.
EMBEDDING_WEIGHTS = (
    ("bert/embeddings/word_embeddings", "embeddings.word_embeddings"),
    ("bert/embeddings/position_embeddings", "embeddings.position_embeddings"),
    ("bert/embeddings/token_type_embeddings", "embeddings.token_type_embeddings"),
    ("bert/embeddings/LayerNorm/gamma", "embeddings.layer_norm.gamma"),
    ("bert/embeddings/LayerNorm/beta", "embeddings.layer_norm.beta"),
)

# (Google name under `bert/encoder/layer_{i}/`, attribute path on `encoder.transformer_blocks[i]`).
LAYER_WEIGHTS = (
    ("attention/self/query/kernel", "attention.query.kernel"),
    ("attention/self/query/bias", "attention.query.bias"),
    ("attention/self/key/kernel", "attention.key.kernel"),
    ("attention/self/key/bias", "attention.key.bias"),
    ("attention/self/value/kernel", "attention.value.kernel"),
    ("attention/self/value/bias", "attention.value.bias"),
    ("attention/output/dense/kernel", "attention_output.kernel"),
    ("attention/output/dense/bias", "attention_output.bias"),
    ("attention/output/LayerNorm/gamma", "attention_layer_norm.gamma"),
    ("attention/output/LayerNorm/beta", "attention_layer_norm.beta"),
    ("intermediate/dense/kernel", "intermediate.kernel"),
    ("intermediate/dense/bias", "intermediate.bias"),
    ("output/dense/kernel", "output_dense.kernel"),
    ("output/dense/bias", "output_dense.bias"),
    ("output/LayerNorm/gamma", "output_layer_norm.gamma"),
    ("output/LayerNorm/beta", "output_layer_norm.beta"),
)

POOLER_WEIGHTS = (
    ("bert/pooler/dense/kernel", "pooler.kernel"),
    ("bert/pooler/dense/bias", "pooler.bias"),
)

# The pre-training heads of Google's `run_pretraining.py` and their attribute paths on a
# `BertPretrainer`, in Google's layout (the Keras variables have the same shapes):
#   cls/predictions/transform/dense/kernel [H, H], .../bias [H]   (MLM transform, gelu)
#   cls/predictions/transform/LayerNorm/{gamma,beta} [H]
#   cls/predictions/output_bias [V]              (the MLM decoder is tied to word_embeddings)
#   cls/seq_relationship/output_weights [2, H]   (NOT transposed: logits = x @ W^T)
#   cls/seq_relationship/output_bias [2]
PRETRAINING_HEAD_WEIGHTS = (
    ("cls/predictions/transform/dense/kernel", "masked_lm.transform.kernel"),
    ("cls/predictions/transform/dense/bias", "masked_lm.transform.bias"),
    ("cls/predictions/transform/LayerNorm/gamma", "masked_lm.transform_layer_norm.gamma"),
    ("cls/predictions/transform/LayerNorm/beta", "masked_lm.transform_layer_norm.beta"),
    ("cls/predictions/output_bias", "masked_lm.output_bias"),
    ("cls/seq_relationship/output_weights", "next_sentence.output_weights"),
    ("cls/seq_relationship/output_bias", "next_sentence.output_bias"),
)
PRETRAINING_HEAD_NAMES = tuple(google for google, _ in PRETRAINING_HEAD_WEIGHTS)

# Hugging Face names that do not follow the rule below (Google name -> HF name without prefix).
_HF_SPECIAL = {
    "cls/predictions/output_bias": "cls.predictions.bias",
    "cls/seq_relationship/output_weights": "cls.seq_relationship.weight",
    "cls/seq_relationship/output_bias": "cls.seq_relationship.bias",
}


def encoder_weight_names(num_hidden_layers):
    """Google names of every encoder weight, in a fixed order (embeddings, layers, pooler)."""
    names = [google for google, _ in EMBEDDING_WEIGHTS]
    for i in range(num_hidden_layers):
        names += [f"bert/encoder/layer_{i}/{suffix}" for suffix, _ in LAYER_WEIGHTS]
    return names + [google for google, _ in POOLER_WEIGHTS]


def _resolve(obj, attribute_path):
    for attribute in attribute_path.split("."):
        obj = getattr(obj, attribute)
    return obj


def encoder_weights(encoder):
    """`[(google_name, keras_variable)]` for every weight of a `BertEncoder`, table order.

    The variables' shapes equal the Google arrays' shapes (Keras dense kernels are `[in, out]`
    like Google's), so an array read by this package assigns without any transform.
    """
    pairs = [(google, _resolve(encoder, path)) for google, path in EMBEDDING_WEIGHTS]
    for i, block in enumerate(encoder.transformer_blocks):
        pairs += [(f"bert/encoder/layer_{i}/{suffix}", _resolve(block, path))
                  for suffix, path in LAYER_WEIGHTS]
    pairs += [(google, _resolve(encoder, path)) for google, path in POOLER_WEIGHTS]
    if len({id(v) for _, v in pairs}) != len(encoder.weights) or len(pairs) != len(encoder.weights):
        raise AssertionError(  # the table went out of step with BertEncoder
            f"the naming table covers {len(pairs)} weights but the encoder has "
            f"{len(encoder.weights)}: update bert_tf/checkpoints/names.py")
    return pairs


def pretraining_head_weights(pretrainer):
    """`[(google_name, keras_variable)]` for every weight of a `BertPretrainer`'s two heads,
    table order."""
    return [(google, _resolve(pretrainer, path)) for google, path in PRETRAINING_HEAD_WEIGHTS]


def hf_transposed(google_name):
    """Whether the Hugging Face tensor is the transpose of Google's: true for dense kernels
    (torch Linear stores `[out, in]`), false for embeddings, biases, LayerNorm and
    `cls/seq_relationship/output_weights` (already `[2, H]` in both)."""
    return google_name.endswith("/kernel")


def hf_names(google_name):
    """The Hugging Face names of a Google weight, canonical first (with the `bert.` prefix of
    `BertForPreTraining`; a bare `BertModel` file drops it), then legacy spellings
    (`LayerNorm.gamma`/`.beta` of files written by old `transformers`).

    The rule: `/` -> `.`, `layer_{i}` -> `layer.{i}`, `kernel` -> `weight` (transposed),
    LayerNorm `gamma`/`beta` -> `weight`/`bias`, an embedding table gets `.weight`.
    """
    if google_name in _HF_SPECIAL:
        return [_HF_SPECIAL[google_name]]
    parts = google_name.split("/")
    parts = [re.sub(r"^layer_(\d+)$", r"layer.\1", part) for part in parts]
    last = parts[-1]
    if last.endswith("_embeddings"):
        return [".".join(parts + ["weight"])]
    stem = ".".join(parts[:-1])
    if last == "kernel":
        return [f"{stem}.weight"]
    if last == "gamma":
        return [f"{stem}.weight", f"{stem}.gamma"]
    if last == "beta":
        return [f"{stem}.bias", f"{stem}.beta"]
    return [".".join(parts)]


# A transformer layer's weight in Google's names (`bert/encoder/layer_3/...`) or Hugging Face's
# (`encoder.layer.3....`, with or without `bert.`).
_LAYER_WEIGHT = re.compile(r"(?:^|[/.])encoder[/.]layer[_.](\d+)[/.]")


def layer_count(names):
    """How many transformer layers the weight `names` (Google's or Hugging Face's) reach: one
    more than the highest layer index among them, 0 for none.

    Example:
        >>> layer_count(["bert/encoder/layer_11/output/dense/bias", "encoder.layer.2.output"])
        12
    """
    found = [int(match.group(1)) for match in map(_LAYER_WEIGHT.search, names) if match]
    return max(found) + 1 if found else 0


def is_optimizer_or_bookkeeping(google_style_name):
    """Names in a TF1 checkpoint that are not model weights: optimizer slots and counters."""
    last = google_style_name.rsplit("/", 1)[-1]
    return (last in ("adam_m", "adam_v", "Momentum", "Adagrad", "RMSProp", "lamb_m", "lamb_v")
            or google_style_name in ("global_step", "good_steps", "loss_scale",
                                     "current_loss_scale")
            or google_style_name.startswith(("beta1_power", "beta2_power")))
