"""Each file is migrated in a worker process the command watches, so that no file can end the run.

A file that crashes libcst's native parser (a stack overflow is a segfault, which no `except` catches), that
exhausts memory, or that runs past the time limit costs that file only: it is reported as an error of its own,
a fresh worker takes the next files, and the summary and the report are written as always.

Workers are forked: they start in a millisecond with everything the command imported, and find the jobs in the
memory they share with it (only job numbers and results cross the pipe). Each works in a thread with a large
stack and a raised recursion limit, so that deep but legitimate code (a 1,000-term sum) is walked by libcst's
recursive visitors; what Python's own parser refuses never reaches libcst (`verify.python_tree`).
"""

from __future__ import annotations

import contextlib
import ctypes
import multiprocessing
import multiprocessing.util
import os
import signal
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from multiprocessing.connection import Connection, wait
from typing import Generic, TypeVar

Result = TypeVar("Result")

DEFAULT_TIMEOUT_S = 60.0  # seconds one file may take (`--timeout`); the largest library files take a few
STACK_BYTES = 512 * 1024 * 1024  # address space only: pages are used as the recursion reaches them
RECURSION_LIMIT = 30_000
TICK_S = 0.5  # how often `on_tick` hears of the files in progress
_PR_SET_PDEATHSIG = 1


class Supervisor(Generic[Result]):
    """Runs `work(index)` for every index of `batches` in up to `workers` processes.

    `failed(index, message)` makes the result of a file whose worker died or ran out of time; `on_done(index,
    result)` is called as each result arrives, `on_tick([(index, seconds), ...])` with the files in progress
    every TICK_S. `timeout`: seconds one file may take (None: no limit). KeyboardInterrupt (and any other
    exception) stops every worker at once before it propagates.
    """

    def __init__(
        self,
        work: Callable[[int], Result],
        failed: Callable[[int, str], Result],
        timeout: float | None = None,
        on_done: Callable[[int, Result], None] | None = None,
        on_tick: Callable[[list[tuple[int, float]]], None] | None = None,
    ) -> None:
        self.work, self.failed, self.timeout = work, failed, timeout
        self.on_done, self.on_tick = on_done, on_tick
        self._context = multiprocessing.get_context("fork")

    def run(self, count: int, batches: Sequence[Sequence[int]], workers: int) -> list[Result]:
        self.results: list[Result | None] = [None] * count
        queue: deque[list[int]] = deque(list(batch) for batch in batches if batch)
        self.started: list[_Worker] = []  # every worker, so that a Ctrl-C while one starts still stops it
        try:
            pool = [_Worker(self) for _ in range(min(workers, len(queue)))]
            while True:
                for worker in pool:
                    if not worker.pending and queue:
                        worker.assign(queue.popleft())
                busy = [worker for worker in pool if worker.pending]
                if not busy:
                    break
                wait(
                    [c for worker in busy for c in (worker.connection, worker.process.sentinel)],
                    self._wait_s(busy),
                )
                for worker in busy:
                    lost = self._collect(worker)
                    if worker.pending and (lost or not worker.process.is_alive()):
                        self._collect(worker)  # what it sent before it died
                    if not worker.pending:
                        continue
                    if lost or not worker.process.is_alive():
                        worker.process.join(timeout=5)  # reaped: its exit code says how it died
                        message = _death_message(worker)
                    elif self.timeout is not None and time.monotonic() - worker.since > self.timeout:
                        message = (
                            f"took longer than {self.timeout:g} s (--timeout); file left untouched (raise --timeout "
                            "to give it more time)"
                        )
                    else:
                        continue
                    worker.kill()
                    self._finish(worker.pending.popleft(), self.failed, message)
                    if worker.pending:
                        queue.appendleft(list(worker.pending))
                    pool[pool.index(worker)] = _Worker(self)
                if self.on_tick is not None:
                    now = time.monotonic()
                    self.on_tick(
                        [(worker.pending[0], now - worker.since) for worker in pool if worker.pending]
                    )
        finally:
            with _signals_deferred():  # a second Ctrl-C must not leave a worker running
                for worker in self.started:
                    worker.stop()
        return self.results  # type: ignore[return-value]

    def _wait_s(self, busy: list[_Worker]) -> float | None:
        waits = [TICK_S] if self.on_tick is not None else []
        if self.timeout is not None:
            waits.append(max(0.0, min(worker.since for worker in busy) + self.timeout - time.monotonic()))
        return min(waits) if waits else None

    def _collect(self, worker: _Worker) -> bool:
        """Reads every result the worker has sent; True when its end of the pipe is closed."""
        try:
            while worker.connection.poll():
                index, result = worker.connection.recv()
                if worker.pending and worker.pending[0] == index:
                    worker.pending.popleft()
                    worker.since = time.monotonic()
                    self._finish(index, lambda _index, _message, result=result: result, "")
        except (EOFError, OSError):
            return True
        return False

    def _finish(self, index: int, make, message: str) -> None:
        self.results[index] = result = make(index, message)
        if self.on_done is not None:
            self.on_done(index, result)


class _Worker:
    def __init__(self, supervisor: Supervisor) -> None:
        self.connection, child = supervisor._context.Pipe()
        self.process = supervisor._context.Process(
            target=_serve, args=(child, supervisor.work, supervisor.failed), daemon=True
        )
        # Known before it starts: a worker ignores SIGTERM, so one the command forgot would keep the command's
        # exit (multiprocessing joins its children) waiting for ever.
        self.pending: deque[int] = deque()
        self.since = time.monotonic()
        supervisor.started.append(self)
        self.process.start()
        child.close()
        # Should a second Ctrl-C skip the stop in `Supervisor.run`'s `finally`, multiprocessing's exit handler
        # runs this before it joins its children: the worker is killed instead of joined for ever.
        multiprocessing.util.Finalize(self, _kill, args=(self.process,), exitpriority=0)

    def assign(self, batch: list[int]) -> None:
        self.connection.send(batch)
        self.pending.extend(batch)
        self.since = time.monotonic()

    def kill(self) -> None:
        self.process.kill()
        self.process.join()
        self.connection.close()

    def stop(self) -> None:
        """Ends an idle worker; one that is still working is killed (an interrupted or failed run)."""
        if self.process.is_alive() and not self.pending:
            with contextlib.suppress(OSError):
                self.connection.send(None)
            self.process.join(timeout=5)
        if self.process.is_alive():
            self.process.kill()
            self.process.join()
        self.connection.close()


def _kill(process: multiprocessing.process.BaseProcess) -> None:
    if process.is_alive():
        process.kill()
        process.join()


def _death_message(worker: _Worker) -> str:
    code = worker.process.exitcode
    if code is not None and code < 0:
        name = signal.Signals(-code).name
        why = {
            "SIGSEGV": "a native parser crashed, most likely on code nested too deeply for its stack",
            "SIGKILL": "killed from outside, most likely for running out of memory",
        }.get(name, "killed by a signal")
        return f"the process migrating this file died ({name}: {why}); file left untouched"
    return f"the process migrating this file stopped (exit code {code}); file left untouched"


def _serve(connection: Connection, work: Callable, failed: Callable) -> None:
    """A worker: runs the batches it is sent until it is sent None or the command's end of the pipe closes."""
    # Ctrl-C and SIGTERM reach the whole process group: they are the command's to handle (it stops the workers;
    # were it killed outright, `_die_with_parent` ends them).
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    _die_with_parent()
    threading.stack_size(STACK_BYTES)
    sys.setrecursionlimit(RECURSION_LIMIT)
    thread = threading.Thread(target=_loop, args=(connection, work, failed), name="migrate")
    thread.start()
    thread.join()


def _loop(connection: Connection, work: Callable, failed: Callable) -> None:
    while True:
        try:
            batch = connection.recv()
        except (EOFError, OSError):
            return
        if batch is None:
            return
        for index in batch:
            try:
                result = work(index)
            except BaseException as error:  # `work` reports a file's own problems; this is a bug of ours
                result = failed(
                    index, f"internal error: {type(error).__name__}: {error}; file left untouched"
                )
            try:
                connection.send((index, result))
            except (EOFError, OSError):
                return
            except Exception as error:  # a result that cannot be sent
                connection.send((index, failed(index, f"internal error: {type(error).__name__}: {error}")))


@contextlib.contextmanager
def _signals_deferred():
    """Ctrl-C and SIGTERM wait until the block is done, then arrive as they would have (main thread only)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    received: list[int] = []
    held = (signal.SIGINT, signal.SIGTERM)
    previous = {
        signum: signal.signal(signum, lambda signum, _frame: received.append(signum)) for signum in held
    }
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        if received:
            os.kill(os.getpid(), received[0])


def _die_with_parent() -> None:
    """Linux: the worker is killed when the command dies (SIGKILL included), instead of going on alone."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
