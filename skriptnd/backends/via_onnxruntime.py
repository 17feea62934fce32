"""``onnxruntime``: the graph's ONNX export (skriptnd.interop.onnx_export.to_onnx) run by onnxruntime, the
path users deploy with. The session is built once per graph (the registry keeps the runner); inputs and
outputs are matched to the ONNX model's by position (the exporter may sanitize names)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from skriptnd import hostcpu
from skriptnd.backends.base import Backend, Options, Progress, Runner
from skriptnd.backends.registry import register
from skriptnd.compose.input_shapes import check_shapes
from skriptnd.compose.ir import Graph
from skriptnd.compose.quantization import has_quantization
from skriptnd.diagnostics import Diagnostic, DiagnosticError

#: Why int8 QDQ graphs run unfused on this host (None: they run fused); see :func:`session`.
UNFUSED_INT8 = ("onnxruntime's fused int8 kernels saturate on this CPU (x86 without VNNI or AMX), so the "
                "QuantizeLinear/DequantizeLinear pairs run unfused (session.disable_quant_qdq), as ONNX defines them")


def keep_qdq_unfused() -> bool:
    """On x86 without an int8 dot product, onnxruntime's QDQ fusion (Conv/MatMul into u8s8 integer kernels)
    adds u8*s8 products in int16 with saturation: models/digits_int8's probabilities came out 0.92 instead of
    0.997 on an AVX2 EPYC. Unfused, each DequantizeLinear -> float operator -> QuantizeLinear is exact."""
    return hostcpu.int8_saturates()


def session(model: bytes | str, threads: int | None = None, unfused_qdq: bool = False) -> Any:
    """An onnxruntime CPU session of a serialized ONNX model (or a .onnx path), ``threads`` intra-op
    threads (None: onnxruntime's default), every graph optimisation on but, with ``unfused_qdq``, the fusion
    of QuantizeLinear/DequantizeLinear pairs into integer kernels (see :func:`keep_qdq_unfused`)."""
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    if unfused_qdq:
        so.add_session_config_entry("session.disable_quant_qdq", "1")
    if threads:
        so.intra_op_num_threads = threads
        so.inter_op_num_threads = 1
    so.log_severity_level = 3
    return ort.InferenceSession(model, so, providers=["CPUExecutionProvider"])


def to_onnx_bytes(graph: Graph) -> bytes:
    try:  # lazy: the exporter imports onnx, an optional heavy dependency
        from skriptnd.interop.onnx_export import to_onnx
    except ImportError:
        raise DiagnosticError([Diagnostic(code="E0780", span=graph.declared_at(), message="the onnxruntime backend needs the "
                                          "ONNX exporter (skriptnd.interop.onnx_export), which this installation "
                                          "does not have")]) from None
    return to_onnx(graph).SerializeToString()


#: onnxruntime's input type names and their numpy dtypes
ONNX_TYPES = {"tensor(float)": np.float32, "tensor(double)": np.float64, "tensor(float16)": np.float16,
              "tensor(int64)": np.int64, "tensor(int32)": np.int32, "tensor(int16)": np.int16,
              "tensor(int8)": np.int8, "tensor(uint8)": np.uint8, "tensor(uint16)": np.uint16,
              "tensor(bool)": np.bool_}


def input_dtype(onnx_type: str, ours: str) -> Any:
    """The dtype to feed an input as: what the ONNX model declares (int64 token ids stay int64, in our export
    and in a model someone else exported), else our tensor's (real: float32, int: int64)."""
    if onnx_type in ONNX_TYPES:
        return ONNX_TYPES[onnx_type]
    return {"real": np.float32, "int": np.int64, "bool": np.bool_}.get(ours, np.float32)


class OnnxRuntimeRunner(Runner):
    def __init__(self, graph: Graph, model: bytes | str, threads: int | None, plan: list[str],
                 unfused_qdq: bool = False) -> None:
        try:
            self.session = session(model, threads, unfused_qdq)
        except Exception as err:  # onnxruntime raises its own exception types for models it refuses
            raise DiagnosticError([Diagnostic(code="E0783", span=graph.declared_at(),
                                              message=f"onnxruntime refuses the ONNX model of '{graph.name}': "
                                              f"{str(err).strip()[:2000]}")]) from None
        # inputs keep their dtype: SkriptND int is the export's int64 (token ids), bool its bool
        self.inputs = [(t.name, i.name, input_dtype(i.type, t.dtype))
                       for t, i in zip(graph.inputs, self.session.get_inputs(), strict=True)]
        self.output_names = [graph.output_name(i) for i in range(len(graph.outputs))]
        self.plan = plan
        self.graph = graph

    def run(self, inputs: Mapping[str, Any], progress: Progress | None = None) -> dict[str, Any]:
        check_shapes(self.graph, inputs)  # onnxruntime's own refusal would be an internal error
        feed = {}
        for ours, theirs, dtype in self.inputs:
            if ours not in inputs:
                raise DiagnosticError([Diagnostic(code="E0711", message=f"no value given for input '{ours}'",
                                                  span=self.graph.declared_at())])
            feed[theirs] = np.ascontiguousarray(inputs[ours], dtype=dtype)
        results = self.session.run(None, feed)
        return dict(zip(self.output_names, results, strict=True))


@register
class OnnxRuntimeBackend(Backend):
    def __init__(self) -> None:
        super().__init__("onnxruntime", "the graph's ONNX export on onnxruntime (CPU)",
                         requires=("onnx", "onnxruntime"))

    def prepare(self, graph: Graph, options: Options) -> Runner:
        model = to_onnx_bytes(graph)
        plan = [f"{graph.name}: its ONNX export ({len(model) / 1e6:.1f} MB) on onnxruntime (CPU)"]
        unfused = has_quantization(graph) and keep_qdq_unfused()
        if unfused:
            plan.append(UNFUSED_INT8)
        return OnnxRuntimeRunner(graph, model, options.threads, plan, unfused)
