"""Runs bert_tf.cli.run_multiple_choice (installed as bert-tf-run-multiple-choice)."""

from bert_tf.cli.run_multiple_choice import run

# Worker processes started with "spawn" import this file again: only the program runs the tool.
if __name__ == "__main__":
    run()
