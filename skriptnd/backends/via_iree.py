"""``iree``: the whole graph legalized to TOSA (skriptnd.tosa.legalize), written as TOSA MLIR
(skriptnd.tosa.export; a graph with @quantize entries as its integer TOSA graph, skriptnd.tosa.quantized),
compiled by ``iree-compile`` for the CPU (llvm-cpu, ``--iree-llvmcpu-target-cpu=host`` unless
``Options.target`` names another CPU) and run by the IREE runtime.

The weights leave the compiled module: ``--iree-parameter-export`` writes every constant of at least
:data:`PARAMETER_MIN_BYTES` bytes to an IREE parameter archive (``params.irpa``) that the runtime maps
from disk at load time. Compiled modules are cached (skriptnd.backends.iree_cache) by a content hash of
the MLIR, the flags and the IREE version, so a second run of the same graph loads in milliseconds.

A graph that does not fully legalize is refused with a located E0781 naming its first unlegalizable
operation (``--via numpy`` runs it: TOSA where it legalizes, numpy for the rest); never a silent fallback.
"""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Mapping
from typing import Any

import numpy as np

from ..diagnostics import Diagnostic, DiagnosticError, Note
from ..source import NO_SPAN
from . import register
from .base import Backend, Options, Progress, Runner
from .executor_runner import has_quantization

#: Flags of every compilation (the input is TOSA; the device the local CPU).
BASE_FLAGS = ("--iree-input-type=tosa", "--iree-hal-target-device=local",
              "--iree-hal-local-target-device-backends=llvm-cpu")
#: Optimisation flags on by default (see docs/performance.md for the sweep that chose them).
DEFAULT_FLAGS: tuple[str, ...] = ()
PARAMETER_MIN_BYTES = 256
PARAMETER_SCOPE = "model"
COMPILE_TIMEOUT = 1800.0


def iree_version() -> str:
    import iree.compiler.version as v

    return f"{v.VERSION} {v.REVISIONS}"


def compiler_path() -> str:
    from iree.compiler.tools.binaries import find_tool

    return str(find_tool("iree-compile"))


def compile_flags(options: Options) -> list[str]:
    target = options.target or "host"
    flags = list(BASE_FLAGS)
    if "-" in target:  # a target triple, e.g. aarch64-unknown-linux-gnu: cross-compile for its generic CPU
        flags += [f"--iree-llvmcpu-target-triple={target}", "--iree-llvmcpu-target-cpu=generic"]
    else:
        flags.append(f"--iree-llvmcpu-target-cpu={target}")
    return flags + list(DEFAULT_FLAGS) + list(options.flags)


def _refusal(graph: Any, diags: list[Diagnostic]) -> DiagnosticError:
    """E0781 at the first thing keeping the graph from compiling, the others as notes."""
    first = diags[0]
    message = first.message.replace("is not legalized to TOSA", "does not legalize to TOSA")
    notes = tuple(Note(d.message) for d in diags[1:6])
    if len(diags) > 6:
        notes += (Note(f"and {len(diags) - 6} more"),)
    return DiagnosticError([Diagnostic(
        code="E0781", span=first.span, notes=notes,
        message=f"the iree backend compiles the whole graph '{graph.name}' to TOSA, but {message}",
        hint="run it with --via numpy (TOSA programs where it legalizes, numpy kernels for the rest); "
             "sknd compose MODEL --tosa lists what legalizes")])


def graph_mlir(graph: Any) -> tuple[str, Any]:
    """(TOSA MLIR, the integer graph for a @quantize graph else None); E0781 when it does not legalize."""
    if has_quantization(graph):
        from ..tosa import quantized

        try:
            integer = quantized.lower_quantized(graph)
        except DiagnosticError as err:
            raise _refusal(graph, err.diagnostics) from None
        return quantized.to_mlir(integer), integer
    from ..tosa.export import check_exportable, to_mlir

    diags = check_exportable(graph)
    if diags:
        raise _refusal(graph, diags)
    return to_mlir(graph), None


def _compile(mlir: str, flags: list[str], folder: Any) -> None:
    from .iree_cache import MODULE, PARAMS

    source = os.path.join(folder, "model.mlir")
    with open(source, "w", encoding="utf-8") as f:
        f.write(mlir)
    command = [compiler_path(), *flags, f"--iree-parameter-export={PARAMETER_SCOPE}={os.path.join(folder, PARAMS)}",
               f"--iree-parameter-export-minimum-size={PARAMETER_MIN_BYTES}", source,
               "-o", os.path.join(folder, MODULE)]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=COMPILE_TIMEOUT)
    except subprocess.TimeoutExpired:
        raise _compiler_failed(f"iree-compile did not finish in {COMPILE_TIMEOUT:.0f} s") from None
    finally:
        os.unlink(source)
    if done.returncode != 0:
        raise _compiler_failed(f"iree-compile failed:\n{done.stderr.strip()[-4000:]}")


def _compiler_failed(message: str) -> DiagnosticError:
    return DiagnosticError([Diagnostic(code="E0782", message=message, span=NO_SPAN,
                                       hint="report it with the model; --via numpy runs it meanwhile")])


class IreeRunner(Runner):
    def __init__(self, graph: Any, options: Options) -> None:
        import iree.runtime as rt

        from .iree_cache import cache_root, content_key, lookup_or_build

        start = time.perf_counter()
        mlir, self.integer = graph_mlir(graph)
        flags = compile_flags(options)
        key = content_key(mlir, flags, iree_version())
        entry = lookup_or_build(cache_root(options.cache_dir), key, lambda folder: _compile(mlir, flags, folder))
        self.entry = entry
        self.prepare_seconds = time.perf_counter() - start
        threads = options.threads
        driver = "local-sync" if threads == 1 else "local-task"
        if threads and threads > 1:
            rt.flags.parse_flags(f"--task_topology_max_group_count={threads}")
        config = rt.Config(driver)
        modules = []
        params = entry.params
        if params is not None:
            index = rt.ParameterIndex()
            index.load(str(params))
            modules.append(rt.create_io_parameters_module(config.vm_instance,
                                                          index.create_provider(scope=PARAMETER_SCOPE)))
        try:
            modules.append(rt.VmModule.mmap(config.vm_instance, str(entry.module)))
            self.context = rt.SystemContext(vm_modules=modules, config=config)
            self.main = self.context.modules.module["main"]
        except (RuntimeError, ValueError) as err:
            raise DiagnosticError([Diagnostic(code="E0783", span=NO_SPAN, message=f"the IREE runtime cannot load "
                                              f"{entry.module}: {err}",
                                              hint=f"remove {entry.folder} to recompile it")]) from None
        self.graph = graph
        self.input_names = [t.name for t in graph.inputs]
        self.input_shapes = [tuple(int(d) for d in t.shape) for t in graph.inputs]
        self.output_names = ([n for n, _ in self.integer.outputs] if self.integer is not None
                             else [graph.output_name(i) for i in range(len(graph.outputs))])
        how = "compiled" if entry.compiled else "loaded from the cache"
        kind = "integer TOSA graph" if self.integer is not None else "TOSA graph"
        self.plan = [f"{graph.name}: the whole graph as one {kind} compiled by IREE (llvm-cpu, "
                     f"{' '.join(f for f in flags if f not in BASE_FLAGS)})",
                     f"module {how} in {self.prepare_seconds:.2f} s: {entry.folder}",
                     f"weights: {'parameter archive ' + str(params) if params else 'inside the module'}; "
                     f"driver {driver}" + (f", {threads} threads" if threads else "")]

    def _arrays(self, inputs: Mapping[str, Any]) -> list[np.ndarray]:
        if self.integer is not None:
            return self.integer.quantize_inputs(dict(inputs))
        arrays = []
        for t, name, shape in zip(self.graph.inputs, self.input_names, self.input_shapes, strict=True):
            if name not in inputs:
                raise DiagnosticError([Diagnostic(code="E0711", message=f"no value given for input '{name}'",
                                                  span=t.span or NO_SPAN)])
            a = np.asarray(inputs[name], np.bool_ if t.dtype == "bool" else np.float32)
            if a.shape != shape:
                raise DiagnosticError([Diagnostic(code="E0711", span=t.span or NO_SPAN,
                                                  message=f"input '{name}' must have shape {list(shape)}, "
                                                  f"got {list(a.shape)} (the iree backend compiles static shapes)")])
            arrays.append(np.ascontiguousarray(a))
        return arrays

    def run(self, inputs: Mapping[str, Any], progress: Progress | None = None) -> dict[str, Any]:
        result = self.main(*self._arrays(inputs))
        results = list(result) if isinstance(result, list | tuple) else [result]
        return {name: np.array(r.to_host(), copy=True) for name, r in zip(self.output_names, results, strict=True)}


@register
class IreeBackend(Backend):
    def __init__(self) -> None:
        super().__init__("iree", "the whole graph as TOSA MLIR compiled by IREE for the CPU (cached; weights in a "
                         "parameter archive)", requires=("iree.compiler", "iree.runtime"))

    def prepare(self, graph: Any, options: Options) -> Runner:
        return IreeRunner(graph, options)
