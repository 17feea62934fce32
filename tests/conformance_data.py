"""Where the conformance vectors are: ``../shared/conformance`` beside the repository (or its worktree
folder's parent), or ``$SKRIPTND_SHARED/conformance``. Absent: the tests skip with the reason, except
under CI=1, where a missing oracle is a failure (as for the other optional oracles)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def shared_dir() -> Path | None:
    """The shared folder (conformance/ and spec/): $SKRIPTND_SHARED, else beside the checkout or its parent."""
    candidates = []
    if os.environ.get("SKRIPTND_SHARED"):
        candidates.append(Path(os.environ["SKRIPTND_SHARED"]))
    candidates += [ROOT.parent / "shared", ROOT.parents[1] / "shared"]
    for c in candidates:
        if (c / "conformance").is_dir() or (c / "spec").is_dir():
            return c
    return None


def require(sub: str) -> Path:
    """The folder ``shared/<sub>``, or skip (fail under CI=1) when it is not there."""
    base = shared_dir()
    folder = base / sub if base is not None else None
    if folder is None or not folder.is_dir():
        message = f"shared/{sub} not found beside the repository (set SKRIPTND_SHARED)"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    return folder


# -- the conformance runs, once per test session (the conformance tests and the docs check share them) ------

@pytest.fixture(scope="session")
def nnapi_vectors() -> dict[str, dict]:
    import json

    folder = require("conformance/nnapi-1.0")
    return {p.stem: json.loads(p.read_text()) for p in sorted(folder.glob("*.json"))}


@pytest.fixture(scope="session")
def nnapi_results(nnapi_vectors: dict[str, dict], tmp_path_factory: pytest.TempPathFactory) -> dict:
    from skriptnd.targets.conformance.nnapi_run import run_vector

    work = tmp_path_factory.mktemp("nnapi")
    return {name: run_vector(model, work) for name, model in nnapi_vectors.items()}


@pytest.fixture(scope="session")
def mli_cases() -> dict[str, dict]:
    import json

    folder = require("conformance/mli-2.0")
    return {p.stem: json.loads(p.read_text()) for p in sorted(folder.glob("*.json"))}


@pytest.fixture(scope="session")
def mli_results(mli_cases: dict[str, dict], tmp_path_factory: pytest.TempPathFactory) -> dict:
    from skriptnd.targets.conformance.mli_run import run_case

    work = tmp_path_factory.mktemp("mli")
    return {name: run_case(case, name, work) for name, case in mli_cases.items()}
