"""Runs bert_tf.cli.run_classifier (installed as bert-tf-run-classifier)."""

from bert_tf.cli.run_classifier import run

# Worker processes started with "spawn" import this file again: only the program runs the tool.
if __name__ == "__main__":
    run()
