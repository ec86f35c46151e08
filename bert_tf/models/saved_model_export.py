"""`SavedModelExport`: Keras' `Model.export` for this package's models, as a Keras user calls it.

Keras' own export failed or gave a SavedModel TF Serving may not load, on three counts:
* without `input_signature` it infers one from the first call's shapes, which a model built in
  `__init__` never records ("The model provided has never called");
* an endpoint must return tensors, and the encoder's `encoder_outputs` is a list ("Got a
  non-Tensor value [...] for key 'encoder_outputs'");
* traced outside `portable_graphs()`, a bfloat16 model on a CPU with AMX served an
  XLA-compiled GELU, which TF Serving binaries without XLA cannot run.

Example:
    >>> encoder.export("/tmp/encoder")
    >>> tf.saved_model.load("/tmp/encoder").serve(inputs)["encoder_outputs_0"]
"""

import keras
import tensorflow as tf

from bert_tf.layers.portable_graphs import portable_graphs

_FORMAT = "tf_saved_model"
_ENDPOINT = "serve"  # what Keras' export names it, and keras.layers.TFSMLayer calls by default


def flat_outputs(outputs):
    """A dict of outputs with each list value `key` numbered `key_0`, `key_1`...: SavedModel
    signatures return a flat dict of tensors.

    Example:
        >>> sorted(flat_outputs({"pooled_output": p, "encoder_outputs": [a, b]}))
        ['encoder_outputs_0', 'encoder_outputs_1', 'pooled_output']
    """
    flat = {}
    for key, value in outputs.items():
        if isinstance(value, (list, tuple)):
            flat.update({f"{key}_{i}": item for i, item in enumerate(value)})
        else:
            flat[key] = value
    return flat


def with_default_output(outputs):
    """An encoder's outputs with `default` (= `pooled_output`) added, as TF Hub's BERT encoders
    return them.

    Example:
        >>> sorted(with_default_output({"pooled_output": p, "sequence_output": s}))
        ['default', 'pooled_output', 'sequence_output']
    """
    return {**outputs, "default": outputs["pooled_output"]}


def input_specs(keys, rank=2):
    """`{key: int32 TensorSpec}` of `rank` dimensions, the models' input dict. Every dimension
    is dynamic: one SavedModel serves every batch size and seq_length a user packs."""
    return {key: tf.TensorSpec([None] * rank, tf.int32, name=key) for key in keys}


class SavedModelExport:
    """Mixin of a Keras model: `export(path)` writes Keras' SavedModel (`serve`, also as the
    `serving_default` signature) with the model's `export_input_signature()` by default, its
    outputs as `export_outputs`, traced in `portable_graphs()`. Other formats are Keras'
    own."""

    def export_input_signature(self):
        """The `input_signature` of `export` when none is given."""
        raise NotImplementedError

    def export_outputs(self, outputs):
        """What `serve` returns for the model's `outputs`: `flat_outputs`."""
        return flat_outputs(outputs)

    def export(self, filepath, format=_FORMAT, verbose=None, input_signature=None, **kwargs):
        """Keras' `Model.export`; `serve(inputs)` returns the outputs dict, lists numbered.

        Example:
            >>> classifier.export("/tmp/classifier")       # serve(inputs dict) -> logits
            >>> tf.saved_model.load("/tmp/classifier").serve(inputs)["logits"]
        """
        if input_signature is None:
            input_signature = self.export_input_signature()
        with portable_graphs():
            if format != _FORMAT:
                return super().export(filepath, format=format, verbose=verbose,
                                      input_signature=input_signature, **kwargs)
            archive = keras.export.ExportArchive()
            archive.track(self)
            archive.add_endpoint(
                _ENDPOINT, lambda inputs: self.export_outputs(self(inputs, training=False)),
                input_signature, **kwargs)
            # Keras' default: the endpoints are printed.
            archive.write_out(filepath, verbose=True if verbose is None else verbose)
