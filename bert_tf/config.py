"""`BertConfig`: the hyper-parameters of a BERT encoder, in Google's `bert_config.json` format.

Example:
    >>> config = BertConfig.from_json_file("official_configs/bert_base.json")
    >>> config.hidden_size, config.num_attention_heads
    (768, 12)
"""

import dataclasses
import json
import os

# Activations a Google / Hugging Face checkpoint may name. "gelu" is the exact erf form.
SUPPORTED_ACTIVATIONS = ("gelu", "gelu_new", "relu", "tanh", "swish", "silu")

_OFFICIAL_CONFIG_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                    "official_configs")


@dataclasses.dataclass(frozen=True)
class BertConfig:
    """The architecture of a BERT encoder; field names are those of Google's `bert_config.json`."""

    vocab_size: int
    hidden_size: int = 768
    num_hidden_layers: int = 12
    num_attention_heads: int = 12
    intermediate_size: int = 3072
    hidden_act: str = "gelu"
    hidden_dropout_prob: float = 0.1
    attention_probs_dropout_prob: float = 0.1
    max_position_embeddings: int = 512
    type_vocab_size: int = 2
    initializer_range: float = 0.02
    layer_norm_eps: float = 1e-12

    def __post_init__(self):
        problems = []
        for name in ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads",
                     "intermediate_size", "max_position_embeddings", "type_vocab_size"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
                problems.append(f"{name} must be a positive integer, got {value!r}")
        for name in ("hidden_dropout_prob", "attention_probs_dropout_prob"):
            value = getattr(self, name)
            if not 0.0 <= value < 1.0:
                problems.append(f"{name} must be in [0, 1), got {value!r}")
        for name in ("initializer_range", "layer_norm_eps"):
            if not getattr(self, name) > 0:
                problems.append(f"{name} must be positive, got {getattr(self, name)!r}")
        if self.hidden_act not in SUPPORTED_ACTIVATIONS:
            problems.append(f"hidden_act {self.hidden_act!r} is not one of {SUPPORTED_ACTIVATIONS}")
        if (not problems and self.hidden_size % self.num_attention_heads):
            problems.append(f"hidden_size {self.hidden_size} is not divisible by "
                            f"num_attention_heads {self.num_attention_heads}")
        if problems:
            raise ValueError("Invalid BertConfig: " + "; ".join(problems))

    @property
    def head_size(self):
        return self.hidden_size // self.num_attention_heads

    @classmethod
    def from_dict(cls, values):
        """Builds a config from a dict; keys this class does not know (e.g. Hugging Face's
        `model_type`, `architectures`) are ignored, missing required keys are an error."""
        known = {f.name for f in dataclasses.fields(cls)}
        if "vocab_size" not in values:
            raise ValueError("Invalid BertConfig: 'vocab_size' is missing")
        return cls(**{k: v for k, v in values.items() if k in known})

    @classmethod
    def from_json_file(cls, path):
        with open(path, encoding="utf-8") as f:
            try:
                values = json.load(f)
            except json.JSONDecodeError as e:
                raise ValueError(f"{path} is not valid JSON: {e}") from e
        try:
            return cls.from_dict(values)
        except ValueError as e:
            raise ValueError(f"{path}: {e}") from e

    @classmethod
    def from_name(cls, name):
        """The config shipped in `official_configs/`, e.g. `BertConfig.from_name("bert_base")`."""
        path = os.path.join(_OFFICIAL_CONFIG_DIR, f"{name}.json")
        if not os.path.exists(path):
            names = sorted(f[:-5] for f in os.listdir(_OFFICIAL_CONFIG_DIR) if f.endswith(".json"))
            raise ValueError(f"Unknown config name {name!r}; known: {', '.join(names)}")
        return cls.from_json_file(path)

    def to_dict(self):
        return dataclasses.asdict(self)

    def to_json_string(self):
        return json.dumps(self.to_dict(), indent=2, sort_keys=True) + "\n"

    def to_json_file(self, path):
        with open(path, "w", encoding="utf-8") as f:
            f.write(self.to_json_string())
