"""The run an output directory holds, checked before a training job writes to it.

Beside its checkpoints a training tool writes `bert_config.json` and `vocab.txt` (what makes
them complete for every tool's `--init_checkpoint`), `tokenizer_config.json` (the lower-casing
its text had, in Hugging Face's format: what later runs and exports of it default to) and
`run.json` (the tool and task that trained them, and a fine-tuning run's training flags), and
it resumes from the latest checkpoint when run again. Run again with another model, vocabulary
or task, it would overwrite the first two and then "resume" weights that do not fit (a restore
error deep inside TensorFlow) or, of a task with as many labels, that fit silently; with other
training flags, it would continue a schedule the checkpoints did not start. So a tool calls
`check_existing_run` before writing anything: a directory holding a run of anything else is
refused in one line naming what differs, and left as it is. `record_run` then writes the
files, and `recorded_task` reads back the task of a run (an export's defaults). A directory
holding files of the names a run writes but no run of this package (someone's own
`eval_results.json`, an original BERT's `checkpoint`) is refused before that, when the tool
checks its flags (`other_files_problem`): the run would overwrite them.

Example:
    >>> other_files_problem("/tmp/sst2", ["predictions*.tsv"])
    >>> check_existing_run("/tmp/sst2", encoder.config, "vocab.txt", "run_classifier", "SST-2")
    >>> record_run("/tmp/sst2", encoder.config, "vocab.txt", "run_classifier", "SST-2",
    ...            do_lower_case=True)
"""

import fnmatch
import os

import tensorflow as tf

from bert_tf.checkpoints import write_model_files
from bert_tf.checkpoints.layout import (CHECKPOINT_NAME, CONFIG_FILE, ENCODER_KEY,
                                        TOKENIZER_CONFIG_FILE, VOCAB_FILE, ObjectGraph)
from bert_tf.checkpoints.loading import listed
from bert_tf.config import BertConfig, read_json_file
from bert_tf.file_io import makedirs
from bert_tf.text.vocab_size import vocab_difference
from bert_tf.training.eval_results import EVAL_RESULTS_FILE, write_json

RUN_FILE = "run.json"
# The names every training run writes in its output directory (shell patterns), beside its
# tool's own (predictions...): what TensorFlow's checkpoint manager writes and replaces...
CHECKPOINT_FILES = ("checkpoint", f"{CHECKPOINT_NAME}-*")
# ... and the files and TensorBoard directories the run writes into itself, again when resumed.
WRITTEN_FILES = (CONFIG_FILE, VOCAB_FILE, TOKENIZER_CONFIG_FILE, RUN_FILE, EVAL_RESULTS_FILE,
                 "train", "eval")


def _run_record(tool, task, training=None):
    return {"tool": tool, **({"task": task} if task else {}),
            **({"training": training} if training else {})}


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


def _recorded_run(output_dir):
    """What `output_dir`'s `run.json` records, or None when there is none."""
    run_path = os.path.join(output_dir, RUN_FILE)
    return read_json_file(run_path) if tf.io.gfile.exists(run_path) else None


def recorded_task(output_dir, tool):
    """The task that `tool` (e.g. "run_classifier") recorded training in `output_dir`'s
    `run.json` (e.g. "MRPC"), or None (no record, another tool's, or no task).

    Example:
        >>> recorded_task("/tmp/mrpc", "run_classifier")
        'MRPC'
    """
    recorded = _recorded_run(output_dir)
    if not isinstance(recorded, dict) or recorded.get("tool") != tool:
        return None
    return recorded.get("task")


def _task_differences(recorded, tool, task):
    """`[difference]` between the run `recorded` (`_recorded_run`) and this one (`tool`,
    `task`), or `[]` when nothing is recorded or the same."""
    if recorded is None:
        return []
    ours = _run_record(tool, task)
    if isinstance(recorded, dict) and all(recorded.get(key) == ours.get(key)
                                          for key in ("tool", "task")):
        return []
    return [f"trained by {_described(recorded)} ({RUN_FILE}), this run is {_described(ours)}"]


def _training_differences(recorded, training):
    """`[difference]` between the training settings the run `recorded` (`_recorded_run`) has
    and `training` (e.g. `{"learning_rate": 5e-05, ...}`), or `[]` (the same, or either
    unknown: runs recorded before settings were)."""
    theirs = recorded.get("training") if isinstance(recorded, dict) else None
    if not training or not theirs:
        return []
    keys = [key for key in training if key in theirs and theirs[key] != training[key]]
    if not keys:
        return []
    # A flag's name, or what a setting that is no flag says (the data: its examples' count).
    names = {"training_examples": "training examples (other data)"}
    return [", ".join(f"{names.get(key, '--' + key)} {theirs[key]} there, {training[key]} here"
                      for key in keys)]


def check_existing_run(output_dir, config, vocab_file, tool, task=None, training=None):
    """Raises ValueError when `output_dir` (local or remote) holds a run of another model
    (its `bert_config.json` differs from `config`, its `vocab.txt` from `vocab_file`), task
    (its `run.json` names another `tool` or `task`) or, given `training` (the settings of a
    run that trains), other training settings: resumed with another learning rate, batch size
    or length, the checkpoints would continue a schedule they did not start, and a finished
    run would re-report its old metrics as the new settings'. The message names every
    difference. A directory without these files, or with the same, passes: the run resumes
    there.

    Example:
        >>> check_existing_run("/tmp/pre", BertConfig.from_name("bert_mini"), None,
        ...                    "run_pretraining")
        ValueError: --output_dir /tmp/pre holds a run of another model: bert_config.json
        differs in hidden_size (128 there, 256 here), ...; use a new --output_dir
    """
    config_path, vocab_path = (os.path.join(output_dir, name)
                               for name in (CONFIG_FILE, VOCAB_FILE))
    recorded = _recorded_run(output_dir)
    differences = {"model": [], "task": _task_differences(recorded, tool, task),
                   "training": _training_differences(recorded, training)}
    if tf.io.gfile.exists(config_path):
        differences["model"].append(_config_difference(config_path, config))
    if (vocab_file and os.path.abspath(vocab_file) != os.path.abspath(vocab_path)
            and tf.io.gfile.exists(vocab_path)):
        differences["model"].append(vocab_difference(vocab_path, vocab_file, VOCAB_FILE))
    _refuse_differences(output_dir, differences)


def other_training_settings(output_dir, training):
    """What differs between the `training` settings (e.g. `{"learning_rate": 5e-05, ...}`) and
    those `output_dir`'s run last trained with (its `run.json`), as one line, or None (the
    same, or either unknown). For a tool that resumes a run with other settings but says so:
    pre-training's second phase at another batch size is the paper's recipe, and a lower
    learning rate after a divergence a common one.

    Example:
        >>> other_training_settings("/tmp/pre", {"learning_rate": 5e-4, "optimizer": "adamw"})
        '--learning_rate 0.001 there, 0.0005 here'
    """
    differences = _training_differences(_recorded_run(output_dir), training)
    return differences[0] if differences else None


def check_same_task(output_dir, tool, task=None):
    """Raises ValueError, as `check_existing_run` does, when `output_dir` holds a run of
    another `tool` or `task` (its `run.json`): what a tool checks before it reads what its own
    run would have left there, so that the user hears of the other task, not of a file of its
    own missing.

    Example:
        >>> check_same_task("/tmp/sst2", "run_ner")
        ValueError: --output_dir /tmp/sst2 holds a run of another task: trained by
        run_classifier SST-2 (run.json), this run is run_ner; use a new --output_dir
    """
    _refuse_differences(output_dir, {"model": [],
                                     "task": _task_differences(_recorded_run(output_dir), tool,
                                                               task),
                                     "training": []})


def _refuse_differences(output_dir, differences):
    differences = {what: [found for found in listed if found]
                   for what, listed in differences.items()}
    other = " and ".join(name for name in ("model", "task") if differences[name])
    if other:  # its training settings do not matter then
        raise ValueError(f"--output_dir {output_dir} holds a run of another {other}: "
                         f"{'; '.join(differences['model'] + differences['task'])}; use a new "
                         f"--output_dir")
    if differences["training"]:
        raise ValueError(f"--output_dir {output_dir} holds a run with other training settings: "
                         f"{'; '.join(differences['training'])}; use a new --output_dir "
                         f"(--init_checkpoint={output_dir} starts from its weights), or its own "
                         f"flags to resume it")


def is_run_output(name, outputs=()):
    """Whether a run writes the entry `name` of its output directory: one of `CHECKPOINT_FILES`,
    `WRITTEN_FILES` or its tool's `outputs` (shell patterns).

    Example:
        >>> is_run_output("predictions_mismatched.tsv", ["predictions*.tsv"])
        True
    """
    return any(fnmatch.fnmatchcase(name, pattern)
               for pattern in CHECKPOINT_FILES + WRITTEN_FILES + tuple(outputs))


def holds_run(output_dir):
    """Whether `output_dir` (local or remote) holds a run of this package: its `run.json` or,
    of a run begun before that was written, a latest checkpoint with this package's encoder."""
    if tf.io.gfile.exists(os.path.join(output_dir, RUN_FILE)):
        return True
    latest = tf.train.latest_checkpoint(output_dir)
    return bool(latest) and ObjectGraph(latest).has((ENCODER_KEY,))


def other_files_problem(output_dir, outputs=()):
    """Why `output_dir` (local or remote) cannot take a run: it holds entries of the names the
    run writes (`is_run_output` with the tool's `outputs`), which the run would overwrite, but
    no run of this package (`holds_run`) they belong to; None otherwise (the directory is
    missing, holds no such names, or holds a run: `check_existing_run` checks which).

    Example:
        >>> other_files_problem("/tmp/notes", ["predictions*.tsv"])
        '--output_dir /tmp/notes holds predictions.tsv but no run of bert_tf (no run.json), and
        this run would overwrite it; use another --output_dir'
    """
    if not tf.io.gfile.isdir(output_dir):
        return None
    names = sorted(name.rstrip("/") for name in tf.io.gfile.listdir(output_dir)  # gs:// "eval/"
                   if is_run_output(name.rstrip("/"), outputs))
    if not names or holds_run(output_dir):
        return None
    return (f"--output_dir {output_dir} holds {', '.join(listed(names))} but no run of bert_tf "
            f"(no {RUN_FILE}), and this run would overwrite {'it' if len(names) == 1 else 'them'}"
            f"; use another --output_dir")


def record_run(output_dir, config, vocab_file, tool, task=None, do_lower_case=None,
               training=None):
    """Writes `bert_config.json`, a copy of `vocab_file` (`write_model_files`) and, when the
    run starts (`output_dir` has no checkpoint yet), `run.json` (`tool`, `task`, the
    `training` settings if given; resumed, the `training` settings it goes on with) and,
    unless `do_lower_case` is None, `tokenizer_config.json` (`{"do_lower_case": ...}`) into
    `output_dir`; after `check_existing_run` passed. A run begun before these existed is not
    recorded afterwards: what trained it is not known (`FineTuner` refuses to resume a
    checkpoint of another task model, by the class it records or by its shapes)."""
    starting = not tf.train.latest_checkpoint(output_dir)
    # First when starting: the files below, without it, would not be a run (`holds_run`).
    if starting or (training and _recorded_run(output_dir) is not None):
        makedirs(output_dir)
        write_json(os.path.join(output_dir, RUN_FILE), _run_record(tool, task, training))
    write_model_files(output_dir, config, vocab_file, do_lower_case if starting else None)
