"""Mixed precision by name, as the training tools' --mixed_precision takes it: the Keras dtype
policy of the encoder (None keeps float32 everywhere).

bfloat16 computes in bfloat16 with float32 variables: faster on CPUs with AMX/AVX512-BF16 and
on TPUs, and needs no loss scaling; float16 does need it (`PretrainingTrainer` adds dynamic loss
scaling for it).

Example:
    >>> BertEncoder(config, dtype=MIXED_PRECISION["bfloat16"])
"""

MIXED_PRECISION = {"float32": None, "bfloat16": "mixed_bfloat16", "float16": "mixed_float16"}
