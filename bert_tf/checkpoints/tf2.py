"""This package's own checkpoint format: reading its arrays, writing a converted checkpoint.

The object layout (keys `encoder`, `pretraining_heads`, `model`, ...) is described once, in
`layout.py`; this module reads the encoder and heads out of it by Google name and writes
converted checkpoints. Loading a model from any format: `restore.py`.

Example:
    >>> save_checkpoint("/tmp/mini", encoder, vocab_file="vocab.txt")
    '/tmp/mini/ckpt-1'
    >>> arrays, ignored, unused = read_arrays("/tmp/mini/ckpt-1", encoder.config)
"""

import json
import os

import numpy as np

from bert_tf import file_io
from bert_tf.checkpoints import layout


def _read_heads(graph):
    heads = {}
    for name in graph.child_names(layout.HEADS_PATH):
        key = graph.key(layout.heads_path(name))
        if key:
            heads[name] = np.asarray(graph.array(key), dtype=np.float32)
    return heads


def locate_encoder(graph, paths):
    """`(keys, missing, unused)`: tensor key per Google name found, names not found, and the
    variable keys under `encoder` that no encoder weight took."""
    keys = {name: graph.key(path) for name, path in paths.items()}
    missing = [name for name, key in keys.items() if key is None]
    keys = {name: key for name, key in keys.items() if key is not None}
    unused = sorted(graph.keys_under((layout.ENCODER_KEY,)) - set(keys.values()))
    return keys, missing, unused


def encoder_layer_count(prefix):
    """How many transformer layers the encoder in this package's checkpoint `prefix` holds,
    whatever a config says: the layers' container in the object graph (where the first and the
    second layer of a two-layer encoder differ) counts its children holding a layer's weight.

    Example:
        >>> encoder_layer_count("converted/minilm/ckpt-1")
        6
    """
    weight = "attention/self/query/kernel"
    paths = layout.encoder_paths_for_layers(2)
    first, second = (paths[f"bert/encoder/layer_{i}/{weight}"] for i in (0, 1))
    index = next(i for i, (a, b) in enumerate(zip(first, second)) if a != b)
    container, inside = first[:index], first[index + 1:]
    graph = layout.ObjectGraph(prefix)
    return sum(graph.key(container + (child,) + inside) is not None
               for child in graph.child_names(container))


def read_arrays(prefix, config):
    """`(arrays, ignored, unused)` of a bert_tf checkpoint, arrays keyed by Google name (the
    encoder's and, when present, the pre-training heads')."""
    graph = layout.ObjectGraph(prefix)
    keys, _, unused = locate_encoder(graph, layout.encoder_paths_for_layers(
        config.num_hidden_layers))
    arrays = {name: np.asarray(graph.array(key), dtype=np.float32) for name, key in keys.items()}
    arrays.update(_read_heads(graph))
    taken = set(keys.values()) | graph.keys_under((layout.HEADS_KEY,)) | set(unused)
    ignored = sorted(k for k in graph.shapes if k not in taken)
    return arrays, ignored, unused


def check_new_output_dir(output_dir, vocab_file=None):
    """Raises FileExistsError naming what `output_dir` holds unless it is missing or empty, so
    that writing a checkpoint there overwrites nothing, and PermissionError when it cannot be
    written (a read-only file system...). `vocab_file` may be there when it is
    `output_dir/vocab.txt` itself (it is kept as it is), and so may what a killed save left
    (`ckpt-N_temp/`, removed by the save).

    Example:
        >>> check_new_output_dir("mymodel")
        FileExistsError: mymodel is not empty (bert_config.json, vocab.txt): write the
        checkpoint into a new or empty directory
    """
    if os.path.exists(output_dir) and not os.path.isdir(output_dir):
        raise FileExistsError(f"{output_dir} is a file, not a directory: write the "
                              f"checkpoint into a new or empty directory")
    if unwritable := file_io.unwritable_path(output_dir):
        raise PermissionError(f"Cannot write into {output_dir}: {unwritable} is not writable; "
                              f"write the checkpoint into a directory you can write")
    if not os.path.isdir(output_dir):
        return
    kept = os.path.join(output_dir, layout.VOCAB_FILE)
    keeps_vocab = bool(vocab_file) and os.path.abspath(vocab_file) == os.path.abspath(kept)
    # What a killed save left is nobody's data: the save removes it (`layout.checkpoint_manager`).
    entries = sorted(name for name in os.listdir(output_dir)
                     if not (keeps_vocab and name == layout.VOCAB_FILE)
                     and not layout.is_interrupted_save(os.path.join(output_dir, name)))
    if entries:
        listed = ", ".join(entries[:5]) + (f" and {len(entries) - 5} more"
                                           if len(entries) > 5 else "")
        raise FileExistsError(f"{output_dir} is not empty ({listed}): write the checkpoint "
                              f"into a new or empty directory")


def save_checkpoint(output_dir, encoder, heads=None, vocab_file=None, do_lower_case=None):
    """Writes `encoder` (and `heads`, Google-named arrays) as this package's checkpoint.

    Writes `output_dir/ckpt-1.*`, the `checkpoint` state file and `write_model_files`' files
    (`bert_config.json`, a copy of `vocab_file`, the casing `do_lower_case` unless None).
    Refuses a directory that holds anything else (`check_new_output_dir`): nothing is
    overwritten. Returns the checkpoint prefix.
    """
    output_dir = os.fspath(output_dir)
    check_new_output_dir(output_dir, vocab_file)
    os.makedirs(output_dir, exist_ok=True)
    checkpoint = layout.training_checkpoint(encoder, heads={
        name: np.asarray(value, np.float32) for name, value in (heads or {}).items()})
    prefix = layout.checkpoint_manager(checkpoint, output_dir, max_to_keep=1).save()
    write_model_files(output_dir, encoder.config, vocab_file, do_lower_case)
    return prefix


def write_model_files(output_dir, config, vocab_file=None, do_lower_case=None):
    """Writes `bert_config.json` (of `config`), a copy of `vocab_file` and, unless
    `do_lower_case` is None, `tokenizer_config.json` stating the casing (Hugging Face's
    `{"do_lower_case": ...}`) into `output_dir` (created if needed): what makes the checkpoints
    there complete for every tool's `--init_checkpoint=output_dir`, casing included. A
    `vocab_file` already in place is left alone. Local or remote (`gs://...`) paths.

    Example:
        >>> write_model_files("/tmp/finetuned", encoder.config, "converted/vocab.txt", True)
    """
    file_io.makedirs(output_dir)
    config.to_json_file(os.path.join(output_dir, layout.CONFIG_FILE))
    if vocab_file:
        target = os.path.join(output_dir, layout.VOCAB_FILE)
        if os.path.abspath(vocab_file) != os.path.abspath(target):
            file_io.copy_file(vocab_file, target)
    if do_lower_case is not None:
        with file_io.open_file(os.path.join(output_dir, layout.TOKENIZER_CONFIG_FILE), "w") as f:
            json.dump({"do_lower_case": bool(do_lower_case)}, f, indent=2)
            f.write("\n")
