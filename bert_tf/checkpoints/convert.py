"""Converting a Google or Hugging Face BERT checkpoint into this package's TF2 checkpoint.

Example:
    >>> result = convert_checkpoint("uncased_L-12_H-768_A-12/bert_model.ckpt", "/tmp/bert_base")
    >>> result.prefix
    '/tmp/bert_base/ckpt-1'
"""

import dataclasses

from bert_tf.checkpoints import loading, sources, tf2
from bert_tf.text.vocab_size import check_vocab_size


@dataclasses.dataclass
class ConversionResult:
    """What `convert_checkpoint` wrote: the output `prefix`, the source `format` and path, the
    `config`, the number of encoder weights, the head names carried over, the copied vocab
    (or None), the casing recorded (or None), the source tensors `ignored` (optimizer
    slots...) and `unused` (unknown)."""

    prefix: str
    format: str
    source: str
    config: object
    encoder_weights: int
    parameters: int
    heads: list
    vocab_file: str
    do_lower_case: bool
    ignored: list
    unused: list


def convert_checkpoint(checkpoint, output_dir, bert_config_file=None, do_lower_case=None):
    """Reads `checkpoint` (any format `detect_format` knows), checks that the config leaves
    out none of its layers (`sources.check_no_layer_left_out`), that every encoder weight is
    there with the right shape (else `CheckpointMismatchError` listing all problems) and
    that the config embeds every token of the vocab.txt beside it (`check_vocab_size`), and
    writes it with its heads, `bert_config.json`, `vocab.txt` and the casing
    (`tokenizer_config.json`) into `output_dir`, which must be new or empty (checked before
    anything is read). `do_lower_case` None records the casing stated beside `checkpoint`
    (`sources.stated_lower_case`), or none when none is."""
    from bert_tf.models.bert_encoder import BertEncoder

    tf2.check_new_output_dir(output_dir)
    config = sources.read_config(checkpoint, bert_config_file)
    sources.check_no_layer_left_out(checkpoint, config, bert_config_file)
    weights = sources.read_weights(checkpoint, config=config)
    if weights.vocab_file:
        check_vocab_size(weights.config, weights.vocab_file,
                         bert_config_file or f"the config of {checkpoint}")
    if do_lower_case is None:
        do_lower_case = sources.stated_lower_case(checkpoint)
    encoder = BertEncoder(weights.config)
    loaded = loading.load_encoder_weights(encoder, weights.arrays, source=weights.source)
    heads = weights.heads
    prefix = tf2.save_checkpoint(output_dir, encoder, heads=heads, vocab_file=weights.vocab_file,
                                 do_lower_case=do_lower_case)
    return ConversionResult(prefix=prefix, format=weights.format, source=weights.source,
                            config=weights.config, encoder_weights=len(loaded),
                            parameters=encoder.count_params(), heads=sorted(heads),
                            vocab_file=weights.vocab_file, do_lower_case=do_lower_case,
                            ignored=weights.ignored, unused=weights.unused)
