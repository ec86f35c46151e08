"""What TensorFlow's oneDNN kernels do on this machine: whether they run, and whether the CPU
has AMX, which with the number of rows decides which matmul forms are fastest in bfloat16.

oneDNN is on by default for x86 builds of TensorFlow (`TF_ENABLE_ONEDNN_OPTS=0` turns it off).
Layers ask when they are traced, for forms whose accuracy or speed depends on oneDNN's kernels.

Example:
    >>> onednn_enabled()                  # an x86 build of TensorFlow
    True
    >>> amx_bfloat16_matmuls(tf.bfloat16)  # and a Xeon with AMX
    True

`amx_matmul_forms` is the rule the layers follow; the other functions are its parts.
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


# Rows up to which bfloat16 inference takes the AMX forms (`dense_rows.matmul_plus_bias`'s
# batched matmul, the feed-forward's GELU apart) on a CPU without AMX too. There oneDNN's
# inner product, the other form, loses at few rows: a chain of MiniLM feed-forward pairs at
# 128 rows took 4.06 ms per pair as the inner product with the GELU in its epilogue, 2.61 ms as
# the batched matmul (PyTorch: 2.19), and MiniLM's whole batch-1 x 128 pass ran 41-53 % faster
# in the AMX forms; at 4,096 rows (batch 32) BERT-base ran 2-9 % slower in them, and between,
# one noisy run had no clear crossover (2-vCPU Xeon with oneDNN capped at AVX512_CORE_BF16, the
# stand-in for an AMD EPYC; docs/PERFORMANCE.md).
FEW_ROWS = 128


def few_bfloat16_rows(dtype, rows):
    """Whether bfloat16 inference on `rows` rows (as known when traced; None: unknown) takes the
    AMX forms whatever the CPU: bfloat16, oneDNN, and at most `FEW_ROWS` rows."""
    return (tf.as_dtype(dtype) == tf.bfloat16 and onednn_enabled() and rows is not None
            and rows <= FEW_ROWS)


def amx_matmul_forms(dtype, rows, training):
    """Whether a layer's matmuls on `rows` rows (as known when traced; None: unknown) in `dtype`
    take the AMX forms: on a CPU with AMX (`amx_bfloat16_matmuls`), or in inference on few rows
    (`few_bfloat16_rows`).

    Example:
        >>> amx_matmul_forms(tf.bfloat16, 128, training=False)  # batch 1 x 128, any oneDNN CPU
        True
    """
    return amx_bfloat16_matmuls(dtype) or (not training and few_bfloat16_rows(dtype, rows))
