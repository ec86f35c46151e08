"""What the hub tests share: a tiny pre-trained model installed by name with the tool.

Example:
    >>> hub_dir, checkpoint_dir, pretrainer, vocab_file, result = install_tiny_model(
    ...     tmp_path_factory, "bert_tf_base")
"""

from bert_tf.hub import HUB_DIR_ENV
from tests.export.tiny_models import write_pretrained_checkpoint, write_vocab
from tests.tools.tool_runs import run_tool


def install_tiny_model(tmp_path_factory, name):
    """Installs a random one-layer model (with its MLM head) as `name` into a new model
    directory named by $BERT_TF_HUB_DIR; returns `(model directory, checkpoint dir,
    pretrainer, vocab_file, the tool's CompletedProcess)`, the tool having succeeded."""
    vocab_file = write_vocab(tmp_path_factory.mktemp("vocab"))
    checkpoint_dir = str(tmp_path_factory.mktemp("checkpoint"))
    pretrainer = write_pretrained_checkpoint(checkpoint_dir, vocab_file, num_hidden_layers=1)
    directory = str(tmp_path_factory.mktemp("hub"))
    result = run_tool("install_hub_model.py", f"--init_checkpoint={checkpoint_dir}",
                      f"--name={name}", "--seq_length=16", env={HUB_DIR_ENV: directory})
    assert result.returncode == 0, result.stderr
    return directory, checkpoint_dir, pretrainer, vocab_file, result
