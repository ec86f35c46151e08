"""`hub.KerasLayer("bert_tf_...")` as typed, in fresh processes that import only `tensorflow`,
`tensorflow_text`, `tf_keras` and `tensorflow_hub`, never bert_tf: the post-import hook that the
install puts into site-packages registers the names. Checked for a regular install (a wheel
built from a copy of this checkout) and an editable one, each in a site directory of its own
that the process adds with `site.addsitedir` (Python's own .pth processing) while this
environment's site-packages are on its path without theirs, so only that install's hook can
answer; and for the real MiniLM, against Hugging Face transformers' outputs."""

import json
import os
import shutil
import subprocess
import sys
import sysconfig

import numpy as np
import pytest

from bert_tf.hub import HUB_DIR_ENV
from tests.hub.tiny_install import install_tiny_model
from tests.resources import REPO_ROOT, minilm_dir
from tests.tools.tool_runs import run_tool

SITE_PACKAGES = sysconfig.get_paths()["purelib"]
ENV = {"TF_CPP_MIN_LOG_LEVEL": "2"}

# Run as `python -S -c USER SITE_DIR HUB_DIR NAME SEQ_LENGTH TEXTS SITE_PACKAGES`: this
# environment's packages are importable but their .pth files unread; SITE_DIR's are read (an
# empty SITE_DIR: none). Without -S, this environment's own install answers.
USER = r"""
import json, sys, site
# The install's site directory first: its .pth lines import its own modules, whose names this
# environment's editable install shares.
if sys.argv[1]:
    site.addsitedir(sys.argv[1])
sys.path.append(sys.argv[6])
import os
os.environ["BERT_TF_HUB_DIR"] = sys.argv[2]
import numpy as np
import tensorflow as tf
import tensorflow_text  # noqa: F401
import tf_keras
import tensorflow_hub as hub

name, seq_length = sys.argv[3], int(sys.argv[4])
texts = tf.constant(json.loads(sys.argv[5]))
preprocess = hub.KerasLayer(name + "_preprocess")
encoder = hub.KerasLayer(name, trainable=True)
packed = preprocess(texts)
pooled = encoder(packed)["pooled_output"]
# Fine-tuning: one tf_keras step on a classifier over the encoder changes every encoder weight.
text_input = tf_keras.Input(shape=(), dtype=tf.string)
logits = tf_keras.layers.Dense(2)(encoder(preprocess(text_input))["pooled_output"])
model = tf_keras.Model(text_input, logits)
model.compile(tf_keras.optimizers.Adam(1e-2),
              tf_keras.losses.SparseCategoricalCrossentropy(from_logits=True), run_eagerly=True)
before = [w.numpy() for w in encoder.trainable_weights]
model.fit(texts, tf.range(len(texts)) % 2, epochs=1, verbose=0)
changed = [not np.array_equal(b, w.numpy()) for b, w in zip(before, encoder.trainable_weights)]
import bert_tf_hub_names
print(json.dumps({
    "paths": [hub.resolve(name), hub.resolve(name + "_preprocess")],
    "input_word_ids": packed["input_word_ids"].numpy().tolist(),
    "pooled_output": pooled.numpy().tolist(),
    "encoder_weights": len(changed), "trained": sum(changed),
    "hook": bert_tf_hub_names.__file__,
    "bert_tf_imported": sorted(m for m in sys.modules if m.split(".")[0] == "bert_tf")}))
"""
TEXTS = ["Hello unaffable world!", "what a good film?"]


def start_user(site_dir, hub_dir, name, texts=TEXTS, cwd=None, own_site=False):
    """Runs USER in a fresh interpreter (reading this environment's .pth files only when
    `own_site`); returns the CompletedProcess."""
    return subprocess.run(
        [sys.executable, *(() if own_site else ("-S",)), "-c", USER, site_dir, hub_dir, name,
         "16", json.dumps(texts), SITE_PACKAGES],
        capture_output=True, text=True, timeout=600, cwd=cwd, env={**os.environ, **ENV})


def run_user(*args, **kwargs):
    """USER's JSON report (the test fails on errors)."""
    result = start_user(*args, **kwargs)
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def tiny_installed(tmp_path_factory):
    """`(hub_dir, pretrainer, vocab_file)`: a tiny model installed as bert_tf_tiny_test."""
    hub_dir, _, pretrainer, vocab_file, _ = install_tiny_model(tmp_path_factory,
                                                               "bert_tf_tiny_test")
    return hub_dir, pretrainer, vocab_file


@pytest.fixture(scope="module")
def checkout_copy(tmp_path_factory):
    """The checkout's files (those git tracks or would, as they are now) copied elsewhere, so
    that builds leave the checkout untouched."""
    files = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard"],
                           cwd=REPO_ROOT, capture_output=True, text=True, check=True).stdout
    copy = tmp_path_factory.mktemp("checkout") / "bert_tf_src"
    for name in files.splitlines():
        source = os.path.join(REPO_ROOT, name)
        if os.path.isfile(source):
            os.makedirs(copy / os.path.dirname(name), exist_ok=True)
            shutil.copy(source, copy / name)
    return copy


def pip_install(*arguments):
    result = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation",
         *arguments], capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]


def expected_outputs(tiny_installed):
    from bert_tf.text.bert_preprocessor import BertPreprocessor
    import tensorflow as tf

    _, pretrainer, vocab_file = tiny_installed
    packed = BertPreprocessor(vocab_file, lower_case=True, seq_length=16)(tf.constant(TEXTS))
    return packed, pretrainer.encoder(packed)["pooled_output"].numpy()


def assert_loaded_by_name(report, tiny_installed, install_dir):
    hub_dir = tiny_installed[0]
    assert report["paths"] == [os.path.join(hub_dir, "bert_tf_tiny_test", "1"),
                               os.path.join(hub_dir, "bert_tf_tiny_test_preprocess", "1")]
    # The hook came from the install under test, and bert_tf itself was never imported.
    assert report["hook"].startswith(str(install_dir)), report["hook"]
    assert report["bert_tf_imported"] == []
    packed, pooled = expected_outputs(tiny_installed)
    np.testing.assert_array_equal(report["input_word_ids"], packed["input_word_ids"])
    np.testing.assert_allclose(report["pooled_output"], pooled, atol=1e-5)
    assert report["trained"] == report["encoder_weights"] > 0


def test_a_regular_install_resolves_names_in_a_process_that_never_imports_bert_tf(
        tiny_installed, checkout_copy, tmp_path):
    target = tmp_path / "site"
    pip_install("--target", str(target), str(checkout_copy))
    assert (target / "bert_tf_hub_names.pth").is_file()
    report = run_user(str(target), tiny_installed[0], "bert_tf_tiny_test", cwd=str(tmp_path))
    assert_loaded_by_name(report, tiny_installed, target)


def test_an_editable_install_resolves_names_too(tiny_installed, checkout_copy, tmp_path):
    prefix = tmp_path / "prefix"
    # --ignore-installed: otherwise pip would first uninstall this environment's bert_tf.
    pip_install("--prefix", str(prefix), "--ignore-installed", "--editable", str(checkout_copy))
    site_dir = sysconfig.get_paths(vars={"base": str(prefix), "platbase": str(prefix)})["purelib"]
    assert os.path.isfile(os.path.join(site_dir, "bert_tf_hub_names.pth"))
    report = run_user(site_dir, tiny_installed[0], "bert_tf_tiny_test", cwd=str(tmp_path))
    # Editable: the hook is the checkout's own file.
    assert_loaded_by_name(report, tiny_installed, checkout_copy)


def test_without_the_hook_the_name_is_unknown_to_tensorflow_hub(tiny_installed, tmp_path):
    # The control experiment: same process, no install's .pth read.
    result = start_user("", tiny_installed[0], "bert_tf_tiny_test", cwd=str(tmp_path))
    assert result.returncode != 0
    assert "bert_tf_tiny_test_preprocess does not exist" in result.stderr


def test_a_damaged_install_is_one_error_naming_it_in_a_fresh_process(tiny_installed, tmp_path):
    """Not tensorflow_hub's bare "IndexError: Read less bytes than requested"."""
    hub_dir = shutil.copytree(tiny_installed[0], tmp_path / "hub")
    data_file = hub_dir / "bert_tf_tiny_test" / "1" / "variables" / "variables.data-00000-of-00001"
    size = data_file.stat().st_size
    os.truncate(data_file, size // 2)
    result = start_user("", str(hub_dir), "bert_tf_tiny_test", cwd=str(tmp_path), own_site=True)
    assert result.returncode == 1
    assert result.stderr.strip().splitlines()[-1].startswith(
        f"bert_tf_hub_names.DamagedModelError: The bert_tf model 'bert_tf_tiny_test' is "
        f"damaged: version 1 at {data_file.parents[1]} is not as its install wrote it "
        f"(variables/variables.data-00000-of-00001 has {size // 2} bytes, not {size}); "
        f"installing it again adds a version that takes this one's place. Install it ")


def test_start_up_loads_only_the_hook(tmp_path):
    # This environment's own install: its .pth line runs at every start-up, and must cost
    # nothing to processes that never import tensorflow_hub.
    result = subprocess.run(
        [sys.executable, "-c", "import json, sys; print(json.dumps([sorted(sys.modules), "
         "[type(finder).__name__ for finder in sys.meta_path]]))"],
        capture_output=True, text=True, timeout=60, cwd=str(tmp_path))
    modules, finders = json.loads(result.stdout)
    assert "bert_tf_hub_names" in modules and "_PostImportFinder" in finders
    heavy = {"tensorflow", "tensorflow_hub", "keras", "numpy", "bert_tf"}
    assert heavy.isdisjoint(name.split(".")[0] for name in modules)


def test_the_real_minilm_by_name_matches_transformers(tmp_path):
    model_dir = minilm_dir()
    with np.load(os.path.join(REPO_ROOT, "tests", "reference", "minilm_reference.npz")) as data:
        reference = {key: data[key] for key in data.files}
    hub_dir = str(tmp_path / "hub")
    result = run_tool("install_hub_model.py", f"--init_checkpoint={model_dir}",
                      "--name=bert_tf_L6_H384_A12", env={HUB_DIR_ENV: hub_dir})
    assert result.returncode == 0, result.stderr
    # Sentences without a second segment, packed by the installed preprocessor at length 128.
    single = [i for i, text_b in enumerate(reference["text_b"]) if not text_b]
    texts = [str(reference["text_a"][i]) for i in single]
    report = run_user("", hub_dir, "bert_tf_L6_H384_A12", texts=texts, cwd=str(tmp_path),
                      own_site=True)
    assert report["bert_tf_imported"] == []
    np.testing.assert_array_equal(report["input_word_ids"], reference["input_word_ids"][single])
    np.testing.assert_allclose(report["pooled_output"], reference["pooled_output"][single],
                               rtol=0, atol=1e-4)
    assert report["trained"] == report["encoder_weights"] > 0


def test_a_find_spec_probe_before_the_import_does_not_use_the_hook_up(tmp_path):
    result = subprocess.run(
        [sys.executable, "-c", "import importlib.util, sys\n"
         "assert importlib.util.find_spec('tensorflow_hub') is not None\n"
         "import tensorflow_hub\n"
         "from tensorflow_hub import registry\n"
         "print(type(registry.resolver._impls[-1]).__module__)"],
        capture_output=True, text=True, timeout=300, cwd=str(tmp_path), env={**os.environ, **ENV})
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.split() == ["bert_tf_hub_names"]
