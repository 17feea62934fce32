"""Shared helpers of the ONNX export tests: onnxruntime as the oracle for exported models.

onnx and onnxruntime are in the dev extra; locally a missing package skips the calling test, in CI
(``CI`` set) it fails it, so the suite cannot silently shrink there."""

from __future__ import annotations

import os
from typing import Any

import numpy as np
import pytest

from skriptnd.backends.via_onnxruntime import keep_qdq_unfused


def require_ort() -> Any:
    """The onnxruntime module (skip locally, fail in CI when onnx or onnxruntime is missing)."""
    try:
        import onnx  # noqa: F401
        import onnxruntime
    except ImportError as e:
        if os.environ.get("CI"):
            pytest.fail(f"onnx/onnxruntime missing in CI: {e}")
        pytest.skip(f"onnx/onnxruntime not installed: {e}")
    return onnxruntime


def run_onnx(model: Any, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Run an ONNX ModelProto in onnxruntime (CPU, one thread); outputs by name."""
    ort = require_ort()
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    options.log_severity_level = 3
    if keep_qdq_unfused():  # onnxruntime's fused int8 kernels saturate on x86 without VNNI (skriptnd.hostcpu)
        options.add_session_config_entry("session.disable_quant_qdq", "1")
    session = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    names = [o.name for o in session.get_outputs()]
    return dict(zip(names, session.run(None, feeds), strict=True))


def assert_close(actual: Any, expected: Any, rtol: float = 1e-4) -> None:
    """Exact for int/bool; for reals within ``rtol`` of the largest magnitude of ``expected``."""
    actual, expected = np.asarray(actual), np.asarray(expected)
    assert actual.shape == expected.shape, (actual.shape, expected.shape)
    if expected.dtype.kind in "biu":
        np.testing.assert_array_equal(actual, expected)
        return
    scale = max(float(np.max(np.abs(expected[np.isfinite(expected)]), initial=0.0)), 1e-30)
    np.testing.assert_allclose(actual, expected, rtol=0, atol=rtol * scale, equal_nan=True)
