import os
import subprocess
import sys

import pytest
import tensorflow as tf

from bert_tf.layers import onednn


@pytest.mark.parametrize("cap, allows", [
    (None, True), ("ALL", True), ("default", True), ("AVX10_1_512_AMX", True),
    ("AVX512_CORE_AMX", True), ("AVX512_CORE_BF16", False), ("AVX2", False)])
def test_the_isa_cap_decides_whether_amx_may_run(monkeypatch, cap, allows):
    monkeypatch.delenv("DNNL_MAX_CPU_ISA", raising=False)
    if cap is None:
        monkeypatch.delenv("ONEDNN_MAX_CPU_ISA", raising=False)
    else:
        monkeypatch.setenv("ONEDNN_MAX_CPU_ISA", cap)
    assert onednn.onednn_isa_allows_amx() is allows


def test_a_cap_below_amx_turns_the_amx_forms_off(monkeypatch):
    monkeypatch.setattr(onednn, "_cpu_has_amx", lambda: True)
    monkeypatch.setattr(onednn, "onednn_enabled", lambda: True)
    monkeypatch.delenv("ONEDNN_MAX_CPU_ISA", raising=False)
    monkeypatch.setenv("DNNL_MAX_CPU_ISA", "AVX512_CORE_BF16")
    assert not onednn.amx_bfloat16_matmuls(tf.bfloat16)
    monkeypatch.delenv("DNNL_MAX_CPU_ISA")
    assert onednn.amx_bfloat16_matmuls(tf.bfloat16)
    assert not onednn.amx_bfloat16_matmuls(tf.float32)


def test_few_bfloat16_rows_are_at_most_128_known_ones(monkeypatch):
    monkeypatch.setattr(onednn, "onednn_enabled", lambda: True)
    assert onednn.few_bfloat16_rows(tf.bfloat16, 128)
    assert onednn.few_bfloat16_rows("bfloat16", 1)
    assert not onednn.few_bfloat16_rows(tf.bfloat16, 129)
    assert not onednn.few_bfloat16_rows(tf.bfloat16, None)
    assert not onednn.few_bfloat16_rows(tf.float32, 128)
    monkeypatch.setattr(onednn, "onednn_enabled", lambda: False)
    assert not onednn.few_bfloat16_rows(tf.bfloat16, 128)


@pytest.mark.parametrize("amx, rows, training, forms", [
    (True, 4096, False, True), (True, None, True, True), (False, 128, False, True),
    (False, 128, True, False), (False, 129, False, False), (False, None, False, False)])
def test_amx_matmul_forms_on_amx_or_in_inference_on_few_rows(monkeypatch, amx, rows, training,
                                                             forms):
    monkeypatch.setattr(onednn, "onednn_enabled", lambda: True)
    monkeypatch.setattr(onednn, "amx_bfloat16_matmuls",
                        lambda dtype: amx and tf.as_dtype(dtype) == tf.bfloat16)
    assert onednn.amx_matmul_forms(tf.bfloat16, rows, training) is forms
    assert not onednn.amx_matmul_forms(tf.float32, rows, training)


def test_single_threaded_matmuls_fit_one_cores_l2_as_tensorflow_counts_them(monkeypatch):
    monkeypatch.setattr(onednn, "onednn_enabled", lambda: True)
    monkeypatch.setattr(onednn, "_l2_cache_bytes", lambda: 1 << 20)
    # bytes * (rows * units + depth * (rows + units)) < L2
    assert onednn.single_threaded_matmul(128, 384, 384, tf.bfloat16)       # 0.49 MB
    assert onednn.single_threaded_matmul(128, 384, 384, tf.float32)        # 0.98 MB
    assert not onednn.single_threaded_matmul(128, 768, 768, tf.bfloat16)   # 1.57 MB
    assert not onednn.single_threaded_matmul(149 + 1, 384, 384, tf.float32)
    monkeypatch.setattr(onednn, "_l2_cache_bytes", lambda: None)  # not Linux
    assert not onednn.single_threaded_matmul(128, 384, 384, tf.bfloat16)
    monkeypatch.setattr(onednn, "_l2_cache_bytes", lambda: 1 << 20)
    monkeypatch.setattr(onednn, "onednn_enabled", lambda: False)
    assert not onednn.single_threaded_matmul(128, 384, 384, tf.bfloat16)


def test_the_l2_cache_is_read_from_linux():
    onednn._l2_cache_bytes.cache_clear()
    size = onednn._l2_cache_bytes()
    assert size is None or (64 << 10) <= size <= (64 << 20), size


_BFLOAT16_MATMUL = """
import tensorflow as tf
a = tf.cast(tf.ones([64, 256]), tf.bfloat16)
print(tf.function(tf.matmul)(a, a, transpose_b=True).dtype)
"""


@pytest.mark.skipif(not (onednn.onednn_enabled() and onednn._cpu_has_amx()),
                    reason="needs oneDNN on a CPU with AMX")
def test_tensorflows_onednn_honours_the_cap():
    """The premise of the rule above: under the cap oneDNN picks a kernel without AMX."""
    def implementations(cap):
        env = dict(os.environ, ONEDNN_VERBOSE="1", TF_CPP_MIN_LOG_LEVEL="2")
        env.pop("DNNL_MAX_CPU_ISA", None)
        env.pop("ONEDNN_MAX_CPU_ISA", None)
        if cap:
            env["ONEDNN_MAX_CPU_ISA"] = cap
        run = subprocess.run([sys.executable, "-c", _BFLOAT16_MATMUL], env=env,
                             capture_output=True, text=True, check=True)
        return [line.split(",")[6] for line in (run.stdout + run.stderr).splitlines()
                if line.startswith("onednn_verbose") and ",primitive,exec," in line]

    assert any("amx" in name for name in implementations(None))
    capped = implementations("AVX512_CORE_BF16")
    assert capped and not any("amx" in name for name in capped)
