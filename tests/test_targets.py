"""Target mappings (skriptnd.targets): `sknd compose --target`, the operator tables against the spec
documents, and the NNAPI mapping's parameter translation checked against the CTS models themselves
(a model written from an NNAPI vector must map back onto the same NNAPI operation and operands)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from conformance_data import ROOT, require

from skriptnd.model import load
from skriptnd.targets import get, targets
from skriptnd.targets.nnapi import to_sknd


def sknd(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "skriptnd", *args], capture_output=True, text=True, cwd=ROOT)


def test_compose_target_nnapi_names_the_operations_for_digits_int8() -> None:
    proc = sknd("compose", "models/digits_int8", "--target", "nnapi", "--color", "never")
    assert proc.returncode == 0, proc.stderr
    for name in ("MAX_POOL_2D", "RELU", "RESHAPE", "SOFTMAX", "CONV_2D", "FULLY_CONNECTED"):
        assert name in proc.stdout
    data = json.loads(sknd("compose", "models/digits_int8", "--target", "nnapi", "--format", "json").stdout)
    rows = {r["outputs"][0]: r for r in data["operations"]}
    # main.sknd: padding=[1,1,1,1], stride 1, per-channel symmetric filters (NNAPI 1.0 has per-tensor only)
    assert rows["conv1"]["target_op"] is None and "per channel" in rows["conv1"]["how"]
    assert "CONV_2D" in rows["conv1"]["how"] and "left 1, right 1, top 1, bottom 1" in rows["conv1"]["how"]
    assert rows["pool1"]["target_op"] == "MAX_POOL_2D"
    assert rows["pool1"]["params"] == {"padding": [0, 0, 0, 0], "stride": [2, 2], "filter": [2, 2], "activation": 0}
    assert "int8 scale 0.0248532 zero point -128" in rows["relu1"]["how"]  # conv1's @quantize, passed through relu
    assert rows["probabilities"]["target_op"] == "SOFTMAX" and "DEQUANTIZE" in rows["probabilities"]["how"]
    assert data["total"] == 9


def test_compose_target_mli_and_tosa() -> None:
    data = json.loads(sknd("compose", "models/digits_int8", "--target", "mli", "--format", "json").stdout)
    rows = {r["outputs"][0]: r for r in data["operations"]}
    conv = rows["conv1"]
    assert conv["target_op"] == "mli_krn_conv2d_hwcn"
    assert conv["params"]["relu"] == "MLI_RELU_GEN" and rows["relu1"]["target_op"] == "(fused)"
    assert [conv["params"][k] for k in ("padding_top", "padding_bottom", "padding_left", "padding_right")] == [1] * 4
    assert "sa8 per axis 0" in conv["how"]
    assert rows["probabilities"]["target_op"] is None and "float" in rows["probabilities"]["how"]
    tosa = json.loads(sknd("compose", "models/digits", "--target", "tosa", "--format", "json").stdout)
    assert tosa["supported"] == tosa["total"] == 9
    assert "CONV2D" in tosa["operations"][0]["target_op"]


def test_unknown_target_is_a_usage_error() -> None:
    proc = sknd("compose", "models/digits", "--target", "coreml")
    assert proc.returncode == 2 and "mli, nnapi, tosa" in proc.stderr


def test_nnapi_table_lists_every_operation_of_types_hal() -> None:
    spec = require("spec") / "nnapi-1.0-types.hal.txt"
    text = spec.read_text(encoding="utf-8").replace("\xa0", " ")
    body = text[text.index("enum OperationType"):]
    body = body[:body.index("};")]
    ops = re.findall(r"^\s*\d+\s+([A-Z][A-Z_0-9]+)\s*=\s*\d+,?", body, re.M)
    assert len(ops) == 30  # 29 operations and OEM_OPERATION
    assert [s.name for s in get("nnapi").spec_ops()] == ops


def test_mli_table_lists_every_kernel_of_the_mli_documents() -> None:
    text = (require("spec") / "embarc-mli.txt").read_text(encoding="utf-8", errors="replace")
    names = set()
    for m in re.findall(r"mli_(?:krn|hlp)_[a-z0-9_]+", text):
        base = re.sub(r"_(chw|hwc|hwcn)(_.*)?$", "", m)
        base = re.sub(r"_(fx8w16d|fx8|fx16|fx|sa8)(_.*)?$", "", base).rstrip("_")
        if not base.endswith(("_spec_api", "_spec_i")) and base != "mli_krn_eltwise":
            names.add(base)
    groups = {p.name.split(".")[0] for p in require("conformance/mli-2.0").glob("*.json")}
    groups = {"mli_krn_depthwise_conv2d" if g == "mli_krn_depthwise_conv" else
              "mli_mov_tensor" if g == "mli_krn_data_movement" else g for g in groups}
    table = {s.name for s in get("mli").spec_ops()}
    assert names <= table, names - table
    eltwise = {"mli_krn_eltwise_add", "mli_krn_eltwise_sub", "mli_krn_eltwise_mul", "mli_krn_eltwise_max",
               "mli_krn_eltwise_min"}
    assert groups - {"mli_krn_eltwise"} <= table and eltwise <= table
    assert len(names) >= 20


def test_every_target_registered() -> None:
    assert set(targets()) == {"nnapi", "mli", "tosa"}


@pytest.mark.parametrize("name", ["conv_float_channels", "conv_quant8", "depthwise_conv2d_quant8", "conv_3_h3_w2_SAME",
                                  "avg_pool_float_2", "max_pool_quant8_3", "l2_pool_float", "avg_pool_quant8_5",
                                  "mul_relu", "fully_connected_quant8"])
def test_nnapi_models_map_back_onto_their_own_operation(name: str, tmp_path: Path) -> None:
    """Write a CTS model with to_sknd, compose it, map it to NNAPI: the first operation maps onto the vector's
    operation with the vector's explicit paddings, strides and fused activation code (SAME/VALID codes are
    compared with NNAPI's own explicit-padding rule)."""
    model = json.loads((require("conformance/nnapi-1.0") / f"{name}.json").read_text())
    graph = load(to_sknd(model, tmp_path / name)).compose()
    rows = get("nnapi").map_graph(graph)
    op = model["operations"][0]
    first = rows[0]
    assert first.target_op == op["op"], (first.target_op, first.how)
    operands = {o["name"]: o for o in model["operands"]}
    value = lambda i: operands[op["inputs"][i]]["value"][0]  # noqa: E731
    n = len(op["inputs"])
    if op["op"] in ("CONV_2D", "DEPTHWISE_CONV_2D", "AVERAGE_POOL_2D", "MAX_POOL_2D", "L2_POOL_2D"):
        conv = op["op"] in ("CONV_2D", "DEPTHWISE_CONV_2D")
        explicit = n in (10, 11)
        p0 = 3 if conv else 1
        if explicit:
            assert first.params["padding"] == [value(i) for i in range(p0, p0 + 4)]
            stride_at = p0 + 4
        else:
            assert value(p0) in (1, 2)
            stride_at = p0 + 1
            if value(p0) == 2:
                assert first.params["padding"] == [0, 0, 0, 0]
        assert first.params["stride"] == [value(stride_at), value(stride_at + 1)]
    fused = {r.op.op for r in rows if r.target_op == "(fused)"}
    act = value(n - 1)
    assert first.params.get("activation", 0) == act
    assert bool(fused) == (act != 0)


@pytest.mark.parametrize("pattern", ["mli_krn_conv2d.05.*", "mli_krn_conv2d.00.*", "mli_krn_depthwise_conv.02.*",
                                     "mli_krn_maxpool.02.*", "mli_krn_avepool.03.*", "mli_krn_group_conv2d.01.*"])
def test_mli_cases_map_back_onto_their_own_kernel(pattern: str, tmp_path: Path) -> None:
    """Write an MLI case with to_sknd, compose it, map it to MLI: the window operation maps onto the case's
    kernel family with the case's paddings, strides and fused ReLU, and its tensors' MLI types."""
    from skriptnd.targets.mli import to_sknd as mli_to_sknd

    path = next(iter(sorted(require("conformance/mli-2.0").glob(pattern))))
    case = json.loads(path.read_text())
    graph = load(mli_to_sknd(case, tmp_path / "case")).compose()
    rows = [r for r in get("mli").map_graph(graph) if r.op.op in ("nn.conv", "nn.max_pool", "nn.avg_pool")]
    assert len(rows) == 1
    row, cfg = rows[0], case["config"]
    family = {"mli_krn_conv2d": "mli_krn_conv2d_hwcn", "mli_krn_depthwise_conv": "mli_krn_depthwise_conv2d_hwcn",
              "mli_krn_group_conv2d": "mli_krn_group_conv2d_hwcn", "mli_krn_maxpool": "mli_krn_maxpool_hwc",
              "mli_krn_avepool": "mli_krn_avepool_hwc"}[case["kernel_group"]]
    assert row.target_op == family, row.how
    for key in ("padding_top", "padding_bottom", "padding_left", "padding_right", "stride_height", "stride_width"):
        assert row.params[key] == cfg[key], key
    if "relu" in cfg:
        assert row.params["relu"] == cfg["relu"]
    kind = case["tensors"]["input"]["quant"]["type"]
    assert f": {kind}" in row.how
