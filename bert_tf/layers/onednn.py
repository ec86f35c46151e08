"""`onednn_enabled`: whether TensorFlow runs its CPU ops with oneDNN in this process.

oneDNN is on by default for x86 builds of TensorFlow (`TF_ENABLE_ONEDNN_OPTS=0` turns it off).
Layers ask when they are traced, for forms whose accuracy or speed depends on oneDNN's kernels.

Example:
    >>> onednn_enabled()
    True
"""

import functools


@functools.cache
def onednn_enabled():
    """True when this process's TensorFlow uses oneDNN; False when it cannot tell."""
    try:
        from tensorflow.python.util import _pywrap_util_port
        return bool(_pywrap_util_port.IsMklEnabled())
    except (ImportError, AttributeError):  # a TensorFlow build without the private helper
        return False
