"""`sknd lsp`: the SkriptND language server (pygls over stdio).

The wiring only: documents are kept by pygls (incremental sync) and mirrored into a
`Workspace`; diagnostics are published after a debounce (150 ms after the last change, at once
on open and save) for the changed document and for the open documents whose programs load it.
Checks run on the event loop: they are short (the incremental parser and the per-definition
check cache keep an edit's re-check to the edited definition), and it keeps things ordered.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO, TypeVar
from urllib.parse import unquote

from lsprotocol import types
from pygls.io_ import StdoutWriter
from pygls.lsp.server import LanguageServer

from skriptnd.lsp import features
from skriptnd.lsp.encoding import Positions
from skriptnd.lsp.transport import BoundedReader, serve
from skriptnd.lsp.workspace import MAX_FILE_BYTES, Workspace, model_root, uri_to_path
from skriptnd.resources import stdlib_dir
from skriptnd.untrusted import UnsafeFile, read_regular
from skriptnd.version import __version__

__all__ = ["DEBOUNCE_SECONDS", "SkriptndServer", "create_server", "main"]

DEBOUNCE_SECONDS = 0.15
logger = logging.getLogger(__name__)
_Result = TypeVar("_Result")
_OPEN_DOCUMENT_NOTIFICATIONS = (types.TEXT_DOCUMENT_DID_CHANGE, types.TEXT_DOCUMENT_DID_SAVE,
                                types.TEXT_DOCUMENT_DID_CLOSE)


def _guarded(handler: Callable[[SkriptndServer, object], _Result]) -> Callable[[SkriptndServer, object], _Result | None]:
    """A feature handler that never raises: a failure (a bug, or params valid in type but not in meaning) is
    one log line and a null result, so every request is answered and no traceback reaches the log."""

    @functools.wraps(handler)
    def run(ls: SkriptndServer, params: object) -> _Result | None:
        try:
            return handler(ls, params)
        except Exception as err:  # noqa: BLE001 - see the docstring
            logger.error("%s failed: %s: %s", handler.__name__, type(err).__name__, err)
            return None

    return run


class SkriptndServer(LanguageServer):
    """A pygls LanguageServer holding the `Workspace` and the pending diagnostic runs."""

    def __init__(self, debounce: float = DEBOUNCE_SECONDS) -> None:
        super().__init__("sknd", __version__, text_document_sync_kind=types.TextDocumentSyncKind.Incremental)
        self.state = Workspace()
        self.debounce = debounce
        self._pending: dict[str, asyncio.TimerHandle] = {}
        self.clean_exit = True

    def start_io(self, stdin: BinaryIO | None = None, stdout: BinaryIO | None = None) -> None:
        """Serve over stdio with transport.py's bounded loop instead of pygls' (see there why)."""
        self._stop_event = threading.Event()
        reader = BoundedReader(stdin or sys.stdin.buffer, self.thread_pool)
        self.protocol.set_writer(StdoutWriter(stdout or sys.stdout.buffer))
        try:
            self.clean_exit = asyncio.run(serve(self._stop_event, reader, self.protocol, self.admits))
        except BrokenPipeError:
            logger.error("the connection to the client is lost; stopping")
        except (KeyboardInterrupt, SystemExit):
            pass
        finally:
            self.shutdown()

    def admits(self, message: object) -> bool:
        """Drop a didChange / didSave / didClose of a document the client never opened: pygls would read
        it from disk (any path: /dev/zero, a FIFO) or fail on it."""
        if getattr(message, "method", None) not in _OPEN_DOCUMENT_NOTIFICATIONS:
            return True
        uri = message.params.text_document.uri  # type: ignore[attr-defined]
        if unquote(uri) in self.workspace.text_documents:
            return True
        logger.warning("ignoring %s for %s: the client has not opened it", message.method, uri)  # type: ignore[attr-defined]
        return False

    # ------------------------------------------------------------ what may be read

    def readable_roots(self) -> list[Path]:
        """Folders whose files a request may make the server read: the workspace folders, the model folders
        of the documents the client opened, and the standard library."""
        roots = [stdlib_dir()]
        try:
            workspace = self.workspace
        except RuntimeError:  # before initialize
            workspace = None
        if workspace is not None:
            roots += [uri_to_path(folder.uri) for folder in workspace.folders.values()]
            if workspace.root_path:
                roots.append(Path(workspace.root_path))
        roots += [model_root(doc.path) for doc in self.state.documents.values()]
        return roots

    def read_file(self, path: Path) -> str | None:
        """The text of a file under `readable_roots`: a regular file of at most MAX_FILE_BYTES, else None."""
        try:
            real = path.resolve()
            if not any(real.is_relative_to(root.resolve()) for root in self.readable_roots()):
                logger.warning("not reading %s: outside the workspace and the opened documents' folders", path)
                return None
            return read_regular(real, MAX_FILE_BYTES).decode("utf-8")
        except (OSError, UnsafeFile, UnicodeDecodeError, ValueError, RuntimeError) as err:
            logger.warning("not reading %s: %s", path, err)
            return None

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
            text = self.read_file(uri_to_path(uri))
        except ValueError:
            return None
        return None if text is None else text.split("\n")

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
    @_guarded
    def did_open(ls: SkriptndServer, params: types.DidOpenTextDocumentParams) -> None:
        doc = params.text_document
        ls.state.open(doc.uri, doc.text, doc.version)
        ls.changed(doc.uri, 0)

    @server.feature(types.TEXT_DOCUMENT_DID_CHANGE)
    @_guarded
    def did_change(ls: SkriptndServer, params: types.DidChangeTextDocumentParams) -> None:
        uri = params.text_document.uri
        ls.sync(uri)
        ls.changed(uri, ls.debounce)

    @server.feature(types.TEXT_DOCUMENT_DID_SAVE)
    @_guarded
    def did_save(ls: SkriptndServer, params: types.DidSaveTextDocumentParams) -> None:
        uri = params.text_document.uri
        ls.sync(uri)
        ls.changed(uri, 0)

    @server.feature(types.TEXT_DOCUMENT_DID_CLOSE)
    @_guarded
    def did_close(ls: SkriptndServer, params: types.DidCloseTextDocumentParams) -> None:
        uri = params.text_document.uri
        dependents = ls.state.dependents(uri)
        ls.cancel(uri)
        ls.state.close(uri)
        ls.text_document_publish_diagnostics(types.PublishDiagnosticsParams(uri=uri, diagnostics=[]))
        for other in dependents:  # they now see the file on disk again
            ls.schedule(other, ls.debounce)

    @server.feature(types.WORKSPACE_DID_CHANGE_WATCHED_FILES)
    @_guarded
    def files_changed(ls: SkriptndServer, params: types.DidChangeWatchedFilesParams) -> None:
        ls.state.invalidate()  # a module on disk changed: any open document may import it
        for uri in list(ls.state.documents):
            ls.schedule(uri, ls.debounce)

    @server.feature(types.TEXT_DOCUMENT_HOVER)
    @_guarded
    def hover(ls: SkriptndServer, params: types.HoverParams) -> types.Hover | None:
        uri = params.text_document.uri
        return ls.positions.outgoing(uri, features.hover(ls.state, uri, ls.positions.incoming(uri, params.position)))

    @server.feature(types.TEXT_DOCUMENT_DEFINITION)
    @_guarded
    def definition(ls: SkriptndServer, params: types.DefinitionParams) -> list[types.Location] | None:
        uri = params.text_document.uri
        return ls.positions.outgoing(uri, features.definition(ls.state, uri,
                                                              ls.positions.incoming(uri, params.position)))

    @server.feature(types.TEXT_DOCUMENT_REFERENCES)
    @_guarded
    def references(ls: SkriptndServer, params: types.ReferenceParams) -> list[types.Location] | None:
        uri = params.text_document.uri
        return ls.positions.outgoing(uri, features.references(ls.state, uri, ls.positions.incoming(uri, params.position),
                                                              params.context.include_declaration))

    @server.feature(types.TEXT_DOCUMENT_COMPLETION,
                    types.CompletionOptions(trigger_characters=list(features.TRIGGER_CHARACTERS)))
    @_guarded
    def completion(ls: SkriptndServer, params: types.CompletionParams) -> types.CompletionList:
        trigger = params.context.trigger_character if params.context is not None else None
        uri = params.text_document.uri
        return features.completion(ls.state, uri, ls.positions.incoming(uri, params.position), trigger)

    @server.feature(types.TEXT_DOCUMENT_DOCUMENT_SYMBOL)
    @_guarded
    def document_symbol(ls: SkriptndServer, params: types.DocumentSymbolParams) -> list[types.DocumentSymbol]:
        uri = params.text_document.uri
        return ls.positions.outgoing(uri, features.document_symbols(ls.state, uri))

    @server.feature(types.TEXT_DOCUMENT_FORMATTING)
    @_guarded
    def formatting(ls: SkriptndServer, params: types.DocumentFormattingParams) -> list[types.TextEdit]:
        uri = params.text_document.uri
        return ls.positions.outgoing(uri, features.formatting(ls.state, uri))

    return server


def main() -> None:
    """Serve over stdin/stdout until the client says exit."""
    logging.basicConfig(level=logging.WARNING, format="sknd lsp: %(levelname)s: %(message)s")
    server = create_server()
    server.start_io()
    if not server.clean_exit:  # the client broke the framing; the log says how
        sys.exit(1)
