"""Runs bert_tf.cli.encoder_demo; --helpshort lists its flags."""

from bert_tf.cli.encoder_demo import run

# Worker processes started with "spawn" import this file again: only the program runs the tool.
if __name__ == "__main__":
    run()
