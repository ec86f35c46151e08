"""What TensorFlow's oneDNN kernels do on this machine: whether they run, and whether the CPU
has AMX, which decides which matmul forms are fastest in bfloat16.

oneDNN is on by default for x86 builds of TensorFlow (`TF_ENABLE_ONEDNN_OPTS=0` turns it off).
Layers ask when they are traced, for forms whose accuracy or speed depends on oneDNN's kernels.

Example:
    >>> onednn_enabled()                  # an x86 build of TensorFlow
    True
    >>> amx_bfloat16_matmuls(tf.bfloat16)  # and a Xeon with AMX
    True
"""

import functools
import os

import tensorflow as tf


@functools.cache
def onednn_enabled():
    """True when this process's TensorFlow uses oneDNN; False when it cannot tell."""
    try:
        from tensorflow.python.util import _pywrap_util_port
        return bool(_pywrap_util_port.IsMklEnabled())
    except (ImportError, AttributeError):  # a TensorFlow build without the private helper
        return False


@functools.cache
def _cpu_has_amx():
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("flags"):
                    return "amx_bf16" in line.split()
    except OSError:  # not Linux
        pass
    return False


def onednn_isa_allows_amx():
    """False when `ONEDNN_MAX_CPU_ISA` (or its older name `DNNL_MAX_CPU_ISA`) caps oneDNN below
    AMX, e.g. `AVX512_CORE_BF16`: oneDNN then runs bfloat16 matmuls on AVX-512 as a CPU without
    AMX would, and the layers must pick that CPU's forms too. Unset, `ALL` or `DEFAULT`: True."""
    cap = os.environ.get("ONEDNN_MAX_CPU_ISA") or os.environ.get("DNNL_MAX_CPU_ISA") or "ALL"
    return cap.upper() in ("ALL", "DEFAULT") or "AMX" in cap.upper()


def amx_bfloat16_matmuls(dtype):
    """Whether matmuls in `dtype` run on AMX tiles here: bfloat16, oneDNN, a CPU with AMX-BF16
    (Intel Xeon from Sapphire Rapids on) and no `ONEDNN_MAX_CPU_ISA` below AMX."""
    return (tf.as_dtype(dtype) == tf.bfloat16 and onednn_enabled() and _cpu_has_amx()
            and onednn_isa_allows_amx())
