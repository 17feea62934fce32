"""The iree backend's devices (skriptnd.backends.iree_devices; `--via iree --device cuda|vulkan|hip|cpu`) and its
compile status line.

CI has no GPU: these tests compile the shipped models for cuda and vulkan (the module must hold the device's
executable format: PTX for cuda, SPIR-V for vulkan), check that a machine without the device gets a located
E0786 before anything is compiled, and that the CLI takes the option. IREE is an optional oracle as in
test_backends_compiled.py: the tests skip when it is missing locally and fail in CI (CI=1). On a machine
that has the device, the missing-device tests skip (benchmarks/gpu_check.py runs the models there).
"""

from __future__ import annotations

import io
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from test_backends_compiled import require, sknd  # noqa: E402

import skriptnd  # noqa: E402
from skriptnd.backends import Options, reporting_compiles  # noqa: E402
from skriptnd.backends.iree_cache import content_key  # noqa: E402
from skriptnd.backends.iree_devices import KINDS, parse  # noqa: E402
from skriptnd.cli.backend import CompileLine  # noqa: E402
from skriptnd.diagnostics import DiagnosticError  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
MODELS = ROOT / "models"
#: The executable format each device's module carries (IREE's HAL executable format names).
FORMATS = {"cuda": b"cuda-nvptx-fb", "vulkan": b"vulkan-spirv-fb", "hip": b"rocm-hsaco-fb", "cpu": b"embedded-elf"}


def has_device(driver: str) -> bool:
    import iree.runtime as rt

    try:
        rt.Config(driver)
    except (RuntimeError, ValueError, OSError):
        return False
    return True


def require_no(driver: str) -> None:
    require("iree.compiler", "iree.runtime")
    if has_device(driver):
        pytest.skip(f"this machine has a {driver} device (benchmarks/gpu_check.py covers it)")


def compose(model: str, **attribs: int) -> skriptnd.compose.ir.Graph:
    return skriptnd.load(MODELS / model).compose(attribs=attribs or None, random_weights=True, seed=1)


# -- parsing and flags -------------------------------------------------------------------------------


def test_device_names_defaults_and_refusals() -> None:
    assert str(parse(None)) == "cpu" and parse("").is_cpu and parse("host").is_cpu
    assert str(parse("cuda")) == "cuda:sm_80" and parse("cuda").arch is None
    assert str(parse("CUDA:sm_86")) == "cuda:sm_86"
    assert str(parse("vulkan")) == "vulkan" and str(parse("vulkan:rdna3")) == "vulkan:rdna3"
    assert str(parse("rocm")) == "hip:gfx942" and str(parse("hip:gfx90a")) == "hip:gfx90a"
    assert parse("cuda").compile_flags() == ["--iree-hal-target-device=cuda", "--iree-cuda-target=sm_80"]
    assert parse("vulkan").compile_flags() == ["--iree-hal-target-device=vulkan"]
    assert parse("hip:gfx1100").compile_flags() == ["--iree-hal-target-device=hip", "--iree-rocm-target=gfx1100"]
    assert [parse(d).driver(1) for d in ("cpu", "cuda", "vulkan", "hip")] == ["local-sync", "cuda", "vulkan", "hip"]
    assert parse("cpu").driver(None) == "local-task"
    for bad, says in (("tpu", "unknown device 'tpu'"), ("cpu:znver4", "--target"), ("cuda:", "no architecture")):
        with pytest.raises(ValueError, match=says):
            parse(bad)


def test_compile_flags_and_cache_key_follow_the_device() -> None:
    from skriptnd.backends.via_iree import BASE_FLAGS, DEFAULT_FLAGS, compile_flags

    cpu = compile_flags(Options())
    assert cpu[:len(BASE_FLAGS)] == list(BASE_FLAGS) and set(DEFAULT_FLAGS) <= set(cpu)
    cuda = compile_flags(Options(device="cuda", flags=("--x",)))
    # a GPU gets its HAL target and IREE's defaults: no llvm-cpu flags, no CPU data tiling
    assert cuda == ["--iree-input-type=tosa", "--iree-hal-target-device=cuda", "--iree-cuda-target=sm_80", "--x"]
    assert not any("llvmcpu" in f for f in cuda)
    with pytest.raises(ValueError, match="--device cuda:ARCH"):
        compile_flags(Options(device="cuda", target="znver4"))
    keys = {d: content_key([b"same mlir"], compile_flags(Options(device=d)), "v")
            for d in ("cpu", "cuda", "cuda:sm_86", "vulkan", "vulkan:ampere", "hip")}
    assert len(set(keys.values())) == len(keys)  # a module compiled for one device is never loaded for another
    assert keys["cuda"] == content_key([b"same mlir"], compile_flags(Options(device="cuda:sm_80")), "v")


def test_only_the_iree_backend_takes_a_gpu() -> None:
    from skriptnd import backends

    graph = compose("transformer")
    with pytest.raises(ValueError, match="numpy backend runs on cpu"):
        backends.prepare(graph, "numpy", Options(device="cuda"))
    with pytest.raises(ValueError, match="unknown device"):
        backends.prepare(graph, "iree", Options(device="npu"))
    assert set(backends.get("iree").devices) == set(KINDS)


# -- compiling for GPUs (no GPU needed) ---------------------------------------------------------------


@pytest.mark.parametrize(("model", "device"), [("transformer", "cuda"), ("transformer", "vulkan"),
                                               ("mobilenetv2", "cuda")])
def test_shipped_models_compile_for_gpus(model: str, device: str, tmp_path: Path) -> None:
    require("iree.compiler", "iree.runtime")
    from skriptnd.backends.via_iree import IreeGraphRunner

    attribs = {"height": 64, "width": 64} if model == "mobilenetv2" else {}
    graph = compose(model, **attribs)
    runner = IreeGraphRunner(graph, Options(device=device, cache_dir=str(tmp_path)), load=False)
    assert not runner.split and len(runner.modules) == 1  # every operation compiled for the GPU
    data = runner.modules[0].entry.module.read_bytes()
    assert FORMATS[device] in data and FORMATS["cpu"] not in data
    assert f"({parse(device)}, " in runner.plan[0]


# -- a machine without the device --------------------------------------------------------------------


@pytest.mark.parametrize("device", ["cuda", "vulkan"])
def test_missing_device_is_a_located_diagnostic_before_any_compile(device: str, tmp_path: Path) -> None:
    require_no(device)
    graph = compose("transformer")
    x = np.zeros([int(d) for d in graph.inputs[0].shape], np.float32)
    with pytest.raises(DiagnosticError) as err:
        skriptnd.run(graph, {graph.inputs[0].name: x}, backend="iree", device=device, cache_dir=str(tmp_path))
    (diag,) = err.value.diagnostics
    assert diag.code == "E0786" and f"--device {parse(device)}" in diag.message
    assert f"'{device}' driver could not create one" in diag.message and "--device cpu" in (diag.hint or "")
    assert diag.span.file.endswith("main.sknd") and diag.span.line > 1  # at `graph Transformer`
    assert list(tmp_path.iterdir()) == []  # nothing compiled for a device that is not there


def test_cli_missing_device_and_usage_errors(tmp_path: Path) -> None:
    require_no("cuda")
    env = {"SKRIPTND_CACHE_DIR": str(tmp_path)}
    model = str(MODELS / "transformer")
    run = sknd("run", model, "--random-weights", "--random-inputs", "--via", "iree", "--device", "cuda:sm_86",
               env=env)
    assert run.returncode == 1 and "error[E0786]" in run.stderr and "--device cuda:sm_86" in run.stderr
    assert "main.sknd:" in run.stderr and "graph Transformer" in run.stderr  # located, with the source line
    bench = sknd("bench", model, "--random-weights", "--via", "numpy,iree", "--device", "cuda", "--rounds", "1",
                 "--json", env=env)
    rows = {r["backend"]: r for r in __import__("json").loads(bench.stdout)["results"]}
    assert rows["numpy"]["median_ms"] is not None  # the CPU backends still run beside the missing GPU
    assert rows["iree"]["median_ms"] is None and "cuda" in rows["iree"]["error"]
    for args, says in ((("--via", "iree", "--device", "tpu"), "unknown device"),
                       (("--device", "cuda"), "is for --via iree"),
                       (("--via", "iree", "--device", "cuda", "--target", "znver4"), "--device cuda:ARCH")):
        usage = sknd("run", model, "--random-weights", "--random-inputs", *args, env=env)
        assert usage.returncode == 2 and says in " ".join(usage.stderr.replace("│", " ").split())


# -- the compile status line -------------------------------------------------------------------------


def test_a_running_compile_is_reported_then_ended(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    require("iree.compiler", "iree.runtime")
    from skriptnd.backends import iree_compile, via_iree

    monkeypatch.setattr(iree_compile, "STATUS_INTERVAL", 0.05)
    seen: list[tuple[str, float | None]] = []
    graph = compose("transformer")
    with reporting_compiles(lambda what, seconds: seen.append((what, seconds))):
        via_iree.IreeGraphRunner(graph, Options(cache_dir=str(tmp_path)), load=False)
    assert seen and seen[-1][1] is None and len({w for w, _ in seen}) == 1
    what = seen[0][0]
    ops = len(graph.operations)
    assert what == f"Transformer with iree-compile (llvm-cpu, {ops} ops)"
    times = [s for _, s in seen[:-1]]
    assert times and times == sorted(times) and times[0] > 0
    seen.clear()
    with reporting_compiles(lambda what, seconds: seen.append((what, seconds))):  # cached: no compile, no line
        via_iree.IreeGraphRunner(graph, Options(cache_dir=str(tmp_path)), load=False)
    assert seen == []


class Stream(io.StringIO):
    def __init__(self, tty: bool) -> None:
        super().__init__()
        self.tty = tty

    def isatty(self) -> bool:
        return self.tty


def test_compile_line_on_a_terminal_and_in_a_log() -> None:
    log, term = Stream(False), Stream(True)
    for stream in (log, term):
        line = CompileLine(stream)
        for seconds in (1.0, 2.0, 3.4, None):
            line("G with iree-compile (llvm-cpu, 5 ops)", seconds)
    assert log.getvalue() == "compiling G with iree-compile (llvm-cpu, 5 ops)…\n"  # one line in a log
    shown = term.getvalue()
    assert shown.count("\r\033[K") == 4 and shown.endswith("\r\033[K")  # rewritten in place, then cleared
    assert "… 1 s" in shown and "… 3 s" in shown and "\n" not in shown
