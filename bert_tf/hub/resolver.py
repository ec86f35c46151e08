"""A tensorflow_hub resolver for bert_tf's short model names (`hub.KerasLayer("bert_tf_base")`).

`register_resolver()` adds `ModelNameResolver` to tensorflow_hub's registry, ahead of its own
resolvers: a handle such as "bert_tf_base" (that is not an existing local path) resolves to the
latest version of that model in the local model directory (`model_dir.hub_dir()`), and never
reaches the network. A name that is not installed raises `ModelNotInstalledError`, which says
how to install it.

Example:
    >>> register_resolver()
    >>> encoder = hub.KerasLayer("bert_tf_base", trainable=True)
    >>> preprocess = hub.KerasLayer("bert_tf_base_preprocess")
"""

import os

from tensorflow_hub import registry, resolver

from bert_tf.export.serving_layout import latest_version_dir
from bert_tf.hub import model_dir


class ModelNotInstalledError(FileNotFoundError):
    """A bert_tf model name with no exported model in the local model directory."""


def _install_hint(name):
    encoder_name = name[:-len(model_dir.PREPROCESS_SUFFIX)] \
        if name.endswith(model_dir.PREPROCESS_SUFFIX) else name
    return (f"Install it (with {encoder_name}{model_dir.PREPROCESS_SUFFIX}) from a checkpoint "
            f"and its vocab.txt: python tools/install_hub_model.py --name={encoder_name} "
            f"--init_checkpoint=<checkpoint dir or prefix> [--vocab_file=<vocab.txt>] "
            f"[--nodo_lower_case], or bert_tf.hub.install_model(...). Set {model_dir.HUB_DIR_ENV} "
            f"to use another model directory.")


def resolve_model_name(name):
    """The SavedModel directory of the installed model `name` (its highest version)."""
    base_path = model_dir.model_base_path(name)
    path = latest_version_dir(base_path)
    if path is None:
        raise ModelNotInstalledError(
            f"The bert_tf model {name!r} is not installed: {base_path} holds no exported "
            f"version (model directory: ${model_dir.HUB_DIR_ENV} or "
            f"{model_dir.DEFAULT_HUB_DIR}). {_install_hint(name)}")
    return path


class ModelNameResolver(resolver.Resolver):
    """Resolves "bert_tf_<name>" handles to installed models; an existing local path of that
    name is left to tensorflow_hub's own path resolver."""

    def is_supported(self, handle):
        return model_dir.is_model_name(handle) and not os.path.exists(handle)

    def __call__(self, handle):
        return resolve_model_name(handle)


_registered = []


def register_resolver():
    """Adds `ModelNameResolver` to tensorflow_hub's resolvers once (later calls do nothing).
    Resolvers registered last are asked first, so it runs before the built-in ones."""
    if not _registered:
        _registered.append(ModelNameResolver())
        registry.resolver.add_implementation(_registered[0])
