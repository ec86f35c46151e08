"""Runs bert_tf.cli.run_ner (installed as bert-tf-run-ner)."""

from bert_tf.cli.run_ner import run

# Worker processes started with "spawn" import this file again: only the program runs the tool.
if __name__ == "__main__":
    run()
