"""`neuron-migrate try DIR`: every entry point of a tree (`entry_points`) tried with the engine of a single
try (`runner.try_path`), N at a time in processes of their own, into one table."""

from __future__ import annotations

import dataclasses
import json
import multiprocessing
import os
import signal
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from multiprocessing.connection import wait
from pathlib import Path

from try_run.entry_points import EntryPoint
from try_run.report import FAILED, NOT_RUN, RAN, RunReport
from try_run.runner import TryOptions, TryUsageError, try_path


@dataclass
class EntryResult:
    entry: EntryPoint
    runs: list[RunReport]
    seconds: float = 0.0

    @property
    def status(self) -> str:
        statuses = {run.status for run in self.runs}
        if statuses == {RAN}:
            return RAN
        return NOT_RUN if not statuses or statuses == {NOT_RUN} else FAILED

    @property
    def reason(self) -> str:
        """Why it did not run (the first run that did not), or how its runs ended."""
        failed = next((run for run in self.runs if run.status != RAN), None)
        return (failed or self.runs[0]).reason if self.runs else ""

    def as_dict(self) -> dict:
        return {
            **self.entry.as_dict(),
            "status": self.status,
            "reason": self.reason,
            "seconds": round(self.seconds, 2),
            "runs": [run.as_dict() for run in self.runs],
        }


def try_tree(
    root: Path,
    entries: list[EntryPoint],
    options: TryOptions,
    jobs: int,
    on_done: Callable[[EntryResult, int], None] | None = None,
) -> list[EntryResult]:
    """Tries each entry point of `root`, `jobs` at a time, each in a process of its own; results in the order of
    `entries`. `on_done(result, finished)`. On Ctrl-C (or a KeyboardInterrupt raised for SIGTERM) the running
    tries are stopped, with the processes they started, and the interrupt goes on."""
    fields = {
        item.name: getattr(options, item.name) for item in dataclasses.fields(options) if item.name != "echo"
    }
    fields["show_output"] = False  # N runs at once: their output goes to the table, not the terminal
    fields["tree"] = root  # its files, wherever a run's frames fall, are the user's code
    # `jobs` tries at once share the cores: each run's processes get their share as PyTorch's intra-op threads
    # (as torchrun gives its workers; the user's OMP_NUM_THREADS wins). Threads that wait for cores another run
    # holds made two tries at once 10-20 % slower (docs/using/try.md).
    threads = str(max(1, len(os.sched_getaffinity(0)) // max(1, jobs)))
    # spawn: each try starts clean (no copy of this process's threads, locks or imported libraries' state)
    context = multiprocessing.get_context("spawn")
    pending = list(enumerate(entries))
    running: dict[int, tuple] = {}  # index -> (process, its result file, start time)
    results: dict[int, EntryResult] = {}
    with tempfile.TemporaryDirectory(prefix="neuron-migrate-try-tree-") as folder:
        try:
            while pending or running:
                while pending and len(running) < max(1, jobs):
                    index, entry = pending.pop(0)
                    out = Path(folder) / f"{index}.json"
                    process = context.Process(
                        target=_try_entry, args=(root, entry, fields, out, threads), daemon=True
                    )
                    process.start()
                    running[index] = (process, out, time.monotonic())
                wait([process.sentinel for process, _, _ in running.values()])
                for index, (process, out, started) in list(running.items()):
                    if process.is_alive():
                        continue
                    process.join()
                    del running[index]
                    results[index] = _result(
                        entries[index], out, process.exitcode, time.monotonic() - started
                    )
                    if on_done is not None:
                        on_done(results[index], len(results))
        except BaseException:
            for process, _, _ in running.values():
                process.terminate()  # its SIGTERM handler stops its run, and what the run started
            for process, _, _ in running.values():
                process.join()
            raise
    return [results[index] for index in range(len(entries))]


def _try_entry(root: Path, entry: EntryPoint, fields: dict, out: Path, threads: str) -> None:
    """One try, in its own process: SIGTERM stops it as Ctrl-C does (the run's processes are killed)."""
    os.environ.setdefault("OMP_NUM_THREADS", threads)

    def stop(signum, frame):
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, stop)
    options = TryOptions(**fields, echo=lambda line: None)
    try:
        runs = try_path(root / entry.path, entry.arguments, options)
    except TryUsageError as error:  # one entry that cannot be tried does not stop the others
        runs = [RunReport(entry.path.as_posix(), NOT_RUN, str(error))]
    out.write_text(json.dumps([run.as_dict() for run in runs]), encoding="utf-8")


def _result(entry: EntryPoint, out: Path, exit_code: int | None, seconds: float) -> EntryResult:
    try:
        runs = [RunReport(**run) for run in json.loads(out.read_text(encoding="utf-8"))]
    except (OSError, ValueError, TypeError):
        runs = [
            RunReport(
                entry.path.as_posix(),
                NOT_RUN,
                f"the try of it ended without a report (exit code {exit_code})",
            )
        ]
    return EntryResult(entry, runs, seconds)


def text_lines(results: list[EntryResult]) -> list[str]:
    width = max((len(result.entry.path.as_posix()) for result in results), default=0)
    lines = []
    for result in results:
        arguments = " ".join(result.entry.arguments)
        lines.append(f"{result.status.upper():8} {result.entry.path.as_posix():{width}} {arguments}".rstrip())
        for run in result.runs:
            lines.append(f"         {run.status:8} {run.command}: {run.reason}")
    return lines


def summary(results: list[EntryResult]) -> str:
    counts = {status: sum(result.status == status for result in results) for status in (RAN, FAILED, NOT_RUN)}
    return (
        f"neuron-migrate try: {len(results)} entry points: {counts[RAN]} ran, {counts[FAILED]} failed, "
        f"{counts[NOT_RUN]} not run"
    )
