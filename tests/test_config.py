import json
import os

import pytest

from bert_tf import BertConfig, BertEncoder
from tests.resources import REPO_ROOT

CONFIG_DIR = os.path.join(REPO_ROOT, "official_configs")


def test_bert_base_matches_the_paper():
    config = BertConfig.from_name("bert_base")
    assert (config.num_hidden_layers, config.hidden_size, config.num_attention_heads,
            config.intermediate_size, config.vocab_size) == (12, 768, 12, 3072, 30522)
    assert config.hidden_act == "gelu" and config.layer_norm_eps == 1e-12


def test_bert_large_matches_the_paper():
    config = BertConfig.from_name("bert_large")
    assert (config.num_hidden_layers, config.hidden_size, config.num_attention_heads,
            config.intermediate_size) == (24, 1024, 16, 4096)


@pytest.mark.parametrize("layers", [2, 4, 6, 8, 10, 12])
@pytest.mark.parametrize("hidden", [128, 256, 512, 768])
def test_compact_models_follow_the_rule(layers, hidden):
    config = BertConfig.from_json_file(os.path.join(CONFIG_DIR, f"bert_L{layers}_H{hidden}.json"))
    assert config.num_hidden_layers == layers and config.hidden_size == hidden
    assert config.num_attention_heads == hidden // 64
    assert config.intermediate_size == 4 * hidden


@pytest.mark.parametrize("alias,target", [("bert_tiny", "bert_L2_H128"), ("bert_mini", "bert_L4_H256"),
                                          ("bert_small", "bert_L4_H512"),
                                          ("bert_medium", "bert_L8_H512")])
def test_named_aliases(alias, target):
    assert BertConfig.from_name(alias) == BertConfig.from_name(target)


def test_every_shipped_config_has_googles_keys():
    required = {"vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads",
                "intermediate_size", "hidden_act", "hidden_dropout_prob",
                "attention_probs_dropout_prob", "max_position_embeddings", "type_vocab_size",
                "initializer_range"}
    names = [f for f in os.listdir(CONFIG_DIR) if f.endswith(".json")]
    assert len(names) == 30
    for name in names:
        with open(os.path.join(CONFIG_DIR, name)) as f:
            assert required <= set(json.load(f)), name


def test_json_round_trip(tmp_path):
    config = BertConfig(vocab_size=99, hidden_size=64, num_hidden_layers=3, num_attention_heads=4,
                        intermediate_size=128, layer_norm_eps=1e-6)
    path = tmp_path / "bert_config.json"
    config.to_json_file(path)
    assert BertConfig.from_json_file(path) == config


def test_reads_hugging_face_config_and_ignores_extra_keys():
    config = BertConfig.from_dict({"vocab_size": 10, "hidden_size": 32, "num_attention_heads": 2,
                                   "model_type": "bert", "architectures": ["BertModel"]})
    assert config.hidden_size == 32 and config.num_attention_heads == 2


@pytest.mark.parametrize("overrides,message", [
    ({"hidden_size": 100, "num_attention_heads": 12}, "not divisible by num_attention_heads"),
    ({"hidden_act": "gelu_fast"}, "hidden_act 'gelu_fast'"),
    ({"num_hidden_layers": -1}, "num_hidden_layers must be a positive integer"),
    ({"vocab_size": 0}, "vocab_size must be a positive integer"),
    ({"hidden_dropout_prob": 1.5}, "hidden_dropout_prob must be a number in [0, 1)"),
    ({"initializer_range": None}, "initializer_range must be a positive number, got None"),
    ({"hidden_act": ["gelu"]}, "hidden_act ['gelu'] is not one of"),
    ({"num_hidden_layers": 257}, "num_hidden_layers 257 is larger than this package's limit 256"),
    ({"vocab_size": 2_000_000}, "vocab_size 2000000 is larger than this package's limit"),
    ({"max_position_embeddings": 10 ** 6}, "max_position_embeddings 1000000 is larger"),
])
def test_invalid_config_names_the_problem(overrides, message):
    with pytest.raises(ValueError, match=message.replace("[", r"\[").replace("(", r"\(").replace(")", r"\)")):
        BertConfig(**{"vocab_size": 10, **overrides})


def test_missing_vocab_size_and_bad_json(tmp_path):
    with pytest.raises(ValueError, match="'vocab_size' is missing"):
        BertConfig.from_dict({"hidden_size": 8})
    path = tmp_path / "broken.json"
    path.write_text("{not json")
    with pytest.raises(ValueError, match="broken.json is not valid JSON"):
        BertConfig.from_json_file(path)


def _write_tiny_config(tmp_path, change):
    """bert_tiny.json after `change(values)`; returns its path."""
    with open(os.path.join(CONFIG_DIR, "bert_tiny.json")) as f:
        values = json.load(f)
    change(values)
    path = tmp_path / "bert_config.json"
    path.write_text(json.dumps(values))
    return str(path)


@pytest.mark.parametrize("key", ["vocab_size", "hidden_size", "num_hidden_layers",
                                 "num_attention_heads", "intermediate_size", "hidden_act",
                                 "hidden_dropout_prob", "attention_probs_dropout_prob",
                                 "max_position_embeddings", "type_vocab_size",
                                 "initializer_range"])
def test_a_config_file_missing_a_key_is_refused_not_defaulted(tmp_path, key):
    path = _write_tiny_config(tmp_path, lambda values: values.pop(key))
    with pytest.raises(ValueError) as error:
        BertConfig.from_json_file(path)
    assert str(error.value) == f"{path}: Invalid BertConfig: '{key}' is missing"


def test_a_misspelt_key_is_named_with_the_key_meant(tmp_path):
    def misspell(values):
        values["hidden_sizes"] = values.pop("hidden_size")
        values["num_hidden_layer"] = values["num_hidden_layers"]
        values["HIDDEN_DROPOUT_PROB"] = 0.2

    path = _write_tiny_config(tmp_path, misspell)
    with pytest.raises(ValueError) as error:
        BertConfig.from_json_file(path)
    assert str(error.value) == (
        f"{path}: Invalid BertConfig: 'hidden_size' is missing; unknown key 'hidden_sizes': did "
        f"you mean 'hidden_size'?; unknown key 'num_hidden_layer': did you mean "
        f"'num_hidden_layers'?; unknown key 'HIDDEN_DROPOUT_PROB': did you mean "
        f"'hidden_dropout_prob'?")


def test_hugging_face_config_files_keep_loading_with_their_own_keys(tmp_path):
    # bert-base-chinese's config.json: Hugging Face's keys and Google's pooler_* ones.
    extra = {"architectures": ["BertForMaskedLM"], "model_type": "bert", "pad_token_id": 0,
             "directionality": "bidi", "pooler_fc_size": 768, "pooler_num_attention_heads": 12,
             "pooler_num_fc_layers": 3, "pooler_size_per_head": 128,
             "pooler_type": "first_token_transform",
             "position_embedding_type": "absolute", "use_cache": True, "classifier_dropout": None,
             "transformers_version": "4.6.0.dev0", "layer_norm_eps": 1e-12,
             "gradient_checkpointing": False, "torch_dtype": "float32"}
    path = _write_tiny_config(tmp_path, lambda values: values.update(extra))
    assert BertConfig.from_json_file(path) == BertConfig.from_name("bert_tiny")
    # Google's files have no layer_norm_eps: it is the one key that may be missing.
    assert BertConfig.from_name("bert_tiny").layer_norm_eps == 1e-12


def test_unknown_name_lists_the_known_ones():
    with pytest.raises(ValueError, match="bert_base"):
        BertConfig.from_name("bert_huge")


def test_parameter_count_matches_keras_and_bounds_the_whole_model():
    tiny = BertConfig(vocab_size=37, hidden_size=12, num_hidden_layers=3, num_attention_heads=2,
                      intermediate_size=20, max_position_embeddings=9, type_vocab_size=3)
    assert tiny.parameter_count() == BertEncoder(tiny).count_params()
    # BERT-Base's and BERT-Large's well-known sizes (embeddings, layers and pooler).
    assert BertConfig.from_name("bert_base").parameter_count() == 109_482_240
    assert BertConfig.from_name("bert_large").parameter_count() == 335_141_888
    # Every size within its own limit, but 825 billion weights together.
    with pytest.raises(ValueError, match=r"parameters is more than this package's limit of "
                                         r"10,000,000,000"):
        BertConfig(vocab_size=30522, hidden_size=16_384, num_attention_heads=128,
                   num_hidden_layers=256, intermediate_size=65_536)


def test_every_shipped_config_is_within_the_limits():
    for name in os.listdir(CONFIG_DIR):
        BertConfig.from_json_file(os.path.join(CONFIG_DIR, name))
