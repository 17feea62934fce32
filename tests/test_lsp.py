"""End-to-end tests of `sknd lsp`, driven as an editor drives it.

A pygls `LanguageClient` launches `python -m skriptnd lsp` as a subprocess and talks JSON-RPC to
it over stdio: initialize, didOpen/didChange/didClose, then the requests. The client's event
loop runs in a background thread so that the tests themselves stay synchronous; one server
serves the whole module (each test opens its own documents). No network is used.
"""

from __future__ import annotations

import asyncio
import os
import sys
import threading
import time
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

import pytest
from lsprotocol import types
from pygls.lsp.client import LanguageClient

from skriptnd.resources import stdlib_dir
from skriptnd.syntax import parse_module
from skriptnd.syntax.printer import format_module

MAIN = """\
import nn;
import ops;

graph G {
    @input {
        x: real[1, 3, 8, 8];
        w: real[4, 3, 3, 3];
    }
    @output {
        y: real[1, 4, 8, 8];
    }
    @compose {
        c = nn.conv{padding=1}(x, w);
        r = nn.relu(c);
        y = ops.scale{factor=2.0}(r);
    }
}
"""

OPS = """\
operator scale {
    @dtype {
        T: num;
    }
    @attrib {
        factor: real = 1.0;
    }
    @input {
        x: T[s..];
    }
    @output {
        y: T[s..];
    }
    @lower {
        y[i..] = x[i..] * T(factor),
            i < s;
    }
}
"""

TIMEOUT = 20.0


class Session:
    """A language client whose asyncio loop runs in a thread; methods block until done."""

    def __init__(self, root: Path, capabilities: types.ClientCapabilities | None = None) -> None:
        self.root = root
        self.capabilities = capabilities or types.ClientCapabilities()
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.published: list[types.PublishDiagnosticsParams] = []
        self.condition = threading.Condition()
        self.opened: dict[str, int] = {}  # uri -> publications before its last didOpen
        self.open_uris: set[str] = set()
        self.client: LanguageClient = self.run(self._start())

    async def _start(self) -> LanguageClient:
        client = LanguageClient("sknd-tests", "1")

        @client.feature(types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)
        def on_diagnostics(ls: LanguageClient, params: types.PublishDiagnosticsParams) -> None:
            with self.condition:
                self.published.append(params)
                self.condition.notify_all()

        await client.start_io(sys.executable, "-m", "skriptnd", "lsp", cwd=str(self.root))
        await client.initialize_async(types.InitializeParams(
            process_id=os.getpid(), root_uri=self.root.as_uri(), capabilities=self.capabilities))
        client.initialized(types.InitializedParams())
        return client

    def run(self, coro: Coroutine[Any, Any, Any]) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(TIMEOUT)

    def notify(self, fn: Callable[..., None], params: Any) -> None:
        async def send() -> None:
            fn(params)

        self.run(send())

    # ------------------------------------------------------------ documents

    def open(self, path: Path, text: str, version: int = 1) -> str:
        uri = path.as_uri()
        self.opened[uri] = self.mark()
        self.open_uris.add(uri)
        self.notify(self.client.text_document_did_open, types.DidOpenTextDocumentParams(
            types.TextDocumentItem(uri=uri, language_id="skriptnd", version=version, text=text)))
        return uri

    def change(self, uri: str, text: str, version: int) -> None:
        """A full-text change (the server also takes incremental ones)."""
        self.notify(self.client.text_document_did_change, types.DidChangeTextDocumentParams(
            types.VersionedTextDocumentIdentifier(uri=uri, version=version),
            [types.TextDocumentContentChangeWholeDocument(text=text)]))

    def edit(self, uri: str, line: int, start: int, end: int, text: str, version: int) -> None:
        """An incremental change of one range of one line."""
        rng = types.Range(types.Position(line, start), types.Position(line, end))
        self.notify(self.client.text_document_did_change, types.DidChangeTextDocumentParams(
            types.VersionedTextDocumentIdentifier(uri=uri, version=version),
            [types.TextDocumentContentChangePartial(range=rng, text=text)]))

    def close_document(self, uri: str) -> None:
        self.open_uris.discard(uri)
        self.notify(self.client.text_document_did_close,
                    types.DidCloseTextDocumentParams(types.TextDocumentIdentifier(uri=uri)))

    def diagnostics(self, uri: str, version: int | None = None, after: int | None = None) -> list[types.Diagnostic]:
        """The diagnostics of the first publication for uri (of that version) after the
        `after`-th publication (default: since the document was last opened)."""
        after = self.opened.get(uri, 0) if after is None else after
        deadline = time.monotonic() + TIMEOUT
        with self.condition:
            while True:
                for params in self.published[after:]:
                    if params.uri == uri and (version is None or params.version == version):
                        return list(params.diagnostics)
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(f"no diagnostics published for {uri} (version {version})")
                self.condition.wait(left)

    def wait_for(self, uri: str, predicate: Callable[[list[types.Diagnostic]], bool],
                 after: int = 0) -> list[types.Diagnostic]:
        """The diagnostics of the first publication for uri after `after` that satisfies predicate."""
        deadline = time.monotonic() + TIMEOUT
        with self.condition:
            while True:
                for params in self.published[after:]:
                    if params.uri == uri and predicate(list(params.diagnostics)):
                        return list(params.diagnostics)
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(f"no matching diagnostics published for {uri}")
                self.condition.wait(left)

    def mark(self) -> int:
        with self.condition:
            return len(self.published)

    # ------------------------------------------------------------ requests

    def hover(self, uri: str, line: int, character: int) -> types.Hover | None:
        return self.run(self.client.text_document_hover_async(types.HoverParams(
            types.TextDocumentIdentifier(uri=uri), types.Position(line, character))))

    def definition(self, uri: str, line: int, character: int) -> Any:
        return self.run(self.client.text_document_definition_async(types.DefinitionParams(
            types.TextDocumentIdentifier(uri=uri), types.Position(line, character))))

    def references(self, uri: str, line: int, character: int) -> list[types.Location]:
        return self.run(self.client.text_document_references_async(types.ReferenceParams(
            context=types.ReferenceContext(include_declaration=True),
            text_document=types.TextDocumentIdentifier(uri=uri), position=types.Position(line, character))))

    def completion(self, uri: str, line: int, character: int) -> list[str]:
        result = self.run(self.client.text_document_completion_async(types.CompletionParams(
            types.TextDocumentIdentifier(uri=uri), types.Position(line, character))))
        items = result.items if isinstance(result, types.CompletionList) else result or []
        return [item.label for item in items]

    def symbols(self, uri: str) -> list[types.DocumentSymbol]:
        return self.run(self.client.text_document_document_symbol_async(types.DocumentSymbolParams(
            types.TextDocumentIdentifier(uri=uri))))

    def formatting(self, uri: str) -> list[types.TextEdit] | None:
        return self.run(self.client.text_document_formatting_async(types.DocumentFormattingParams(
            types.TextDocumentIdentifier(uri=uri), types.FormattingOptions(tab_size=4, insert_spaces=True))))

    def stop(self) -> None:
        async def shutdown() -> None:
            await self.client.shutdown_async(None)
            self.client.exit(None)
            await asyncio.sleep(0.1)
            await self.client.stop()

        try:
            self.run(shutdown())
        finally:
            self.loop.call_soon_threadsafe(self.loop.stop)
            self.thread.join(5)


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("model")
    (root / "main.sknd").write_text(MAIN, encoding="utf-8")
    (root / "ops.sknd").write_text(OPS, encoding="utf-8")
    return root


@pytest.fixture(scope="module")
def lsp(model: Path):
    session = Session(model)
    yield session
    session.stop()


@pytest.fixture(autouse=True)
def close_documents(lsp: Session):
    """Each test starts with no open document, even when the previous one failed half-way."""
    yield
    for uri in sorted(lsp.open_uris):
        lsp.close_document(uri)


def position_of(text: str, needle: str, offset: int = 0) -> tuple[int, int]:
    """0-based (line, character) of the first occurrence of needle, plus offset characters."""
    for number, line in enumerate(text.split("\n")):
        if needle in line:
            return number, line.index(needle) + offset
    raise AssertionError(f"{needle!r} not in text")


def stdlib_line(module: str, text: str) -> int:
    lines = (stdlib_dir() / f"{module}.sknd").read_text(encoding="utf-8").split("\n")
    return next(i for i, line in enumerate(lines) if line.startswith(text))


# ---------------------------------------------------------------------------- diagnostics


def test_diagnostics_located_then_cleared(lsp: Session, model: Path) -> None:
    bad = MAIN.replace("padding=1", "paddin=1")
    uri = lsp.open(model / "main.sknd", bad, version=1)
    diags = lsp.diagnostics(uri, version=1)
    assert [d.code for d in diags] == ["E0209"]
    line, col = position_of(bad, "paddin=")
    assert diags[0].range == types.Range(types.Position(line, col), types.Position(line, col + len("paddin")))
    assert diags[0].severity == types.DiagnosticSeverity.Error
    assert diags[0].source == "sknd"
    assert "did you mean 'padding'?" in diags[0].message  # the hint travels with the message

    lsp.change(uri, MAIN, version=2)
    assert lsp.diagnostics(uri, version=2) == []

    # a syntax error through an incremental edit: delete the ';' of 'r = nn.relu(c);'
    line, col = position_of(MAIN, "nn.relu(c);", len("nn.relu(c)"))
    lsp.edit(uri, line, col, col + 1, "", version=3)
    diags = lsp.diagnostics(uri, version=3)
    assert diags and diags[0].code.startswith("E01")
    assert diags[0].range.start.line in (line, line + 1)
    lsp.edit(uri, line, col, col, ";", version=4)
    assert lsp.diagnostics(uri, version=4) == []


def test_diagnostics_are_debounced(lsp: Session, model: Path) -> None:
    """Changes in quick succession are checked once, for the last version."""
    uri = lsp.open(model / "main.sknd", MAIN, version=1)
    assert lsp.diagnostics(uri, version=1) == []
    mark = lsp.mark()
    line, col = position_of(MAIN, "padding=1", len("padding="))
    for version in range(2, 7):  # padding=1 -> 2, 3, 4, 5, 6: well within the 150 ms debounce
        lsp.edit(uri, line, col, col + 1, str(version), version=version)
    # padding=6 makes the convolution 18x18, not the declared 8x8: composing the graph says so
    assert [d.code for d in lsp.diagnostics(uri, version=6, after=mark)] == ["E0403"]
    versions = [p.version for p in lsp.published[mark:] if p.uri == uri]
    assert versions[-1] == 6 and len(versions) <= 2


def test_importers_are_rechecked(lsp: Session, model: Path) -> None:
    """Renaming an operator in an open module re-checks the open module that invokes it."""
    main_uri = lsp.open(model / "main.sknd", MAIN, version=1)
    ops_uri = lsp.open(model / "ops.sknd", OPS, version=1)
    try:
        assert lsp.diagnostics(main_uri, version=1) == []
        assert lsp.diagnostics(ops_uri, version=1) == []
        mark = lsp.mark()
        lsp.change(ops_uri, OPS.replace("operator scale", "operator rescale"), version=2)
        # unknown operator 'ops.scale': main sees the unsaved buffer of ops.sknd
        diags = lsp.wait_for(main_uri, bool, after=mark)
        assert [d.code for d in diags] == ["E0204"]
        line, col = position_of(MAIN, "ops.scale")
        assert diags[0].range.start == types.Position(line, col)
        mark = lsp.mark()
        lsp.change(ops_uri, OPS, version=3)
        assert lsp.wait_for(main_uri, lambda d: not d, after=mark) == []
    finally:
        lsp.close_document(ops_uri)
        lsp.close_document(main_uri)


# ---------------------------------------------------------------------------- navigation


def test_hover(lsp: Session, model: Path) -> None:
    uri = lsp.open(model / "main.sknd", MAIN)
    line, col = position_of(MAIN, "nn.conv", 4)
    hover = lsp.hover(uri, line, col)
    assert hover is not None
    text = hover.contents.value
    assert "nn.conv{stride: int..(d) = 1" in text  # the signature
    assert "| `padding` |" in text  # the attribute table
    assert hover.range == types.Range(types.Position(line, col - 4), types.Position(line, col + 3))

    line, col = position_of(MAIN, "(x, w)", 1)
    hover = lsp.hover(uri, line, col)
    assert hover is not None and "input `x`: `real[1, 3, 8, 8]`" in hover.contents.value

    line, col = position_of(MAIN, "ops.scale", 5)
    hover = lsp.hover(uri, line, col)
    assert hover is not None and "ops.scale<T: num>{factor: real = 1.0}" in hover.contents.value
    lsp.close_document(uri)


def test_definition(lsp: Session, model: Path) -> None:
    uri = lsp.open(model / "main.sknd", MAIN)
    line, col = position_of(MAIN, "nn.relu", 4)
    found = lsp.definition(uri, line, col)
    assert len(found) == 1
    assert Path(found[0].uri.removeprefix("file://")).resolve() == (stdlib_dir() / "nn.sknd").resolve()
    assert found[0].range.start.line == stdlib_line("nn", "operator relu")

    line, col = position_of(MAIN, "ops.scale", 5)
    found = lsp.definition(uri, line, col)
    assert found[0].uri == (model / "ops.sknd").as_uri() and found[0].range.start.line == 0

    line, col = position_of(MAIN, "(x, w)", 4)  # w -> its declaration in @input
    found = lsp.definition(uri, line, col)
    decl_line, decl_col = position_of(MAIN, "w: real")
    assert found[0].uri == uri
    assert found[0].range == types.Range(types.Position(decl_line, decl_col), types.Position(decl_line, decl_col + 1))
    lsp.close_document(uri)


def test_references(lsp: Session, model: Path) -> None:
    uri = lsp.open(model / "main.sknd", MAIN)
    line, col = position_of(MAIN, "c = nn.conv")
    found = lsp.references(uri, line, col)
    assert sorted((loc.range.start.line, loc.range.start.character) for loc in found) == [
        position_of(MAIN, "c = nn.conv"), position_of(MAIN, "(c)", 1)]
    line, col = position_of(MAIN, "nn.relu", 4)
    found = lsp.references(uri, line, col)
    assert (uri, position_of(MAIN, "nn.relu")) in {(loc.uri, (loc.range.start.line, loc.range.start.character))
                                                  for loc in found}
    assert any(loc.uri.endswith("/nn.sknd") for loc in found)  # the declaration
    lsp.close_document(uri)


# ---------------------------------------------------------------------------- completion


def test_completion(lsp: Session, model: Path) -> None:
    line, _ = position_of(MAIN, "y = ops.scale")
    lines = MAIN.split("\n")

    def with_line(text: str) -> tuple[str, int, int]:
        edited = "\n".join(lines[:line] + [text] + lines[line:])
        return edited, line, len(text)

    uri = (model / "main.sknd").as_uri()
    text, ln, col = with_line("        z = nn.")
    lsp.open(model / "main.sknd", text)
    labels = lsp.completion(uri, ln, col)
    assert {"conv", "relu", "max_pool"} <= set(labels)

    text, ln, col = with_line("        z = nn.conv{")
    lsp.change(uri, text, version=2)
    labels = lsp.completion(uri, ln, col)
    assert {"stride", "padding", "dilation"} <= set(labels)
    text, ln, col = with_line("        z = nn.conv{stride=2, ")
    lsp.change(uri, text, version=3)
    labels = lsp.completion(uri, ln, col)
    assert "padding" in labels and "stride" not in labels

    text, ln, col = with_line("    @")
    lsp.change(uri, text, version=4)
    labels = lsp.completion(uri, ln, col)
    assert "lower" in labels and "compose" in labels

    lsp.change(uri, "import \n" + MAIN, version=5)
    labels = lsp.completion(uri, 0, len("import "))
    assert {"nn", "layout", "ops"} <= set(labels)

    text, ln, col = with_line("        z = ")
    lsp.change(uri, text, version=6)
    labels = lsp.completion(uri, ln, col)
    assert {"x", "w", "c", "nn", "sqrt"} <= set(labels)
    lsp.close_document(uri)


# ---------------------------------------------------------------------------- outline, formatting


def test_document_symbols(lsp: Session, model: Path) -> None:
    uri = lsp.open(model / "main.sknd", MAIN)
    symbols = lsp.symbols(uri)
    assert [s.name for s in symbols] == ["nn", "ops", "G"]
    graph = symbols[-1]
    assert graph.kind == types.SymbolKind.Class
    assert [b.name for b in graph.children] == ["@input", "@output", "@compose"]
    inputs = graph.children[0].children
    assert [(s.name, s.detail) for s in inputs] == [("x", "real[1, 3, 8, 8]"), ("w", "real[4, 3, 3, 3]")]
    assert [s.name for s in graph.children[2].children] == ["c", "r", "y"]
    lsp.close_document(uri)


def test_formatting(lsp: Session, model: Path) -> None:
    messy = MAIN.replace("real[1, 3, 8, 8]", "real[1,3,8,8]").replace("    @output", "  @output")
    uri = lsp.open(model / "main.sknd", messy)
    edits = lsp.formatting(uri)
    module, _ = parse_module(messy)
    assert len(edits) == 1 and edits[0].new_text == format_module(module) == MAIN
    assert edits[0].range.start == types.Position(0, 0)

    lsp.change(uri, messy.replace("nn.relu(c);", "nn.relu(c)"), version=2)  # a syntax error: no edit
    assert not lsp.formatting(uri)
    lsp.close_document(uri)


# ---------------------------------------------------------------------------- position encoding


def utf16(text: str) -> int:
    return len(text.encode("utf-16-le")) // 2


def test_positions_count_utf16_units_by_default(lsp: Session, model: Path) -> None:
    """'😋' is one code point but two UTF-16 code units (LSP's default encoding): a diagnostic
    after it on its line, and a request there, are in UTF-16 units."""
    bad = MAIN.replace("c = nn.conv{padding=1}(x, w);", "c = nn.conv{padding_align='😋', paddin=1}(x, w);")
    uri = lsp.open(model / "main.sknd", bad, version=1)
    diags = lsp.diagnostics(uri, version=1)
    line, col = position_of(bad, "paddin=")
    prefix = bad.split("\n")[line][:col]
    (unknown,) = [d for d in diags if d.code == "E0209"]
    assert unknown.range.start == types.Position(line, utf16(prefix)) != types.Position(line, col)
    assert unknown.range.end == types.Position(line, utf16(prefix) + len("paddin"))
    # a hover on `w` after the emoji, sent in UTF-16 units, finds w
    wline, wcol = position_of(bad, "(x, w)", 4)
    hover = lsp.hover(uri, wline, utf16(bad.split("\n")[wline][:wcol]))
    assert hover is not None and "w" in hover.contents.value and "real[4, 3, 3, 3]" in hover.contents.value


def test_a_client_offering_utf32_gets_code_points(model: Path) -> None:
    session = Session(model, types.ClientCapabilities(
        general=types.GeneralClientCapabilities(position_encodings=[types.PositionEncodingKind.Utf32])))
    try:
        bad = MAIN.replace("c = nn.conv{padding=1}(x, w);", "c = nn.conv{padding_align='😋', paddin=1}(x, w);")
        uri = session.open(model / "main.sknd", bad, version=1)
        (unknown,) = [d for d in session.diagnostics(uri, version=1) if d.code == "E0209"]
        line, col = position_of(bad, "paddin=")
        assert unknown.range.start == types.Position(line, col)
    finally:
        session.stop()
