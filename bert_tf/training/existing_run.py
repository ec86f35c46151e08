"""The run an output directory holds, checked before a training job writes to it.

Beside its checkpoints a training tool writes `bert_config.json` and `vocab.txt` (what makes
them complete for every tool's `--init_checkpoint`), `tokenizer_config.json` (the lower-casing
its text had, in Hugging Face's format: what later runs and exports of it default to) and
`run.json` (the tool and task that trained them), and it resumes from the latest checkpoint
when run again. Run again with another model, vocabulary or task, it would overwrite the first
two and then "resume" weights that do not fit (a restore error deep inside TensorFlow) or, of a
task with as many labels, that fit silently. So a tool calls `check_existing_run` before
writing anything: a directory holding a run of anything else is refused in one line naming
what differs, and left as it is. `record_run` then writes the files.

Example:
    >>> check_existing_run("/tmp/sst2", encoder.config, "vocab.txt", "run_classifier", "SST-2")
    >>> record_run("/tmp/sst2", encoder.config, "vocab.txt", "run_classifier", "SST-2",
    ...            do_lower_case=True)
"""

import os

import tensorflow as tf

from bert_tf.checkpoints import write_model_files
from bert_tf.checkpoints.layout import CONFIG_FILE, VOCAB_FILE
from bert_tf.config import BertConfig, read_json_file
from bert_tf.text.vocab_size import vocab_difference
from bert_tf.training.eval_results import write_json

RUN_FILE = "run.json"


def _run_record(tool, task):
    return {"tool": tool, **({"task": task} if task else {})}


def _described(record):
    if not isinstance(record, dict):
        return repr(record)
    return " ".join(str(record[key]) for key in ("tool", "task") if key in record)


def _config_difference(path, config):
    theirs, ours = BertConfig.from_json_file(path).to_dict(), config.to_dict()
    keys = [key for key in ours if theirs[key] != ours[key]]
    if not keys:
        return None
    return f"{CONFIG_FILE} differs in " + ", ".join(
        f"{key} ({theirs[key]} there, {ours[key]} here)" for key in keys)


def _task_difference(path, ours):
    recorded = read_json_file(path)
    if recorded == ours:
        return None
    return f"trained by {_described(recorded)} ({RUN_FILE}), this run is {_described(ours)}"


def check_existing_run(output_dir, config, vocab_file, tool, task=None):
    """Raises ValueError when `output_dir` (local or remote) holds a run of another model
    (its `bert_config.json` differs from `config`, its `vocab.txt` from `vocab_file`) or task
    (its `run.json` names another `tool` or `task`); the message names every difference. A
    directory without these files, or with the same, passes: the run resumes there.

    Example:
        >>> check_existing_run("/tmp/pre", BertConfig.from_name("bert_mini"), None,
        ...                    "run_pretraining")
        ValueError: --output_dir /tmp/pre holds a run of another model: bert_config.json
        differs in hidden_size (128 there, 256 here), ...; use a new --output_dir
    """
    config_path, vocab_path, run_path = (os.path.join(output_dir, name)
                                         for name in (CONFIG_FILE, VOCAB_FILE, RUN_FILE))
    differences = {"model": [], "task": []}
    if tf.io.gfile.exists(config_path):
        differences["model"].append(_config_difference(config_path, config))
    if (vocab_file and os.path.abspath(vocab_file) != os.path.abspath(vocab_path)
            and tf.io.gfile.exists(vocab_path)):
        differences["model"].append(vocab_difference(vocab_path, vocab_file, VOCAB_FILE))
    if tf.io.gfile.exists(run_path):
        differences["task"].append(_task_difference(run_path, _run_record(tool, task)))
    differences = {what: [found for found in listed if found]
                   for what, listed in differences.items()}
    if any(differences.values()):
        what = " and ".join(name for name, listed in differences.items() if listed)
        raise ValueError(f"--output_dir {output_dir} holds a run of another {what}: "
                         f"{'; '.join(differences['model'] + differences['task'])}; use a new "
                         f"--output_dir")


def record_run(output_dir, config, vocab_file, tool, task=None, do_lower_case=None):
    """Writes `bert_config.json`, a copy of `vocab_file` (`write_model_files`) and, when the
    run starts (`output_dir` has no checkpoint yet), `run.json` (`tool`, `task`) and, unless
    `do_lower_case` is None, `tokenizer_config.json` (`{"do_lower_case": ...}`) into
    `output_dir`; after `check_existing_run` passed. A run begun before these existed is not
    recorded afterwards: what trained it is not known (`FineTuner` refuses to resume a
    checkpoint of another task model, by the class it records or by its shapes)."""
    starting = not tf.train.latest_checkpoint(output_dir)
    write_model_files(output_dir, config, vocab_file, do_lower_case if starting else None)
    if starting:
        write_json(os.path.join(output_dir, RUN_FILE), _run_record(tool, task))
