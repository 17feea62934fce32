"""The child process that runs the `nnef` package's C++ parser (started by `contained.py`, never imported).

The parser segfaults on some malformed text (e.g. `graph G( x ) -> ( y ) { f(`); running it here means a
crash kills this process, not `sknd`. It is run as a script (`python -I parse_worker.py`): it imports nothing
of skriptnd, only the standard library and `_nnef`, with its address space and CPU time limited.

Protocol on stdin/stdout, one frame each way per request: an 8-byte big-endian length, then UTF-8 JSON.
The first request is `{"path": [...]}` (the parent's sys.path, to find `_nnef`); then
`{"call": "parse_file" | "parse_string", "args": [...], "kwargs": {...}}`, answered by `{"ok": <graph>}`
or `{"error": [exception type name, message]}`. The graph is encoded as tagged JSON (see `_encode`),
because the parser's Graph / Tensor / Operation namedtuples and its `Identifier` strings do not pickle.
"""

from __future__ import annotations

import json
import os
import struct
import sys

#: Limits of this process: a parse that needs more is reported as a crash by the parent. The CPU limit is
#: per parse: one process serves many parses, and RLIMIT_CPU counts the process's whole CPU time.
ADDRESS_SPACE = 4 << 30
CPU_SECONDS = 300

try:
    import resource
except ImportError:  # not on POSIX: no limits, the parent's timeout still applies
    resource = None


def _limit(kind: int, value: int) -> None:
    """Set the soft limit to value (at most the hard limit); a lower limit the user set stays for memory."""
    soft, hard = resource.getrlimit(kind)
    if hard != resource.RLIM_INFINITY:
        value = min(value, hard)
    if kind == resource.RLIMIT_AS and soft != resource.RLIM_INFINITY:
        value = min(value, soft)
    resource.setrlimit(kind, (value, hard))


def _limit_memory() -> None:
    if resource is not None:
        _limit(resource.RLIMIT_AS, ADDRESS_SPACE)


def _limit_cpu() -> None:
    """CPU_SECONDS more than this process has used so far (SIGXCPU kills it past that)."""
    if resource is not None:
        usage = resource.getrusage(resource.RUSAGE_SELF)
        _limit(resource.RLIMIT_CPU, int(usage.ru_utime + usage.ru_stime) + 1 + CPU_SECONDS)


def _encode(value: object, identifier: type) -> object:
    """Plain JSON with tags: {"i": s} an Identifier, {"t": [...]} a tuple, {"d": [[k, v], ...]} a dict ("o" an OrderedDict),
    {"n": type name, "f": [...]} a Graph / Tensor / Operation, {"a": [dtype, shape, values]} a numpy array; lists, strings, numbers, None as themselves."""
    if value is None or isinstance(value, (bool, int, float)):
        return value
    if isinstance(value, identifier):
        return {"i": str(value)}
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return [_encode(v, identifier) for v in value]
    if isinstance(value, tuple) and hasattr(value, "_fields"):
        return {"n": type(value).__name__, "f": [_encode(v, identifier) for v in value]}
    if isinstance(value, tuple):
        return {"t": [_encode(v, identifier) for v in value]}
    if isinstance(value, dict):
        items = [[_encode(k, identifier), _encode(v, identifier)] for k, v in value.items()]
        return {"o" if type(value) is not dict else "d": items}
    if hasattr(value, "dtype") and hasattr(value, "tolist"):  # a numpy array or scalar (quantization values)
        return {"a": [str(value.dtype), list(getattr(value, "shape", ())), _encode(value.tolist(), identifier)]}
    raise TypeError(f"unexpected {type(value).__name__} in a parsed graph")


def _read(stream) -> dict | None:  # noqa: ANN001 - a binary stream
    head = stream.read(8)
    if len(head) < 8:
        return None
    (size,) = struct.unpack(">Q", head)
    return json.loads(stream.read(size).decode("utf-8"))


def _write(stream, message: dict) -> None:  # noqa: ANN001 - a binary stream
    body = json.dumps(message, allow_nan=True).encode("utf-8")
    stream.write(struct.pack(">Q", len(body)) + body)
    stream.flush()


def main() -> int:
    _limit_memory()
    stdin, stdout = sys.stdin.buffer, sys.stdout.buffer
    sys.stdout = sys.stderr  # nothing printed by the parser can corrupt the frames
    first = _read(stdin)
    if first is None:
        return 0
    sys.path[:] = [p for p in first.get("path", []) if isinstance(p, str)]
    import _nnef

    while (request := _read(stdin)) is not None:
        call = {"parse_file": _nnef.parse_file, "parse_string": _nnef.parse_string}[request["call"]]
        _limit_cpu()
        try:
            reply = {"ok": _encode(call(*request["args"], **request["kwargs"]), _nnef.Identifier)}
        except Exception as exc:  # noqa: BLE001 - handed to the parent, which re-raises it
            reply = {"error": [type(exc).__name__, str(exc)]}
        _write(stdout, reply)
    return 0


if __name__ == "__main__":
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    sys.exit(main())
