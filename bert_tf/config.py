"""`BertConfig`: the hyper-parameters of a BERT encoder, in Google's `bert_config.json` format.

Example:
    >>> config = BertConfig.from_json_file("official_configs/bert_base.json")
    >>> config.hidden_size, config.num_attention_heads
    (768, 12)
"""

import dataclasses
import difflib
import json
import os

from bert_tf.file_io import open_file

# Activations a Google / Hugging Face checkpoint may name. "gelu" is the exact erf form.
SUPPORTED_ACTIVATIONS = ("gelu", "gelu_new", "relu", "tanh", "swish", "silu")

# Upper bounds a config is checked against before anything is allocated: a typo or a corrupt
# file (`"num_hidden_layers": 1000000000` took 4 GB of memory before failing) is refused at
# once. Each bound is far above every published BERT: BERT-Large has 24 layers, hidden size
# 1024, intermediate 4096, 512 positions and 2 token types; multilingual BERT's vocabulary has
# 119,547 entries; long-context BERTs use 8,192 positions.
SIZE_LIMITS = {
    "vocab_size": 1_000_000,
    "hidden_size": 16_384,
    "num_hidden_layers": 256,
    "num_attention_heads": 1_024,
    "intermediate_size": 65_536,
    "max_position_embeddings": 131_072,
    "type_vocab_size": 1_024,
}
# And on the whole: 10 billion parameters (40 GB in float32), 30x BERT-Large's 335 million.
MAX_PARAMETERS = 10_000_000_000

# The keys a config file must have: every key of Google's bert_config.json, which Hugging
# Face's BERT config.json always has too. Only layer_norm_eps may be missing (Google's files do
# not have it; their 1e-12 is the default). A missing key is refused, not defaulted: a default
# silently trains or loads another model than the file describes.
FILE_KEYS = ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads",
             "intermediate_size", "hidden_act", "hidden_dropout_prob",
             "attention_probs_dropout_prob", "max_position_embeddings", "type_vocab_size",
             "initializer_range")
# An unknown key at least this similar (difflib's ratio) to a known one is taken for its
# misspelling: "hidden_sizes" scores 0.96, "num_hidden_layer" 0.97. Other unknown keys are
# Hugging Face's (model_type, architectures, pad_token_id, ...) and ignored; the closest of
# those, bert-base-chinese's pooler_num_attention_heads, scores 0.84 to num_attention_heads.
MISSPELLING_SIMILARITY = 0.85


def official_config_dir():
    """The directory of the shipped configs: `bert_tf/official_configs` in an installed package
    (setup.py puts them there), else `official_configs/` at the top of this checkout."""
    package_dir = os.path.dirname(os.path.abspath(__file__))
    candidates = [os.path.join(package_dir, "official_configs"),
                  os.path.join(os.path.dirname(package_dir), "official_configs")]
    for directory in candidates:
        if os.path.isdir(directory):
            return directory
    raise FileNotFoundError(f"No official_configs directory in {' or '.join(candidates)}: "
                            f"reinstall bert_tf")


def official_config_names():
    """The names of the shipped configs, sorted: "bert_base", "bert_mini", ..."""
    return sorted(f[:-len(".json")] for f in os.listdir(official_config_dir())
                  if f.endswith(".json"))


def official_config_file(name):
    """The shipped config file of `name` ("bert_mini"), or None when no config goes by it.

    Example:
        >>> os.path.basename(official_config_file("bert_mini"))
        'bert_mini.json'
    """
    if name not in official_config_names():
        return None
    return os.path.join(official_config_dir(), f"{name}.json")


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
        for name, limit in SIZE_LIMITS.items():
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
                problems.append(f"{name} must be a positive integer, got {value!r}")
            elif value > limit:
                problems.append(f"{name} {value} is larger than this package's limit {limit}")
        for name in ("hidden_dropout_prob", "attention_probs_dropout_prob"):
            value = getattr(self, name)
            if not _is_number(value) or not 0.0 <= value < 1.0:
                problems.append(f"{name} must be a number in [0, 1), got {value!r}")
        for name in ("initializer_range", "layer_norm_eps"):
            value = getattr(self, name)
            if not _is_number(value) or not value > 0:
                problems.append(f"{name} must be a positive number, got {value!r}")
        if not isinstance(self.hidden_act, str) or self.hidden_act not in SUPPORTED_ACTIVATIONS:
            problems.append(f"hidden_act {self.hidden_act!r} is not one of {SUPPORTED_ACTIVATIONS}")
        if not problems and self.hidden_size % self.num_attention_heads:
            problems.append(f"hidden_size {self.hidden_size} is not divisible by "
                            f"num_attention_heads {self.num_attention_heads}")
        if not problems and self.parameter_count() > MAX_PARAMETERS:
            problems.append(f"{self.parameter_count():,} parameters is more than this package's "
                            f"limit of {MAX_PARAMETERS:,}")
        if problems:
            raise ValueError("Invalid BertConfig: " + "; ".join(problems))

    def parameter_count(self):
        """The number of weights of the encoder this config describes (embeddings, layers,
        pooler), computed without building it."""
        hidden, inner = self.hidden_size, self.intermediate_size
        embeddings = (self.vocab_size + self.max_position_embeddings
                      + self.type_vocab_size + 2) * hidden
        layer = 4 * (hidden * hidden + hidden) + 2 * hidden * inner + inner + hidden + 4 * hidden
        return embeddings + self.num_hidden_layers * layer + hidden * hidden + hidden

    @property
    def head_size(self):
        return self.hidden_size // self.num_attention_heads

    @classmethod
    def from_dict(cls, values):
        """Builds a config from a dict; keys this class does not know (e.g. Hugging Face's
        `model_type`, `architectures`) are ignored, missing required keys are an error."""
        if not isinstance(values, dict):
            raise ValueError(f"Invalid BertConfig: expected a JSON object of hyper-parameters, "
                             f"got {type(values).__name__}")
        known = {f.name for f in dataclasses.fields(cls)}
        if "vocab_size" not in values:
            raise ValueError("Invalid BertConfig: 'vocab_size' is missing")
        return cls(**{k: v for k, v in values.items() if k in known})

    @classmethod
    def from_json_file(cls, path):
        """Reads a `bert_config.json` (or Hugging Face `config.json`); every problem is a
        one-line ValueError naming `path` (see `from_json_values`)."""
        return cls.from_json_values(read_json_file(path), path)

    @classmethod
    def from_json_values(cls, values, path):
        """The config that the parsed JSON file `path` holds. Stricter than `from_dict`: every
        key of `FILE_KEYS` must be there, and an unknown key that looks like a misspelling of
        a known one is refused; other unknown keys (Hugging Face's) are ignored. All problems
        go into one one-line ValueError naming `path`.

        Example:
            >>> BertConfig.from_json_values({**google_config, "hidden_sizes": 128}, "c.json")
            ValueError: c.json: Invalid BertConfig: 'hidden_size' is missing; unknown key
            'hidden_sizes': did you mean 'hidden_size'?
        """
        try:
            if isinstance(values, dict):
                _check_file_keys(values)
            return cls.from_dict(values)
        except ValueError as e:
            raise ValueError(f"{path}: {e}") from None

    @classmethod
    def from_name(cls, name):
        """The config shipped in `official_configs/`, e.g. `BertConfig.from_name("bert_base")`."""
        path = official_config_file(name)
        if path is None:
            raise ValueError(f"Unknown config name {name!r}; known: "
                             f"{', '.join(official_config_names())}")
        return cls.from_json_file(path)

    def to_dict(self):
        return dataclasses.asdict(self)

    def to_json_string(self):
        return json.dumps(self.to_dict(), indent=2, sort_keys=True) + "\n"

    def to_json_file(self, path):
        """Writes the config to `path`: a local or remote (`gs://...`) file."""
        with open_file(path, "w") as f:
            f.write(self.to_json_string())


def _check_file_keys(values):
    """Raises ValueError listing the `FILE_KEYS` missing from `values` and its keys that look
    like misspelt known ones."""
    known = [field.name for field in dataclasses.fields(BertConfig)]
    problems = [f"{key!r} is missing" for key in FILE_KEYS if key not in values]
    for key in values:
        if key not in known:
            close = difflib.get_close_matches(key.lower(), known, n=1,
                                              cutoff=MISSPELLING_SIMILARITY)
            problems += [f"unknown key {key!r}: did you mean {close[0]!r}?"] if close else []
    if problems:
        raise ValueError("Invalid BertConfig: " + "; ".join(problems))


def _is_number(value):
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def read_json_file(path):
    """The parsed contents of a JSON config file, local or remote (`gs://...`); a one-line
    ValueError naming `path` when it is not UTF-8 JSON."""
    with open_file(path, "rb") as f:
        data = f.read()
    try:
        return json.loads(data.decode("utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise ValueError(f"{path} is not valid JSON: {e}") from None
