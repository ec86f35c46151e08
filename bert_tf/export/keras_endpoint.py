"""`serving_default` as Keras 3's `TFSMLayer(path, call_endpoint="serving_default")` calls it.

TFSMLayer calls its endpoint with one positional argument, the layer's inputs. A SavedModel
signature takes keyword arguments only, so TFSMLayer fails on it ("too many positional
arguments") unless the SavedModel also has an attribute of that name, which TFSMLayer prefers.
`keras_endpoint(signature)` is that attribute: the same computation, called with the dict of
named inputs, or, when the signature has a single input, with that tensor alone.

Example:
    >>> root.serving_default = keras_endpoint(signatures["serving_default"])
    >>> tf.saved_model.save(root, export_dir, signatures=signatures)
    >>> keras.layers.TFSMLayer(export_dir, call_endpoint="serving_default")(
    ...     {"text": tf.constant(["a gripping film"])})
"""

import tensorflow as tf


def keras_endpoint(signature):
    """A tf.function over the concrete function `signature`, traced for a dict of its inputs
    (and for the bare tensor when it has one input)."""
    positional, keywords = signature.structured_input_signature
    # A signature's inputs are named by its specs' names when it takes them positionally.
    specs = {spec.name: spec for spec in positional} if positional else dict(keywords)

    def endpoint(inputs):
        if not isinstance(inputs, dict):
            (name,) = specs
            inputs = {name: inputs}
        if positional:
            return signature(*(inputs[name] for name in specs))
        return signature(**inputs)

    function = tf.function(endpoint, autograph=False)
    function.get_concrete_function(specs)
    if len(specs) == 1:
        function.get_concrete_function(next(iter(specs.values())))
    return function
