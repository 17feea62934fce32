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

#: the committed small models and their inputs (benchmarks/zoo/make_tflite.py --ci)
DATA = Path(__file__).resolve().parent / "data" / "tflite"
#: where make_tflite.py writes the big models (as benchmarks/zoo/build.py its ONNX files)
ZOO = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "skriptnd" / "zoo" / "tflite"


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


def operator_code(builtin: str, version: int = 1) -> Any:
    """A schema OperatorCodeT of a builtin operator (the deprecated code field as old readers see it)."""
    s = schema()
    code = getattr(s.BuiltinOperator, builtin)
    opcode = s.OperatorCodeT()
    opcode.builtinCode, opcode.deprecatedBuiltinCode, opcode.version = code, min(code, 127), version
    return opcode


def builtin_options(name: str, **fields: Any) -> Any:
    """A schema ``<name>T`` options table (e.g. ``Conv2DOptions``) with ``fields`` set."""
    o = getattr(schema(), name + "T")()
    for k, v in fields.items():
        setattr(o, k, v)
    return o


def one_operator_model(opcode: Any, tensors: list[Any], buffers: list[Any], graph_inputs: list[int],
                       op_inputs: list[int], outputs: list[int], options: Any = None,
                       options_type: str | None = None) -> bytes:
    """A .tflite model of one operator over ``tensors`` (indices): its inputs ``op_inputs``, the subgraph's inputs
    ``graph_inputs``, both's outputs ``outputs``; ``options`` a builtin options table (its type from its class
    name unless ``options_type`` says)."""
    s = schema()
    op = s.OperatorT()
    op.opcodeIndex, op.inputs, op.outputs = 0, op_inputs, outputs
    if options is not None:
        op.builtinOptionsType = getattr(s.BuiltinOptions, options_type or type(options).__name__[:-1])
        op.builtinOptions = options
    sub = s.SubGraphT()
    sub.tensors, sub.inputs, sub.outputs, sub.operators, sub.name = tensors, graph_inputs, outputs, [op], "main"
    model = s.ModelT()
    model.version, model.operatorCodes, model.subgraphs, model.buffers = 3, [opcode], [sub], buffers
    return pack(model)


def unpack(data: bytes) -> Any:
    """.tflite bytes as a schema ModelT (to alter and pack again)."""
    s = schema()
    return s.ModelT.InitFromObj(s.Model.GetRootAs(data, 0))
