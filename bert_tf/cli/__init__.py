"""The command-line tools, installed as console scripts `bert-tf-<tool>` (and run by the thin
`tools/<tool>.py` scripts of a checkout). One module per tool, each with `run()`; the flag
groups several tools share are in `fine_tuning_flags`; `app.run_tool` is the entry point they
all go through (help, one-line errors, library warnings off), and `quiet_tensorflow` keeps
TensorFlow's start-up lines off their console.

    build_vocab              a WordPiece vocab.txt from text files
    convert_checkpoint       Google / Hugging Face checkpoints to this package's
    create_pretraining_data  text to pre-training TFRecords
    encoder_demo             a pre-trained encoder's sentence similarities
    export_savedmodel        SavedModels for TF Serving / TF Hub
    install_hub_model        an encoder under a short hub.KerasLayer name
    run_classifier           GLUE fine-tuning
    run_multiple_choice      SWAG-format multiple choice
    run_ner                  CoNLL-2003 named-entity recognition
    run_pretraining          masked LM + next sentence pre-training
    run_squad                SQuAD v1.1 / v2.0
    serve                    TF Serving's gRPC and REST APIs, locally
"""

import sys

from bert_tf.cli import quiet_tensorflow

# Every tool imports TensorFlow after this line: its start-up lines stay off the console
# unless --verbosity=1 or more asks for them.
quiet_tensorflow.install(quiet_tensorflow.verbosity_in(sys.argv))
