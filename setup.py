"""bert_tf: BERT for TensorFlow 2 / Keras 3, with in-graph tf.text preprocessing."""

import os

from setuptools import find_packages, setup
from setuptools.command.build_py import build_py
from setuptools.command.editable_wheel import editable_wheel

# Installed into site-packages, where Python runs its import line at start-up: a finder that
# registers bert_tf's model names with tensorflow_hub whenever a process imports it
# (bert_tf_hub_names.py says why and how).
HUB_HOOK_PTH = "bert_tf_hub_names.pth"
HUB_HOOK_LINE = "import bert_tf_hub_names; bert_tf_hub_names.install()\n"


def _write_hub_hook(directory):
    with open(os.path.join(directory, HUB_HOOK_PTH), "w", encoding="utf-8") as f:
        f.write(HUB_HOOK_LINE)


class BuildPyWithHubHook(build_py):
    """A regular install: the .pth goes to the root of the wheel, i.e. site-packages."""

    def run(self):
        super().run()
        _write_hub_hook(self.build_lib)

    def get_outputs(self, *args, **kwargs):
        return super().get_outputs(*args, **kwargs) + [os.path.join(self.build_lib, HUB_HOOK_PTH)]


class EditableWheelWithHubHook(editable_wheel):
    """An editable install (`pip install -e`): setuptools builds its wheel from the unpacked
    directory, not from build_lib, so the .pth is added there."""

    def _run_build_commands(self, dist_name, unpacked_wheel, build_lib, tmp_dir):
        outputs = super()._run_build_commands(dist_name, unpacked_wheel, build_lib, tmp_dir)
        _write_hub_hook(unpacked_wheel)
        return outputs


setup(
    name="bert_tf",
    version="0.1.0",
    description="BERT (Devlin et al., 2019) for TensorFlow 2 and Keras 3",
    long_description=open("README.md", encoding="utf-8").read(),
    long_description_content_type="text/markdown",
    python_requires=">=3.11",
    # official_configs/ stays at the top of the checkout and is installed as
    # bert_tf/official_configs, where BertConfig.from_name looks first.
    packages=find_packages(include=["bert_tf", "bert_tf.*"]) + ["bert_tf.official_configs"],
    package_dir={"bert_tf.official_configs": "official_configs"},
    # bert_tf/text/codepoint_tables.npz: the code point tables, built by codepoint_table.py.
    package_data={"bert_tf.official_configs": ["*.json"],
                  "bert_tf.text": ["codepoint_tables.npz"]},
    # Top-level: importable without the bert_tf package (bert_tf_post_import.py says why).
    py_modules=["bert_tf_hub_names", "bert_tf_post_import"],
    cmdclass={"build_py": BuildPyWithHubHook, "editable_wheel": EditableWheelWithHubHook},
    install_requires=[
        "tensorflow>=2.20,<2.22",
        "tensorflow-text>=2.20,<2.22",
        # The contract's floor; .ci/run tests it on TensorFlow 2.20 (2.21 itself needs 3.12).
        "keras>=3.10",
        "absl-py",
        "numpy",
        "safetensors",
        "tensorflow-datasets",
        # tensorflow-datasets (4.9.10) imports it for catalog builders such as squad, but
        # declares it only for Python < 3.9.
        "importlib_resources",
    ],
    # The tools, as bert-tf-<tool> (tools/<tool>.py runs the same code from a checkout).
    entry_points={"console_scripts": [
        "bert-tf-build-vocab = bert_tf.cli.build_vocab:run",
        "bert-tf-convert-checkpoint = bert_tf.cli.convert_checkpoint:run",
        "bert-tf-create-pretraining-data = bert_tf.cli.create_pretraining_data:run",
        "bert-tf-encoder-demo = bert_tf.cli.encoder_demo:run",
        "bert-tf-export-savedmodel = bert_tf.cli.export_savedmodel:run",
        "bert-tf-install-hub-model = bert_tf.cli.install_hub_model:run",
        "bert-tf-run-classifier = bert_tf.cli.run_classifier:run",
        "bert-tf-run-multiple-choice = bert_tf.cli.run_multiple_choice:run",
        "bert-tf-run-ner = bert_tf.cli.run_ner:run",
        "bert-tf-run-pretraining = bert_tf.cli.run_pretraining:run",
        "bert-tf-run-squad = bert_tf.cli.run_squad:run",
        "bert-tf-serve = bert_tf.cli.serve:run",
    ]},
    extras_require={
        "test": ["pytest", "pytest-xdist", "tokenizers"],
        "hub": ["tensorflow-hub", "tf-keras>=2.20,<2.22"],
        "serving": ["tensorflow-serving-api>=2.20,<2.22", "grpcio"],
        "bench": ["matplotlib"],
    },
)
