"""Shared helpers of the TFLite import tests: LiteRT's interpreter (ai-edge-litert) as the oracle, and its
schema's object API to build and alter .tflite files.

ai-edge-litert is in the dev extra; locally a missing package skips the calling test, in CI (``CI`` set) it
fails it, so the suite cannot silently shrink there."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np
import pytest


def require_litert() -> Any:
    """ai_edge_litert's interpreter module (skip locally, fail in CI when it is missing)."""
    try:
        from ai_edge_litert import interpreter
    except ImportError as e:
        if os.environ.get("CI"):
            pytest.fail(f"ai-edge-litert missing in CI: {e}")
        pytest.skip(f"ai-edge-litert not installed (pip install -e '.[dev]'): {e}")
    return interpreter


def schema() -> Any:
    """LiteRT's generated schema module (object API: ModelT, ... with Pack / InitFromPackedBuf)."""
    require_litert()
    import flatbuffers  # noqa: F401 - a dependency of ai-edge-litert
    from ai_edge_litert import schema_py_generated

    return schema_py_generated


def inputs_of(npz: Path) -> list[np.ndarray]:
    """The inputs make_tflite.py saved beside a model, in order (arr_0, arr_1, ...)."""
    data = np.load(npz)
    return [data[f"arr_{i}"] for i in range(len(data.files))]


def run_litert(model: Path | bytes, inputs: list[np.ndarray], resolver: str = "AUTO") -> dict[str, np.ndarray]:
    """Run the model's serving_default signature (else its only subgraph) on `inputs` given in the
    signature's input order (args_0, args_1, ...); outputs by signature name. `resolver`: the interpreter's
    kernels (AUTO: its default, BUILTIN_REF: the reference kernels)."""
    interpreter = require_litert()
    it = interpreter.Interpreter(**({"model_content": model} if isinstance(model, bytes) else
                                    {"model_path": str(model)}), num_threads=1,
                                 experimental_op_resolver_type=getattr(interpreter.OpResolverType, resolver))
    signatures = it.get_signature_list()
    if signatures:
        key = "serving_default" if "serving_default" in signatures else next(iter(signatures))
        names = sorted(signatures[key]["inputs"], key=_natural)
        return it.get_signature_runner(key)(**dict(zip(names, inputs, strict=True)))
    it.allocate_tensors()
    for detail, x in zip(it.get_input_details(), inputs, strict=True):
        it.set_tensor(detail["index"], x)
    it.invoke()
    return {d["name"]: it.get_tensor(d["index"]) for d in it.get_output_details()}


def _natural(name: str) -> tuple:
    head = name.rstrip("0123456789")
    tail = name[len(head):]
    return head, int(tail) if tail else -1


def pack(model: Any) -> bytes:
    """A schema ModelT as .tflite bytes."""
    import flatbuffers

    builder = flatbuffers.Builder(1024)
    builder.Finish(model.Pack(builder), file_identifier=b"TFL3")
    return bytes(builder.Output())


def unpack(data: bytes) -> Any:
    """.tflite bytes as a schema ModelT (to alter and pack again)."""
    s = schema()
    return s.ModelT.InitFromObj(s.Model.GetRootAs(data, 0))
