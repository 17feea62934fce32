"""`sknd lsp` under hostile traffic, driven as a raw JSON-RPC client over a real server's stdin/stdout.

What is asserted: every request gets a reply (a result or a JSON-RPC error) with its id; the log has no
traceback; a request naming /dev/zero, a FIFO or /proc/self/fd/0 is answered at once without reading it
(the server's memory stays small); a file outside the workspace and the opened documents' folders is not
read; an oversized `Content-Length` or header line closes the connection cleanly (exit 1, one log line),
never a MemoryError (exit 3). The server's stderr goes to a file, so that its log cannot fill a pipe.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

ROOT = Path(__file__).resolve().parent.parent
SCALE = max(1, int(os.environ.get("SKRIPTND_FUZZ", "1") or 1))
REQUESTS = ["textDocument/hover", "textDocument/definition", "textDocument/references", "textDocument/completion",
            "textDocument/documentSymbol", "textDocument/formatting"]
NOTIFICATIONS = ["textDocument/didOpen", "textDocument/didChange", "textDocument/didSave", "textDocument/didClose",
                 "workspace/didChangeWatchedFiles"]
MAIN = "graph G {\n    @input { x: real[2]; }\n    @output { y: real[2]; }\n    @compose { y = x + x; }\n}\n"


def _frame(message: object) -> bytes:
    body = json.dumps(message).encode("utf-8")
    return b"Content-Length: %d\r\n\r\n" % len(body) + body


class RawServer:
    """`python -m skriptnd lsp` with a byte-level client: send frames, collect replies by id."""

    def __init__(self, workspace: Path, log: Path) -> None:
        self.log = log
        self.err = open(log, "wb")  # noqa: SIM115 - closed in close()
        self.proc = subprocess.Popen([sys.executable, "-m", "skriptnd", "lsp"], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=self.err, cwd=workspace,
                                     env=dict(os.environ, PYTHONPATH=str(ROOT)))
        self.buffer = b""
        self.replies: dict[object, dict] = {}
        self.notifications: list[dict] = []
        self.lock = threading.Lock()
        self.eof = threading.Event()
        threading.Thread(target=self._drain, daemon=True).start()
        self.send({"jsonrpc": "2.0", "id": "init", "method": "initialize",
                   "params": {"capabilities": {}, "rootUri": workspace.as_uri(),
                              "workspaceFolders": [{"uri": workspace.as_uri(), "name": "w"}]}})
        self.wait_for(["init"], 60)
        self.send({"jsonrpc": "2.0", "method": "initialized", "params": {}})

    def send(self, message: object) -> None:
        self.send_bytes(_frame(message))

    def send_bytes(self, data: bytes) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(data)
        self.proc.stdin.flush()

    def _drain(self) -> None:
        """A thread reading the server's stdout all the time, so that the server never blocks writing
        replies while this client is busy writing requests (both pipes full is a deadlock)."""
        fd = self.proc.stdout.fileno()
        while chunk := os.read(fd, 1 << 20):
            with self.lock:
                self.buffer += chunk
                self._parse()
        self.eof.set()

    def _parse(self) -> None:
        while b"\r\n\r\n" in self.buffer:
            head, rest = self.buffer.split(b"\r\n\r\n", 1)
            length = next(int(line.split(b":")[1]) for line in head.split(b"\r\n")
                          if line.lower().startswith(b"content-length"))
            if len(rest) < length:
                break
            message = json.loads(rest[:length])
            self.buffer = rest[length:]
            if "id" in message and "method" not in message:
                self.replies[message["id"]] = message
            else:
                self.notifications.append(message)

    def wait_for(self, ids: list[object], timeout: float) -> list[object]:
        """The ids still unanswered after `timeout` seconds (or when the server's output ends)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and not self.eof.is_set():
            with self.lock:
                if all(i in self.replies for i in ids):
                    break
            time.sleep(0.02)
        with self.lock:
            return [i for i in ids if i not in self.replies]

    def close(self) -> int:
        if self.proc.poll() is None:
            self.send({"jsonrpc": "2.0", "id": "bye", "method": "shutdown"})
            self.wait_for(["bye"], 30)
            self.send({"jsonrpc": "2.0", "method": "exit"})
            self.proc.stdin.close()
        try:
            code = self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            code = self.proc.wait()
        self.err.close()
        return code

    def stderr(self) -> str:
        return self.log.read_text(encoding="utf-8", errors="replace")

    def rss_mib(self) -> float:
        status = Path(f"/proc/{self.proc.pid}/status").read_text()
        return int(next(line for line in status.splitlines() if line.startswith("VmRSS")).split()[1]) / 1024


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("ws")
    (root / "main.sknd").write_text(MAIN, encoding="utf-8")
    os.mkfifo(root / "pipe.sknd")
    return root


@pytest.fixture(scope="module")
def server(workspace: Path, tmp_path_factory: pytest.TempPathFactory):
    srv = RawServer(workspace, tmp_path_factory.mktemp("log") / "stderr.txt")
    yield srv
    srv.close()


def _hostile_uris(workspace: Path) -> list[str]:
    return ["file:///dev/zero", "file:///dev/stdin", "file:///proc/self/fd/0", (workspace / "pipe.sknd").as_uri(),
            "file:///etc/passwd", "file:///", "", "untitled:x", "http://example.com/x.sknd", "file://host/x",
            "file:///nonexistent/%00x.sknd", (workspace / "main.sknd").as_uri(), "file:///" + "a/" * 2000,
            "\u202e", "file:///%ff%fe.sknd"]


def _malformed(rng: random.Random, method: str, uris: list[str]) -> object:
    """Params for `method`, wrong in one to three places (types, ranges, missing keys, odd URIs, nesting)."""
    odd = [None, True, -1, 2**31, 2**64, 10**30, 1.5, float("nan"), "", "x" * 10000, [], {}, [[[[[]]]]],
           {"line": 0}, "\x00", -(2**63)]
    params: dict = {"textDocument": {"uri": rng.choice(uris), "version": 1, "text": MAIN, "languageId": "sknd"},
                    "position": {"line": rng.randint(0, 5), "character": rng.randint(0, 30)},
                    "context": {"includeDeclaration": True, "triggerKind": 1},
                    "options": {"tabSize": 4, "insertSpaces": True},
                    "contentChanges": [{"text": "x"}], "changes": [{"uri": rng.choice(uris), "type": 1}]}
    for _ in range(rng.randint(1, 3)):
        where = rng.choice(["top", "textDocument", "position", "context", "options", "drop", "uri", "whole"])
        if where == "whole":
            return rng.choice(odd)
        if where == "drop":
            params.pop(rng.choice(list(params)), None)
        elif where == "top":
            params[rng.choice(list(params) or ["x"])] = rng.choice(odd)
        elif where == "uri" and isinstance(params.get("textDocument"), dict):
            params["textDocument"]["uri"] = rng.choice(uris + odd)
        elif isinstance(params.get(where), dict):
            inner = params[where]
            inner[rng.choice(list(inner) or ["x"])] = rng.choice(odd)
    return params


def test_hundreds_of_malformed_requests_per_method_are_all_answered(server: RawServer, workspace: Path) -> None:
    """400 requests with invalid params for each request method (plus notifications in between): every id is
    answered, with a result or a JSON-RPC error, and the log holds no traceback."""
    rng = random.Random(23)
    uris = _hostile_uris(workspace)
    ids: list[object] = []
    for method in REQUESTS:
        for n in range(400 * SCALE):
            msg_id: object = f"{method}-{n}" if n % 2 else len(ids) + 1000
            server.send({"jsonrpc": "2.0", "id": msg_id, "method": method, "params": _malformed(rng, method, uris)})
            ids.append(msg_id)
            if n % 50 == 0:
                note = rng.choice(NOTIFICATIONS)
                server.send({"jsonrpc": "2.0", "method": note, "params": _malformed(rng, note, uris)})
        assert server.wait_for(ids, 120) == [], f"unanswered {method} requests"
    errors = [server.replies[i] for i in ids if "error" in server.replies[i]]
    assert errors and all(e["error"]["code"] in (-32602, -32600, -32603) for e in errors)
    assert server.proc.poll() is None, "the server died"
    assert "Traceback" not in server.stderr()
    assert server.rss_mib() < 1024


def test_special_files_named_by_requests_are_not_read(server: RawServer, workspace: Path) -> None:
    """/dev/zero, a FIFO without a writer and /proc/self/fd/0 (the server's own stdin) would grow the server
    or block it for good if read; each request is answered at once and the server stays small."""
    ids = []
    for n, uri in enumerate(["file:///dev/zero", (workspace / "pipe.sknd").as_uri(), "file:///proc/self/fd/0",
                             "file:///dev/urandom"]):
        for method in ("textDocument/hover", "textDocument/definition"):
            ids.append(f"special-{n}-{method}")
            server.send({"jsonrpc": "2.0", "id": ids[-1], "method": method,
                         "params": {"textDocument": {"uri": uri}, "position": {"line": 3, "character": 5}}})
    assert server.wait_for(ids, 30) == []
    assert server.rss_mib() < 1024
    assert "Traceback" not in server.stderr()


def test_notifications_about_documents_never_opened_read_nothing(server: RawServer, workspace: Path) -> None:
    """didSave / didChange / didClose of a URI the client never opened: pygls would read the file from disk
    (/dev/zero grew the server without bound, a FIFO blocked it); they are ignored, and the server answers."""
    for uri in ["file:///dev/zero", (workspace / "pipe.sknd").as_uri(), "file:///proc/self/fd/0"]:
        document = {"uri": uri, "version": 2}
        server.send({"jsonrpc": "2.0", "method": "textDocument/didSave", "params": {"textDocument": document}})
        server.send({"jsonrpc": "2.0", "method": "textDocument/didChange",
                     "params": {"textDocument": document, "contentChanges": [
                         {"range": {"start": {"line": 0, "character": 0}, "end": {"line": 0, "character": 1}},
                          "text": "x"}]}})
        server.send({"jsonrpc": "2.0", "method": "textDocument/didClose", "params": {"textDocument": document}})
    server.send({"jsonrpc": "2.0", "id": "after-unopened", "method": "textDocument/documentSymbol",
                 "params": {"textDocument": {"uri": (workspace / "main.sknd").as_uri()}}})
    assert server.wait_for(["after-unopened"], 30) == []
    assert server.rss_mib() < 1024
    assert "ignoring textDocument/didSave for file:///dev/zero: the client has not opened it" in server.stderr()


def test_files_outside_the_workspace_are_not_read(workspace: Path, tmp_path: Path) -> None:
    from skriptnd.lsp.server import create_server

    outside = tmp_path / "secret.sknd"
    outside.write_text("secret\n", encoding="utf-8")
    big = workspace / "big.sknd"
    with open(big, "wb") as fh:
        fh.truncate((16 << 20) + 1)  # sparse: over the limit without filling the disk
    srv = create_server()
    srv.state.open((workspace / "main.sknd").as_uri(), MAIN)
    assert srv.lines_of(outside.as_uri()) is None
    assert srv.lines_of((workspace / "pipe.sknd").as_uri()) is None
    assert srv.lines_of(big.as_uri()) is None
    big.unlink()
    (workspace / "other.sknd").write_text("a\nb\n", encoding="utf-8")
    assert srv.lines_of((workspace / "other.sknd").as_uri()) == ["a", "b", ""]
    link = workspace / "link.sknd"
    link.symlink_to(outside)  # a link out of the workspace is outside too
    assert srv.lines_of(link.as_uri()) is None
    link.unlink()


def _one_shot(workspace: Path, log: Path, data: bytes) -> tuple[int, str]:
    with open(log, "wb") as err:
        proc = subprocess.run([sys.executable, "-m", "skriptnd", "lsp"], input=data, stdout=subprocess.PIPE,
                              stderr=err, cwd=workspace, env=dict(os.environ, PYTHONPATH=str(ROOT)), timeout=120)
    return proc.returncode, log.read_text(encoding="utf-8", errors="replace")


def test_an_oversized_content_length_closes_the_connection_cleanly(workspace: Path, tmp_path: Path) -> None:
    code, log = _one_shot(workspace, tmp_path / "log", b"Content-Length: 999999999999\r\n\r\n{}")
    assert code == 1 and "Traceback" not in log
    assert "a message of 999999999999 bytes (the limit is 64 MiB)" in log


def test_an_endless_header_line_closes_the_connection_cleanly(workspace: Path, tmp_path: Path) -> None:
    code, log = _one_shot(workspace, tmp_path / "log", b"Content-Length: 1" + b"1" * 100_000)
    assert code == 1 and "Traceback" not in log and "header line longer than 4096 bytes" in log


# ---------------------------------------------------------------- property-based: arbitrary traffic

JSON = st.recursive(st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.floats(allow_nan=False)
                    | st.text(max_size=30),
                    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=12), children,
                                                                                       max_size=4),
                    max_leaves=20)
POSITION = st.fixed_dictionaries({"line": st.integers(-3, 2**32), "character": st.integers(-3, 2**32)})
DOC = st.fixed_dictionaries({"uri": st.sampled_from(["file:///dev/zero", "file:///proc/self/fd/0", "untitled:a",
                                                     "file:///etc/passwd", ""]) | st.text(max_size=20)})
PARAMS = JSON | st.fixed_dictionaries({"textDocument": DOC, "position": POSITION | JSON}) | st.fixed_dictionaries(
    {"textDocument": DOC | JSON, "context": JSON, "options": JSON})
MESSAGE = st.fixed_dictionaries({"jsonrpc": st.just("2.0") | JSON,
                                 "method": st.sampled_from(REQUESTS + NOTIFICATIONS + ["$/cancelRequest", "x/y"]) | JSON,
                                 "params": PARAMS})


@settings(max_examples=300 * SCALE, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                           HealthCheck.too_slow])
@given(message=MESSAGE, with_id=st.booleans(), raw=st.none() | st.binary(max_size=40))
@example(message={"jsonrpc": "2.0", "method": "textDocument/didSave",  # a notification sent as a request
                  "params": {"textDocument": {"uri": "file:///dev/zero"}}}, with_id=True, raw=None)
def test_arbitrary_traffic_never_goes_unanswered(server: RawServer, message: dict, with_id: bool,
                                                 raw: bytes | None) -> None:
    if raw is not None:  # a frame whose body is arbitrary bytes: answered with a parse or request error
        server.send_bytes(b"Content-Length: %d\r\n\r\n" % len(raw) + raw)
    msg_id = f"fuzz-{time.monotonic_ns()}"
    if with_id:
        message = {**message, "id": msg_id}
    server.send(message)
    if with_id and isinstance(message.get("method"), str) and message.get("jsonrpc") == "2.0":
        assert server.wait_for([msg_id], 30) == [], f"no reply to {message!r}"
    assert server.proc.poll() is None, "the server died"


def test_the_fuzzed_server_logged_no_traceback_and_exits_cleanly(server: RawServer) -> None:
    assert "Traceback" not in server.stderr()
    code = server.close()
    assert code == 0, server.stderr()[-2000:]
