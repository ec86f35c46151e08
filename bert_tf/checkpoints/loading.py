"""Assigning arrays keyed by Google names to Keras variables, all-or-nothing.

Example (a pre-training model loading Google's heads):
    >>> weights = read_weights("uncased_L-12_H-768_A-12/bert_model.ckpt")
    >>> assign_weights([
    ...     (mlm.transform.kernel, "cls/predictions/transform/dense/kernel"),
    ...     (nsp.dense.kernel, "cls/seq_relationship/output_weights", np.transpose),
    ... ], weights.arrays)
"""

import numpy as np

from bert_tf.checkpoints import names as names_lib


# Problems a message lists by name; the rest are counted. A config that does not describe the
# checkpoint made the one-line error of a fine-tuning tool 6 KB long (39 shapes of a 2-layer
# config against MiniLM); the error's attributes keep every one.
LISTED = 5


def listed(items, limit=LISTED):
    """The first `limit` of `items` and how many more.

    Example:
        >>> listed(["a", "b", "c"], 2)
        ['a', 'b', '... and 1 more']
    """
    items = list(items)
    return items[:limit] + ([f"... and {len(items) - limit} more"] if len(items) > limit else [])


class CheckpointMismatchError(ValueError):
    """The checkpoint does not fit the model. Counts every problem at once and names the first
    `LISTED` of each kind.

    Attributes:
      missing: Google names the model needs and the checkpoint lacks.
      mismatched: `(name, expected_shape, found_shape)` for every shape mismatch.
    """

    def __init__(self, missing, mismatched, source=None, hint=None):
        self.missing = list(missing)
        self.mismatched = list(mismatched)
        self.source = source
        lines = [f"Checkpoint{f' {source}' if source else ''} does not fit the model: "
                 f"{len(self.missing)} missing, {len(self.mismatched)} with the wrong shape."]
        if self.missing:
            lines.append(f"Missing ({len(self.missing)}):")
            lines += [f"  {name}" for name in listed(self.missing)]
        if self.mismatched:
            lines.append(f"Wrong shape ({len(self.mismatched)}; name: expected, found):")
            lines += [f"  {line}" for line in listed(
                f"{name}: expected {tuple(expected)}, found {tuple(found)}"
                for name, expected, found in self.mismatched)]
        lines.append(hint or "Is the config (bert_config.json / --bert_config_file) the one "
                             "this checkpoint was trained with?")
        super().__init__("\n".join(lines))


def assign_weights(pairs, arrays, source=None, hint=None):
    """Assigns `arrays[name]` to each variable of `pairs`, or nothing at all.

    Args:
      pairs: an iterable of `(variable, google_name)` or `(variable, google_name, transform)`,
        where `transform` is a callable applied to the array first (e.g. `np.transpose` to put
        Google's `cls/seq_relationship/output_weights` [2, H] into a Keras `Dense(2)` kernel
        [H, 2]). Variables are Keras 3 or `tf.Variable`s.
      arrays: a mapping from Google name to array, e.g. `read_weights(path).arrays` (Google's
        layout, float32).
      source: named in the error message.
      hint: what the error message ends with (default: a question about the config).

    Returns:
      The list of Google names assigned, in `pairs` order.

    Raises:
      CheckpointMismatchError: listing every name absent from `arrays` and every shape
        mismatch; no variable is changed then.
    """
    plan, missing, mismatched = [], [], []
    for pair in pairs:
        variable, name = pair[0], pair[1]
        transform = pair[2] if len(pair) > 2 else None
        if name not in arrays:
            missing.append(name)
            continue
        value = np.asarray(arrays[name])
        if transform is not None:
            value = np.asarray(transform(value))
        expected = tuple(variable.shape)
        if tuple(value.shape) != expected:
            mismatched.append((name, expected, tuple(value.shape)))
            continue
        plan.append((variable, name, value))
    if missing or mismatched:
        raise CheckpointMismatchError(missing, mismatched, source=source, hint=hint)
    for variable, _, value in plan:
        variable.assign(value.astype(_numpy_dtype(variable)))
    return [name for _, name, _ in plan]


def _numpy_dtype(variable):
    dtype = variable.dtype
    name = getattr(dtype, "name", dtype)
    if name == "bfloat16":
        import ml_dtypes
        return ml_dtypes.bfloat16
    return np.dtype(name)


def load_encoder_weights(encoder, arrays, source=None):
    """Assigns every `BertEncoder` weight from `arrays` (Google names, Google layout).

    Extra arrays (heads, layers beyond the encoder's) are left alone; the caller reports them.
    Returns the assigned names. Raises `CheckpointMismatchError` listing all problems.
    """
    return assign_weights([(variable, name) for name, variable in
                           names_lib.encoder_weights(encoder)], arrays, source=source)
