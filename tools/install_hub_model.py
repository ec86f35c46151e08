"""Runs bert_tf.cli.install_hub_model (installed as bert-tf-install-hub-model)."""

from bert_tf.cli.install_hub_model import run

# Worker processes started with "spawn" import this file again: only the program runs the tool.
if __name__ == "__main__":
    run()
