"""Bring an ONNX model into the one form the converters handle, with the `onnx` package only.

Steps: load (with external data), `onnx.checker`, version conversion of older opsets up to
`TARGET_OPSET` (so converters see opset-13+ forms: Squeeze/Unsqueeze/Split axes as inputs, Softmax on
one axis, ...), `--input-shape` overrides of the graph inputs, then shape inference with data
propagation (so shapes computed by Shape→Gather→Concat chains are known). Every failure is a
diagnostic located at the model file, never a traceback.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING

from skriptnd.diagnostics import DiagnosticError
from skriptnd.extras import install_hint
from skriptnd.interop.onnx_import.errors import diagnostic
from skriptnd.untrusted import UnsafeFile, contained, open_regular

if TYPE_CHECKING:  # onnx is an optional dependency, imported when importing a model
    from onnx import GraphProto, ModelProto, TensorProto, TensorShapeProto

#: Models older than this are converted up to it; the converters are written for opset 13 and later.
TARGET_OPSET = 13
#: The oldest opset the version converter is asked to upgrade.
OLDEST_OPSET = 1


def require_onnx(source: str | Path) -> ModuleType:
    try:
        import onnx
    except ImportError:
        raise DiagnosticError([diagnostic(
            "E0800", "importing ONNX models needs the onnx package, which is not installed", source,
            hint=install_hint("onnx"))]) from None
    return onnx


def load(src: str | Path | ModelProto, source: str | Path) -> ModelProto:
    """The ModelProto of a path (external data loaded from beside it) or a ModelProto as given."""
    onnx = require_onnx(source)
    if isinstance(src, onnx.ModelProto):
        check_contents(src, source)
        return src
    path = Path(src)
    if not path.is_file():
        raise DiagnosticError([diagnostic("E0801", f"no such ONNX file: {path}", source)])
    try:
        model = onnx.load(str(path), load_external_data=False)
    except Exception as err:  # noqa: BLE001 - protobuf raises DecodeError, ValueError, RuntimeWarning ...
        raise DiagnosticError([diagnostic(
            "E0801", f"{path} is not a readable ONNX model (corrupt or truncated?): {_first_line(err)}", source)]) \
            from None
    if not model.graph.node and not model.graph.output:
        raise DiagnosticError([diagnostic("E0801", f"{path} holds no ONNX graph (empty or not an ONNX file)",
                                          source)])
    _load_external(model, path.parent, source)
    check_contents(model, source)
    return model


def check_contents(model: ModelProto, source: str | Path) -> None:
    """What onnx.checker lets through and the converters would trip on, as located E0803 diagnostics:
    a tensor whose raw data is longer or shorter than its dims and type say, a string attribute that is
    not UTF-8 text (in the main graph and every subgraph)."""
    problems: list[str] = []

    def tensor(t: TensorProto, where: str) -> None:
        if not t.HasField("raw_data") or t.data_location == t.EXTERNAL:
            return
        need = _data_bytes(t)
        if need is not None and len(t.raw_data) != need:
            problems.append(f"{where} '{t.name}' holds {len(t.raw_data):,} bytes of raw data, but its dims "
                            f"{list(t.dims)} and type need {need:,}")

    def graph(g: GraphProto) -> None:
        for t in g.initializer:
            tensor(t, "initializer")
        for node in g.node:
            where = f"node '{node.name}' ({node.op_type})"
            for a in node.attribute:
                texts = [a.s] if a.type == a.STRING else list(a.strings) if a.type == a.STRINGS else []
                for text in texts:
                    try:
                        text.decode("utf-8")
                    except UnicodeDecodeError:
                        problems.append(f"{where}: attribute '{a.name}' is not UTF-8 text ({text[:20]!r})")
                for t in [a.t] if a.type == a.TENSOR else list(a.tensors) if a.type == a.TENSORS else []:
                    tensor(t, f"{where}, attribute '{a.name}': tensor")
                for sub in [a.g] if a.type == a.GRAPH else list(a.graphs) if a.type == a.GRAPHS else []:
                    graph(sub)

    graph(model.graph)
    if problems:
        raise DiagnosticError([diagnostic("E0803", f"the model is invalid: {problem}", source)
                               for problem in problems[:10]])


def _load_external(model: ModelProto, base: Path, source: str | Path) -> None:
    """Read each initializer's external data into it, ourselves rather than with onnx's helper: a location
    names a regular file inside the model's folder (links resolved: never '../x', '/etc/x' or a link
    leading out), and the bytes read are exactly those the tensor's dims need, checked against the file's
    size first (a sparse or endless file costs nothing)."""
    from onnx.external_data_helper import uses_external_data

    missing: list[str] = []
    problems: list[str] = []
    for tensor in _all_tensors(model):
        if not uses_external_data(tensor):
            continue
        info = {e.key: e.value for e in tensor.external_data}
        location = info.get("location", "")
        where = f"initializer '{tensor.name}'"
        try:
            path = contained(base, location)
        except UnsafeFile as err:
            problems.append(f"the external data location '{location}' of {where} {err.reason}")
            continue
        if not path.exists():
            missing.append(f"'{location}' ({where})")
            continue
        problem = _read_external(tensor, path, info, location, where)
        if problem:
            problems.append(problem)
    if missing:
        raise DiagnosticError([diagnostic(
            "E0802", f"external data file{'s' if len(missing) > 1 else ''} not found beside the model: "
            + ", ".join(sorted(set(missing))), source,
            hint="copy the data files next to the .onnx file (their names are given relative to it)")])
    if problems:
        raise DiagnosticError([diagnostic("E0802", problem, source) for problem in problems])


def _data_bytes(tensor: TensorProto) -> int | None:
    """The bytes of a tensor's data as its dims and type say (None: a type without a fixed size, or dims
    that are not sizes)."""
    import math

    from onnx import TensorProto, helper

    if tensor.data_type in (TensorProto.UNDEFINED, TensorProto.STRING):
        return None
    if any(int(d) < 0 for d in tensor.dims):
        return None
    count = math.prod(int(d) for d in tensor.dims)
    bits = {TensorProto.INT4: 4, TensorProto.UINT4: 4}.get(tensor.data_type)
    if bits is None and getattr(TensorProto, "FLOAT4E2M1", None) == tensor.data_type:
        bits = 4
    if bits is None:
        try:
            bits = 8 * helper.tensor_dtype_to_np_dtype(tensor.data_type).itemsize
        except (KeyError, TypeError, ValueError):
            return None
    return (count * bits + 7) // 8


def _read_external(tensor: TensorProto, path: Path, info: dict[str, str], location: str, where: str) -> str | None:
    """Fill tensor.raw_data from its external file; the problem in words, or None."""
    from onnx import TensorProto

    need = _data_bytes(tensor)
    if need is None or any(int(d) < 0 for d in tensor.dims):
        return f"{where} keeps data of type {tensor.data_type} with dims {list(tensor.dims)} in '{location}'; " \
               "only numeric tensors can have external data"
    try:
        offset = int(info.get("offset") or 0)
        length = int(info["length"]) if info.get("length") else None
    except ValueError:
        return f"{where}: the external data offset or length is not a number"
    if length is not None and length != need:
        return f"{where}: its external data length is {length} bytes, but dims {list(tensor.dims)} need {need}"
    try:
        fh, size = open_regular(path)
    except (UnsafeFile, OSError) as err:
        reason = err.reason if isinstance(err, UnsafeFile) else (err.strerror or str(err))
        return f"cannot read '{location}' (external data of {where}): {reason}"
    with fh:
        if offset < 0 or offset + need > size:
            return f"'{location}' holds {size:,} bytes, but {where} needs {need:,} bytes at offset {offset:,}; " \
                   "the data file is truncated or belongs to another model"
        try:
            fh.seek(offset)
            data = fh.read(need)
        except OSError as err:
            return f"cannot read '{location}' (external data of {where}): {err.strerror or err}"
    if len(data) != need:
        return f"'{location}' changed while it was read (external data of {where})"
    tensor.raw_data = data
    del tensor.external_data[:]
    tensor.data_location = TensorProto.DEFAULT
    return None


def _all_tensors(model: ModelProto) -> list[TensorProto]:
    from onnx.external_data_helper import _get_all_tensors

    return list(_get_all_tensors(model))


def opset(model: ModelProto) -> int:
    return next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), 1)


def normalize(model: ModelProto, source: str | Path, input_shapes: Mapping[str, Sequence[int | str]] | None = None,
              upgrade: bool = True) -> ModelProto:
    """Checked, upgraded, shape-inferred copy of `model` (input shapes overridden first)."""
    onnx = require_onnx(source)
    if any(not o.type.HasField("tensor_type") for o in model.graph.output):
        try:  # graph outputs without types are common in hand-built models; inference adds them
            model = onnx.shape_inference.infer_shapes(model)
        except Exception:  # noqa: BLE001 - the checker below says what is wrong
            pass
    try:
        onnx.checker.check_model(model)
    except Exception as err:  # noqa: BLE001 - ValidationError, or a protobuf error on odd files
        raise DiagnosticError([diagnostic("E0803", f"the model fails onnx.checker: {_first_line(err)}", source)]) \
            from None
    version = opset(model)
    newest = onnx.defs.onnx_opset_version()
    if version > newest:
        raise DiagnosticError([diagnostic(
            "E0804", f"the model uses opset {version}; the installed onnx package knows opsets up to {newest}",
            source, hint="upgrade the onnx package")])
    if version < TARGET_OPSET:
        if version < OLDEST_OPSET or not upgrade:
            raise DiagnosticError([diagnostic(
                "E0804", f"the model uses opset {version}; supported are opsets {TARGET_OPSET}–{newest}"
                + (f", and {OLDEST_OPSET}–{TARGET_OPSET - 1} with --opset-upgrade" if not upgrade else ""),
                source, hint="re-export the model with a newer opset")])
        try:
            from onnx import version_converter

            model = version_converter.convert_version(model, TARGET_OPSET)
        except Exception as err:  # noqa: BLE001
            raise DiagnosticError([diagnostic(
                "E0804", f"cannot convert the model from opset {version} to opset {TARGET_OPSET}: "
                f"{_first_line(err)}", source)]) from None
    if input_shapes:
        model = _override_inputs(model, input_shapes, source)
    try:
        model = onnx.shape_inference.infer_shapes(model, check_type=False, strict_mode=True, data_prop=True)
    except Exception as err:  # noqa: BLE001
        raise DiagnosticError([diagnostic("E0805", f"shape inference failed: {_first_line(err)}", source)]) \
            from None
    return model


def _override_inputs(model: ModelProto, shapes: Mapping[str, Sequence[int | str]], source: str | Path) -> ModelProto:
    from onnx import helper

    model = _copy(model)
    initializers = {t.name for t in model.graph.initializer}
    inputs = {i.name: i for i in model.graph.input if i.name not in initializers}
    unknown = sorted(set(shapes) - set(inputs))
    if unknown:
        raise DiagnosticError([diagnostic(
            "E0809", f"--input-shape names no input of the model: {', '.join(unknown)}; its inputs are "
            f"{', '.join(inputs) or 'none'}", source)])
    for name, shape in shapes.items():
        value = inputs[name]
        dims = value.type.tensor_type.shape.dim
        if value.type.tensor_type.HasField("shape") and len(dims) != len(shape):
            raise DiagnosticError([diagnostic(
                "E0809", f"--input-shape {name} has rank {len(shape)}, the input has rank {len(dims)}", source)])
        for dim, extent in zip(dims, shape, strict=False):
            if dim.HasField("dim_value") and dim.dim_value != extent:  # a name for a fixed one contradicts too
                raise DiagnosticError([diagnostic(
                    "E0809", f"--input-shape {name}={','.join(map(str, shape))} contradicts the model's "
                    f"fixed shape [{', '.join(_dim_text(d) for d in dims)}]", source)])
        new = helper.make_tensor_value_info(name, value.type.tensor_type.elem_type, list(shape))
        value.CopyFrom(new)
    # intermediate shapes inferred for the old input shapes would now contradict: drop them
    del model.graph.value_info[:]
    return model


def _copy(model: ModelProto) -> ModelProto:
    import onnx

    out = onnx.ModelProto()
    out.CopyFrom(model)
    return out


def _dim_text(dim: TensorShapeProto.Dimension) -> str:
    return str(dim.dim_value) if dim.HasField("dim_value") else (dim.dim_param or "?")


def _first_line(err: BaseException) -> str:
    text = str(err).strip() or type(err).__name__
    return text.splitlines()[0][:300]
