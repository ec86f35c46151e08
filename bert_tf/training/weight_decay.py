"""`NoWeightDecayPattern`: the variables an optimizer does not decay, named by a pattern that is
part of the optimizer's config.

Keras' `exclude_from_weight_decay` is not: a model compiled with it and saved as `.keras` came
back from `keras.models.load_model` decaying every variable, LayerNorm's and the biases
included (BERT excludes both), so that resuming a fine-tuning trained another model.

Example:
    >>> optimizer = FusedAdamW(learning_rate=1e-4, weight_decay=0.01,
    ...                        no_weight_decay=r"layer_norm|bias")
    >>> optimizer.get_config()["no_weight_decay"]
    'layer_norm|bias'
"""

import re


class NoWeightDecayPattern:
    """Mixin of a Keras optimizer: `no_weight_decay`, a regular expression searched in each
    variable's path ("bert_encoder/layer_0/attention/output/layer_norm/gamma"), names the
    variables without weight decay, besides those of `exclude_from_weight_decay`."""

    def __init__(self, *args, no_weight_decay=None, **kwargs):
        super().__init__(*args, **kwargs)
        if no_weight_decay is not None:
            re.compile(no_weight_decay)  # a bad pattern fails here, not in the first step
        self.no_weight_decay = no_weight_decay

    def _use_weight_decay(self, variable):
        # A tf.Variable (which optimizers also take) has no path: its name is one.
        path = getattr(variable, "path", variable.name)
        if self.no_weight_decay and re.search(self.no_weight_decay, path):
            return False
        return super()._use_weight_decay(variable)

    def get_config(self):
        return {**super().get_config(), "no_weight_decay": self.no_weight_decay}
