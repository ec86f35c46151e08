"""Runs bert_tf.cli.serve (installed as bert-tf-serve)."""

from bert_tf.cli.serve import run

# Worker processes started with "spawn" import this file again: only the program runs the tool.
if __name__ == "__main__":
    run()
