"""Isolation and scheduling.

``run_one_isolated(model_type, settings)`` runs one architecture in its own process with a timeout and a memory
cap and always returns a complete result row (a segfault, OOM or hang becomes that row's verdict).
``run_local(...)`` is the local scheduler: N of those at a time, rows appended as they finish.
"""

from __future__ import annotations

import functools
import multiprocessing
import os
import resource
import signal
import threading
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor, as_completed
from typing import Any

import psutil

from compat_matrix.archs import optimum_neuron_support, ranks
from compat_matrix.environment import run_env
from compat_matrix.settings import ProbeSettings

POLL_SECONDS = 0.1
# Children are forked from a server that has already imported torch and transformers (about 4 s saved per
# architecture) and warmed their caches with one probe (see worker_warmup); each child is still a fresh
# process that resets Dynamo before probing.
_CONTEXT = multiprocessing.get_context("forkserver")
_CONTEXT.set_forkserver_preload(["compat_matrix.worker_warmup"])
# Set by the scheduler on Ctrl-C: every waiting worker kills its child instead of recording a row.
_STOP = threading.Event()


class Interrupted(Exception):
    """The run was stopped; the architecture has no row."""


def _child_main(model_type: str, settings: ProbeSettings, torch_threads: int, connection) -> None:
    import warnings

    import torch
    from transformers.utils import logging as transformers_logging

    # Library warnings from N workers would bury the progress bar; the row records what matters.
    warnings.simplefilter("ignore")
    transformers_logging.set_verbosity_error()

    torch.set_num_threads(torch_threads)
    # Hard backstop under the parent's resident-memory watchdog: address space beyond this fails to allocate.
    address_space = psutil.Process().memory_info().vms + 2 * settings.memory_mb * 1024 * 1024
    resource.setrlimit(resource.RLIMIT_AS, (address_space, address_space))
    if settings.self_signal is not None:
        os.kill(os.getpid(), settings.self_signal)
    from compat_matrix.probes import probe_architecture

    measured = probe_architecture(model_type, settings)
    measured["peak_rss_mb"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)
    connection.send(measured)
    connection.close()


def empty_measurement() -> dict[str, Any]:
    return {
        "stage": None, "error": None, "compile_count": None, "recompile_count": None, "recompile_reasons": [],
        "graph_breaks": None, "graph_break_reasons": [], "unsupported_ops": [], "outputs_match": None,
        "tokens_match": None, "max_logit_diff": None, "train_compile_count": None, "train_padded_lengths": [],
        "unique_graphs": None, "eager_new_op_signatures": None, "probe_seconds": {},
    }  # fmt: skip


def make_row(model_type: str, settings: ProbeSettings, measured: dict, verdict: str, seconds: float,
             peak_rss_mb: float | None) -> dict[str, Any]:  # fmt: skip
    """The result row: the contract's fields first, in their documented order, then the extra measurements."""
    inference, training = optimum_neuron_support().get(model_type, (None, None))
    row = {
        "model_type": model_type,
        "rank": ranks().get(model_type),
        "backend": settings.backend,
        "simulated": settings.backend == "neuron-sim",
        "verdict": verdict,
    }
    measured = dict(measured)
    for name in ("stage", "error", "compile_count", "recompile_count", "recompile_reasons", "graph_breaks",
                 "graph_break_reasons", "unsupported_ops", "outputs_match", "train_compile_count"):  # fmt: skip
        row[name] = measured.pop(name)
    row["seconds"] = round(seconds, 2)
    row["peak_rss_mb"] = measured.pop("peak_rss_mb", peak_rss_mb)
    row["optimum_neuron_inference"] = inference
    row["optimum_neuron_training"] = training
    row.update(measured)
    row["env"] = run_env(settings)
    return row


def _tree_rss(process: psutil.Process) -> int:
    try:
        return process.memory_info().rss + sum(c.memory_info().rss for c in process.children(recursive=True))
    except psutil.Error:
        return 0


@functools.cache
def start_worker_server() -> float:
    """Start the server workers fork from and wait until it serves (it imports torch and transformers and runs
    its warm-up probe, once per process); the seconds it took. No row's time includes it."""
    start = time.monotonic()
    ready = _CONTEXT.Process(target=int)  # a no-op worker, forked once the server's preload is done
    ready.start()
    ready.join()
    return time.monotonic() - start


def run_one_isolated(model_type: str, settings: ProbeSettings, torch_threads: int = 1) -> dict[str, Any]:
    """Probe one architecture in a fresh process; never raises for anything the architecture does."""
    from compat_matrix.probes import decide_verdict

    start_worker_server()
    receiver, sender = _CONTEXT.Pipe(duplex=False)
    process = _CONTEXT.Process(
        target=_child_main, args=(model_type, settings, torch_threads, sender), daemon=True
    )
    start = time.monotonic()
    process.start()
    sender.close()
    watched = psutil.Process(process.pid)
    peak_rss = 0
    measured: dict[str, Any] | None = None
    killed_for: str | None = None
    while measured is None and killed_for is None:
        if receiver.poll(POLL_SECONDS):
            try:
                measured = receiver.recv()
            except EOFError:  # the child died before sending its row
                break
            continue
        if not process.is_alive():
            break
        peak_rss = max(peak_rss, _tree_rss(watched))
        if peak_rss > settings.memory_mb * 1024 * 1024:
            killed_for = "memory"
        elif time.monotonic() - start > settings.timeout_s:
            killed_for = "timeout"
        elif _STOP.is_set():
            killed_for = "interrupted"
    if killed_for:
        process.kill()
    process.join(timeout=30)
    receiver.close()
    if killed_for == "interrupted":
        raise Interrupted(model_type)
    seconds = time.monotonic() - start
    peak_mb = round(peak_rss / 2**20, 1) if peak_rss else None
    if measured is not None:
        return make_row(model_type, settings, measured, decide_verdict(measured), seconds, peak_mb)
    failure = empty_measurement()
    if killed_for == "timeout":
        failure["error"] = f"no result within --timeout {settings.timeout_s:g} s; the process was killed"
        return make_row(model_type, settings, failure, "timeout", seconds, peak_mb)
    if killed_for == "memory":
        failure["error"] = f"resident memory above --memory-mb {settings.memory_mb}; the process was killed"
    else:
        failure["error"] = describe_exit(process.exitcode)
    return make_row(model_type, settings, failure, "crash", seconds, peak_mb)


def describe_exit(exitcode: int | None) -> str:
    if exitcode is not None and exitcode < 0:
        name = signal.Signals(-exitcode).name
        hint = " (likely out of memory: the kernel's OOM killer)" if name == "SIGKILL" else ""
        return f"worker killed by {name}{hint}"
    return f"worker exited with code {exitcode} before reporting a result"


def run_local(
    model_types: Iterable[str],
    settings: ProbeSettings,
    jobs: int,
    on_row: Callable[[dict], None],
) -> None:
    """Local scheduler: ``jobs`` isolated workers at a time; ``on_row`` gets each row as soon as it is done
    (in the calling thread, so it may write files and update progress without locks)."""
    torch_threads = max(1, (os.cpu_count() or 1) // jobs)
    _STOP.clear()
    start_worker_server()  # here, not in the worker threads: they would each start a no-op process at once
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        futures = [
            pool.submit(run_one_isolated, model_type, settings, torch_threads) for model_type in model_types
        ]
        try:
            for future in as_completed(futures):
                on_row(future.result())
        except BaseException:
            _STOP.set()
            for future in futures:
                future.cancel()
            raise
