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
import os
import queue
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

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


@contextmanager
def using(n: int | None) -> Iterator[int]:
    """Run parallel work started from this thread on ``n`` threads (None: :func:`default_threads`)."""
    old = getattr(_local, "threads", None)
    _local.threads = max(1, int(n)) if n else default_threads()
    try:
        yield _local.threads
    finally:
        _local.threads = old


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
    """``fn(0) .. fn(n-1)``, taken index by index by whoever calls :meth:`work`; ``counted``: the
    completion is counted for :meth:`wait` (queue hand-off; a hot pool waits on each worker instead)."""

    def __init__(self, fn: Callable[[int], Any], n: int, counted: bool = True) -> None:
        self.fn, self.n = fn, n
        self.next = itertools.count()  # next() is atomic under the GIL
        self.error: BaseException | None = None
        self.counted = counted
        if counted:
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
                if self.counted:
                    with self.lock:
                        self.done += 1
                        if self.done == self.n:
                            self.finished.set()
        finally:
            _local.inside = False


class _Spin:
    """A libc (POSIX) spin lock used as a binary semaphore: :meth:`acquire` busy-waits inside libc, the
    GIL released (a ctypes call), so a waiting thread takes over within a microsecond of
    :meth:`release` instead of being woken by the kernel (tens of microseconds on a VM whose idle
    vCPU has halted: as much as a 100 us pass over a tensor takes)."""

    def __init__(self, functions: tuple[Any, Any, Any]) -> None:
        import ctypes

        init, self._lock, self._unlock = functions
        self._value = ctypes.c_int(0)  # pthread_spinlock_t is an int (glibc, musl)
        self._ref = ctypes.byref(self._value)
        init(self._ref, 0)  # its unlocked value is the library's (glibc x86: 1)
        self._lock(self._ref)  # starts taken

    def acquire(self) -> None:
        self._lock(self._ref)

    def release(self) -> None:
        self._unlock(self._ref)


def _spin_functions() -> tuple[Any, Any, Any] | None:
    """libc's pthread_spin_init / _lock / _unlock (Linux), or None (then no hot mode)."""
    try:
        import ctypes
        import ctypes.util

        if not sys.platform.startswith("linux"):
            return None
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        init, lock, unlock = libc.pthread_spin_init, libc.pthread_spin_lock, libc.pthread_spin_unlock
        probe = ctypes.c_int(0)
        if init(ctypes.byref(probe), 0) != 0:
            return None
        return init, lock, unlock
    except (OSError, AttributeError):
        return None


_SPIN: list[Any] = []  # [spin functions or None], looked up once
_HOT = object()  # a worker's queue message: spin until told to stop


class _Worker:
    """A pool thread: takes jobs from its queue (sleeping in between) or, while the pool is hot,
    busy-waits on its ``go`` spin lock for the next job and releases its ``done`` lock after each."""

    def __init__(self, index: int) -> None:
        self.queue: queue.SimpleQueue[Any] = queue.SimpleQueue()
        spin = _spin()
        self.go = _Spin(spin) if spin else None
        # the caller waits for ``done`` blocking, not spinning: a spinning caller would hold the core a
        # descheduled worker needs to finish (measured: 10x slower runs while another process ran)
        self.done = threading.Lock()
        self.done.acquire()
        self.job: _Job | None = None
        self.thread = threading.Thread(target=self._run, name=f"skriptnd-worker-{index}", daemon=True)
        self.thread.start()

    def _run(self) -> None:
        _local.threads = 1
        while True:
            msg = self.queue.get()
            if msg is _HOT:
                self._spin()
            else:
                msg.work()

    def _spin(self) -> None:
        assert self.go is not None
        while True:
            self.go.acquire()
            job = self.job
            if job is not None:
                job.work()
            self.done.release()
            if job is None:
                return


def _spin() -> tuple[Any, Any, Any] | None:
    if not _SPIN:
        _SPIN.append(_spin_functions())
    return _SPIN[0]


#: whether :func:`hot` spins the workers (False: they sleep between jobs, each hand-off wakes them).
#: Off: measured with another process keeping one of the 2 vCPUs busy, spinning workers made the
#: numpy backend's ResNet-18 / MobileNetV2 2x slower at 2 threads (median 76 vs 37 ms, 32 vs 16 ms:
#: a spinning thread takes the core the descheduled other one needs); sleeping ones cost a wake-up
#: (~10-40 us here) per parallel operator.
HOT = False
_hot: list[Any] = [None, []]  # [thread ident owning the hot pool, its workers]


def _ensure(count: int) -> list[_Worker]:
    if len(_workers) < count:
        with _lock:
            while len(_workers) < count:
                _workers.append(_Worker(len(_workers)))
    return _workers[:count]


@contextmanager
def hot() -> Iterator[None]:
    """Keep the workers busy-waiting (not sleeping) for jobs while the block runs, so that each
    :func:`parallel_for` in it starts on all threads at once, as OpenBLAS and OpenMP pools spin
    between calls. For a stretch of many parallel operators (a TOSA program's run) by one thread;
    the spinning occupies the worker's core, so not around code whose threads (BLAS) need it.
    A no-op with one thread, without libc spin locks, when nested or when another thread holds it."""
    t = threads()
    if t <= 1 or not HOT or getattr(_local, "inside", False) or _spin() is None:
        yield
        return
    me = threading.get_ident()
    with _lock:
        if _hot[0] is not None:
            owner = None
        else:
            owner = _hot[0] = me
    if owner is None:
        yield
        return
    workers = _ensure(t - 1)
    _hot[1] = workers
    for w in workers:
        w.queue.put(_HOT)
    try:
        yield
    finally:
        for w in workers:
            w.job = None
            w.go.release()  # type: ignore[union-attr]
        for w in workers:
            w.done.acquire()
        _hot[1] = []
        _hot[0] = None


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
    if _hot[0] == threading.get_ident() and len(_hot[1]) >= helpers:
        job = _Job(fn, n, counted=False)
        hot_workers = _hot[1][:helpers]
        for w in hot_workers:
            w.job = job
            w.go.release()
        job.work()
        for w in hot_workers:
            w.done.acquire()
    else:
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


def gemm(a: Any, b: Any, out: Any = None) -> Any:
    """``np.matmul(a, b, out=out)`` for a [.., M, K] @ [.., K, N] product (``b`` 2-D or with ``a``'s
    batch), split over the pool's threads when large: over the batch when it has enough items, else
    over M's rows when there are enough of them, else over N's columns (ResNet-18's 7x7 layers: 49
    rows). Each part is one BLAS call on one thread (the caller limits OpenBLAS, see
    :func:`blas_single`: a BLAS pool spinning next to this one would take its cores)."""
    import numpy as np

    m, k = a.shape[-2], a.shape[-1]
    n = b.shape[-1]
    batch = int(np.prod(a.shape[:-2])) if a.ndim > 2 else 1
    t = threads()
    if t == 1 or batch * m * n * k < MIN_GEMM_FLOPS or getattr(_local, "inside", False):
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


@contextmanager
def blas_limit(n: int) -> Iterator[None]:
    """OpenBLAS on at most ``n`` threads inside the block (no-op when it cannot be controlled)."""
    blas = blas_functions()
    if blas is None:
        yield
        return
    old = int(blas[0]())
    if old <= n:
        yield
        return
    blas[1](n)
    try:
        yield
    finally:
        blas[1](old)


def blas_single() -> Any:
    """OpenBLAS on one thread inside the block: for GEMMs split over the pool's threads."""
    return blas_limit(1)
