"""The default size of the text chunks `records_writer` turns into instances one at a time (see
`corpus`), apart from them and TensorFlow: create_pretraining_data's --chunk_size_mb defaults to
it when the tool defines its flags, before TensorFlow loads.

Example:
    >>> DEFAULT_CHUNK_BYTES / 2**20
    8.0
"""

# Text per chunk: 8 MB is about 2M word pieces, 16k sequences of 128 per copy, so about 160 MB
# of records in memory with dupe_factor 10, and thousands of documents to draw random next
# sentences from.
DEFAULT_CHUNK_BYTES = 8 << 20
