"""`hub.KerasLayer("bert_tf_base")`: tools/install_hub_model.py installs an encoder and its
preprocessor into the model directory ($BERT_TF_HUB_DIR), and the tensorflow_hub resolver finds
them by name, without any network; names not installed say how to install; default names say
what is inside. (tests/hub/test_installed_names.py: the same in fresh processes, no bert_tf.)"""

import os
import re
import shutil

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_hub as hub
from tensorflow_hub import registry

from bert_tf import BertConfig
from bert_tf.hub import (HUB_DIR_ENV, DamagedModelError, ModelNotInstalledError,
                         default_model_name, hub_dir, install_model, register_resolver,
                         resolve_model_name)
from bert_tf_hub_names import ModelNameResolver
from bert_tf.text.bert_preprocessor import BertPreprocessor
from tests.export.tiny_models import encoder_inputs, tiny_config, write_pretrained_checkpoint
from tests.hub.tiny_install import install_tiny_model
from tests.read_only import read_only
from tests.tools.tool_runs import error_output, run_tool


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """`(model directory, checkpoint dir, pretrainer, vocab_file)` after installing
    bert_tf_base with the tool, the directory given through the environment variable."""
    directory, checkpoint_dir, pretrainer, vocab_file, result = install_tiny_model(
        tmp_path_factory, "bert_tf_base")
    for name in ("bert_tf_base", "bert_tf_base_preprocess"):
        assert f"Installed {name} at {os.path.join(directory, name, '1')}" in result.stdout
    return directory, checkpoint_dir, pretrainer, vocab_file


@pytest.fixture
def model_dir(installed, monkeypatch):
    monkeypatch.setenv(HUB_DIR_ENV, installed[0])
    register_resolver()
    return installed[0]


def test_keras_layer_loads_the_installed_encoder_by_name(model_dir, installed):
    assert hub.resolve("bert_tf_base") == os.path.join(model_dir, "bert_tf_base", "1")
    inputs = encoder_inputs([[2, 5, 6, 3], [2, 7, 8, 9, 3]], seq_length=6)
    outputs = hub.KerasLayer("bert_tf_base")(inputs)
    expected = installed[2].encoder(inputs)
    np.testing.assert_allclose(outputs["pooled_output"], expected["pooled_output"], atol=1e-5)
    np.testing.assert_allclose(outputs["sequence_output"], expected["sequence_output"], atol=1e-5)
    # The checkpoint has the pre-training heads, so the MLM head was installed too.
    positions = tf.constant([[1, 2], [3, 0]])
    loaded = hub.load("bert_tf_base")
    mlm_logits = loaded.mlm({**inputs, "masked_lm_positions": positions})["mlm_logits"]
    np.testing.assert_allclose(
        mlm_logits, installed[2]({**inputs, "masked_lm_positions": positions})["mlm_logits"],
        atol=1e-5)


def test_the_preprocessor_is_installed_beside_it(model_dir, installed):
    texts = tf.constant(["Hello unaffable world!", "what is a film?"])
    packed = hub.KerasLayer("bert_tf_base_preprocess")(texts)
    expected = BertPreprocessor(installed[3], lower_case=True, seq_length=16)(texts)
    for key, value in expected.items():
        np.testing.assert_array_equal(packed[key], value)
    # TF Hub's two-model pattern, by name.
    pooled = hub.KerasLayer("bert_tf_base")(packed)["pooled_output"]
    np.testing.assert_allclose(pooled, installed[2].encoder(expected)["pooled_output"], atol=1e-5)


def test_a_name_not_installed_says_how_to_install_it(model_dir):
    with pytest.raises(ModelNotInstalledError) as error:
        hub.KerasLayer("bert_tf_large")
    message = str(error.value)
    assert os.path.join(model_dir, "bert_tf_large") in message
    assert "bert-tf-install-hub-model --name=bert_tf_large --init_checkpoint=" in message
    assert HUB_DIR_ENV in message
    with pytest.raises(ModelNotInstalledError, match="--name=bert_tf_large "):
        hub.load("bert_tf_large_preprocess")


def test_the_model_directory_follows_the_environment(model_dir, monkeypatch, tmp_path):
    monkeypatch.setenv(HUB_DIR_ENV, str(tmp_path))
    with pytest.raises(ModelNotInstalledError, match=str(tmp_path / "bert_tf_base")):
        hub.resolve("bert_tf_base")
    # A file by mistake: not "holds no exported version", which says to install.
    (tmp_path / "vocab.txt").write_text("[PAD]\n")
    monkeypatch.setenv(HUB_DIR_ENV, str(tmp_path / "vocab.txt"))
    with pytest.raises(ModelNotInstalledError, match=re.escape(
            f"The bert_tf model 'bert_tf_base' is not installed: {tmp_path / 'vocab.txt'} is a "
            f"file, not a directory (model directory: $BERT_TF_HUB_DIR or ")):
        hub.resolve("bert_tf_base")
    monkeypatch.delenv(HUB_DIR_ENV)
    monkeypatch.setenv("HOME", str(tmp_path))
    assert hub_dir() == os.path.join(str(tmp_path), ".cache", "bert_tf", "hub")


def test_only_bert_tf_names_are_claimed(model_dir, monkeypatch, tmp_path):
    resolver = ModelNameResolver()
    for handle in ("bert_tf_base", "bert_tf_L-2_H-128", "bert_tf_mini_preprocess"):
        assert resolver.is_supported(handle), handle
    for handle in ("https://tfhub.dev/google/bert/1", "/models/bert_tf_base", "bert_tf_",
                   "bert_tf_base/1", "bert_base", "./bert_tf_base", None):
        assert not resolver.is_supported(handle), handle
    # A local directory of that name is the user's: tensorflow_hub's path resolver takes it.
    monkeypatch.chdir(tmp_path)
    (tmp_path / "bert_tf_base").mkdir()
    assert hub.resolve("bert_tf_base") == "bert_tf_base"


def test_registering_twice_adds_one_resolver(model_dir):
    count = len(registry.resolver._impls)
    register_resolver()
    assert len(registry.resolver._impls) == count
    assert sum(isinstance(r, ModelNameResolver) for r in registry.resolver._impls) == 1


def _truncate(path):
    with open(path, "r+b") as f:
        f.truncate(1000)


@pytest.mark.parametrize("damage, problem", [
    (_truncate, "variables/variables.data-00000-of-00001 has 1000 bytes, not {size}"),
    (os.remove, "variables/variables.index is missing"),
    # Without its saved_model.pb the version must not give way to version 1 unnoticed.
    (os.remove, "saved_model.pb is missing"),
])
def test_a_damaged_version_is_named_before_tensorflow_reads_it(installed, monkeypatch, tmp_path,
                                                                damage, problem):
    """A copy cut short or a file lost: TensorFlow itself would fail with "Read less bytes
    than requested" (naming nothing), or load an older version."""
    base_path = tmp_path / "bert_tf_base"
    shutil.copytree(os.path.join(installed[0], "bert_tf_base", "1"), base_path / "1")
    version_dir = shutil.copytree(base_path / "1", base_path / "2")
    damaged = version_dir / problem.split()[0]
    problem = problem.format(size=damaged.stat().st_size)
    damage(damaged)
    monkeypatch.setenv(HUB_DIR_ENV, str(tmp_path))
    register_resolver()
    with pytest.raises(DamagedModelError) as error:
        hub.KerasLayer("bert_tf_base")
    assert str(error.value).startswith(
        f"The bert_tf model 'bert_tf_base' is damaged: version 2 at {version_dir} is not as its "
        f"install wrote it ({problem}); installing it again adds a version that takes this "
        f"one's place. Install it (with bert_tf_base_preprocess) from a checkpoint ")


def test_installing_again_mends_a_damaged_name(installed, monkeypatch, tmp_path):
    """What the error of a damaged version says to do, even when its saved_model.pb, from
    which an install reads the shapes it must keep, is what was cut short."""
    directory = shutil.copytree(installed[0], tmp_path / "hub")
    os.truncate(directory / "bert_tf_base" / "1" / "saved_model.pb", 100)
    monkeypatch.setenv(HUB_DIR_ENV, str(directory))
    register_resolver()
    with pytest.raises(DamagedModelError, match="saved_model.pb has 100 bytes, not "):
        hub.resolve("bert_tf_base")
    install_model(installed[1], name="bert_tf_base", seq_length=16)
    assert hub.resolve("bert_tf_base") == str(directory / "bert_tf_base" / "2")
    inputs = encoder_inputs([[2, 5, 6, 3]], seq_length=6)
    np.testing.assert_allclose(hub.KerasLayer("bert_tf_base")(inputs)["pooled_output"],
                               installed[2].encoder(inputs)["pooled_output"], atol=1e-5)


def test_an_unreadable_install_record_is_damage_and_a_version_without_one_resolves(
        installed, monkeypatch, tmp_path):
    """Versions installed before installs wrote a record load as before."""
    version_dir = shutil.copytree(os.path.join(installed[0], "bert_tf_base", "1"),
                                  tmp_path / "bert_tf_base" / "1")
    record = version_dir / "assets.extra" / "bert_tf_installed_files.json"
    record.write_text("{")
    monkeypatch.setenv(HUB_DIR_ENV, str(tmp_path))
    register_resolver()
    with pytest.raises(DamagedModelError, match=re.escape(
            "(its install record assets.extra/bert_tf_installed_files.json is unreadable (")):
        hub.resolve("bert_tf_base")
    shutil.rmtree(version_dir / "assets.extra")
    assert hub.resolve("bert_tf_base") == str(version_dir)
    inputs = encoder_inputs([[2, 5, 6, 3]], seq_length=6)
    np.testing.assert_allclose(hub.KerasLayer("bert_tf_base")(inputs)["pooled_output"],
                               installed[2].encoder(inputs)["pooled_output"], atol=1e-5)


def test_install_refuses_a_bad_name_before_exporting(installed, tmp_path):
    with pytest.raises(ValueError, match="'bert-base' is not a bert_tf model name"):
        install_model(installed[1], name="bert-base", directory=str(tmp_path))
    assert os.listdir(tmp_path) == []


def test_install_refuses_the_name_of_a_preprocessor(installed, tmp_path):
    """Installed, the encoder would be the newest bert_tf_base_preprocess."""
    with pytest.raises(ValueError) as error:
        install_model(installed[1], name="bert_tf_base_preprocess", directory=str(tmp_path))
    assert str(error.value) == (
        "'bert_tf_base_preprocess' is the name of 'bert_tf_base''s preprocessor: install the "
        "encoder as 'bert_tf_base' (its preprocessor gets 'bert_tf_base_preprocess'), or "
        "choose a name that does not end in '_preprocess'.")
    assert os.listdir(tmp_path) == []


def test_install_reports_a_missing_checkpoint_before_creating_anything(tmp_path):
    with pytest.raises(FileNotFoundError, match=f"No checkpoint at {tmp_path}/nothing"):
        install_model(str(tmp_path / "nothing"), directory=str(tmp_path / "hub"))
    assert not os.path.exists(tmp_path / "hub")


def _listing(directory):
    """Every path under `directory`, with its modification time for a file."""
    return sorted((os.path.relpath(os.path.join(root, name), directory),
                   name in files and os.stat(os.path.join(root, name)).st_mtime_ns)
                  for root, dirs, files in os.walk(directory) for name in dirs + files)


def test_a_failed_install_leaves_the_model_directory_as_it_was(installed, tmp_path):
    checkpoint_dir, vocab_file = installed[1], installed[3]
    directory = str(tmp_path / "hub")
    install_model(checkpoint_dir, name="bert_tf_tiny", seq_length=16, directory=directory)
    before = _listing(directory)
    no_cls = tmp_path / "no_cls_vocab.txt"
    no_cls.write_text("".join(line for line in open(vocab_file) if line.strip() != "[CLS]"))
    # Without a vocab.txt beside the checkpoint, --vocab_file is the only vocabulary.
    no_vocab = shutil.copytree(checkpoint_dir, tmp_path / "no_vocab",
                               ignore=shutil.ignore_patterns("vocab.txt"))
    limit = "seq_length must be between 3 and the encoder's max_position_embeddings (64), got"
    for checkpoint, flags, error in [
            (checkpoint_dir, ["--seq_length=0"], f"{limit} 0."),
            (checkpoint_dir, ["--seq_length=65"], f"{limit} 65."),
            # The encoder exports fine, then its preprocessor fails.
            (no_vocab, ["--seq_length=16", f"--vocab_file={no_cls}"],
             "The vocabulary (22 tokens) has no '[CLS]'")]:
        result = run_tool("install_hub_model.py", f"--init_checkpoint={checkpoint}",
                          "--name=bert_tf_tiny", f"--hub_dir={directory}", *flags)
        assert result.returncode == 1, flags
        assert result.stderr.splitlines()[-1].startswith(f"install_hub_model: error: {error}")
        assert "Traceback" not in result.stderr and "in user code" not in result.stderr
        assert _listing(directory) == before, flags
    # The next install adds version 2 of both.
    assert install_model(checkpoint_dir, name="bert_tf_tiny", seq_length=16,
                         directory=directory) == {
        "bert_tf_tiny": os.path.join(directory, "bert_tf_tiny", "2"),
        "bert_tf_tiny_preprocess": os.path.join(directory, "bert_tf_tiny_preprocess", "2")}


def test_a_model_directory_that_cannot_take_a_version_is_refused_before_loading(installed,
                                                                                 tmp_path):
    """Not after loading and exporting the model, with the bare "x; Read-only file system"."""
    unwritable = tmp_path / "read_only"
    unwritable.mkdir()
    notes = tmp_path / "notes.txt"
    notes.write_text("keep")
    with read_only(unwritable):
        for hub_dir, problem in [
                (os.path.join(unwritable, "models"), f"{unwritable} is not writable"),
                (str(notes), f"{notes} is a file, not a directory")]:
            result = run_tool("install_hub_model.py", f"--init_checkpoint={installed[1]}",
                              "--name=bert_tf_tiny", "--seq_length=16", f"--hub_dir={hub_dir}")
            assert error_output(result) == (
                f"install_hub_model: error: Cannot install into {hub_dir}/bert_tf_tiny: {problem}; "
                f"choose another model directory (--hub_dir or $BERT_TF_HUB_DIR)")
    assert notes.read_text() == "keep"


def test_a_model_of_other_shapes_is_refused_under_an_installed_name(installed, tmp_path):
    """Code built on bert_tf_tiny (one layer) would break if its newest version had two."""
    directory = str(tmp_path / "hub")
    install_model(installed[1], name="bert_tf_tiny", seq_length=16, directory=directory)
    before = _listing(directory)
    deeper = str(tmp_path / "deeper")
    write_pretrained_checkpoint(deeper, installed[3], num_hidden_layers=2)
    flags = (f"--init_checkpoint={deeper}", "--name=bert_tf_tiny", "--seq_length=16",
             f"--hub_dir={directory}")
    assert error_output(run_tool("install_hub_model.py", *flags)) == (
        f"install_hub_model: error: bert_tf_tiny version 1 in {directory}/bert_tf_tiny is L1 H16 "
        f"I32 with 23 tokens, 64 positions, 2 token types, but {deeper} is L2 H16 I32 with 23 "
        f"tokens, 64 positions, 2 token types: as the newest bert_tf_tiny it would break code "
        f"built on version 1; install it under another --name (e.g. bert_tf_L2_H16_A2), or pass "
        f"--allow_architecture_change to replace the architecture of bert_tf_tiny")
    assert _listing(directory) == before
    result = run_tool("install_hub_model.py", *flags, "--allow_architecture_change")
    assert result.returncode == 0, result.stderr
    assert f"Installed bert_tf_tiny at {directory}/bert_tf_tiny/2" in result.stdout


def test_installs_of_one_name_at_once_get_a_version_each(installed, monkeypatch, tmp_path):
    """Both choose version 1; the one to finish second exports again as version 2 instead of
    failing with TensorFlow's bare "file already exists"."""
    from bert_tf.hub import install

    directory = str(tmp_path / "hub")
    export_preprocessor, rival = install.export_preprocessor, {}

    def export_while_another_installs(*args, **kwargs):
        if not rival:  # the other install runs from start to end during this one's export
            rival["paths"] = None
            rival["paths"] = install_model(installed[1], name="bert_tf_tiny", seq_length=16,
                                           directory=directory)
        return export_preprocessor(*args, **kwargs)

    monkeypatch.setattr(install, "export_preprocessor", export_while_another_installs)
    paths = install_model(installed[1], name="bert_tf_tiny", seq_length=16, directory=directory)
    for version, installed_paths in (("1", rival["paths"]), ("2", paths)):
        assert installed_paths == {
            "bert_tf_tiny": os.path.join(directory, "bert_tf_tiny", version),
            "bert_tf_tiny_preprocess": os.path.join(directory, "bert_tf_tiny_preprocess",
                                                    version)}
    for name in ("bert_tf_tiny", "bert_tf_tiny_preprocess"):
        assert sorted(os.listdir(os.path.join(directory, name))) == ["1", "2"]


def test_install_refuses_a_config_of_fewer_layers_than_the_checkpoint(installed, tmp_path):
    """It would install the bottom layer of a two-layer model under a one-layer name."""
    deeper = str(tmp_path / "deeper")
    write_pretrained_checkpoint(deeper, installed[3], num_hidden_layers=2)
    config_file = str(tmp_path / "one_layer.json")
    tiny_config(num_hidden_layers=1).to_json_file(config_file)
    with pytest.raises(ValueError) as error:
        install_model(deeper, bert_config_file=config_file, seq_length=16,
                      directory=str(tmp_path / "hub"))
    assert str(error.value) == (
        f"{deeper}/ckpt-1 has 2 transformer layers, but {config_file} has num_hidden_layers 1: "
        f"the install would leave out the last 1; use the config the checkpoint was trained "
        f"with")
    assert not os.path.exists(tmp_path / "hub")


def test_install_refuses_a_vocab_file_other_than_the_checkpoints(installed, tmp_path):
    """The same tokens in another order would give every word the id of another."""
    checkpoint_dir, vocab_file = installed[1], installed[3]
    shuffled = tmp_path / "shuffled_vocab.txt"
    shuffled.write_text("".join(reversed(open(vocab_file).readlines())))
    result = run_tool("install_hub_model.py", f"--init_checkpoint={checkpoint_dir}",
                      f"--vocab_file={shuffled}", "--seq_length=16",
                      f"--hub_dir={tmp_path / 'hub'}")
    assert error_output(result) == (
        f"install_hub_model: error: --vocab_file is not the vocabulary of --init_checkpoint: "
        f"{checkpoint_dir}/vocab.txt (23 tokens) is not {shuffled} (23 tokens; they differ from "
        f"line 1); drop --vocab_file to use the checkpoint's")
    assert not os.path.exists(tmp_path / "hub")


def test_install_refuses_a_vocab_with_more_tokens_than_the_encoder_embeds(installed, tmp_path):
    """Their ids would pass the preprocessor and fail only in the user's model."""
    checkpoint_dir = shutil.copytree(installed[1], tmp_path / "checkpoint")
    with open(checkpoint_dir / "vocab.txt", "a") as f:
        f.write("extra\n")
    with pytest.raises(ValueError, match=re.escape(
            f"the config of {checkpoint_dir}: vocab_size 23 is smaller than the 24 tokens of "
            f"{checkpoint_dir}/vocab.txt; ")):
        install_model(str(checkpoint_dir), seq_length=16, directory=str(tmp_path / "hub"))
    assert not os.path.exists(tmp_path / "hub")


def test_the_tool_names_a_missing_config_file_with_its_flag(installed, tmp_path):
    result = run_tool("install_hub_model.py", f"--init_checkpoint={installed[1]}",
                      f"--bert_config_file={tmp_path / 'no.json'}", f"--hub_dir={tmp_path}")
    assert error_output(result) == (
        f"install_hub_model: error: --bert_config_file {tmp_path / 'no.json'} does not exist")
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize("layers, hidden, heads, do_lower_case, name", [
    (12, 768, 12, True, "bert_tf_base"),
    (24, 1024, 16, True, "bert_tf_large"),
    (12, 768, 12, False, "bert_tf_base_cased"),
    (4, 256, 4, True, "bert_tf_L4_H256"),            # bert_mini, the compact family (A = H/64)
    (2, 128, 2, False, "bert_tf_L2_H128_cased"),
    (6, 384, 12, True, "bert_tf_L6_H384_A12"),       # MiniLM: 32-wide heads
    (12, 768, 16, True, "bert_tf_L12_H768_A16"),     # base-sized, but not BERT-Base
])
def test_default_names_say_what_is_inside(layers, hidden, heads, do_lower_case, name):
    config = BertConfig(vocab_size=30522, hidden_size=hidden, num_hidden_layers=layers,
                        num_attention_heads=heads, intermediate_size=4 * hidden)
    assert default_model_name(config, do_lower_case) == name


def test_the_tool_without_a_name_names_the_model_after_its_config(installed, tmp_path):
    result = run_tool("install_hub_model.py", f"--init_checkpoint={installed[1]}",
                      "--nodo_lower_case", "--seq_length=16", f"--hub_dir={tmp_path}")
    assert result.returncode == 0, result.stderr
    # The tiny test model: 1 layer, H=16, 2 heads (8 wide, so not the compact family); cased.
    assert result.stdout.splitlines() == [
        f"Installed bert_tf_L1_H16_A2_cased at {tmp_path / 'bert_tf_L1_H16_A2_cased' / '1'}",
        f"Installed bert_tf_L1_H16_A2_cased_preprocess at "
        f"{tmp_path / 'bert_tf_L1_H16_A2_cased_preprocess' / '1'}"]


def test_install_follows_the_casing_stated_beside_the_checkpoint(installed, tmp_path):
    """A cased model (its tokenizer_config.json says so, as Hugging Face's and converted or
    fine-tuned checkpoints do) installs cased without being told; a contradicting flag is
    refused before anything is written."""
    cased = tmp_path / "cased"
    shutil.copytree(installed[1], cased)
    (cased / "tokenizer_config.json").write_text('{"do_lower_case": false}')
    directory = tmp_path / "hub"
    result = run_tool("install_hub_model.py", f"--init_checkpoint={cased}", "--seq_length=16",
                      f"--hub_dir={directory}")
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[0] == (
        f"Installed bert_tf_L1_H16_A2_cased at {directory / 'bert_tf_L1_H16_A2_cased' / '1'}")
    assert not tf.saved_model.load(
        str(directory / "bert_tf_L1_H16_A2_cased" / "1")).do_lower_case.numpy()
    assert list(install_model(str(cased), seq_length=16, directory=str(tmp_path / "api"))) == [
        "bert_tf_L1_H16_A2_cased", "bert_tf_L1_H16_A2_cased_preprocess"]

    before = _listing(directory)
    result = run_tool("install_hub_model.py", f"--init_checkpoint={cased}", "--do_lower_case",
                      "--seq_length=16", f"--hub_dir={directory}")
    assert error_output(result) == (
        f"install_hub_model: error: --do_lower_case contradicts {cased}/tokenizer_config.json, "
        f"which says do_lower_case false (the casing its model was trained with); drop "
        "--do_lower_case")
    assert _listing(directory) == before


def test_keras3_tfsm_layer_runs_the_installed_models_for_inference(model_dir, installed):
    import keras

    from bert_tf.hub import resolve_model_name

    texts = tf.constant(["Hello unaffable world!", "what is a film?"])
    preprocess = keras.layers.TFSMLayer(resolve_model_name("bert_tf_base_preprocess"),
                                        call_endpoint="serving_default")
    encoder = keras.layers.TFSMLayer(resolve_model_name("bert_tf_base"),
                                     call_endpoint="serving_default")
    packed = preprocess(texts)
    expected = BertPreprocessor(installed[3], lower_case=True, seq_length=16)(texts)
    for key, value in expected.items():
        np.testing.assert_array_equal(packed[key], value)
    np.testing.assert_allclose(encoder(packed)["pooled_output"],
                               installed[2].encoder(expected)["pooled_output"], atol=1e-5)


def test_the_install_hint_of_a_missing_preprocessor_names_its_encoder(monkeypatch, tmp_path):
    # It read "Install it (with bert_tf_nothing_preprocess)": the missing name itself.
    monkeypatch.setenv(HUB_DIR_ENV, str(tmp_path))
    with pytest.raises(ModelNotInstalledError) as error:
        resolve_model_name("bert_tf_nothing_preprocess")
    assert ("Install it (with its encoder bert_tf_nothing) from a checkpoint and its vocab.txt: "
            "bert-tf-install-hub-model --name=bert_tf_nothing ") in str(error.value)
