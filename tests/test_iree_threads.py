"""skriptnd.backends.iree_threads: a module's multiply-accumulates counted from its TOSA program (against sums
written out here and against skriptnd.compose.stats, which counts them from the operators' @lower formulas),
kept with the compiled module, and the CPU driver they choose (a small module on the caller's thread)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import skriptnd
from skriptnd import backends
from skriptnd.backends import Options, iree_threads
from skriptnd.backends.iree_threads import SMALL_WORK_MACS, cpu_driver, program_macs
from skriptnd.compose.stats import graph_stats
from skriptnd.tosa.program.build import Op, Program
from skriptnd.tosa.program.patch_matmul import value_shapes

MODELS = Path(__file__).resolve().parents[1] / "models"
ZEROS = {"xz": np.zeros(1, np.float32), "wz": np.zeros(1, np.float32)}


def _macs(program: Program, *inputs: tuple[int, ...]) -> int:
    return program_macs(program, value_shapes(program, [(s, np.dtype(np.float32)) for s in inputs]))


def test_convolutions_and_products_count_their_multiply_accumulates() -> None:
    conv = {"pad": [1, 1, 1, 1], "stride": [1, 1], "dilation": [1, 1], "acc_type": "fp32"}
    program = Program(inputs=["x", "a"], outputs=["d", "m", "e"], ops=[
        Op("CONV2D", ["x", "w", "b", "xz", "wz"], conv, "y"),           # [1,8,8,3] * [4,3,3,3] -> [1,8,8,4]
        Op("DEPTHWISE_CONV2D", ["y", "dw", "db", "xz", "wz"], {**conv, "stride": [2, 2]}, "d"),  # -> [1,4,4,4]
        Op("MATMUL", ["a", "k", "xz", "wz"], {}, "m"),                  # [2,5,7] x [2,7,3] -> [2,5,3]
        Op("ADD", ["m", "m"], {}, "e"),                                 # element-wise: not counted
    ], constants={"w": np.ones((4, 3, 3, 3), np.float32), "b": np.zeros(4, np.float32),
                  "dw": np.ones((3, 3, 4, 1), np.float32), "db": np.zeros(4, np.float32),
                  "k": np.ones((2, 7, 3), np.float32), **ZEROS})
    conv2d = (8 * 8 * 4) * (3 * 3 * 3)   # every output: a 3x3 window over 3 channels
    depthwise = (4 * 4 * 4) * (3 * 3)    # every output: a 3x3 window of its own channel
    matmul = (2 * 5 * 3) * 7             # every output: a row times a column of 7
    assert _macs(program, (1, 8, 8, 3), (2, 5, 7)) == conv2d + depthwise + matmul == 7698


def test_the_count_of_a_model_program_is_what_its_lower_formulas_say(tmp_path: Path) -> None:
    """The TOSA program's count (after batch-norm folding and layout changes) equals compose.stats' count
    from the SkriptND operators' @lower formulas, and is kept with the cached module."""
    pytest.importorskip("iree.compiler")
    pytest.importorskip("iree.runtime")
    graph = skriptnd.load(MODELS / "digits").compose(random_weights=True, seed=1)
    runner = backends.prepare(graph, "iree", Options(cache_dir=str(tmp_path), threads=2))
    (module,) = runner.modules  # type: ignore[attr-defined]
    expected = graph_stats(graph).macs
    assert 0 < expected < SMALL_WORK_MACS
    assert iree_threads.read_macs(module.entry.folder) == expected
    # a tiny graph asked for two threads runs on the caller's thread, says why, and is right
    assert module.driver == "local-sync" and "local-sync" in runner.plan[0]  # type: ignore[attr-defined]
    assert "M MACs, under 32 M" in module.describe()
    x = {t.name: np.random.default_rng(0).standard_normal([int(d) for d in t.shape]).astype(np.float32)
         for t in graph.inputs}
    got, want = runner.run(x), skriptnd.run(graph, x, backend="lower")
    for k in want:
        np.testing.assert_allclose(got[k], want[k], rtol=1e-4, atol=1e-5)


def test_a_cached_module_does_not_count_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("iree.compiler")
    pytest.importorskip("iree.runtime")
    graph = skriptnd.load(MODELS / "digits").compose(random_weights=True, seed=1)
    backends.prepare(graph, "iree", Options(cache_dir=str(tmp_path), threads=2))

    def recount(*_: object) -> int:
        raise AssertionError("counted again on a cache hit")

    monkeypatch.setattr(iree_threads, "program_macs", recount)
    graph = skriptnd.load(MODELS / "digits").compose(random_weights=True, seed=1)
    runner = backends.prepare(graph, "iree", Options(cache_dir=str(tmp_path), threads=2))
    assert runner.modules[0].driver == "local-sync"  # type: ignore[attr-defined]


def test_the_driver_follows_the_threads_and_the_work() -> None:
    assert cpu_driver(1, 10**12)[0] == "local-sync"  # one thread: always inline
    assert cpu_driver(2, SMALL_WORK_MACS - 1)[0] == "local-sync"
    assert cpu_driver(None, SMALL_WORK_MACS - 1)[0] == "local-sync"
    assert cpu_driver(2, SMALL_WORK_MACS)[0] == "local-task"
    assert cpu_driver(None, 4_000_000_000)[0] == "local-task"
    assert cpu_driver(2, None)[0] == "local-task"  # unknown work (an integer graph's MLIR): the workers


def test_data_tiled_compiles_write_wider_convolutions_as_patch_products() -> None:
    """With data tiling (IREE's micro-kernels run the products) a 28x28 3x3 convolution is a patch product in
    the MLIR; without, patch_matmul's own limit (196 positions) keeps it a convolution."""
    from skriptnd.backends.iree_defaults import DATA_TILING, NO_DATA_TILING
    from skriptnd.backends.via_iree import DATA_TILED_POSITIONS, ProgramSource, patch_positions
    from skriptnd.tosa.program.patch_matmul import MAX_POSITIONS

    assert patch_positions(list(DATA_TILING)) == DATA_TILED_POSITIONS > MAX_POSITIONS
    assert patch_positions(list(NO_DATA_TILING)) == MAX_POSITIONS
    assert patch_positions([*DATA_TILING, "--iree-opt-data-tiling=false"]) == MAX_POSITIONS  # the last one counts
    conv = {"pad": [1, 1, 1, 1], "stride": [1, 1], "dilation": [1, 1], "acc_type": "fp32"}
    program = Program(inputs=["x"], outputs=["y"], ops=[Op("CONV2D", ["x", "w", "b", "xz", "wz"], conv, "y")],
                      constants={"w": np.ones((8, 3, 3, 4), np.float32), "b": np.zeros(8, np.float32), **ZEROS})
    inputs = [((1, 28, 28, 4), np.dtype(np.float32))]
    wide = ProgramSource(program, inputs, "", DATA_TILED_POSITIONS)
    narrow = ProgramSource(program, inputs, "", MAX_POSITIONS)
    assert "tosa.matmul" in wide.mlir() and "tosa.conv2d" not in wide.mlir()
    assert "tosa.conv2d" in narrow.mlir() and "tosa.matmul" not in narrow.mlir()
    assert list(wide.content()) != list(narrow.content())  # two cache entries
