"""`backing_variables`: the `tf.Variable`s behind Keras 3 variables, what a SavedModel for TF
Serving has to track.

A Keras 3 variable saves as a copy: `keras.Variable._export_to_saved_model_graph` maps it to a
new `tf.Variable` (`Variable_<k>` in the SavedModel), and the SavedModel's checkpoint restores
into those copies, while the signatures read the original handles (`classifier/kernel`, ...).
`tf.saved_model.load` links the two again, but the session loader TF Serving runs (restore op,
then the signature's tensors) leaves the handles the signatures read uninitialized: every
request failed with FAILED_PRECONDITION "Could not find variable classifier/bias" under the
session loaders of TF 2.12, 2.15 and 2.21 (keras-team/keras#19274). Tracked as the
`tf.Variable`s themselves, each weight is saved once, restored where the signatures read it.

Example:
    >>> root.model_variables = backing_variables(model.variables)
    >>> tf.saved_model.save(root, export_dir, signatures=signatures)
"""

import keras


def backing_variables(variables):
    """`variables` with every Keras variable replaced by the `tf.Variable` holding its value
    (outside an autocast scope `keras.Variable.value` is that `tf.Variable`)."""
    return [variable.value if isinstance(variable, keras.Variable) else variable
            for variable in variables]
