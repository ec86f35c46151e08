"""Runs bert_tf.cli.export_savedmodel (installed as bert-tf-export-savedmodel)."""

from bert_tf.cli.export_savedmodel import run

# Worker processes started with "spawn" import this file again: only the program runs the tool.
if __name__ == "__main__":
    run()
