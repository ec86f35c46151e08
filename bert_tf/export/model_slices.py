"""Running the model of an export on a request's sequences a slice at a time, in the graph, so
that what one call allocates is bounded whatever the request holds.

TF Serving hands a signature the whole request: without `--enable_batching` as it comes, and
with batching as one batch of rows, whatever sequences a row makes (a SQuAD question reads its
context in up to `max_windows` windows, a multiple-choice row packs one sequence per choice).
The encoder's activations grow with the sequences of a call (BERT-base at 384 tokens: 7 MB of
attention scores per sequence and layer), while the request's own tensors and the outputs grow
~1,000x slower (a few KB per sequence: ids, logits). So the exports run the model on at most
`max_tokens` packed positions at a time (`max(1, max_tokens // length)` sequences of `length`
tokens) and concatenate the slices' outputs; a request that fits runs in one call, as before.
The slices run one after the other (a `tf.while_loop` of one parallel iteration), so that one
slice's activations are freed before the next one's are made.

Example:
    >>> (logits,) = run_in_slices(lambda part: (model(part)["logits"],), inputs,
    ...                           max_tokens=4096, output_specs=[tf.TensorSpec([None, 2])])
"""

# 32 sequences of 128 tokens, the batch tools/serve.py runs at its defaults: the matmuls of a
# slice are as large as a full batch's (4,096 rows), so slicing costs no matmul efficiency.
DEFAULT_MAX_TOKENS_PER_CALL = 4096


def run_in_slices(run, inputs, max_tokens, output_specs):
    """`run(inputs)` on slices of the rows of `inputs` (a dict of `[rows, length, ...]`
    tensors) of at most `max(1, max_tokens // length)` rows each, its outputs (a tuple of
    tensors with the rows as dimension 0, one per `output_specs` entry, which gives the dtype
    and the shape of a slice's output) concatenated in order."""
    import tensorflow as tf  # here: export_savedmodel reads the default before TensorFlow loads

    first = next(iter(inputs.values()))
    rows, length = tf.shape(first)[0], tf.shape(first)[1]
    rows_per_call = tf.maximum(1, max_tokens // tf.maximum(length, 1))

    def at_once():
        return tuple(run(inputs))

    def in_slices():
        count = (rows + rows_per_call - 1) // rows_per_call
        outputs = tuple(tf.TensorArray(spec.dtype, size=count, infer_shape=False,
                                       element_shape=spec.shape) for spec in output_specs)

        def run_slice(index, outputs):
            begin = index * rows_per_call
            part = {name: value[begin:begin + rows_per_call] for name, value in inputs.items()}
            return index + 1, tuple(array.write(index, value)
                                    for array, value in zip(outputs, run(part), strict=True))

        _, outputs = tf.while_loop(lambda index, _: index < count, run_slice, (0, outputs),
                                   parallel_iterations=1)
        return tuple(array.concat() for array in outputs)

    results = tf.cond(rows <= rows_per_call, at_once, in_slices)
    for result, spec in zip(results, output_specs, strict=True):
        result.set_shape(spec.shape)
    return results
