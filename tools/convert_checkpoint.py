"""Runs bert_tf.cli.convert_checkpoint (installed as bert-tf-convert-checkpoint)."""

from bert_tf.cli.convert_checkpoint import run

# Worker processes started with "spawn" import this file again: only the program runs the tool.
if __name__ == "__main__":
    run()
