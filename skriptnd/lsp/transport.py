"""The language server's JSON-RPC reading loop over stdio, bounded and answering every request.

pygls' own loop (pygls.io_.run_async, 2.1) reads whatever a `Content-Length` header claims
(`Content-Length: 999999999999` is a MemoryError that ends the server), reads header lines of any length,
and, when a request's params do not match its method's type, logs a traceback and never answers it. This
loop replaces it: header lines are at most `MAX_HEADER_LINE` bytes and bodies at most `MAX_MESSAGE_BYTES`
(a larger claim closes the connection with one log line: the stream cannot be resynchronized); a body that
is not JSON gets a -32700 error, a request that is not a valid JSON-RPC message or whose params do not
match the method gets a -32600 / -32602 error with its id, a notification with bad params is dropped with
one log line. What is left is handed to pygls' protocol, whose handlers answer the rest.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import BinaryIO

from pygls.protocol import JsonRPCProtocol
from pygls.protocol.json_rpc import (
    JsonRPCNotification,
    JsonRPCRequestMessage,
    JsonRPCResponseMessage,
    ResponseErrorMessage,
)

__all__ = ["MAX_HEADER_LINE", "MAX_MESSAGE_BYTES", "ProtocolViolation", "serve"]

MAX_HEADER_LINE = 4096
MAX_MESSAGE_BYTES = 64 << 20

logger = logging.getLogger(__name__)
_CONTENT_LENGTH = re.compile(rb"content-length:\s*(\d{1,20})\s*", re.I)

#: JSON-RPC error codes (https://www.jsonrpc.org/specification#error_object)
PARSE_ERROR, INVALID_REQUEST, METHOD_NOT_FOUND, INVALID_PARAMS, INTERNAL_ERROR = -32700, -32600, -32601, -32602, -32603


class ProtocolViolation(Exception):
    """The stream is not LSP framing the server can follow (an over-long header line, an oversized body)."""


class BoundedReader:
    """Reads headers and bodies from a binary stream in a worker thread, never more than the bounds."""

    def __init__(self, stream: BinaryIO, executor: ThreadPoolExecutor | None) -> None:
        self.stream = stream
        self.executor = executor

    async def _run(self, func, *args):  # noqa: ANN001, ANN202 - a blocking read of the stream
        return await asyncio.get_running_loop().run_in_executor(self.executor, func, *args)

    async def message(self) -> bytes | None:
        """The next message body, or None at the end of the stream."""
        length: int | None = None
        while True:
            line = await self._run(self.stream.readline, MAX_HEADER_LINE + 1)
            if not line:
                return None
            if len(line) > MAX_HEADER_LINE:
                raise ProtocolViolation(f"a header line longer than {MAX_HEADER_LINE} bytes")
            if line.strip():
                match = _CONTENT_LENGTH.fullmatch(line)
                if match:
                    length = int(match.group(1))
                continue
            if length is None:  # a blank line without a length: nothing to read, wait for the next header
                continue
            if length > MAX_MESSAGE_BYTES:
                raise ProtocolViolation(f"a message of {length} bytes (the limit is {MAX_MESSAGE_BYTES >> 20} MiB)")
            body = await self._run(self._read_exactly, length)
            return body

    def _read_exactly(self, n: int) -> bytes | None:
        chunks, left = [], n
        while left:
            chunk = self.stream.read(left)
            if not chunk:
                return None
            chunks.append(chunk)
            left -= len(chunk)
        return b"".join(chunks)


def _error(protocol: JsonRPCProtocol, msg_id: int | str | None, code: int, message: str) -> None:
    protocol._send_data({"jsonrpc": "2.0", "id": msg_id, "error": {"code": code, "message": message}})


def _brief(exc: BaseException) -> str:
    """One line saying what is wrong with a message, from a cattrs validation error (nested groups)."""
    leaves = []

    def walk(e: BaseException, where: str) -> None:
        subs = getattr(e, "exceptions", None)
        if subs:
            for sub in subs:  # cattrs notes each sub-error with the attribute it is about
                note = next(iter(getattr(sub, "__notes__", None) or []), "")
                walk(sub, str(note) or where)
        else:
            leaves.append(f"{where}: {type(e).__name__}: {e}" if where else f"{type(e).__name__}: {e}")

    walk(exc, "")
    return "; ".join(leaves[:3])[:500] or type(exc).__name__


Admit = Callable[[object], bool]


def _handle(protocol: JsonRPCProtocol, body: bytes, admit: Admit) -> None:
    try:
        raw = json.loads(body)
    except (ValueError, RecursionError):
        logger.warning("a message that is not JSON was answered with a parse error")
        _error(protocol, None, PARSE_ERROR, "Parse error: the message is not JSON")
        return
    if not isinstance(raw, dict) or raw.get("jsonrpc") != "2.0":
        logger.warning("a message that is not JSON-RPC 2.0 was refused")
        _error(protocol, raw.get("id") if isinstance(raw, dict) and _valid_id(raw.get("id")) else None,
               INVALID_REQUEST, "Invalid Request: not a JSON-RPC 2.0 message")
        return
    has_id, method = "id" in raw, raw.get("method")
    if has_id and not _valid_id(raw["id"]):
        logger.warning("a message with an invalid id was refused")
        _error(protocol, None, INVALID_REQUEST, "Invalid Request: the id must be a string or an integer")
        return
    if has_id and method is None:  # a response to a request of ours
        kind = ResponseErrorMessage if "error" in raw else (protocol._result_types.pop(raw["id"], None)
                                                             or JsonRPCResponseMessage)
        try:
            _structured(protocol, protocol._converter.structure(raw, kind), None, admit)
        except Exception as exc:  # noqa: BLE001 - a malformed response: dropped
            logger.warning("a malformed response was dropped: %s", _brief(exc))
        return
    if not isinstance(method, str):
        logger.warning("a message without a method name was refused")
        if has_id:
            _error(protocol, raw["id"], INVALID_REQUEST, "Invalid Request: 'method' must be a string")
        return
    kind = protocol.get_message_type(method) or (JsonRPCRequestMessage if has_id else JsonRPCNotification)
    try:
        message = protocol._converter.structure(raw, kind)
    except Exception as exc:  # noqa: BLE001 - cattrs raises many kinds; all mean: these params are invalid
        why = _brief(exc)
        logger.warning("invalid params for %s: %s", method, why)
        if has_id:
            _error(protocol, raw["id"], INVALID_PARAMS, f"Invalid params for {method}: {why}")
        return
    if has_id and getattr(message, "id", None) is None:  # a notification's method, sent with an id
        logger.warning("%s is a notification, not a request; refused", method)
        _error(protocol, raw["id"], METHOD_NOT_FOUND, f"Method not found: {method} is a notification")
        return
    _structured(protocol, message, raw.get("id") if has_id else None, admit)


def _structured(protocol: JsonRPCProtocol, message: object, msg_id: int | str | None, admit: Admit) -> None:
    try:
        if admit(message):
            protocol.handle_message(message)
        elif msg_id is not None:
            _error(protocol, msg_id, INVALID_REQUEST, "Invalid Request: refused")
    except Exception as exc:  # noqa: BLE001 - a failure in pygls' dispatch must not end the loop
        logger.error("handling a message failed: %s: %s", type(exc).__name__, exc)
        if msg_id is not None:
            _error(protocol, msg_id, INTERNAL_ERROR, f"Internal error: {type(exc).__name__}")


def _valid_id(value: object) -> bool:
    return isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool))


async def serve(stop: threading.Event, reader: BoundedReader, protocol: JsonRPCProtocol,
                admit: Admit = lambda message: True) -> bool:
    """Read and dispatch messages until the end of the stream or `stop`; False after a protocol violation.
    `admit(message)` may drop a well-formed notification (it logs why); requests always get a reply."""
    while not stop.is_set():
        try:
            body = await reader.message()
        except ProtocolViolation as exc:
            logger.error("closing the connection: the client sent %s", exc)
            return False
        if body is None:
            return True
        _handle(protocol, body, admit)
    return True
