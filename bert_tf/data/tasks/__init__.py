"""Fine-tuning task data: files to packed BERT inputs, and predictions back.

    glue, glue_tasks         GLUE TSV files and each task's columns and labels
    squad, squad_windows     SQuAD JSON to windowed span-labeling features
    conll, tagging_windows   CoNLL-2003 NER files and word-level tagging windows
    swag                     SWAG-format multiple choice
    dynamic_padding          batches trimmed to their longest example, length buckets
    chunked_packing          in-graph packing of many texts per call
"""
