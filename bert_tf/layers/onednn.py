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
import glob
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


@functools.cache
def _l2_cache_bytes():
    """One core's L2 cache in bytes as Linux reports it (None elsewhere)."""
    for index in sorted(glob.glob("/sys/devices/system/cpu/cpu0/cache/index*")):
        try:
            with open(os.path.join(index, "level"), encoding="ascii") as f:
                if f.read().strip() != "2":
                    continue
            with open(os.path.join(index, "size"), encoding="ascii") as f:
                size = f.read().strip()
        except OSError:
            continue
        units = {"K": 1 << 10, "M": 1 << 20}
        return int(size[:-1]) * units[size[-1]] if size[-1] in units else int(size)
    return None


def single_threaded_matmul(rows, depth, units, dtype):
    """Whether TensorFlow's oneDNN matmul runs `[rows, depth] @ [depth, units]` in `dtype` on
    one thread whatever its intra-op pool: it does when the three matrices together fit one
    core's L2 cache (`ExecuteSingleThreadedGemm` in TensorFlow's `mkl_matmul_ops_common.h`,
    which assumes "very small models"). MiniLM's `[128, 384] @ [384, 384]` in bfloat16 (0.5 MB
    against the 1 MB L2 of an AMD EPYC) took 0.168 ms of oneDNN time with one thread or two,
    PyTorch's 0.168 with one and 0.089 with two (same oneDNN kernel, `brg_matmul`).

    Example:
        >>> single_threaded_matmul(128, 384, 384, tf.bfloat16)  # 1 MB of L2 or more
        True
    """
    l2_bytes = _l2_cache_bytes()
    return (onednn_enabled() and l2_bytes is not None
            and tf.as_dtype(dtype).size * (rows * units + depth * (rows + units)) < l2_bytes)

