"""--bert_config_file takes a shipped config's name as well as a path, in every tool that has
the flag (`bert_tf.cli.config_flag`): what makes the tools' examples run after a regular
install, where no official_configs/ is beside the user's commands."""

import dataclasses
import json
import subprocess

import pytest

from bert_tf.config import BertConfig, official_config_file
from tests.cli.tool_flags import tool_flags
from tests.tools.tool_runs import error_output, tool_command, tool_env

TOOLS_WITH_THE_FLAG = [tool for tool, names in sorted(tool_flags().items())
                       if "bert_config_file" in names]


def run_in(directory, tool, *flags):
    """Runs `tools/<tool>.py` with `flags` in the working directory `directory`."""
    return subprocess.run(tool_command(f"{tool}.py", *flags), cwd=directory, capture_output=True,
                          text=True, timeout=600, env=tool_env())


def tool_flags_with_config(tool, directory, config):
    """The least a `tool` needs besides --bert_config_file=`config` to reach its flag checks."""
    output = f"--output_dir={directory}/out"
    return {
        "build_vocab": [f"--input_file={directory}/text.txt", f"--output_file={directory}/v.txt"],
        "convert_checkpoint": [f"--checkpoint={directory}", output],
        "export_savedmodel": ["--export_type=encoder", f"--init_checkpoint={directory}", output],
        "install_hub_model": [f"--init_checkpoint={directory}"],
        "run_pretraining": [f"--input_file={directory}/train.tfrecord", output],
        "run_squad": [f"--train_file={directory}/train.json", f"--vocab_file={directory}/v.txt",
                      "--do_train", output],
    }.get(tool, [f"--data_dir={directory}", f"--vocab_file={directory}/v.txt", "--do_train",
                 output]) + [f"--bert_config_file={config}"]


def test_every_tool_with_the_flag_is_checked_here():
    assert TOOLS_WITH_THE_FLAG == ["build_vocab", "convert_checkpoint", "export_savedmodel",
                                   "install_hub_model", "run_classifier", "run_multiple_choice",
                                   "run_ner", "run_pretraining", "run_squad"]


@pytest.mark.parametrize("tool", TOOLS_WITH_THE_FLAG)
def test_a_missing_config_names_the_shipped_one_it_may_have_meant(tmp_path, tool):
    (tmp_path / "text.txt").write_text("a few words of text\n")
    for given, advice in [
            ("official_configs/bert_mini.json",
             "; the shipped config of that name is --bert_config_file=bert_mini"),
            ("bert_mni", "; did you mean the shipped config bert_mini?"),
            ("nothing_like_it", ", nor is it a shipped config's name (bert_L10_H128, ")]:
        result = run_in(tmp_path, tool, *tool_flags_with_config(tool, tmp_path, given))
        assert result.returncode == 1, result.stderr[-2000:]
        assert f"--bert_config_file {given} does not exist{advice}" in error_output(result)
        assert not (tmp_path / "out").exists() and not (tmp_path / "v.txt").exists()


def test_a_shipped_config_goes_by_its_name_and_a_file_of_that_name_wins(tmp_path):
    (tmp_path / "text.txt").write_text("the words of a small corpus to learn a vocabulary from\n")

    def build_vocab_with_bert_mini(expected_config, read):
        """Runs build_vocab with --bert_config_file=bert_mini: the config it wrote must be
        `expected_config`'s, sized to the vocabulary, and its line name the file `read`."""
        result = run_in(tmp_path, "build_vocab", f"--input_file={tmp_path}/text.txt",
                        "--output_file=model/vocab.txt", "--vocab_size=100",
                        "--bert_config_file=bert_mini")
        assert result.returncode == 0, result.stderr[-2000:]
        written = BertConfig.from_json_file(str(tmp_path / "model" / "bert_config.json"))
        assert written == dataclasses.replace(BertConfig.from_name(expected_config),
                                              vocab_size=written.vocab_size)
        assert f"Wrote model/bert_config.json: {read} with vocab_size" in result.stdout

    build_vocab_with_bert_mini("bert_mini", official_config_file("bert_mini"))
    # A file named like a shipped config, where the command runs, is the one read.
    (tmp_path / "bert_mini").write_text(json.dumps(BertConfig.from_name("bert_tiny").to_dict()))
    build_vocab_with_bert_mini("bert_tiny", "bert_mini")
