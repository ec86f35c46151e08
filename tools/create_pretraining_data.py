"""Runs bert_tf.cli.create_pretraining_data (installed as bert-tf-create-pretraining-data)."""

from bert_tf.cli.create_pretraining_data import run

# Worker processes started with "spawn" import this file again: only the program runs the tool.
if __name__ == "__main__":
    run()
