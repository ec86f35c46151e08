"""The start of a script, run in a fresh process, in which `import tensorflow` raises
`TensorFlowImported`: the check that code meant to run before TensorFlow loads (a tool's flags
and their checks) does not load it, and where it would.

Example:
    >>> subprocess.run([sys.executable, "-c", REFUSING_TENSORFLOW + "import bert_tf.config"])
"""

REFUSING_TENSORFLOW = """
import sys
import bert_tf.cli  # first: it puts a finder of TensorFlow first, which this one must precede

class TensorFlowImported(Exception):
    pass

class RefuseTensorFlow:
    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] == "tensorflow":
            raise TensorFlowImported()

sys.meta_path.insert(0, RefuseTensorFlow())
"""
