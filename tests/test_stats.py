"""`sknd stats` (issue 26, item 4): parameters, MACs from the @lower formulas, peak activation memory; the
expectations are hand-computed from the architectures (ResNet-18's published 1.814 G MACs at 224x224)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
from typer.testing import CliRunner

import skriptnd
from skriptnd.cli.app import app
from skriptnd.compose.stats import graph_stats

ROOT = Path(__file__).resolve().parents[1]


def test_resnet18_counts_as_its_architecture_says() -> None:
    graph = skriptnd.load(ROOT / "models" / "resnet18").compose()
    stats = graph_stats(graph)
    # by hand, from each convolution's shapes: output elements x (input channels / groups) x kernel taps
    expected = 0
    for op in graph.operations:
        if op.op == "nn.conv":
            out, filt = op.outputs[0].shape, op.inputs[1].shape
            expected += int(np.prod(out)) * int(np.prod(filt[1:]))
        elif op.op == "nn.linear":
            expected += int(np.prod(op.outputs[0].shape)) * op.inputs[0].shape[-1]
    assert stats.macs == expected
    assert abs(stats.macs - 1.814e9) / 1.814e9 < 0.002  # torchvision's figure for ResNet-18
    # torchvision's 11,689,512 trainable parameters plus the running mean and variance of its 4,800 BN channels
    assert stats.parameter_count == 11_689_512 + 2 * 4_800
    assert stats.parameters == {"real": (stats.parameter_count, 4 * stats.parameter_count)}
    by = stats.by_operator()
    assert by["nn.conv"][0] == 20 and by["nn.relu"][1] == 0


SOURCE = """import math;

operator dot {
    @input {
        a: real[n];
        b: real[n];
    }
    @output {
        c: real[];
    }
    @lower {
        c[] = 0.0;
        c[] += a[i,] * b[i,], i < n;
    }
}

graph G {
    @input {
        x: real[5, 7];
        y: real[7];
    }
    @output {
        z: real[];
    }
    @variable {
        w: real[7];
    }
    @compose {
        d = dot(y, w);
        e = math.exp(x);
        f = math.sum_reduce{axes=[0, 1], squeeze=true}(e);
        z = math.add(d, f);
    }
}
"""


def test_a_custom_operator_counts_from_its_formula_and_peak_memory_follows_the_run(tmp_path: Path) -> None:
    (tmp_path / "main.sknd").write_text(SOURCE, encoding="utf-8")
    graph = skriptnd.load(tmp_path).compose()
    stats = graph_stats(graph)
    assert [c.macs for c in stats.operations] == [7, 0, 0, 0]  # dot: one MAC per i < 7; exp, sum, add: none
    assert stats.parameters == {"real": (7, 28)}
    # inputs x (35 floats) and y (7) live throughout; d (1) until the add; e (35) until the sum; f (1); z (1):
    # the most at once is while e and f both live: 35 + 7 + 1 + 35 + 1
    assert stats.peak_activation_bytes == 4 * (35 + 7 + 1 + 35 + 1)


def test_the_command_prints_a_table_and_json(tmp_path: Path) -> None:
    (tmp_path / "main.sknd").write_text(SOURCE, encoding="utf-8")
    runner = CliRunner()
    result = runner.invoke(app, ["stats", str(tmp_path), "--format", "json"], env={"NO_COLOR": "1"})
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert data["macs"]["total"] == 7 and data["parameters"]["count"] == 7
    assert data["peak_activation_bytes"] == 4 * 79
    result = runner.invoke(app, ["stats", str(tmp_path)], env={"NO_COLOR": "1", "COLUMNS": "120"})
    assert result.exit_code == 0 and "7 MACs" in result.output and "main.dot" in result.output
    missing = runner.invoke(app, ["stats", str(tmp_path / "nowhere")])
    assert missing.exit_code in (1, 2) and "Traceback" not in missing.output
