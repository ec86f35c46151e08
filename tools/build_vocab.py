"""Runs bert_tf.cli.build_vocab (installed as bert-tf-build-vocab)."""

from bert_tf.cli.build_vocab import run

# Worker processes started with "spawn" import this file again: only the program runs the tool.
if __name__ == "__main__":
    run()
