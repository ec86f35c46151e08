"""Evaluation results, written one way by every training job: `eval_results.json` in the job's
output directory (the metrics with the global step, keys sorted) and the numeric ones as
TensorBoard scalars under `eval/`.

Example:
    >>> write_eval_results("/tmp/sst2", {"accuracy": 0.91, "loss": 0.25}, step=2000)
    '/tmp/sst2/eval_results.json'
    >>> json.load(open("/tmp/sst2/eval_results.json"))
    {'accuracy': 0.91, 'global_step': 2000, 'loss': 0.25}
"""

import json
import math
import os

import tensorflow as tf

from bert_tf.file_io import open_file
from bert_tf.training.summaries import write_scalars

EVAL_RESULTS_FILE = "eval_results.json"


def _null_for_non_finite(value):
    """`value` with every NaN or infinite float (nested in dicts, lists, tuples) made None."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {key: _null_for_non_finite(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_null_for_non_finite(item) for item in value]
    return value


def write_json(path, value, **dump_options):
    """Writes `value` to `path` (local or gs://...) as indented JSON (`dump_options` go to
    `json.dump`), whole or not at all (`open_file`); returns `path`. NaN and infinite numbers
    (e.g. the loss of a run that diverged) are written as null: `json.dump` would write them
    as bare `NaN` / `Infinity`, which is not JSON and which strict readers refuse."""
    with open_file(path, "w") as f:
        json.dump(_null_for_non_finite(value), f, indent=2, allow_nan=False, **dump_options)
        f.write("\n")
    return path


def write_eval_results(output_dir, results, step):
    """Writes `results` ({metric: value}; values may be nested, e.g. data counts) with
    `global_step` to `output_dir/eval_results.json`, and its numbers as scalars to
    `output_dir/eval`; returns the JSON's path."""
    path = write_json(os.path.join(output_dir, EVAL_RESULTS_FILE),
                      {"global_step": step, **results}, sort_keys=True)
    writer = tf.summary.create_file_writer(os.path.join(output_dir, "eval"))
    write_scalars(writer, step, {name: value for name, value in results.items()
                                 if isinstance(value, (int, float))})
    writer.close()
    return path
