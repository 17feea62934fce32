"""Language-server latency: from a didChange to the published diagnostics, on a 2,000-line module.

The module is made of copies of the standard library's nn operators, renamed `<op>_<k>` (and
their local invocations with them), so it checks clean and is about as dense as real code.
`sknd lsp` runs as a subprocess and is driven over stdio by pygls' LanguageClient, as an
editor drives it. Each change is an incremental edit of one line (a default value changed in
place, or a blank line inserted, which moves every definition below it); the time measured is
from sending didChange to receiving the publishDiagnostics of that version, and includes the
server's 150 ms debounce. As a reference, the same text is checked in-process the plain way
(`load_program` + `check_program`, as `sknd check` does, warm caches). The cold open is timed
first (the composition cache holds nothing for the new file yet); a second server then opens the
unchanged file again, as an editor restarted on a saved file does.

    python benchmarks/lsp.py [--changes N]
"""

from __future__ import annotations

import argparse
import asyncio
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path

from lsprotocol import types
from pygls.lsp.client import LanguageClient

ROOT = Path(__file__).resolve().parents[1]
TARGET = 0.300
LINES = 2000


def generate(lines: int = LINES) -> str:
    """A module of `lines` lines or a few more: renamed copies of stdlib/nn.sknd's operators.

    Copy k of operator `op` is `op_k`; local invocations (in @compose; @lower calls built-ins
    such as erf) are renamed to the first copy, which is complete."""
    source = (ROOT / "stdlib" / "nn.sknd").read_text(encoding="utf-8")
    body = source[source.index("\n# spec"):].strip("\n")
    operators = re.split(r"\n(?=# spec)", body)
    names = re.findall(r"^operator (\w+)", body, re.MULTILINE)
    local = re.compile(r"(?<![\w.])(" + "|".join(map(re.escape, names)) + r")(?=\s*[{(<])")
    out = ["import layout;", "import math;"]
    count = 2
    k = 0
    while count < lines:
        copy, text = k // len(operators), operators[k % len(operators)]
        text = re.sub(r"^operator (\w+)", rf"operator \g<1>_{copy}", text, flags=re.MULTILINE)
        parts = re.split(r"(@compose \{.*?\n    \})", text, flags=re.DOTALL)
        parts = [local.sub(lambda m: f"{m.group(1)}_0", p) if p.startswith("@compose") else p for p in parts]
        out.append("\n" + "".join(parts))
        count += text.count("\n") + 2
        k += 1
    return "\n".join(out) + "\n"


def edit(text: str, k: int) -> tuple[str, tuple[int, int, int, str]]:
    """The k-th edit of text, and the text after it: (line, start, end, new text), 0-based.

    Even k: the default of a `groups: int = N;` attribute gets another digit (in place);
    odd k: a blank line is inserted before one (every definition below it moves)."""
    lines = text.split("\n")
    sites = [i for i, line in enumerate(lines) if re.search(r"groups: int = \d;", line)]
    line = sites[(k * 7) % len(sites)]
    if k % 2 == 0:
        col = re.search(r"groups: int = (\d);", lines[line]).start(1)
        new = str(k % 9 + 1) if lines[line][col] != str(k % 9 + 1) else "0"
        lines[line] = lines[line][:col] + new + lines[line][col + 1:]
        return "\n".join(lines), (line, col, col + 1, new)
    lines.insert(line, "")
    return "\n".join(lines), (line, 0, 0, "\n")


async def measure(path: Path, text: str, changes: int) -> tuple[float, list[float]]:
    client = LanguageClient("sknd-benchmark", "1")
    published: dict[int | None, float] = {}
    expect_errors = False
    arrived = asyncio.Event()

    @client.feature(types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)
    def on_diagnostics(ls: LanguageClient, params: types.PublishDiagnosticsParams) -> None:
        if bool(params.diagnostics) != expect_errors:
            print(f"unexpected diagnostics: {params.diagnostics[:3]}", file=sys.stderr)
        published[params.version] = time.perf_counter()
        arrived.set()

    async def wait(version: int) -> float:
        while version not in published:
            arrived.clear()
            await asyncio.wait_for(arrived.wait(), 60)
        return published[version]

    await client.start_io(sys.executable, "-m", "skriptnd", "lsp")
    await client.initialize_async(types.InitializeParams(process_id=None, root_uri=path.parent.as_uri(),
                                                         capabilities=types.ClientCapabilities()))
    client.initialized(types.InitializedParams())
    uri = path.as_uri()
    t0 = time.perf_counter()
    client.text_document_did_open(types.DidOpenTextDocumentParams(
        types.TextDocumentItem(uri=uri, language_id="skriptnd", version=1, text=text)))
    first = await wait(1) - t0
    version = 1
    if changes < 0:  # only the open
        await client.shutdown_async(None)
        client.exit(None)
        await client.stop()
        return first, []

    async def change(line: int, start: int, end: int, new: str) -> float:
        nonlocal version
        await asyncio.sleep(0.05)
        version += 1
        rng = types.Range(types.Position(line, start), types.Position(line, end))
        sent = time.perf_counter()
        client.text_document_did_change(types.DidChangeTextDocumentParams(
            types.VersionedTextDocumentIdentifier(uri=uri, version=version),
            [types.TextDocumentContentChangePartial(range=rng, text=new)]))
        return await wait(version) - sent

    times = []
    current = text
    for k in range(changes):
        current, (line, start, end, new) = edit(current, k)
        times.append(await change(line, start, end, new))
    # while the module has a syntax error (a ';' deleted), every change parses it all again
    expect_errors = True
    lines = current.split("\n")
    line = next(i for i, t in enumerate(lines) if t.rstrip().endswith(";") and i > len(lines) // 2)
    col = len(lines[line].rstrip()) - 1
    broken = [await change(line, col, col + 1, "")]
    for k in range(4):
        broken.append(await change(line, 0, 0, " ") if k % 2 == 0 else await change(line, 0, 1, ""))
    await client.shutdown_async(None)
    client.exit(None)
    await client.stop()
    print("each change (ms): " + ", ".join(f"{t * 1000:.0f}" for t in times))
    print("with a syntax error, each change (ms): " + ", ".join(f"{t * 1000:.0f}" for t in broken))
    return first, times


def reference(path: Path, runs: int = 5) -> float:
    """Median time of a plain in-process check of the file (warm: stdlib and grammar cached)."""
    from skriptnd.check.program import check_program
    from skriptnd.semantics.modules import load_program

    check_program(load_program(path))
    samples = []
    for _ in range(runs):
        t0 = time.perf_counter()
        diags = check_program(load_program(path))
        samples.append(time.perf_counter() - t0)
    if diags:
        print(f"warning: the generated module has {len(diags)} diagnostics: {diags[0]}", file=sys.stderr)
    return statistics.median(samples)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--changes", type=int, default=11, help="number of edits timed (default 11)")
    args = parser.parse_args()
    from skriptnd.lsp.server import DEBOUNCE_SECONDS

    text = generate()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "big.sknd"
        path.write_text(text, encoding="utf-8")
        # the editor first: a reference run before it would fill the composition cache
        # (compose.check_cache) for this very file, and the open would not be cold
        first, times = asyncio.run(measure(path, text, args.changes))
        plain = reference(path)
        reopened, _ = asyncio.run(measure(path, text, -1))
    median = statistics.median(times)
    print(f"module: {text.count(chr(10)) + 1} lines, {len(re.findall(r'^operator ', text, re.M))} operators")
    print(f"didOpen -> diagnostics (cold server): {first * 1000:.0f} ms")
    print(f"didOpen -> diagnostics (new server, the file unchanged since it was checked): {reopened * 1000:.0f} ms")
    print(f"didChange -> diagnostics, median of {len(times)}: {median * 1000:.0f} ms "
          f"(min {min(times) * 1000:.0f}, max {max(times) * 1000:.0f}; includes the {DEBOUNCE_SECONDS * 1000:.0f} ms "
          f"debounce) = {median / TARGET:.2f}x the {TARGET * 1000:.0f} ms target")
    print(f"  of which after the debounce: {(median - DEBOUNCE_SECONDS) * 1000:.0f} ms")
    print(f"reference: plain in-process check of the same text: {plain * 1000:.0f} ms "
          f"(change latency less debounce = {(median - DEBOUNCE_SECONDS) / plain:.2f}x of it)")


if __name__ == "__main__":
    main()
