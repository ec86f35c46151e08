"""Runs bert_tf.cli.run_pretraining (installed as bert-tf-run-pretraining)."""

from bert_tf.cli.run_pretraining import run

# Worker processes started with "spawn" import this file again: only the program runs the tool.
if __name__ == "__main__":
    run()
