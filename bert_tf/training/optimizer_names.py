"""The names of the pre-training optimizers `optimizers.create_optimizer` makes, apart from it
and TensorFlow: run_pretraining's --optimizer offers them when it defines its flags, before
TensorFlow loads.

Example:
    >>> OPTIMIZERS
    ('adamw', 'lamb')
"""

OPTIMIZERS = ("adamw", "lamb")
