"""`truncated_normal`: BERT's weight initializer, a new instance for every weight.

Keras 3 draws an unseeded initializer's seed once, when the instance is made, so every call of
one instance returns the same values for the same shape (and the same leading values for a
larger one). Shared by the weights of a layer, it started the query, key and value kernels of
every layer equal, the feed-forward's and attention output's kernels with the same leading
values, and the position and token-type embeddings as copies of the word embeddings' first
rows. Google's BERT draws each weight from its own stream (`create_initializer` per variable);
so does this, from Keras' seeded Python generator (`keras.utils.set_random_seed` makes runs
repeatable).

Example:
    >>> query = keras.layers.Dense(768, kernel_initializer=truncated_normal(0.02))
    >>> key = keras.layers.Dense(768, kernel_initializer=truncated_normal(0.02))
"""

import keras


def truncated_normal(stddev):
    """A new `TruncatedNormal(stddev=stddev)` initializer (its own seed): one per weight."""
    return keras.initializers.TruncatedNormal(stddev=stddev)
