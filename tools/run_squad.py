"""Runs bert_tf.cli.run_squad (installed as bert-tf-run-squad)."""

from bert_tf.cli.run_squad import run

# Worker processes started with "spawn" import this file again: only the program runs the tool.
if __name__ == "__main__":
    run()
