"""Drive the TOSA reference model (``tosa-tools`` wheel) as a test oracle.

``run_reference(op_name, inputs, attributes, output_dtype)`` builds a one-operator TOSA 1.0 graph
and executes it with the reference model, returning the output array or a :class:`ReferenceError`.

How the reference model is driven (the wheel is installed with ``--no-deps``, so ``ml_dtypes``,
``flatbuffers`` and ``jsonschema`` are absent and every helper that needs them is avoided):

1. ``tosa_serializer`` (a pybind11 extension) builds the graph: every operand, including the ordinary
   inputs, becomes a ``CONST`` tensor (``TosaSerializer.addConst(shape, dtype)`` *without* values,
   because passing values imports ``ml_dtypes``); the operator is added with
   ``addOperator(Op.X, input_names, output_names, attribute)`` where ``attribute`` is a
   ``TosaSerializerAttribute`` filled by its ``<Name>Attribute(...)`` method.
2. ``saveFileJson`` (after ``loadFileSchema(<site-packages>/bin/tosa.fbs)``) writes the graph as JSON;
   the constant payloads are patched in as little-endian byte lists (int48 = 6 bytes, bool = 1 byte,
   bf16 = the upper 16 bits of the fp32 pattern). ``shape_t`` operands (PAD padding, RESHAPE shape,
   SLICE start/size, TILE multiples) are not tensors: they go to the block's ``shapes`` list (int64
   bytes) and are produced by a ``CONST_SHAPE`` operator. RESIZE ``scale``/``offset``/``border`` are
   shape operands too (output shape inferred from them unless given). FFT2D/RFFT2D get two outputs of
   the same shape and return a ``(real, imag)`` tuple.
3. A second ``TosaSerializer`` created for version 1.0.0 (non-draft) loads the JSON
   (``loadTosaJson``) and ``serialize()`` returns the flatbuffer bytes.
4. ``tosa_reference_model.run(flatbuffer, [])`` returns ``([outputs], GraphStatus)``; status is
   ``TOSA_VALID`` / ``TOSA_UNPREDICTABLE`` (a REQUIRE failed) / ``TOSA_ERROR`` (an ERROR_IF fired at
   run time). Failing graph validation (most ERROR_IF checks on shapes, types and attributes) raises
   ``ValueError('Invalid TOSA graph')`` instead. bf16 outputs come back as ``|V2`` bytes; int48 outputs
   are not returned at all. ``precise_mode=1`` computes floating-point operators in FP64 and returns
   float64 outputs (used here to measure the ulp error of float results).

``run_reference_graph(regions)`` runs a graph of several regions (one basic block each), for the control
flow operators: a COND_IF / WHILE_LOOP operator names its then/else or cond/body graph by *region* name
(``CondIfAttribute(then_graph, else_graph)``, ``WhileLoopAttribute(cond_graph, body_graph)``; the
reference model looks them up with ``GetRegionByName``). That graph's JSON is written directly (the
serializer only encodes each operator's attribute, through a throw-away one-operator graph): every tensor
is declared with its shape and type, a region's block inputs/outputs are its graph inputs/outputs, CONST
operators come first in each block (the reference model asserts otherwise), and the first region
("main") takes its operands as CONST tensors.

The reference model aborts the whole process on internal assertions (and tries to attach gdb unless
``TOSA_MODEL_NO_BACKTRACE`` is set), so it runs in a persistent worker subprocess that is restarted
if it dies; its stdout/stderr go to a log whose new text is attached to every :class:`ReferenceError`.
"""

from __future__ import annotations

import atexit
import importlib.util
import os
import pickle
import select
import struct
import subprocess
import sys
import tempfile
from dataclasses import astuple, dataclass, field
from typing import Any

import numpy as np

TOSA_TOOLS_VERSION = "2026.8.0"

# TOSA type names used here -> (serializer DType name, bytes per element)
_TYPES = {
    "bool": ("BOOL", 1),
    "int8": ("INT8", 1),
    "int16": ("INT16", 2),
    "int32": ("INT32", 4),
    "int48": ("INT48", 6),
    "fp16": ("FP16", 2),
    "bf16": ("BF16", 2),
    "fp32": ("FP32", 4),
}
_NUMPY_TO_TYPE = {
    np.dtype(np.bool_): "bool",
    np.dtype(np.int8): "int8",
    np.dtype(np.int16): "int16",
    np.dtype(np.int32): "int32",
    np.dtype(np.int64): "int48",
    np.dtype(np.float16): "fp16",
    np.dtype(np.float32): "fp32",
}

# Operands (by position) that are shape_t values rather than tensors.
_SHAPE_OPERANDS = {"PAD": {1}, "RESHAPE": {1}, "SLICE": {1, 2}, "TILE": {1}, "RESIZE": {1, 2, 3}}

# Operators with two outputs of the same shape (returned by run_reference as a tuple).
_TWO_OUTPUTS = {"FFT2D", "RFFT2D"}

# Attribute order of each operator's TosaSerializerAttribute method (TOSA 1.0 attribute names).
_ATTRIBUTE_ORDER = {
    "ARGMAX": ("axis", "nan_mode"),
    "CLAMP": ("min_val", "max_val", "nan_mode"),
    "MAXIMUM": ("nan_mode",),
    "MINIMUM": ("nan_mode",),
    "REDUCE_ALL": ("axis",),
    "REDUCE_ANY": ("axis",),
    "REDUCE_MAX": ("axis", "nan_mode"),
    "REDUCE_MIN": ("axis", "nan_mode"),
    "REDUCE_PRODUCT": ("axis",),
    "REDUCE_SUM": ("axis",),
    "ARITHMETIC_RIGHT_SHIFT": ("round",),
    "CONCAT": ("axis",),
    "REVERSE": ("axis",),
    "TRANSPOSE": ("perms",),
    "RESCALE": ("scale32", "rounding_mode", "per_channel", "input_unsigned", "output_unsigned"),
}
_ATTRIBUTE_DEFAULTS = {
    "nan_mode": "PROPAGATE",
    "round": False,
    "rounding_mode": "SINGLE_ROUND",
    "per_channel": False,
    "input_unsigned": False,
    "output_unsigned": False,
}


class ReferenceError(Exception):  # noqa: A001 - the name is part of the oracle's interface
    """The reference model did not return a valid result.

    ``status`` is ``"ERROR"`` (TOSA_ERROR at run time), ``"INVALID_GRAPH"`` (graph validation failed:
    an ERROR_IF on shapes/types/attributes, or a malformed oracle graph), ``"UNPREDICTABLE"``
    (a REQUIRE failed) or ``"CRASH"`` (the reference model aborted). ``log`` holds its messages.
    (Deliberately shadows the builtin ``ReferenceError`` inside this module only.)
    """

    def __init__(self, status: str, log: str = "") -> None:
        super().__init__(f"{status}: {log.strip()[-2000:]}")
        self.status = status
        self.log = log

    @property
    def is_unpredictable(self) -> bool:
        """UNPREDICTABLE, or a crash right after a REQUIRE failed (INTDIV by zero raises SIGFPE in the
        reference model after its REQUIRE fires)."""
        return self.status == "UNPREDICTABLE" or (self.status == "CRASH" and "REQUIRE() fails" in self.log)

    @property
    def is_error(self) -> bool:
        """True for the statuses a TOSA_ERROR graph produces (run-time or validation)."""
        return self.status in ("ERROR", "INVALID_GRAPH")

    def expected_exception(self) -> type[Exception]:
        """The exception skriptnd.tosa must raise for this outcome: TosaUnpredictable or TosaError
        (AssertionError when the reference model failed otherwise, e.g. crashed)."""
        from skriptnd.tosa.ops import TosaError, TosaUnpredictable

        if self.is_unpredictable:
            return TosaUnpredictable
        if self.is_error:
            return TosaError
        raise AssertionError(f"reference model failed: {self}")


def available() -> bool:
    """Whether the tosa-tools wheel (serializer + reference model) is importable."""
    return all(importlib.util.find_spec(m) is not None for m in ("tosa_serializer", "tosa_reference_model"))


def type_of(array: np.ndarray) -> str:
    """TOSA type name for a numpy array (int64 is taken as int48)."""
    try:
        return _NUMPY_TO_TYPE[array.dtype]
    except KeyError:
        raise TypeError(f"no TOSA type for numpy dtype {array.dtype}") from None


def to_bytes(array: np.ndarray, tosa_type: str) -> list[int]:
    """Little-endian serialization of ``array`` as ``tosa_type`` (bf16 from an fp32 carrier)."""
    a = np.ascontiguousarray(array)
    if tosa_type == "bool":
        return (a != 0).astype(np.uint8).ravel().tolist()
    if tosa_type == "int48":
        return a.astype("<i8").view(np.uint8).reshape(-1, 8)[:, :6].ravel().tolist()
    if tosa_type == "bf16":
        bits = a.astype("<f4").view("<u4") >> 16
        return bits.astype("<u2").view(np.uint8).ravel().tolist()
    dtype = {"int8": "i1", "int16": "<i2", "int32": "<i4", "fp16": "<f2", "fp32": "<f4"}[tosa_type]
    return a.astype(dtype).view(np.uint8).ravel().tolist()


def _infer_output_shape(op: str, inputs: list[np.ndarray], attributes: dict[str, Any]) -> tuple[int, ...]:
    if op in ("CONCAT",):
        axis = attributes["axis"]
        shape = list(inputs[0].shape)
        shape[axis] = sum(int(x.shape[axis]) for x in inputs)
        return tuple(shape)
    if op == "PAD":
        pads = [int(v) for v in inputs[1]]
        return tuple(d + pads[2 * i] + pads[2 * i + 1] for i, d in enumerate(inputs[0].shape))
    if op == "RESHAPE":
        return tuple(int(v) for v in inputs[1])
    if op == "SLICE":
        return tuple(int(v) for v in inputs[2])
    if op == "TILE":
        return tuple(d * int(m) for d, m in zip(inputs[0].shape, inputs[1], strict=False))
    if op == "TRANSPOSE":
        return tuple(inputs[0].shape[p] for p in attributes["perms"])
    if op == "RESIZE":
        n, ih, iw, c = inputs[0].shape
        (yn, yd, xn, xd), (oy, ox), (by, bx) = ([int(v) for v in a] for a in inputs[1:4])
        return (n, ((ih - 1) * yn - oy + by) // yd + 1, ((iw - 1) * xn - ox + bx) // xd + 1, c)
    if op == "RFFT2D":
        n, h, w = inputs[0].shape
        return (n, h, w // 2 + 1)
    if op == "GATHER":
        n, _, c = inputs[0].shape
        return (n, inputs[1].shape[1], c)
    if op.startswith("REDUCE_"):
        shape = list(inputs[0].shape)
        shape[attributes["axis"]] = 1
        return tuple(shape)
    if op == "ARGMAX":
        shape = list(inputs[0].shape)
        del shape[attributes["axis"]]
        return tuple(shape)
    if op in ("ADD", "SUB", "MUL", "INTDIV", "POW", "MAXIMUM", "MINIMUM", "EQUAL", "GREATER", "GREATER_EQUAL",
              "ARITHMETIC_RIGHT_SHIFT", "LOGICAL_LEFT_SHIFT", "LOGICAL_RIGHT_SHIFT", "BITWISE_AND", "BITWISE_OR",
              "BITWISE_XOR", "LOGICAL_AND", "LOGICAL_OR", "LOGICAL_XOR"):
        return tuple(np.broadcast_shapes(inputs[0].shape, inputs[1].shape))
    if op == "SELECT":
        return tuple(np.broadcast_shapes(*(x.shape for x in inputs)))
    return tuple(inputs[0].shape)


@dataclass
class _Request:
    op: str
    operands: list[tuple[tuple[int, ...], str, list[int], bool]]  # shape, type, bytes, is_shape_t
    attributes: dict[str, Any]
    output_shape: tuple[int, ...]
    output_type: str


def run_reference(
    op_name: str,
    inputs: list[np.ndarray],
    attributes: dict[str, Any] | None = None,
    output_dtype: str | np.dtype | type = "int32",
    *,
    input_types: list[str | None] | None = None,
    output_shape: tuple[int, ...] | None = None,
    timeout: float = 120.0,
) -> np.ndarray | ReferenceError:
    """Run one TOSA 1.0 operator on the reference model.

    ``inputs`` are all input operands in TOSA 1.0 order, constant ones included (MUL ``shift``,
    NEGATE/RESCALE zero points, TABLE ``table``, PAD ``padding``/``pad_const``, ...). Their TOSA types
    come from the numpy dtypes (int64 means int48) unless ``input_types`` names them (``"bf16"`` with
    an fp32 carrier array, for instance). ``attributes`` are the TOSA 1.0 attributes by name
    (``nan_mode`` and ``rounding_mode`` as enum names; CLAMP ``min_val``/``max_val`` as numbers).
    ``output_dtype`` is a TOSA type name or a numpy dtype. bf16 outputs are returned as float32 carriers.
    """
    attributes = dict(attributes or {})
    out_type = output_dtype if isinstance(output_dtype, str) else _NUMPY_TO_TYPE[np.dtype(output_dtype)]
    shape_ops = _SHAPE_OPERANDS.get(op_name, set())
    operands = []
    for i, x in enumerate(inputs):
        x = np.asarray(x)
        if i in shape_ops:
            operands.append(((len(x),), "shape", np.asarray(x, "<i8").view(np.uint8).tolist(), True))
            continue
        t = (input_types[i] if input_types and i < len(input_types) else None) or type_of(x)
        operands.append((tuple(int(d) for d in x.shape), t, to_bytes(x, t), False))
    if output_shape is None:
        output_shape = _infer_output_shape(op_name, [np.asarray(x) for x in inputs], attributes)
    request = _Request(op_name, operands, attributes, tuple(int(d) for d in output_shape), out_type)
    return _worker().call(request, timeout)


@dataclass
class Region:
    """One region (a single basic block) of a graph for :func:`run_reference_graph`.

    ``inputs``/``outputs`` name the block's graph inputs/outputs; ``tensors`` declares the shape and TOSA
    type of every other tensor (constants may be left out: they take their shape and type from the
    array); ``operators`` are ``(op, input_names, output_names, attributes)`` in execution order, with
    the attributes of :func:`run_reference` (COND_IF: ``then_graph``/``else_graph``, WHILE_LOOP:
    ``cond_graph``/``body_graph``: region names); ``constants`` become CONST operators.
    """

    name: str
    inputs: list[str]
    outputs: list[str]
    tensors: dict[str, tuple[tuple[int, ...], str]]
    operators: list[tuple[str, list[str], list[str], dict[str, Any]]]
    constants: dict[str, np.ndarray] = field(default_factory=dict)

    def encode(self) -> dict[str, Any]:
        tensors = {n: (tuple(int(d) for d in s), t) for n, (s, t) in self.tensors.items()}
        data = {}
        for n, v in self.constants.items():
            carrier = input_types_of([v])[0]
            v = np.asarray(v)
            t = tensors[n][1] if n in tensors else carrier or type_of(v)
            tensors[n] = (tuple(int(d) for d in v.shape), t)
            data[n] = to_bytes(v, t)
        return {"name": self.name, "inputs": list(self.inputs), "outputs": list(self.outputs), "tensors": tensors,
                "operators": [(op, list(i), list(o), dict(a)) for op, i, o, a in self.operators], "data": data}


def run_reference_graph(regions: list[Region], timeout: float = 120.0, *,
                        tosa_level: str = "NONE") -> list[np.ndarray] | ReferenceError:
    """Run a multi-region TOSA 1.0 graph; ``regions[0]`` is the main graph (no inputs: its operands are
    constants). Returns the main graph's outputs (bf16 as float32 carriers; int48 is not returned).
    ``tosa_level`` ("NONE" or "EIGHTK") selects the reference model's level checks (MAX_NESTING ...)."""
    return _worker().call(("__graph__", [r.encode() for r in regions], tosa_level), timeout)


# --------------------------------------------------------------------------------------------------
# Parent side: a persistent worker process.


class _Worker:
    def __init__(self) -> None:
        self.proc: subprocess.Popen[bytes] | None = None
        self.workdir = ""

    def start(self) -> None:
        env = dict(os.environ, TOSA_MODEL_NO_BACKTRACE="1")
        self.workdir = tempfile.mkdtemp(prefix="tosa_oracle_")
        self.proc = subprocess.Popen(
            [sys.executable, os.path.abspath(__file__), "--worker", self.workdir],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env,
        )

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self.proc = None

    def call(self, request: _Request | tuple, timeout: float) -> Any:
        if self.proc is None or self.proc.poll() is not None:
            self.start()
        assert self.proc is not None and self.proc.stdin and self.proc.stdout
        payload = pickle.dumps(astuple(request) if isinstance(request, _Request) else request)
        try:
            self.proc.stdin.write(struct.pack("<Q", len(payload)) + payload)
            self.proc.stdin.flush()
            reply = _read_message(self.proc.stdout, timeout)
        except (BrokenPipeError, EOFError, TimeoutError) as exc:
            self.stop()
            return ReferenceError("CRASH", f"reference model worker died: {exc!r}\n{self._log_tail()}")
        kind, value, log = pickle.loads(reply)
        if kind == "ok":
            return value
        return ReferenceError(kind, log)


    def _log_tail(self) -> str:
        try:
            with open(os.path.join(self.workdir, "log.txt"), "rb") as f:
                return f.read()[-3000:].decode("utf-8", "replace")
        except OSError:
            return ""


def _read_message(stream, timeout: float) -> bytes:
    fd = stream.fileno()
    header = _read_exact(fd, 8, timeout)
    (n,) = struct.unpack("<Q", header)
    return _read_exact(fd, n, timeout)


def _read_exact(fd: int, n: int, timeout: float) -> bytes:
    chunks = []
    while n:
        ready, _, _ = select.select([fd], [], [], timeout)
        if not ready:
            raise TimeoutError("reference model did not answer")
        chunk = os.read(fd, n)
        if not chunk:
            raise EOFError("worker closed its pipe")
        chunks.append(chunk)
        n -= len(chunk)
    return b"".join(chunks)


_WORKER: _Worker | None = None


def _worker() -> _Worker:
    global _WORKER
    if _WORKER is None:
        _WORKER = _Worker()
        atexit.register(_WORKER.stop)
    return _WORKER


# --------------------------------------------------------------------------------------------------
# Worker side: build the graph and run it.


_ACC_TYPES = {"int32": "INT32", "int48": "INT48", "fp16": "FP16", "fp32": "FP32"}
_CONV_ATTRIBUTES = {"CONV2D": "Conv2dAttribute", "DEPTHWISE_CONV2D": "DepthwiseConv2dAttribute",
                    "CONV3D": "Conv3dAttribute"}


def _tensor_attribute(ts, op: str, attributes: dict[str, Any]):
    """Attributes of the tensor operators (convolutions, pools, MATMUL), or None for other ops."""
    attr = ts.TosaSerializerAttribute()
    acc = getattr(ts.DType, _ACC_TYPES.get(attributes.get("acc_type") or "", "FP32"))
    if op in _CONV_ATTRIBUTES:
        getattr(attr, _CONV_ATTRIBUTES[op])(list(attributes["pad"]), list(attributes["stride"]),
                                            list(attributes["dilation"]), False, acc)
    elif op == "TRANSPOSE_CONV2D":
        attr.TransposeConv2dAttribute(list(attributes["out_pad"]), list(attributes["stride"]), False, acc)
    elif op == "MATMUL":
        attr.MatMulAttribute()
    elif op == "MAX_POOL2D":
        attr.MaxPool2dAttribute(list(attributes["kernel"]), list(attributes["stride"]), list(attributes["pad"]),
                                getattr(ts.NanPropagationMode, attributes.get("nan_mode", "PROPAGATE")))
    elif op == "AVG_POOL2D":
        attr.AvgPool2dAttribute(list(attributes["kernel"]), list(attributes["stride"]), list(attributes["pad"]), acc)
    elif op == "RESIZE":
        mode = {"NEAREST_NEIGHBOR": "NEAREST"}.get(attributes["mode"], attributes["mode"])
        attr.ResizeAttribute(getattr(ts.ResizeMode, mode))
    elif op == "FFT2D":
        attr.FFT2dAttribute(bool(attributes.get("inverse", False)), bool(attributes.get("local_bound", False)))
    elif op == "RFFT2D":
        attr.RFFT2dAttribute(bool(attributes.get("local_bound", False)))
    else:
        return None
    return attr


def _attribute(ts, op: str, attributes: dict[str, Any], input_type: str):
    tensor_attr = _tensor_attribute(ts, op, attributes)
    if tensor_attr is not None:
        return tensor_attr
    attr = ts.TosaSerializerAttribute()
    method = next(
        name for name in dir(attr)
        if name.endswith("Attribute") and name[: -len("Attribute")].lower() == op.replace("_", "").lower()
    )
    args = []
    for name in _ATTRIBUTE_ORDER.get(op, ()):
        value = attributes.get(name, _ATTRIBUTE_DEFAULTS.get(name))
        if name == "nan_mode":
            value = getattr(ts.NanPropagationMode, value)
        elif name == "rounding_mode":
            value = getattr(ts.RoundingMode, value)
        elif name in ("min_val", "max_val"):
            value = to_bytes(np.asarray([value], dtype=np.float32 if input_type == "bf16" else None), input_type)
            value = value + [0] * (-len(value) % 8)
        elif name == "perms":
            value = [int(v) for v in value]
        args.append(value)
    getattr(attr, method)(*args)
    return attr


def _from_bf16(value: np.ndarray) -> np.ndarray:
    """float32 values of the reference model's bf16 output bytes (``|V2``: the upper 16 bits)."""
    return (np.frombuffer(value.tobytes(), "<u2").astype(np.uint32) << 16).view(np.float32)


def _load_and_run(workdir: str, fbs: str, path: str, tosa_level: str = "NONE") -> list[np.ndarray]:
    """The outputs of the graph JSON at ``path``, serialized (TOSA 1.0) and run by the reference model;
    :class:`_Status` for an invalid graph or a status other than TOSA_VALID."""
    import tosa_reference_model as trm
    import tosa_serializer as ts

    loader = ts.TosaSerializer(workdir, targetMajor=1, targetMinor=0, targetPatch=0, targetDraft=False)
    loader.loadFileSchema(fbs)
    if not loader.loadTosaJson(path):
        raise RuntimeError("loadTosaJson failed")
    try:
        outputs, status = trm.run(loader.serialize(), [], tosa_level=tosa_level)
    except ValueError as exc:
        raise _Status("INVALID_GRAPH", str(exc)) from None
    if status != trm.GraphStatus.TOSA_VALID:
        raise _Status({1: "UNPREDICTABLE", 2: "ERROR"}.get(int(status), str(status)), "")
    return outputs


def _run(request: _Request, workdir: str) -> np.ndarray:
    import json

    import tosa_serializer as ts

    fbs = os.path.join(os.path.dirname(os.path.dirname(ts.__file__)), "bin", "tosa.fbs")
    ser = ts.TosaSerializer(workdir, targetMajor=1, targetMinor=0, targetPatch=0, targetDraft=False)
    ser.loadFileSchema(fbs)
    names, payload, shapes = [], {}, []
    for i, (shape, t, data, is_shape) in enumerate(request.operands):
        if is_shape:
            name = f"shape{i}"
            shapes.append({"name": name, "rank": shape[0], "data": data})
        else:
            tensor = ser.addConst(list(shape), getattr(ts.DType, _TYPES[t][0]))
            name = tensor.name
            payload[name] = data
        names.append(name)
    first_type = next((t for (_, t, _, s) in request.operands if not s), "int32")
    n_out = 2 if request.op in _TWO_OUTPUTS else 1
    outs = [ser.addOutput(list(request.output_shape), getattr(ts.DType, _TYPES[request.output_type][0]))
            for _ in range(n_out)]
    attr = _attribute(ts, request.op, request.attributes, first_type)
    ser.addOperator(getattr(ts.Op, request.op), names, [o.name for o in outs], attr)
    path = os.path.join(workdir, "graph.json")
    if ser.saveFileJson(path) != ts.TosaError.TOSA_OK:
        raise RuntimeError("saveFileJson failed")
    with open(path) as f:
        graph = json.load(f)
    block = graph["regions"][0]["blocks"][0]
    for tensor in block["tensors"]:
        if tensor["name"] in payload:
            tensor["data"] = payload[tensor["name"]]
    block["shapes"] = shapes
    for s in shapes:
        block["operators"].insert(0, {"op": "CONST_SHAPE", "attribute_type": "ConstShapeAttribute",
                                      "attribute": {}, "inputs": [], "outputs": [s["name"]]})
    with open(path, "w") as f:
        json.dump(graph, f)
    outputs = _load_and_run(workdir, fbs, path)
    if n_out > 1:
        return tuple(np.asarray(o).reshape(request.output_shape) for o in outputs)
    result = outputs[0]
    if request.output_type == "bf16":
        result = _from_bf16(result).reshape(request.output_shape)
    return np.asarray(result).reshape(request.output_shape)


_GRAPH_ATTRIBUTES = {"COND_IF": ("CondIfAttribute", ("then_graph", "else_graph")),
                     "WHILE_LOOP": ("WhileLoopAttribute", ("cond_graph", "body_graph"))}


def _attribute_json(ts, fbs: str, workdir: str, op: str, attributes: dict[str, Any], input_type: str):
    """(attribute_type, attribute) of one operator as the serializer writes them in JSON."""
    import json

    if op in _GRAPH_ATTRIBUTES:
        kind, names = _GRAPH_ATTRIBUTES[op]
        return kind, {n: attributes[n] for n in names}
    if op == "CONST":
        return "ConstAttribute", {}
    ser = ts.TosaSerializer(workdir, targetMajor=1, targetMinor=0, targetPatch=0, targetDraft=False)
    ser.loadFileSchema(fbs)
    ser.addOperator(getattr(ts.Op, op), [], [], _attribute(ts, op, attributes, input_type))
    path = os.path.join(workdir, "attribute.json")
    if ser.saveFileJson(path) != ts.TosaError.TOSA_OK:
        raise RuntimeError("saveFileJson failed")
    with open(path) as f:
        operator = json.load(f)["regions"][0]["blocks"][0]["operators"][-1]
    return operator["attribute_type"], operator["attribute"]


def _run_graph(regions: list[dict[str, Any]], workdir: str, tosa_level: str = "NONE") -> list[np.ndarray]:
    import json

    import tosa_serializer as ts

    fbs = os.path.join(os.path.dirname(os.path.dirname(ts.__file__)), "bin", "tosa.fbs")
    out_regions = []
    for r in regions:
        tensors = [{"name": n, "shape": list(shape), "type": _TYPES[t][0], "data": r["data"].get(n, []),
                    "variable_name": "", "scale_data": []} for n, (shape, t) in r["tensors"].items()]
        operators = [{"op": "CONST", "attribute_type": "ConstAttribute", "attribute": {}, "inputs": [],
                      "outputs": [n]} for n in r["data"]]
        for op, ins, outs, attributes in r["operators"]:
            first = next((r["tensors"][i][1] for i in ins if i in r["tensors"]), "int32")
            kind, attr = _attribute_json(ts, fbs, workdir, op, attributes, first)
            operators.append({"op": op, "attribute_type": kind, "attribute": attr, "inputs": ins, "outputs": outs})
        block = {"name": r["name"], "operators": operators, "tensors": tensors, "inputs": r["inputs"],
                 "outputs": r["outputs"], "shapes": []}
        out_regions.append({"name": r["name"], "blocks": [block]})
    graph = {"version": {"_major": 1, "_minor": 0, "_patch": 0, "_draft": False}, "regions": out_regions}
    path = os.path.join(workdir, "graph.json")
    with open(path, "w") as f:
        json.dump(graph, f)
    outputs = _load_and_run(workdir, fbs, path, tosa_level)
    main = regions[0]
    results = []
    for name, value in zip(main["outputs"], outputs, strict=False):
        shape, t = main["tensors"][name]
        if t == "bf16":
            value = _from_bf16(value)
        results.append(np.asarray(value).reshape(shape))
    return results


class _Status(Exception):
    def __init__(self, status: str, message: str) -> None:
        super().__init__(message)
        self.status = status


def _serve(workdir: str) -> None:
    log_path = os.path.join(workdir, "log.txt")
    proto_in = os.fdopen(os.dup(0), "rb", buffering=0)
    proto_out = os.fdopen(os.dup(1), "wb", buffering=0)
    log_fd = os.open(log_path, os.O_RDWR | os.O_CREAT | os.O_TRUNC)
    os.dup2(log_fd, 1)
    os.dup2(log_fd, 2)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    while True:
        header = proto_in.read(8)
        if len(header) < 8:
            return
        (n,) = struct.unpack("<Q", header)
        data = b""
        while len(data) < n:
            chunk = proto_in.read(n - len(data))
            if not chunk:
                return
            data += chunk
        message_in = pickle.loads(data)
        start = os.lseek(log_fd, 0, os.SEEK_END)
        try:
            if message_in[0] == "__graph__":
                reply = ("ok", _run_graph(message_in[1], workdir, *message_in[2:]), "")
            else:
                reply = ("ok", _run(_Request(*message_in), workdir), "")
        except _Status as exc:
            reply = (exc.status, None, str(exc))
        except Exception as exc:  # oracle bug: report, keep serving
            reply = ("ORACLE_FAILURE", None, repr(exc))
        sys.stdout.flush()
        sys.stderr.flush()
        with open(log_path, "rb") as f:
            f.seek(start)
            log = f.read().decode("utf-8", "replace")
        kind, value, message = reply
        message = (message + "\n" + log).strip()
        out = pickle.dumps((kind, value, message))
        proto_out.write(struct.pack("<Q", len(out)) + out)


if __name__ == "__main__" and "--worker" in sys.argv:
    _serve(sys.argv[sys.argv.index("--worker") + 1])


# --------------------------------------------------------------------------------------------------
# Test helpers: availability, random data, ulp comparison.


def seeded_rng(tag: str, *key: object) -> np.random.Generator:
    """A generator per (test file tag, case key), varied by the TOSA_TEST_SEED environment variable."""
    import zlib

    return np.random.default_rng(zlib.crc32(repr((tag, os.environ.get("TOSA_TEST_SEED", "")) + key).encode()))


def require_oracle() -> None:
    """Skip the calling test when the wheel is missing locally; in CI (``CI`` set) fail instead."""
    if available():
        return
    import pytest

    if os.environ.get("CI"):
        pytest.fail("tosa-tools (the TOSA reference model) is not installed; .ci/run installs it")
    pytest.skip("tosa-tools is not installed (pip install --no-deps tosa-tools==" + TOSA_TOOLS_VERSION + ")")


_RUN_FLATBUFFER = """
import sys, numpy as np, tosa_reference_model as trm
fb, out, *inputs = sys.argv[1:]
outputs, status = trm.run(open(fb, 'rb').read(), [np.load(p) for p in inputs])
assert status == trm.GraphStatus.TOSA_VALID, status
np.save(out, np.asarray(outputs[0]))
"""


def run_flatbuffer(fb: bytes | os.PathLike[str], inputs: list[np.ndarray], workdir: os.PathLike[str],
                   timeout: float = 120.0) -> np.ndarray:
    """The first output of a whole TOSA flatbuffer (``fb``: its bytes or its file) run by the reference
    model on ``inputs``, in a subprocess of its own (an abort takes only it down); asserts the run is
    TOSA_VALID. The flatbuffer bytes, the inputs and the output go to ``workdir`` as ``reference*`` files."""
    from pathlib import Path

    workdir = Path(workdir)
    if isinstance(fb, bytes):
        (workdir / "reference.tosa").write_bytes(fb)
        fb = workdir / "reference.tosa"
    paths = []
    for i, x in enumerate(inputs):
        paths.append(workdir / f"reference_in{i}.npy")
        np.save(paths[-1], x)
    out = workdir / "reference_out.npy"
    proc = subprocess.run([sys.executable, "-c", _RUN_FLATBUFFER, str(fb), str(out), *map(str, paths)],
                          capture_output=True, text=True, env={"TOSA_MODEL_NO_BACKTRACE": "1", "PATH": ""},
                          timeout=timeout)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return np.load(out)


def require_tosa_opt() -> None:
    """Like :func:`require_oracle`, for tosa-tools' ``tosa-opt`` (MLIR validation and serialization)."""
    require_oracle()
    from skriptnd.tosa.mlir.export import tosa_opt_path

    if tosa_opt_path() is None:
        import pytest

        if os.environ.get("CI"):
            pytest.fail("tosa-opt (tosa-tools) is not installed; .ci/run installs it")
        pytest.skip("tosa-opt (tosa-tools) is not installed")


def float_bits(x: np.ndarray, tosa_type: str) -> np.ndarray:
    """Sign-magnitude bit patterns of float values of ``tosa_type`` mapped to ordered int64."""
    x = np.asarray(x)
    if tosa_type == "fp16":
        b = x.astype(np.float16).view(np.uint16).astype(np.int64)
        sign, mag = b >> 15, b & 0x7FFF
    else:
        b = x.astype(np.float32).view(np.uint32).astype(np.int64)
        if tosa_type == "bf16":
            b = b >> 16
            sign, mag = b >> 15, b & 0x7FFF
        else:
            sign, mag = b >> 31, b & 0x7FFFFFFF
    return np.where(sign == 1, -mag, mag)


def ulp_distance(a: np.ndarray, b: np.ndarray, tosa_type: str) -> np.ndarray:
    """Distance in representable steps of ``tosa_type`` (0 for NaN vs NaN, inf for NaN vs number).
    -0 and +0 are at distance 0."""
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    d = np.abs(float_bits(a, tosa_type) - float_bits(b, tosa_type)).astype(np.float64)
    na, nb = np.isnan(a), np.isnan(b)
    return np.where(na & nb, 0.0, np.where(na | nb, np.inf, d))


def same_bits(a: np.ndarray, b: np.ndarray, tosa_type: str) -> bool:
    """Exact equality including the sign of zero (any NaN equals any NaN)."""
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    if a.shape != b.shape:
        return False
    na, nb = np.isnan(a), np.isnan(b)
    return bool(np.array_equal(na, nb) and np.array_equal(float_bits(a, tosa_type)[~na], float_bits(b, tosa_type)[~nb]))


_MIN_NORMAL = {"fp16": 2.0**-14, "bf16": 2.0**-126, "fp32": 2.0**-126}
_EPS = {"fp16": 2.0**-10, "bf16": 2.0**-7, "fp32": 2.0**-23}


def input_types_of(inputs: list[Any]) -> list[str | None]:
    """Oracle input types for operands built with ``skriptnd.tosa.ops.bf16`` (None: from the dtype)."""
    return ["bf16" if type(x).__name__ == "BF16Array" else None for x in inputs]


def compare_with_reference(op: str, inputs: list[Any], attributes: dict[str, Any], output_type: str, *,
                           ulps: float = 0, abs_tol: float = 0.0, flush_subnormals: bool = False,
                           mine_kwargs: dict[str, Any] | None = None, oracle_inputs: list[Any] | None = None,
                           output_shape: tuple[int, ...] | None = None) -> np.ndarray | ReferenceError:
    """Run ``skriptnd.tosa.ops.OPS[op]`` and the reference model on the same operands and assert agreement.

    Integer and bool results must be identical. Float results must be identical bit for bit
    (sign of zero included) when ``ulps == 0 and abs_tol == 0``; otherwise each element must be within
    ``ulps`` representable steps of the output type or within ``abs_tol`` × eps(output type) absolutely.
    ``flush_subnormals`` accepts ±0 from the reference where the exact result is subnormal.
    When the reference reports an error the implementation must raise the matching exception.
    """
    from skriptnd.tosa.ops import OPS

    ref = run_reference(op, list(oracle_inputs if oracle_inputs is not None else inputs), attributes,
                        output_type, input_types=input_types_of(list(inputs)), output_shape=output_shape)
    kwargs = dict(attributes if mine_kwargs is None else mine_kwargs)
    if isinstance(ref, ReferenceError):
        expected = ref.expected_exception()
        try:
            OPS[op](*inputs, **kwargs)
        except expected:
            return ref
        raise AssertionError(f"{op}: reference says {ref.status}, implementation did not raise "
                             f"{expected.__name__}\n{ref.log[-1500:]}")
    with np.errstate(all="ignore"):
        mine = OPS[op](*inputs, **kwargs)
    mine_a = np.asarray(mine)
    assert mine_a.shape == ref.shape, f"{op}: shape {mine_a.shape} != reference {ref.shape}"
    if output_type in _EPS:
        if ulps == 0 and abs_tol == 0 and not flush_subnormals:
            assert same_bits(mine_a, ref, output_type), f"{op}: {mine_a} != reference {ref}"
            return ref
        d = ulp_distance(mine_a, ref, output_type)
        a64, r64 = mine_a.astype(np.float64), ref.astype(np.float64)
        with np.errstate(invalid="ignore"):
            ok = (d <= ulps) | (np.abs(a64 - r64) <= abs_tol * _EPS[output_type])
            if flush_subnormals:
                ok |= (r64 == 0) & (np.abs(a64) < _MIN_NORMAL[output_type])
        bad = np.flatnonzero(~ok.reshape(-1))
        assert bad.size == 0, (f"{op} {output_type}: {bad.size} elements beyond {ulps} ulp / {abs_tol} eps, e.g. "
                               f"mine {a64.reshape(-1)[bad[:5]]} ref {r64.reshape(-1)[bad[:5]]}")
        return ref
    assert mine_a.dtype == ref.dtype, f"{op}: dtype {mine_a.dtype} != reference {ref.dtype}"
    assert np.array_equal(mine_a, ref), f"{op}: {mine_a} != reference {ref}"
    return ref


# --------------------------------------------------------------------------------------------------
# Random operands (seeded numpy generators).

INT_LIMITS = {"int8": (-(1 << 7), (1 << 7) - 1), "int16": (-(1 << 15), (1 << 15) - 1),
              "int32": (-(1 << 31), (1 << 31) - 1), "int48": (-(1 << 47), (1 << 47) - 1)}
_NP_INT = {"int8": np.int8, "int16": np.int16, "int32": np.int32, "int48": np.int64}


def rand_shape(rng: np.random.Generator, min_rank: int = 0, max_rank: int = 4, max_dim: int = 4) -> tuple[int, ...]:
    return tuple(int(d) for d in rng.integers(1, max_dim + 1, size=int(rng.integers(min_rank, max_rank + 1))))


def broadcast_partner(rng: np.random.Generator, shape: tuple[int, ...]) -> tuple[int, ...]:
    """A shape that broadcasts with ``shape`` (some dimensions set to 1)."""
    return tuple(1 if rng.random() < 0.3 else d for d in shape)


def rand_int(rng: np.random.Generator, t: str, shape: tuple[int, ...], lo: int | None = None,
             hi: int | None = None, edge_fraction: float = 0.2) -> np.ndarray:
    """Uniform integers of type ``t`` in [lo, hi] (default: the type range) with the range ends,
    0 and ±1 mixed in."""
    tlo, thi = INT_LIMITS[t]
    lo = tlo if lo is None else lo
    hi = thi if hi is None else hi
    v = rng.integers(lo, hi, size=shape, endpoint=True, dtype=np.int64)
    edges = np.array([e for e in (lo, hi, 0, 1, -1, lo + 1, hi - 1) if lo <= e <= hi], np.int64)
    mask = rng.random(shape) < edge_fraction
    v = np.where(mask, rng.choice(edges, size=shape), v)
    return np.asarray(v).astype(_NP_INT[t])


def make_float(values: Any, t: str) -> np.ndarray:
    """Float operand of TOSA type ``t`` (fp16/fp32 arrays, bf16 as a BF16Array carrier)."""
    from skriptnd.tosa.ops import bf16

    with np.errstate(over="ignore"):
        if t == "fp16":
            return np.asarray(values, np.float64).astype(np.float16)
        if t == "fp32":
            return np.asarray(values, np.float64).astype(np.float32)
    return bf16(values)


SPECIALS = (0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0)


def rand_float(rng: np.random.Generator, t: str, shape: tuple[int, ...], lo: float, hi: float,
               special_fraction: float = 0.1, log_scale: bool = False) -> np.ndarray:
    """Uniform (or log-uniform for positive ranges) floats of type ``t`` with ±0, ±inf, NaN, ±1 mixed in."""
    if log_scale:
        v = np.exp(rng.uniform(np.log(lo), np.log(hi), size=shape))
    else:
        v = rng.uniform(lo, hi, size=shape)
    if special_fraction:
        mask = rng.random(shape) < special_fraction
        v = np.where(mask, rng.choice(np.array(SPECIALS), size=shape), v)
    return make_float(v, t)
