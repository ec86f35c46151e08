"""bert_tf: BERT for TensorFlow 2 / Keras 3, with in-graph tf.text preprocessing."""

from setuptools import find_packages, setup

setup(
    name="bert_tf",
    version="0.1.0",
    description="BERT (Devlin et al., 2019) for TensorFlow 2 and Keras 3",
    long_description=open("README.md", encoding="utf-8").read(),
    long_description_content_type="text/markdown",
    python_requires=">=3.11",
    packages=find_packages(include=["bert_tf", "bert_tf.*"]),
    install_requires=[
        "tensorflow>=2.20,<2.22",
        "tensorflow-text>=2.20,<2.22",
        "keras>=3.15",
        "absl-py",
        "numpy",
        "safetensors",
    ],
    extras_require={
        "test": ["pytest", "tokenizers"],
        "hub": ["tensorflow-hub", "tf-keras>=2.20,<2.22"],
        "serving": ["tensorflow-serving-api>=2.20,<2.22", "grpcio"],
        "bench": ["matplotlib"],
    },
)
