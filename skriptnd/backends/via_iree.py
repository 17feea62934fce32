"""``iree``: the graph compiled by IREE for the CPU (llvm-cpu, ``--iree-llvmcpu-target-cpu=host`` unless
``Options.target`` names another CPU or a target triple), or for a GPU (``Options.device``: cuda, vulkan,
hip; skriptnd.backends.iree_devices), and run by the IREE runtime.

A float graph is planned as for the numpy backend (skriptnd.backends.tosa_programs): batch norms folded, and
every run of operations that legalizes (skriptnd.tosa.legalize) spliced into one simplified TOSA program
(filters re-laid out once, NCHW ↔ NHWC transpose pairs cancelled). Each program is written as TOSA MLIR
(skriptnd.tosa.mlir.program) and compiled into one IREE module; a fully legalizing graph is one module.
What does not legalize runs on numpy between the modules (native kernels, else @lower): the graph is
**split**, and the plan (``sknd run -v``; ``sknd run`` prints a one-line notice) lists what runs where —
never a silent fallback. A graph with @quantize entries compiles as its whole integer TOSA graph
(skriptnd.tosa.integer.lower), or is refused with a located E0781.

The weights leave the compiled module: ``--iree-parameter-export`` writes every constant of at least
``iree_compile.PARAMETER_MIN_BYTES`` bytes to an IREE parameter archive (``params.irpa``) that the
runtime maps from disk at load time. Compiled modules are cached (skriptnd.backends.iree_cache) by a content hash of
the MLIR, the flags and the IREE version, so a second run of the same graph loads in milliseconds.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from skriptnd.backends import iree_devices, iree_dynamic, iree_threads
from skriptnd.backends.base import Backend, Options, Progress, Runner
from skriptnd.backends.executor_runner import ExecutorRunner
from skriptnd.backends.integer_graph import with_kernels_hint
from skriptnd.backends.iree_cache import cache_root, content_key, lookup_or_build
from skriptnd.backends.iree_check import (
    RELATIVE,
    IntegerCheck,
    ProgramCheck,
    check,
    mismatch,
    read_verdict,
    seeded_inputs,
    write_verdict,
)
from skriptnd.backends.iree_compile import (
    PARAMETER_MIN_BYTES,
    PARAMETER_SCOPE,
    compile_log,
    compile_mlir,
    iree_version,
)
from skriptnd.backends.iree_defaults import DATA_TILING, default_flags
from skriptnd.backends.per_shape import PerShape
from skriptnd.backends.registry import register
from skriptnd.backends.tosa_programs import PROGRAM_OP, TosaKernels, compile_segments
from skriptnd.compose.extents import extent_symbols
from skriptnd.compose.ir import Graph, Operation, Tensor
from skriptnd.compose.quantization import has_quantization
from skriptnd.diagnostics import Diagnostic, DiagnosticError, Note
from skriptnd.execute.executor import KERNELS, Executor, Kernel
from skriptnd.execute.specialise import specialise
from skriptnd.source import NO_SPAN
from skriptnd.tosa.integer import lower as quantized
from skriptnd.tosa.integer import mlir as integer_mlir
from skriptnd.tosa.legalize.recurrent import RecurrentLegalizer
from skriptnd.tosa.legalize.tensor import conv_for_compilers
from skriptnd.tosa.mlir import export
from skriptnd.tosa.mlir import program as program_mlir
from skriptnd.tosa.mlir import regions as mlir_regions
from skriptnd.tosa.mlir import text as mlir_text
from skriptnd.tosa.mlir.program import NotCompilable, check_compilable, program_to_mlir
from skriptnd.tosa.program import patch_matmul as conv_as_matmul
from skriptnd.tosa.program.build import Program

#: The input flag of every compilation.
INPUT_FLAGS = ("--iree-input-type=tosa",)
#: Flags of every CPU compilation (the input is TOSA; the device the local CPU); a GPU's are its device's
#: (iree_devices.Device.compile_flags).
BASE_FLAGS = (*INPUT_FLAGS, "--iree-hal-target-device=local", "--iree-hal-local-target-device-backends=llvm-cpu")
#: Optimisation flags on by default where the target has no AVX-512 (skriptnd.backends.iree_defaults: IREE
#: miscompiles with data tiling there; see docs/performance.md for the sweep that chose them): data tiling and
#: micro-kernels make the patch products of skriptnd.tosa.program.patch_matmul fast (without them those are slower
#: than the convolutions they replace), and pack a recurrent layer's weight once for its small per-step
#: products (lstm-large, 1 thread: 21 -> 12.5 ms; docs/performance.md, Notes).
DEFAULT_FLAGS: tuple[str, ...] = DATA_TILING
#: Recurrent steps a graph's layers may unroll in all (RecurrentLegalizer's unroll_budget), beyond which they
#: loop: IREE runs a loop's iterations with a host round trip each (lstm-large, 2 threads: 11.9 ms unrolled,
#: 15.9 ms looped), and compiles lstm-large's 2 x 128 unrolled steps in ~6.5 s with data tiling (looped:
#: ~2.5 s; docs/performance.md, Notes). 0: always loop (from 2k steps on).
UNROLL_BUDGET = 256
#: Grouped convolutions as one depthwise convolution and a sum (tosa.legalize.tensor.conv_for_compilers) rather
#: than one CONV2D per group: ResNeXt-50's cold compile 312 -> 40 s, its run 272 -> 523 ms (1 thread, a loaded
#: 2-core machine; docs/performance.md, "Grouped convolutions"): the compile time is the issue's goal, the run
#: time the price. False: the TABLE's per-group form.
GROUPED_AS_DEPTHWISE = True
#: Output positions (batch x height x width) up to which a convolution is written as a patch product
#: (skriptnd.tosa.program.patch_matmul) when IREE data-tiles, i.e. its micro-kernels run the products: every
#: 3x3 layer of ResNet-50 up to its 56x56 ones. ResNet-50, 2 threads, AMD EPYC znver3: 1.32x onnxruntime
#: with patch_matmul's own limit (196: the 14x14 and 7x7 layers), 1.07x with this one
#: (docs/performance.md, "iree against onnxruntime"). Without data tiling (AVX-512 hosts), patch_matmul's.
DATA_TILED_POSITIONS = 3136
def compile_flags(options: Options) -> list[str]:
    device = iree_devices.parse(options.device)
    if not device.is_cpu:
        if options.target:
            raise ValueError(f"--target names the CPU to compile for; for --device {device.kind.name} give the "
                             f"GPU's architecture as --device {device.kind.name}:ARCH")
        # data tiling and micro-kernels are the CPU's (DEFAULT_FLAGS); a GPU gets IREE's own defaults
        return [*INPUT_FLAGS, *device.compile_flags(), *options.flags]
    target = options.target or "host"
    flags = list(BASE_FLAGS)
    if target.count("-") >= 2:  # a target triple (aarch64-linux-gnu), not a CPU (skylake-avx512): its generic CPU
        flags += [f"--iree-llvmcpu-target-triple={target}", "--iree-llvmcpu-target-cpu=generic"]
    else:
        flags.append(f"--iree-llvmcpu-target-cpu={target}")
    return flags + list(default_flags(target)[0]) + list(options.flags)


def patch_positions(flags: list[str]) -> int:
    """Up to how many output positions a convolution becomes a patch product for these compiler flags."""
    tiling = [f for f in flags if f.startswith("--iree-opt-data-tiling")]
    on = bool(tiling) and tiling[-1] in ("--iree-opt-data-tiling", "--iree-opt-data-tiling=true")
    return DATA_TILED_POSITIONS if on else conv_as_matmul.MAX_POSITIONS


def flags_reason(options: Options) -> str:
    """Why the default optimisation flags are what they are for this target (one line of the plan)."""
    given = [f for f in options.flags if f.startswith("--iree-opt-data-tiling")]
    if given:
        return f"data tiling as the flags given say ({given[-1]})"
    return default_flags(options.target or "host")[1]


def _refusal(graph: Graph, diags: list[Diagnostic], hint: str | None = None) -> DiagnosticError:
    """E0781 at the first thing keeping the graph from compiling, the others as notes."""
    first = diags[0]
    message = first.message.replace("is not legalized to TOSA", "does not legalize to TOSA")
    notes = tuple(Note(d.message) for d in diags[1:6])
    if len(diags) > 6:
        notes += (Note(f"and {len(diags) - 6} more"),)
    return DiagnosticError([Diagnostic(
        code="E0781", span=first.span, notes=notes,
        message=f"the iree backend compiles the whole graph '{graph.name}' to TOSA, but {message}",
        hint=hint or "run it with --via numpy (TOSA programs where it legalizes, numpy kernels for the rest); "
                     "sknd compose MODEL --tosa lists what legalizes")])


def graph_mlir(graph: Graph) -> tuple[str, Any]:
    """(TOSA MLIR, integer graph) of a graph with @quantize entries; E0781 when it has no integer TOSA graph."""
    try:
        integer = quantized.lower_quantized(graph)
    except DiagnosticError as err:  # no integer graph: the numpy backend has none either, kernels runs it
        raise _refusal(graph, err.diagnostics, with_kernels_hint(err).diagnostics[0].hint) from None
    return integer_mlir.to_mlir(integer), integer


_CONFIGS: dict[tuple[str, int | None], Any] = {}


def _config(driver: str, threads: int | None) -> Any:
    """One IREE device (and worker pool) per driver and thread count, shared by every module of the
    process: a split graph's modules, and the graphs run one after another, use the same workers.

    A thread count is given as ``--task_topology_group_count``, whose workers the OS schedules freely, not
    as ``--task_topology_max_group_count``, whose workers IREE pins one to each physical core: on a machine
    shared with other processes a pinned worker waits for its busy core while the other core idles, and
    every dispatch waits for its slowest worker (MobileNetV3-L, 2 threads at a load average of ~15 on 2
    cores: 166-342 ms pinned, 105-125 ms unpinned; docs/performance.md, "iree against onnxruntime")."""
    import iree.runtime as rt

    key = (driver, threads)
    if key not in _CONFIGS:
        if driver == "local-task":  # read when the task executor is created (process-wide flags)
            rt.flags.parse_flags(f"--task_topology_group_count={threads if threads and threads > 1 else 0}")
        _CONFIGS[key] = rt.Config(driver)
    return _CONFIGS[key]


def open_device(options: Options, graph: Graph = None) -> Any:
    """The runtime configuration of ``options.device``, opened before anything is compiled: a machine without
    the device (no GPU, no driver library) gets a located E0786 naming it and the driver's reason at once."""
    device = iree_devices.parse(options.device)
    driver = device.driver(options.threads)
    try:
        return _config(driver, options.threads)
    except (RuntimeError, ValueError, OSError) as err:
        reasons, cause = [], err  # "Could not create device", caused by the driver's own reason: keep both
        while cause is not None and len(reasons) < 4:
            reasons.append(str(cause))
            cause = cause.__cause__ or cause.__context__
        if not any("driver" in r for r in reasons):  # "No device found": ask the driver itself why
            try:
                import iree.runtime as rt

                rt.get_driver(driver)
            except (RuntimeError, ValueError, OSError) as why:
                reasons.append(str(why))
        raise iree_devices.unavailable(device, driver, ": ".join(reasons), graph.declared_at() if graph else NO_SPAN,
                                       graph.name if graph else "?") from None


def _target_name(options: Options) -> str:
    """What the plan says the graph is compiled for: llvm-cpu, or the GPU device (cuda:sm_80)."""
    device = iree_devices.parse(options.device)
    return "llvm-cpu" if device.is_cpu else str(device)


class ProgramSource:
    """A TOSA program to compile: its cache key material without writing the MLIR, the MLIR on a miss."""

    def __init__(self, program: Program, inputs: list[tuple[tuple[int, ...], np.dtype]], comment: str,
                 positions: int = conv_as_matmul.MAX_POSITIONS) -> None:
        self.program, self.inputs, self.comment = program, inputs, comment
        self.positions = positions  # convolutions up to this many output positions as patch products

    def content(self) -> Iterator[bytes]:

        for module in (program_mlir, export, mlir_regions, mlir_text, conv_as_matmul):  # what the MLIR is a function of
            yield Path(module.__file__ or "").read_bytes()
        yield repr(self.inputs).encode()
        yield f"patch products up to {self.positions} positions".encode()
        yield str(self.program).encode()  # operators, attributes, constant shapes
        for name, value in self.program.constants.items():
            a = np.ascontiguousarray(value)
            yield f"{name}:{a.dtype.str}:{a.shape}".encode()
            yield memoryview(a.reshape(-1).view(np.uint8))

    def mlir(self) -> str:
        # deep convolutions over few positions as patch products: IREE runs those faster (conv_as_matmul)
        # looked up at call time (module attribute): tests substitute a miscompiling version
        patched = conv_as_matmul.convs_as_matmuls(self.program, self.inputs, self.positions)
        return program_to_mlir(patched, self.inputs, comment=self.comment, bool_as_i8=True)


class TextSource:
    def __init__(self, mlir: str) -> None:
        self.text = mlir

    def content(self) -> Iterator[bytes]:
        yield self.text.encode("utf-8")

    def mlir(self) -> str:
        return self.text


class IreeModule:
    """One MLIR module compiled (or found in the cache) and loaded: ``module(arrays) -> list of arrays``.
    ``load=False`` only compiles (into the cache: a module for a device this machine does not have)."""

    def __init__(self, source: ProgramSource | TextSource | str, options: Options, label: str = "",
                 load: bool = True, ops: int | None = None) -> None:
        import iree.runtime as rt

        if isinstance(source, str):
            source = TextSource(source)
        self.source = source  # what was compiled (a ProgramSource's program: its TOSA operators)
        start = time.perf_counter()
        flags = compile_flags(options)
        self.flags = [f for f in flags if f not in BASE_FLAGS and f not in INPUT_FLAGS]
        device = iree_devices.parse(options.device)
        count = f", {ops} op{'s' if ops != 1 else ''}" if ops is not None else ""
        label = f"{label or 'a module'} with iree-compile ({_target_name(options)}{count})"
        key = content_key(source.content(), [*flags, f"parameters>={PARAMETER_MIN_BYTES}"], iree_version())
        self.entry = lookup_or_build(cache_root(options.cache_dir), key,
                                     lambda folder: compile_mlir(source.mlir(), flags, folder, label,
                                                             iree_devices.compile_hint(device),
                                                             compile_log(options, key)))
        self.driver = device.driver(options.threads)
        #: why this driver (a phrase for the plan): a small module runs on the caller's thread (iree_threads)
        self.driver_reason = ""
        if device.is_cpu and isinstance(source, ProgramSource):
            macs = iree_threads.module_macs(self.entry.folder, source.program, source.inputs)
            self.driver, self.driver_reason = iree_threads.cpu_driver(options.threads, macs)
        self.seconds = time.perf_counter() - start
        self.options = options
        #: how the module is checked against numpy (set by the runner that made it; None: not checked)
        self.check: ProgramCheck | IntegerCheck | None = None
        self.what = "module"  # what it computes, for E0785
        self.verdict = read_verdict(self.entry.folder)  # the self-check's, kept with the module
        self.checked_now = False
        if not load:
            return
        config = _config(self.driver, options.threads)
        modules = []
        if self.entry.params is not None:
            index = rt.ParameterIndex()
            index.load(str(self.entry.params))
            modules.append(rt.create_io_parameters_module(config.vm_instance,
                                                          index.create_provider(scope=PARAMETER_SCOPE)))
        try:
            modules.append(rt.VmModule.mmap(config.vm_instance, str(self.entry.module)))
            self.context = rt.SystemContext(vm_modules=modules, config=config)
            self.main = self.context.modules.module["main"]
        except (RuntimeError, ValueError) as err:
            raise DiagnosticError([Diagnostic(code="E0783", span=NO_SPAN, message=f"the IREE runtime cannot load "
                                              f"{self.entry.module}: {err}",
                                              hint=f"remove {self.entry.folder} to recompile it")]) from None
        self.seconds = time.perf_counter() - start

    def describe(self) -> str:
        how = "compiled" if self.entry.compiled else "loaded from the cache"
        weights = "parameter archive" if self.entry.params is not None else "weights inside the module"
        driver = f"; driver {self.driver}: {self.driver_reason}" if self.driver_reason else ""
        return f"module {how} in {self.seconds:.2f} s ({weights}{driver}): {self.entry.folder}"

    def __call__(self, arrays: list[np.ndarray]) -> list[np.ndarray]:
        result = self.main(*arrays)
        results = list(result) if isinstance(result, list | tuple) else [result]
        return [np.array(r.to_host(), copy=True) for r in results]

    @property
    def unchecked(self) -> bool:
        """Whether its next call is checked against numpy (verify on, a check known, no verdict yet)."""
        return self.options.verify and self.check is not None and self.verdict is None

    def refuse_if_failed(self) -> None:
        """E0785 when the verdict (maybe cached from an earlier run) is a mismatch and verify is on."""
        if self.options.verify and self.check is not None and self.verdict is not None and not self.verdict.passed:
            v = self.verdict
            located = self.check.locate(v.op) if v.op >= 0 else None
            raise mismatch(v, self.what, located, str(self.entry.folder), self.flags, cached=not self.checked_now)

    def checked(self, arrays: list[np.ndarray]) -> list[np.ndarray]:
        """The module's outputs; on its first call (no verdict yet) compared with numpy first: E0785 on a
        mismatch, located at the first diverging operation (skriptnd.backends.iree_check)."""
        self.refuse_if_failed()
        outputs = self(arrays)
        if self.unchecked:
            assert self.check is not None
            reference = arrays  # numpy runs the program on its own dtypes (bool crosses the boundary as i8)
            if isinstance(self.source, ProgramSource):
                reference = [a.astype(dt, copy=False) for a, (_, dt) in zip(arrays, self.source.inputs, strict=True)]
            try:
                self.verdict = check(outputs, reference, self.check)
            except Exception as err:  # noqa: BLE001 - numpy's run of the program fails on these inputs
                import warnings

                self.check = None  # not checked again: said once
                warnings.warn(f"the IREE module {self.what} could not be compared with the numpy backend: numpy's "
                              f"run of it failed ({type(err).__name__}: {str(err)[:300]}); its results are "
                              "unchecked", RuntimeWarning, stacklevel=2)
                return outputs
            self.checked_now = True
            write_verdict(self.entry.folder, self.verdict)
            self.refuse_if_failed()
        return outputs

    def prefix_compiler(self) -> Any:
        """Compiles the prefix programs of a bisection the way this module was (unchecked modules)."""
        inputs = self.source.inputs if isinstance(self.source, ProgramSource) else None
        # the prefixes written as this module was (the same convolutions as patch products)
        positions = self.source.positions if isinstance(self.source, ProgramSource) else conv_as_matmul.MAX_POSITIONS

        def compile(prefix: Program | str) -> IreeModule:
            if isinstance(prefix, str):
                return IreeModule(prefix, self.options)
            return IreeModule(ProgramSource(prefix, inputs or [], "of a self-check prefix", positions),
                              self.options)

        return compile


def self_check(modules: list[IreeModule], run: Callable[[Mapping[str, np.ndarray]], dict[str, np.ndarray]], graph: Graph, options: Options) -> str:
    """Check every module without a verdict by running the graph (``run(inputs)``) on seeded inputs
    (skriptnd.backends.iree_check.seeded_inputs) before the first real result; the plan line saying what
    happened. E0785 when a module disagrees with numpy (now, or in a cached verdict)."""
    if not options.verify:
        return "self-check: off (--no-verify / Options(verify=False)): results are not compared with numpy"
    checkable = [m for m in modules if m.check is not None]
    for m in checkable:
        m.refuse_if_failed()  # a cached mismatch: refused before any work
    pending = [m for m in checkable if m.verdict is None]
    note = ""
    if pending:
        try:
            run(seeded_inputs(graph.inputs))
        except DiagnosticError as err:
            if any(d.code == "E0785" for d in err.diagnostics):
                raise
            note = (f"; the seeded run failed ({err.diagnostics[0].message[:200]}): the rest is checked at "
                    "its first call")
        except Exception as err:  # noqa: BLE001 - e.g. the runtime on inputs the graph does not expect
            note = f"; the seeded run failed ({type(err).__name__}: {str(err)[:200]}): the rest is checked at its first call"
    done = [m for m in checkable if m.verdict is not None]
    now = [m for m in done if m.checked_now]
    worst = max((m.verdict.worst * RELATIVE for m in done if m.verdict is not None), default=0.0)
    if not checkable:
        return "self-check: nothing compiled to check"
    parts = []
    if now:
        parts.append(f"{len(now)} module(s) checked now on seeded inputs in "
                     f"{sum(m.verdict.seconds for m in now if m.verdict is not None):.2f} s")
    if len(done) > len(now):
        parts.append(f"{len(done) - len(now)} verdict(s) cached with the module(s)")
    lost = [m for m in checkable if m.check is None]
    if lost:
        parts.append(f"{len(lost)} module(s) NOT checked: numpy's run of their program failed (see the warning)")
    if len(done) + len(lost) < len(checkable):
        parts.append(f"{len(checkable) - len(done) - len(lost)} module(s) not reached: checked at their first "
                     "call")
    return (f"self-check against the numpy backend: {'passed' if not lost else 'incomplete'} "
            f"({'; '.join(parts)}; worst deviation "
            f"{worst:.1e} of max |value|, tolerance {RELATIVE:g}){note}")


class IntegerRunner(Runner):
    """A graph with @quantize entries: its whole integer TOSA graph as one IREE module."""

    def __init__(self, graph: Graph, options: Options, load: bool = True) -> None:
        if load:
            open_device(options, graph)
        mlir, self.integer = graph_mlir(graph)
        self.module = IreeModule(mlir, options, f"{graph.name}'s integer TOSA graph", load)
        self.module.check = IntegerCheck(self.integer, graph, self.module.prefix_compiler())
        self.module.what = f"of graph '{graph.name}' (its integer TOSA graph)"
        self.entry = self.module.entry
        self.output_names = [n for n, _ in self.integer.outputs]
        self.plan = [f"{graph.name}: the whole integer TOSA graph compiled by IREE ({_target_name(options)}, "
                     f"{' '.join(self.module.flags)}), driver {self.module.driver}", flags_reason(options),
                     self.module.describe()]
        self.plan.append(self_check([self.module], self.run, graph, options))

    def run(self, inputs: Mapping[str, Any], progress: Progress | None = None) -> dict[str, Any]:
        arrays = self.integer.quantize_inputs(dict(inputs))
        return dict(zip(self.output_names, self.module.checked(arrays), strict=True))


IREE_OP = "iree.module"


#: How a graph dtype crosses a compiled module's boundary (skriptnd.tosa.mlir.program): SkriptND int (int64)
#: as int32 (checked to fit), bool as i8 (IREE's data tiling cannot load i1 arguments).
BOUNDARY_DTYPES = {"real": np.dtype(np.float32), "bool": np.dtype(np.int8), "int": np.dtype(np.int32)}
_GRAPH_DTYPES = {"real": np.dtype(np.float32), "bool": np.dtype(np.bool_), "int": np.dtype(np.int64)}
#: The program's own types of its inputs (program_to_mlir writes the boundary casts).
_PROGRAM_DTYPES = {"real": np.dtype(np.float32), "bool": np.dtype(np.bool_), "int": np.dtype(np.int32)}
_INT32_MIN, _INT32_MAX = int(np.iinfo(np.int32).min), int(np.iinfo(np.int32).max)
#: integer types whose every value fits int32: nothing to check when they cross as int32
_WITHIN_INT32 = frozenset(np.dtype(d) for d in (np.int8, np.uint8, np.int16, np.uint16, np.int32, np.bool_))


def _boundary_input(t: Tensor, a: np.ndarray, dtype: np.dtype) -> np.ndarray:
    if type(a) is not np.ndarray:
        a = np.asarray(a)
    if a.dtype == dtype and a.flags.c_contiguous:  # already what the module takes (the common float32 case)
        return a
    if (dtype == np.int32 and a.size and a.dtype not in _WITHIN_INT32
            and (np.minimum.reduce(a, axis=None) < _INT32_MIN or np.maximum.reduce(a, axis=None) > _INT32_MAX)):
        raise DiagnosticError([Diagnostic(
            code="E0789", span=t.span if getattr(t, "span", None) is not None else NO_SPAN,
            message=f"int tensor '{t.name}' holds {a.min() if a.min() < _INT32_MIN else a.max()}, outside the "
                    "int32 range that the compiled module takes (TOSA indices are int32)",
            hint="run it with --via numpy, or keep the values within +-2**31")])
    return np.ascontiguousarray(a, dtype=dtype)


def _run_module(op: Operation, args: list[Any]) -> list[Any]:
    module: IreeModule = op.attribs["module"]
    dtypes = op.attribs["dtypes"]
    results = module.checked([_boundary_input(t, a, d) for t, a, d in zip(op.inputs, args, dtypes, strict=True)])
    return [r.astype(_GRAPH_DTYPES[t.dtype], copy=False) if t.dtype in _GRAPH_DTYPES else r
            for t, r in zip(op.outputs, results, strict=True)]


class IreeKernels:
    """The kernel mapping of the iree backend on skriptnd's Executor: at plan time, every run of operations
    that legalizes becomes a TOSA program (as for the numpy backend, skriptnd.backends.tosa_programs), and
    each program is written as MLIR and compiled by IREE (one module per run); what does not legalize or
    compile runs on numpy (native kernels, else @lower) and the plan says so."""

    def __init__(self, options: Options, graph_name: str = "", load: bool = True) -> None:
        self.options, self.graph_name, self.load = options, graph_name, load
        self._numpy = TosaKernels(KERNELS)
        self.plan: list[str] = []
        self.modules: list[IreeModule] = []
        self.numpy_ops: list[Any] = []  # graph operations left to numpy
        self.compiled_ops = 0

    def compile_segments(self, operations: list[Any], known: Callable[[Tensor], np.ndarray | None], keep: set[int]) -> list[Any]:
        from dataclasses import replace

        result = []
        recurrent = RecurrentLegalizer(unroll_budget=UNROLL_BUDGET)
        positions = patch_positions(compile_flags(self.options))

        def extra(op: Operation) -> Any:
            """The compiler's own forms: recurrences unrolled within the budget, a grouped convolution as one
            depthwise convolution and a sum (one dispatch, not three per group: a cold compile of ResNeXt-50
            went from minutes to tens of seconds; conv_for_compilers)."""
            return recurrent(op) or (conv_for_compilers(op) if GROUPED_AS_DEPTHWISE else None)

        for op in compile_segments(operations, known, keep, extra):
            if op.op != PROGRAM_OP:  # does not legalize: numpy (its native kernel, else @lower)
                result.append(op)
                self.numpy_ops.append(op)
                self.plan.append(f"numpy: {op.op}" + (f" ({op.label})" if op.label else "")
                                 + " (does not legalize to TOSA; sknd compose --tosa says why)")
                continue
            sources = op.attribs["operations"]
            what = f"{len(sources)} operation{'s' if len(sources) != 1 else ''} ({sources[0].op} … {sources[-1].op})"
            try:
                if any(t.dtype not in BOUNDARY_DTYPES or any(d is None for d in t.shape) for t in op.inputs):
                    raise NotCompilable("an input of the run has a dynamic shape or a dtype without a TOSA type")
                dtypes = [BOUNDARY_DTYPES[t.dtype] for t in op.inputs]
                program = op.attribs["program"]
                check_compilable(program)
                source = ProgramSource(program, [(tuple(int(d) for d in t.shape), _PROGRAM_DTYPES[t.dtype])
                                                 for t in op.inputs], f"of {what}", positions)
                module = IreeModule(source, self.options, self.graph_name, self.load, len(sources))  # MLIR on a miss
                module.check = ProgramCheck(program, sources, module.prefix_compiler())
                module.what = f"of {what}"
            except NotCompilable as err:
                result.append(op)
                self.numpy_ops.extend(sources)
                self.plan.append(f"numpy TOSA program: {what}: not compiled, {err}")
                continue
            self.modules.append(module)
            self.compiled_ops += len(sources)
            result.append(replace(op, op=IREE_OP, attribs={**op.attribs, "module": module, "dtypes": dtypes}))
            self.plan.append(f"IREE: {what}; {module.describe()}")
        return result

    def get(self, name: str, default: Kernel | None = None) -> Any:
        return self[name]

    def __getitem__(self, name: str) -> Any:
        return _run_module if name == IREE_OP else self._numpy[name]


class IreeGraphRunner(Runner):
    """A float graph on the Executor with :class:`IreeKernels` (compiled when prepared, not on the first run)."""

    def __init__(self, graph: Graph, options: Options, load: bool = True) -> None:
        if load:
            open_device(options, graph)  # before compiling: no device, no minutes of compiling for nothing
        self.kernels = IreeKernels(options, graph.name, load)
        self._runner = ExecutorRunner(graph, self.kernels, True, [], per_shape=False)  # type: ignore[arg-type]
        self._runner.executor.prepare()
        total = len(graph.operations)
        k = self.kernels
        self.split = bool(k.numpy_ops)
        self.modules = k.modules
        head = (f"{graph.name}: all {total} operations compiled by IREE" if not self.split else
                f"{graph.name}: split: {len(k.modules)} IREE module(s) for the operations that legalize, "
                f"{len(k.numpy_ops)} operation(s) on numpy")
        flags = " ".join(k.modules[0].flags) if k.modules else " ".join(
            f for f in compile_flags(options) if f not in BASE_FLAGS and f not in INPUT_FLAGS)
        self.plan = [f"{head} ({_target_name(options)}, {flags}; driver "
                     f"{k.modules[0].driver if k.modules else '-'})", flags_reason(options), *k.plan]
        self.plan.append(self_check(k.modules, self.run, graph, options))

    @property
    def entry(self) -> Any:
        """The compiled module of a graph that compiled as one (the common case)."""
        return self.modules[0].entry

    def run(self, inputs: Mapping[str, Any], progress: Progress | None = None) -> dict[str, Any]:
        return self._runner.run(inputs, progress)


class DynamicIreeRunner(Runner):
    """A float graph with dynamic extents (`x: real[n|8, 3, h|64, w|64]`). On its first run: one module for
    every shape where the TOSA allows (IREE's dynamic dimensions, `tensor<?x3x64x64xf32>`; found by comparing
    the programs of three bindings of the graph, skriptnd.backends.iree_dynamic, and checked against numpy at
    those three shapes). Otherwise one module per distinct input shapes, compiled on their first run, as the
    graph bound to them (skriptnd.backends.per_shape; cached on disk like any other, at most per_shape.LIMIT
    runners kept in memory); the plan says which and why. A graph that cannot be bound to static shapes (control
    flow, extents only the data gives) runs as composed, split: what legalizes statically compiled, the rest on
    numpy."""

    def __init__(self, graph: Graph, options: Options) -> None:
        open_device(options, graph)
        self.graph, self.options = graph, options
        self.checker = Executor(graph, {}, kernels=KERNELS)
        self.shaped: PerShape[IreeGraphRunner] = PerShape(graph, self.checker, self._compile)
        self._composed: IreeGraphRunner | None = None
        #: the module for every shape (None: not tried yet, False: not possible, see the plan)
        self.dynamic: IreeModule | bool | None = None
        self._seen: set[tuple[Any, ...]] = set()
        names = sorted({str(sym) for t in graph.inputs for _, sym in extent_symbols(t)})
        self.plan = [f"{graph.name}: dynamic extents ({', '.join(names)}): one IREE module for all shapes where the "
                     f"TOSA program is the same at every size, else one per distinct input shapes, compiled on "
                     f"their first run ({_target_name(options)})"]

    def _compile(self, bound: Graph) -> IreeGraphRunner:
        runner = IreeGraphRunner(bound, self.options)
        dynamic = {t.name for t in self.graph.inputs if t.dynamic}
        shapes = ", ".join(f"{t.name}{list(t.shape)}" for t in bound.inputs if t.name in dynamic)
        self.plan.append(f"for {shapes}: {runner.plan[0]}")
        return runner

    def _bound(self, shapes: dict[str, tuple[int, ...]]) -> Graph | None:
        """The graph bound to ``shapes`` after the checks a run's inputs get (E0711, the asserts)."""
        fake = {t.name: np.broadcast_to(np.zeros((), _GRAPH_DTYPES.get(t.dtype, np.float32)), shapes[t.name])
                for t in self.graph.inputs}
        self.checker.check_inputs(fake)
        return specialise(self.graph, shapes, self.checker.extents)

    def _try_dynamic(self, inputs: Mapping[str, Any]) -> IreeModule | bool:
        """The module for every shape, or False with the plan saying why not (see iree_dynamic)."""
        def no(why: str) -> bool:
            self.plan.append(f"one module for all shapes: no, {why}: one per distinct input shapes")
            return False

        graph = self.graph
        if any(t.dtype != "real" for t in graph.inputs + graph.outputs):
            return no("an input or output is not real")
        shapes = {t.name: tuple(np.shape(inputs[t.name])) for t in graph.inputs}
        extents = dict(self.checker.extents)
        bounds = {sym: (t.bounds or (None,) * t.rank)[k] for t in graph.inputs for k, sym in extent_symbols(t)}
        samples = [shapes]
        for step in (1, 2):
            other = iree_dynamic.perturbed(extents, bounds, step)
            if other is None:
                return no("an extent has no other sizes to compare with (bound 1)")
            samples.append({t.name: tuple(other.get(sym, d) for d, sym in _extent_dims(t, shapes[t.name]))
                            for t in graph.inputs})
        variables = {t.name: graph.variable_source(t) for t in graph.variables} if graph.variable_source else {}
        try:
            bound = [self._bound(s) for s in samples]
            if any(b is None for b in bound):
                return no("the graph cannot be bound to static shapes")
            texts = [export.to_mlir(b, variables) for b in bound if b is not None]
        except DiagnosticError as err:
            return no(f"not every operation legalizes for the sizes compared ({err.diagnostics[0].message[:120]})")
        finally:
            self.checker.check_inputs(inputs)  # this run's extents again
        merged = iree_dynamic.merge(texts[0], texts[1])
        if merged is None or merged != iree_dynamic.merge(texts[0], texts[2]):
            return no("the TOSA program changes with the sizes beyond its tensor types and reshape targets (a "
                      "constant, a padding or a window follows an extent)")
        try:
            module = IreeModule(merged, self.options, f"{graph.name} (dynamic shapes)", True, None)
        except DiagnosticError as err:
            return no(f"IREE does not compile its dynamic form ({err.diagnostics[0].message[:160]})")
        sizes = []
        for s, b in zip(samples, bound, strict=True):
            assert b is not None
            seeded = seeded_inputs([replace(t, shape=s[t.name], bounds=None) for t in graph.inputs])
            expected = Executor(b, variables, kernels=TosaKernels(KERNELS)).run(seeded)
            got = module([np.ascontiguousarray(seeded[t.name], np.float32) for t in graph.inputs])
            if self.options.verify and not iree_dynamic.agrees(got, [expected[graph.output_name(i)]
                                                                     for i in range(len(graph.outputs))]):
                return no(f"its module disagrees with numpy at {s}")
            sizes.append(", ".join(f"{t.name}{list(s[t.name])}" for t in graph.inputs if t.dynamic))
        checked = f"checked against numpy at {'; '.join(sizes)}" if self.options.verify else "not checked (--no-verify)"
        self.plan.append(f"one module for all shapes (IREE dynamic dimensions), {checked}; {module.describe()}")
        return module

    def run(self, inputs: Mapping[str, Any], progress: Progress | None = None) -> dict[str, Any]:
        key = tuple(np.shape(inputs[t.name]) if t.name in inputs else None for t in self.graph.inputs)
        if self.dynamic is None and None not in key:
            self.checker.check_inputs(inputs)
            self._seen.add(key)
            self.dynamic = self._try_dynamic(inputs)
        if isinstance(self.dynamic, IreeModule):
            if key not in self._seen:  # a new shape: its inputs checked (E0711, asserts) once
                self.checker.check_inputs(inputs)
                self._seen.add(key)
            arrays = [np.ascontiguousarray(inputs[t.name], np.float32) for t in self.graph.inputs]
            results = self.dynamic(arrays)
            return {self.graph.output_name(i): r for i, r in enumerate(results)}
        runner = self.shaped.get(inputs)
        if runner is None:  # not bound to static shapes: the composed graph, split
            if self._composed is None:
                self._composed = IreeGraphRunner(self.graph, self.options)
                self.plan.extend(["not bound to static shapes (control flow or data-given extents): the composed "
                                  "graph, split", *self._composed.plan])
            runner = self._composed
        return runner.run(inputs, progress)


def _extent_dims(t: Tensor, shape: tuple[int, ...]) -> list[tuple[int, Any]]:
    """(this run's extent, its symbol or None) for each dimension of input ``t``."""
    symbols = dict(extent_symbols(t))
    return [(d, symbols.get(k)) for k, d in enumerate(shape)]


@register
class IreeBackend(Backend):
    def __init__(self) -> None:
        super().__init__("iree", "the whole graph as TOSA MLIR compiled by IREE for the CPU or a GPU (cached; "
                         "weights in a parameter archive)", requires=("iree.compiler", "iree.runtime"),
                         devices=tuple(iree_devices.KINDS))

    def prepare(self, graph: Graph, options: Options) -> Runner:
        if has_quantization(graph):
            return IntegerRunner(graph, options)
        if any(t.dynamic for t in graph.inputs):
            return DynamicIreeRunner(graph, options)
        return IreeGraphRunner(graph, options)
