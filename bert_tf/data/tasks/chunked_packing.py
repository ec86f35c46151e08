"""`pack_in_chunks`: in-graph packing of an unbatched dataset, many texts per call."""

import tensorflow as tf

# Examples per call of the packing function: tf.text's ops cost much less per text on a batch.
CHUNK_SIZE = 256


def pack_in_chunks(dataset, pack, chunk_size=CHUNK_SIZE):
    """`pack` (a function of a batch of elements, e.g. a `BertPreprocessor` call) applied to
    chunks of `chunk_size` elements of the unbatched `dataset`, unbatched again. A known
    cardinality is kept (`unbatch` alone forgets it; progress bars and `padded_batches` want it).

    Example:
        >>> texts = tf.data.Dataset.from_tensor_slices(["a b", "c"])
        >>> features = pack_in_chunks(texts, preprocessor)      # one dict of ids per text
        >>> int(features.cardinality())
        2
    """
    packed = dataset.batch(chunk_size).map(pack, num_parallel_calls=tf.data.AUTOTUNE).unbatch()
    count = dataset.cardinality()
    if count >= 0:
        packed = packed.apply(tf.data.experimental.assert_cardinality(count))
    return packed
