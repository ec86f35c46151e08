"""The command-line tools, installed as console scripts `bert-tf-<tool>` (and run by the thin
`tools/<tool>.py` scripts of a checkout). One module per tool, each with `run()`; the flag
groups several tools share are in `fine_tuning_flags`; `app.run_tool` is the entry point they
all go through (help, one-line errors).

    build_vocab              a WordPiece vocab.txt from text files
    convert_checkpoint       Google / Hugging Face checkpoints to this package's
    create_pretraining_data  text to pre-training TFRecords
    encoder_demo             an encoder from a config on random ids
    export_savedmodel        SavedModels for TF Serving / TF Hub
    install_hub_model        an encoder under a short hub.KerasLayer name
    run_classifier           GLUE fine-tuning
    run_multiple_choice      SWAG-format multiple choice
    run_ner                  CoNLL-2003 named-entity recognition
    run_pretraining          masked LM + next sentence pre-training
    run_squad                SQuAD v1.1 / v2.0
    serve                    TF Serving's gRPC and REST APIs, locally
"""

import os

# TensorFlow reads this once, when it loads, and every tool imports it after this line: its
# C++ INFO and WARNING lines (CPU feature notices, "failed call to cuInit" on machines without
# a GPU) stay off the console. The user's own setting wins.
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
