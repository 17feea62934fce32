"""`sknd lsp`: the SkriptND language server (pygls over stdio).

The wiring only: documents are kept by pygls (incremental sync) and mirrored into a
`Workspace`; diagnostics are published after a debounce (150 ms after the last change, at once
on open and save) for the changed document and for the open documents whose programs load it.
Checks run on the event loop: they are short (the incremental parser and the per-definition
check cache keep an edit's re-check to the edited definition), and it keeps things ordered.
"""

from __future__ import annotations

import asyncio
import logging

from lsprotocol import types
from pygls.lsp.server import LanguageServer

from .. import __version__
from . import features
from .encoding import Positions
from .workspace import Workspace, uri_to_path

__all__ = ["DEBOUNCE_SECONDS", "SkriptndServer", "create_server", "main"]

DEBOUNCE_SECONDS = 0.15
logger = logging.getLogger(__name__)


class SkriptndServer(LanguageServer):
    """A pygls LanguageServer holding the `Workspace` and the pending diagnostic runs."""

    def __init__(self, debounce: float = DEBOUNCE_SECONDS) -> None:
        super().__init__("sknd", __version__, text_document_sync_kind=types.TextDocumentSyncKind.Incremental)
        self.state = Workspace()
        self.debounce = debounce
        self._pending: dict[str, asyncio.TimerHandle] = {}

    # ------------------------------------------------------------ positions

    @property
    def positions(self) -> Positions:
        """Conversions between the negotiated position encoding and code points (encoding.py)."""
        return Positions(self.workspace.position_codec, self.lines_of)

    def lines_of(self, uri: str) -> list[str] | None:
        doc = self.state.documents.get(uri)
        if doc is not None:
            return doc.text.split("\n")
        try:
            return uri_to_path(uri).read_text(encoding="utf-8").split("\n")
        except (OSError, UnicodeDecodeError, ValueError):
            return None

    # ------------------------------------------------------------ documents

    def sync(self, uri: str) -> None:
        """Copy pygls' text of a document into the workspace."""
        doc = self.workspace.get_text_document(uri)
        self.state.update(uri, doc.source, doc.version)

    def schedule(self, uri: str, delay: float) -> None:
        """(Re)start the timer that publishes uri's diagnostics after delay seconds."""
        previous = self._pending.pop(uri, None)
        if previous is not None:
            previous.cancel()
        loop = asyncio.get_running_loop()
        self._pending[uri] = loop.call_later(delay, self.publish, uri)

    def cancel(self, uri: str) -> None:
        handle = self._pending.pop(uri, None)
        if handle is not None:
            handle.cancel()

    def publish(self, uri: str) -> None:
        """Check one document and publish its diagnostics."""
        self._pending.pop(uri, None)
        doc = self.state.documents.get(uri)
        if doc is None:
            return
        try:
            diags = self.state.check(uri)
        except Exception as err:  # a bug in a check must not take the server down
            logger.exception("checking %s failed", uri)
            self.window_log_message(types.LogMessageParams(type=types.MessageType.Error,
                                                           message=f"sknd: checking {uri} failed: {err!r}"))
            return
        lsp_diags = self.positions.outgoing(uri, [features.to_lsp_diagnostic(d, self.state.uri_of) for d in diags])
        self.text_document_publish_diagnostics(
            types.PublishDiagnosticsParams(uri=uri, diagnostics=lsp_diags, version=doc.version))

    def changed(self, uri: str, delay: float) -> None:
        """A document's text changed (or was opened or saved): re-check it and its importers."""
        self.schedule(uri, delay)
        for other in self.state.dependents(uri):
            self.schedule(other, delay)


def create_server(debounce: float = DEBOUNCE_SECONDS) -> SkriptndServer:
    """A server with every feature registered (not started)."""
    server = SkriptndServer(debounce)

    @server.feature(types.TEXT_DOCUMENT_DID_OPEN)
    def did_open(ls: SkriptndServer, params: types.DidOpenTextDocumentParams) -> None:
        doc = params.text_document
        ls.state.open(doc.uri, doc.text, doc.version)
        ls.changed(doc.uri, 0)

    @server.feature(types.TEXT_DOCUMENT_DID_CHANGE)
    def did_change(ls: SkriptndServer, params: types.DidChangeTextDocumentParams) -> None:
        uri = params.text_document.uri
        ls.sync(uri)
        ls.changed(uri, ls.debounce)

    @server.feature(types.TEXT_DOCUMENT_DID_SAVE)
    def did_save(ls: SkriptndServer, params: types.DidSaveTextDocumentParams) -> None:
        uri = params.text_document.uri
        ls.sync(uri)
        ls.changed(uri, 0)

    @server.feature(types.TEXT_DOCUMENT_DID_CLOSE)
    def did_close(ls: SkriptndServer, params: types.DidCloseTextDocumentParams) -> None:
        uri = params.text_document.uri
        dependents = ls.state.dependents(uri)
        ls.cancel(uri)
        ls.state.close(uri)
        ls.text_document_publish_diagnostics(types.PublishDiagnosticsParams(uri=uri, diagnostics=[]))
        for other in dependents:  # they now see the file on disk again
            ls.schedule(other, ls.debounce)

    @server.feature(types.WORKSPACE_DID_CHANGE_WATCHED_FILES)
    def files_changed(ls: SkriptndServer, params: types.DidChangeWatchedFilesParams) -> None:
        ls.state.invalidate()  # a module on disk changed: any open document may import it
        for uri in list(ls.state.documents):
            ls.schedule(uri, ls.debounce)

    @server.feature(types.TEXT_DOCUMENT_HOVER)
    def hover(ls: SkriptndServer, params: types.HoverParams) -> types.Hover | None:
        uri = params.text_document.uri
        return ls.positions.outgoing(uri, features.hover(ls.state, uri, ls.positions.incoming(uri, params.position)))

    @server.feature(types.TEXT_DOCUMENT_DEFINITION)
    def definition(ls: SkriptndServer, params: types.DefinitionParams) -> list[types.Location] | None:
        uri = params.text_document.uri
        return ls.positions.outgoing(uri, features.definition(ls.state, uri,
                                                              ls.positions.incoming(uri, params.position)))

    @server.feature(types.TEXT_DOCUMENT_REFERENCES)
    def references(ls: SkriptndServer, params: types.ReferenceParams) -> list[types.Location] | None:
        uri = params.text_document.uri
        return ls.positions.outgoing(uri, features.references(ls.state, uri, ls.positions.incoming(uri, params.position),
                                                              params.context.include_declaration))

    @server.feature(types.TEXT_DOCUMENT_COMPLETION,
                    types.CompletionOptions(trigger_characters=list(features.TRIGGER_CHARACTERS)))
    def completion(ls: SkriptndServer, params: types.CompletionParams) -> types.CompletionList:
        trigger = params.context.trigger_character if params.context is not None else None
        uri = params.text_document.uri
        return features.completion(ls.state, uri, ls.positions.incoming(uri, params.position), trigger)

    @server.feature(types.TEXT_DOCUMENT_DOCUMENT_SYMBOL)
    def document_symbol(ls: SkriptndServer, params: types.DocumentSymbolParams) -> list[types.DocumentSymbol]:
        uri = params.text_document.uri
        return ls.positions.outgoing(uri, features.document_symbols(ls.state, uri))

    @server.feature(types.TEXT_DOCUMENT_FORMATTING)
    def formatting(ls: SkriptndServer, params: types.DocumentFormattingParams) -> list[types.TextEdit]:
        uri = params.text_document.uri
        return ls.positions.outgoing(uri, features.formatting(ls.state, uri))

    return server


def main() -> None:
    """Serve over stdin/stdout until the client says exit."""
    logging.basicConfig(level=logging.WARNING, format="sknd lsp: %(levelname)s: %(message)s")
    create_server().start_io()
