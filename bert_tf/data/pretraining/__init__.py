"""Pre-training data: from text to the batches `BertPretrainer` trains on.

    corpus                   reading text in bounded chunks of whole documents
    chunk_size               those chunks' default size (without TensorFlow)
    prose                    prose (books) to one sentence per line
    stdlib_corpus            the standard library's docstrings as a small corpus
    instances                documents to BERT instances (Google's algorithm)
    masking                  masked-LM masking
    records_writer           text files to TFRecords (`create_pretraining_data`'s engine)
    records_dataset          reading those TFRecords into batches
    dynamic_masking_dataset  batches straight from text, masked anew each epoch
    inputs                   a corpus to text files, vocabulary and records in one call
"""
