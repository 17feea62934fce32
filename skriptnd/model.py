"""`skriptnd.load(path) -> Model`: a checked model folder that composes into runnable graphs.

Variables come from NNEF tensor files beside main.sknd, named as in Khronos' NNEF-Tools 2.0
model folders: `<module>.<graph>.<scoped variable name>.dat` (e.g. `main.G.filter.dat`, or
`main.G.conv1.w.dat` for a variable `w` declared inside the operator invoked as `conv1`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from skriptnd.check.program import check_program
from skriptnd.compose.composer import NUMPY_DTYPES, AtomicPolicy, Composer, decompose_all
from skriptnd.compose.ir import Graph, Tensor
from skriptnd.diagnostics import Diagnostic, DiagnosticError
from skriptnd.io.tensor_file import TensorFileError, expected_header, read_tensor, write_tensor
from skriptnd.semantics.modules import Program, load_program
from skriptnd.source import Span
from skriptnd.syntax import ast
from skriptnd.untrusted import UnsafeFile, contained


def variable_file(model_dir: Path, module: str, graph: str, tensor: Tensor | str) -> Path:
    name = tensor if isinstance(tensor, str) else tensor.name
    return model_dir / f"{module}.{graph}.{name}.dat"


def _inside(folder: Path, path: Path) -> None:
    """A variable's tensor file must be inside the model folder once links are resolved: a downloaded
    model whose `main.G.w.dat` links to /dev/zero or to a file of yours is refused (E0701)."""
    try:
        contained(folder, str(path.relative_to(folder)) if path.is_relative_to(folder) else str(path))
    except UnsafeFile as err:
        raise TensorFileError(f"cannot read tensor file: it {err.reason}", path, "E0701") from None


def save_weights(folder: Path | str, graph: str, params: Mapping[str, np.ndarray], module: str = "main",
                 dtype: npt.DTypeLike = np.float32) -> list[Path]:
    """Write variables (by scoped name) as the tensor files `load(...).compose()` reads."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for name, array in params.items():
        path = variable_file(folder, module, graph, name)
        write_tensor(path, np.ascontiguousarray(array, dtype=dtype))
        written.append(path)
    return written


@dataclass
class Model:
    path: Path
    program: Program

    @property
    def graph_names(self) -> list[str]:
        return [g.name for g in self.program.graphs()]

    def attrib_decls(self, graph: str | None = None) -> list[ast.ParamDecl]:
        """The attribute declarations of the graph (the first one, or `graph`; none for an unknown graph)."""
        found = [g for g in self.program.graphs() if graph is None or g.name == graph][:1]
        return [d for g in found for b in g.blocks if isinstance(b, ast.ParamBlock) and b.kind == "attrib"
                for d in b.items]

    def required_attribs(self, graph: str | None = None) -> list[str]:
        """The attributes of the graph that have no default and are not optional: a composition must be given
        their values."""
        return [d.name for d in self.attrib_decls(graph) if d.default is None and not d.type.optional]

    def compose(self, graph: str | None = None, attribs: Mapping[str, Any] | None = None,
                atomic: AtomicPolicy | None = None, *, decompose: bool = False, random_weights: bool = False,
                seed: int = 0, defer: bool = False) -> Graph:
        """The graph for these attributes; `decompose=True` goes down to @lower primitives.

        Variables are read from their tensor files when the graph first runs; with
        `random_weights`, a missing file gives seeded random values instead of an error.

        With `defer=True`, graph attributes that have no default and are not given (an ONNX input that feeds
        only parameters, such as a Reshape's shape, imported as a graph attribute) are awaited: the graph
        returned holds no operations, and `skriptnd.run(graph, {..., "shape": array})` composes it for the
        value given with the inputs (each distinct value once). Without it, such a graph is E0410 as always.
        """
        given = dict(attribs or {})

        def rebind(values: Mapping[str, Any]) -> Graph:
            return self.compose(graph, {**given, **values}, atomic, decompose=decompose,
                                random_weights=random_weights, seed=seed)

        missing = [name for name in self.required_attribs(graph) if name not in given]
        if defer and missing:
            awaiting = Graph(name=graph or self.graph_names[0], program=self.program,
                             attribs={**given, **dict.fromkeys(missing)}, awaiting=tuple(missing))
            awaiting.rebind = rebind
            return awaiting
        policy = decompose_all if decompose else atomic
        composed = Composer(self.program, policy).compose(graph, given)
        composed.rebind = rebind
        module = self.program.main.name if self.program.main else "main"
        rng = np.random.default_rng(seed)
        folder = self.program.model_dir
        drawn: dict[str, np.ndarray] = {}  # a variable's random values are drawn once: every reader sees them

        def source(t: Tensor) -> np.ndarray:
            path = variable_file(folder, module, composed.name, t)
            if not path.exists() and random_weights:
                if t.name not in drawn:
                    drawn[t.name] = _random(rng, t)
                return drawn[t.name]
            span = t.span if isinstance(t.span, Span) else Span(str(path), 1, 1, 1, 2)
            if not path.exists():
                raise DiagnosticError([Diagnostic(
                    code="E0701", span=span,
                    message=f"no tensor file for variable '{t.name}': expected {path}",
                    hint="export the weights there, or run with --random-weights to try the model")])
            try:
                _inside(folder, path)
                array = read_tensor(path, lambda header: expected_header(header, t.dtype, t.shape, path))
            except TensorFileError as err:
                raise DiagnosticError([err.to_diagnostic(span)]) from None
            return array.astype(NUMPY_DTYPES[t.dtype], copy=False)

        composed.variable_source = source
        return composed


def weights_main(description: str, make: Callable[[int], Mapping[str, np.ndarray]], graphs: Sequence[str],
                 default_folder: Path, default_seed: int = 0, module: str = "main") -> None:
    """The command line of a model folder's weight script: `--output DIR --seed N`, then the
    tensor files of every graph (all share the variables), and a one-line summary."""
    import argparse

    parser = argparse.ArgumentParser(description=description.strip().splitlines()[0])
    parser.add_argument("--output", type=Path, default=default_folder,
                        help="folder for the .dat files (default: beside main.sknd)")
    parser.add_argument("--seed", type=int, default=default_seed)
    args = parser.parse_args()
    params = make(args.seed)
    for graph in graphs:
        save_weights(args.output, graph, params, module=module)
    count = sum(int(a.size) for a in params.values())
    print(f"wrote {len(params)} tensors ({count:,} parameters, {4 * count / 1e6:.1f} MB) for "
          f"{', '.join(graphs)} to {args.output}")


def _random(rng: np.random.Generator, t: Tensor) -> np.ndarray:
    shape = tuple(d or 1 for d in t.shape)
    last = t.name.rsplit(".", 1)[-1].lower()
    if t.dtype == "real" and ("variance" in last or last.endswith("var")):
        # a normalisation's variance must be positive, or the model computes sqrt of a negative
        return rng.uniform(0.5, 1.5, size=shape).astype(np.float32)
    if t.dtype == "real":
        fan_in = int(np.prod(shape[1:])) if len(shape) > 1 else max(shape[0] if shape else 1, 1)
        return (rng.standard_normal(shape) / np.sqrt(max(fan_in, 1))).astype(np.float32)
    if t.dtype == "int":
        return rng.integers(0, 10, size=shape, dtype=np.int64)
    return rng.integers(0, 2, size=shape).astype(np.bool_)


def load(path: str | Path) -> Model:
    """Load and check a model folder (or a single main .sknd file); DiagnosticError if it has errors."""
    program = load_program(Path(path))
    # composing checks itself, for the attributes it is given: the defaults may not be those
    diags = check_program(program, composition=False)
    errors = [d for d in diags if d.severity == "error"]
    if errors:
        raise DiagnosticError(errors)
    return Model(Path(path), program)
