"""A process-wide pool of worker threads for the numpy kernels: the numpy backend on several cores.

numpy releases the GIL inside ufunc loops, copies and BLAS calls on large arrays, so Python threads
each running numpy calls on their own part of a tensor (a band of output rows, a slice of channels)
run in parallel. That is the only parallelism here: no C, no compiler, only chunks of vectorised
numpy handed to threads.

* :func:`parallel_for` ``(n, fn)`` calls ``fn(0) .. fn(n-1)``, spread over the current thread count
  (the caller works too; chunks are taken from a shared counter, so a busy or nested pool never
  deadlocks: whatever no worker took, the caller runs). With one thread, or from inside a chunk
  (nesting), it is a plain loop.
* :func:`split` cuts a range into near-equal contiguous chunks; :func:`worth` says whether a
  piece of work is big enough for the hand-off (~10-30 us to wake a worker) to pay.
* The thread count is per calling thread (:func:`using`, a context): the numpy backend sets it
  from ``Options.threads`` (``sknd run/bench --threads N``), else :func:`default_threads`
  (the CPUs this process may use).
* BLAS: OpenBLAS has its own threads. A GEMM split into chunks over pool threads must run each
  chunk on one BLAS thread (:func:`blas_single`), else 2 x 2 threads fight over 2 cores.

Nothing here imports the executor or the TOSA operators: both use it.
"""

from __future__ import annotations

import itertools
import math
import os
import queue
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np

#: Below this many bytes of output (or elements touched, for the caller's measure) a split does not
#: pay on the measured machine (2-vCPU AMD EPYC): waking a worker costs ~20 us, a float32 pass over
#: 64 KB ~5 us.
MIN_BYTES = 1 << 17

_local = threading.local()
_lock = threading.Lock()
_workers: list[_Worker] = []


def default_threads() -> int:
    """The CPUs this process may run on (its affinity mask), at least 1."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):  # not Linux
        return max(1, os.cpu_count() or 1)


def threads() -> int:
    """The thread count for parallel work started from this thread (1 inside a chunk)."""
    n = getattr(_local, "threads", None)
    if n is None:
        n = _local.threads = default_threads()
    return n


class using:  # noqa: N801 - used as a function: ``with parallel.using(n):``
    """Run parallel work started from this thread on ``n`` threads (None: :func:`default_threads`). A class,
    not a generator context manager: a small graph's run enters it every call (issue 28)."""

    __slots__ = ("n", "old")

    def __init__(self, n: int | None) -> None:
        self.n = n

    def __enter__(self) -> int:
        self.old = getattr(_local, "threads", None)
        n = self.n
        _local.threads = max(1, int(n)) if n else default_threads()
        return int(_local.threads)

    def __exit__(self, *exc: object) -> None:
        _local.threads = self.old


#: parts per thread of a split piece of work: a thread that gets no core for a while (another process
#: runs) then holds back only a small part, which the others take over; more parts cost more hand-offs
PARTS_PER_THREAD = 2


def worth(size: int, minimum: int = MIN_BYTES) -> int:
    """Into how many parts a piece of work of ``size`` (bytes, or any measure ``minimum`` is in) should
    split: :data:`PARTS_PER_THREAD` per thread from ``minimum`` on (measured per kernel), else 1."""
    t = threads()
    return 1 if t == 1 or size < minimum else t * PARTS_PER_THREAD


def split(n: int, parts: int) -> list[tuple[int, int]]:
    """``range(n)`` as at most ``parts`` contiguous non-empty (start, stop) chunks of near-equal size
    (the first ``n % parts`` one longer); [] for n == 0."""
    parts = max(1, min(parts, n))
    base, extra = divmod(n, parts)
    out, start = [], 0
    for k in range(parts if n else 0):
        stop = start + base + (k < extra)
        out.append((start, stop))
        start = stop
    return out


class _Job:
    """``fn(0) .. fn(n-1)``, taken index by index by whoever calls :meth:`work`; ``finished`` is set
    when all ``n`` are done (whoever ran them)."""

    def __init__(self, fn: Callable[[int], Any], n: int) -> None:
        self.fn, self.n = fn, n
        self.next = itertools.count()  # next() is atomic under the GIL
        self.error: BaseException | None = None
        self.done = 0
        self.lock = threading.Lock()
        self.finished = threading.Event()

    def work(self) -> None:
        _local.inside = True
        try:
            while (i := next(self.next)) < self.n:
                try:
                    self.fn(i)
                except BaseException as err:  # noqa: BLE001 - re-raised in the caller
                    if self.error is None:
                        self.error = err
                with self.lock:
                    self.done += 1
                    if self.done == self.n:
                        self.finished.set()
        finally:
            _local.inside = False


class _Worker:
    """A pool thread: takes jobs from its queue, sleeping in between (each hand-off wakes it: ~10-40 us
    on this VM; busy-waiting workers were measured 2x slower whenever another process held a core)."""

    def __init__(self, index: int) -> None:
        self.queue: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self.thread = threading.Thread(target=self._run, name=f"skriptnd-worker-{index}", daemon=True)
        self.thread.start()

    def _run(self) -> None:
        _local.threads = 1
        while True:
            self.queue.get().work()


def _ensure(count: int) -> list[_Worker]:
    if len(_workers) < count:
        with _lock:
            while len(_workers) < count:
                _workers.append(_Worker(len(_workers)))
    return _workers[:count]


def parallel_for(n: int, fn: Callable[[int], Any], workers: int | None = None) -> None:
    """``fn(i)`` for i in range(n), on up to ``workers`` (default :func:`threads`) threads including
    the caller; returns when all are done; the first exception of a chunk is raised here."""
    t = threads() if workers is None else workers
    if n <= 0:
        return
    if t <= 1 or n == 1 or getattr(_local, "inside", False):
        for i in range(n):
            fn(i)
        return
    helpers = min(t, n) - 1
    job = _Job(fn, n)
    for w in _ensure(helpers):
        w.queue.put(job)
    job.work()
    job.finished.wait()
    if job.error is not None:
        raise job.error


def parallel_chunks(n: int, fn: Callable[[int, int], Any], parts: int | None = None) -> None:
    """``fn(start, stop)`` over :func:`split` ``(n, parts)`` chunks (default: one per thread) in parallel."""
    chunks = split(n, threads() if parts is None else parts)
    parallel_for(len(chunks), lambda k: fn(*chunks[k]))


# --- GEMMs on the pool's threads -------------------------------------------------------------------

#: from this many multiply-adds a GEMM splits over threads (~0.1 ms of one core)
MIN_GEMM_FLOPS = 1 << 21


def gemm(a: np.ndarray, b: np.ndarray, out: np.ndarray | None = None) -> Any:
    """``np.matmul(a, b, out=out)`` for a [.., M, K] @ [.., K, N] product (``b`` 2-D or with ``a``'s
    batch), split over the pool's threads when large: over the batch when it has enough items, else
    over M's rows when there are enough of them, else over N's columns (ResNet-18's 7x7 layers: 49
    rows). Each part is one BLAS call on one thread (the caller limits OpenBLAS, see
    :func:`blas_single`: a BLAS pool spinning next to this one would take its cores)."""
    import numpy as np

    m, k = a.shape[-2], a.shape[-1]
    n = b.shape[-1]
    batch = math.prod(a.shape[:-2])  # not np.prod: ~10 us a call, which a small transformer's GEMMs felt
    if batch * m * n * k < MIN_GEMM_FLOPS or (t := threads()) == 1 or getattr(_local, "inside", False):
        return np.matmul(a, b, out=out)
    if out is None:
        out = np.empty(np.broadcast_shapes(a.shape[:-2], b.shape[:-2]) + (m, n),
                       np.result_type(a.dtype, b.dtype))
    if batch >= t and a.ndim == 3 and (b.ndim == 2 or b.shape[0] == batch):
        def part(i: int, j: int) -> None:
            np.matmul(a[i:j], b if b.ndim == 2 else b[i:j], out=out[i:j])
        parallel_chunks(batch, part)
    elif m >= 8 * t:
        def part(i: int, j: int) -> None:
            np.matmul(a[..., i:j, :], b, out=out[..., i:j, :])
        parallel_chunks(m, part)
    elif n >= 32 * t:
        def part(i: int, j: int) -> None:
            np.matmul(a, b[..., i:j], out=out[..., i:j])
        parallel_chunks(n, part)
    else:
        np.matmul(a, b, out=out)
    return out


# --- OpenBLAS's own thread count -------------------------------------------------------------------

_BLAS: list[Any] = []  # [(get_num_threads, set_num_threads)] of OpenBLAS, or [None] if unknown


def blas_functions() -> tuple[Any, Any] | None:
    """OpenBLAS's (get, set) thread-count functions (looked up once through threadpoolctl, when
    installed; calling them is cheap, unlike threadpoolctl's context, which scans the libraries)."""
    if not _BLAS:
        found = None
        try:
            from threadpoolctl import ThreadpoolController

            for lib in ThreadpoolController().select(internal_api="openblas").lib_controllers:
                if getattr(lib, "threading_layer", "") != "openmp":
                    get = lib._get_symbol("openblas_get_num_threads")
                    put = lib._get_symbol("openblas_set_num_threads")
                    if get is not None and put is not None:
                        found = (get, put)
                        break
        except Exception:  # noqa: BLE001 - no threadpoolctl / no OpenBLAS: nothing to control
            pass
        _BLAS.append(found)
    return _BLAS[0]


def blas_threads() -> int:
    """The number of threads OpenBLAS may use now; 1 if unknown."""
    blas = blas_functions()
    return int(blas[0]()) if blas is not None else 1


class blas_limit:  # noqa: N801 - used as a function: ``with parallel.blas_limit(n):``
    """OpenBLAS on at most ``n`` threads inside the block (no-op for None, or when it cannot be controlled). A
    class, not a generator context manager: every program call enters it (issue 28)."""

    __slots__ = ("n", "old", "put")

    def __init__(self, n: int | None) -> None:
        self.n = n

    def __enter__(self) -> None:
        self.put = None
        n = self.n
        if n is None:
            return
        blas = blas_functions()
        if blas is None:
            return
        old = int(blas[0]())
        if old > n:
            blas[1](n)
            self.old, self.put = old, blas[1]

    def __exit__(self, *exc: object) -> None:
        if self.put is not None:
            self.put(self.old)


def blas_single() -> Any:
    """OpenBLAS on one thread inside the block: for GEMMs split over the pool's threads."""
    return blas_limit(1)
