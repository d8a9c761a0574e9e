"""Isolation and scheduling.

``run_one_isolated(model_type, settings)`` runs one architecture in its own process with a timeout and a memory
watchdog and always returns a complete result row (a segfault, OOM or hang becomes that row's verdict).
``run_local(...)`` is the local scheduler: N of those at a time, rows appended as they finish; on the neuron
backend each of the N gets its own NeuronCores (``NEURON_RT_VISIBLE_CORES``).
"""

from __future__ import annotations

import datetime
import functools
import logging
import multiprocessing
import os
import queue
import resource
import signal
import threading
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor, as_completed
from typing import Any

import psutil

from compat_matrix.archs import ranks, support_of
from compat_matrix.checkpoints import config_choice
from compat_matrix.environment import run_env, simulated
from compat_matrix.families import (
    GENERATION_TASKS,
    TEXT_GENERATION,
    TEXT_TO_IMAGE,
    judged_stages,
    split_probe_name,
)
from compat_matrix.schema import Cause, Row, Verdict
from compat_matrix.settings import ProbeSettings

POLL_SECONDS = 0.1
# Simulator workers are forked from a server that has already imported torch and transformers (about 4 s
# saved per architecture) and warmed their caches with one probe (see worker_warmup); each child is still a
# fresh process that resets Dynamo before probing. The Neuron runtime refuses to initialise in a forked
# child, so neuron workers are spawned: each one imports everything itself.
_FORKSERVER = multiprocessing.get_context("forkserver")
_FORKSERVER.set_forkserver_preload(["compat_matrix.worker_warmup"])
_SPAWN = multiprocessing.get_context("spawn")
# Set by the scheduler on Ctrl-C: every waiting worker kills its child instead of recording a row.
_STOP = threading.Event()
# A spawned child takes os.environ as it is when it starts: one start at a time while it is set per worker.
_ENVIRON_LOCK = threading.Lock()


def _context(settings: ProbeSettings):
    return _SPAWN if settings.backend == "neuron" else _FORKSERVER


class Interrupted(Exception):
    """The run was stopped; the architecture has no row."""


def _child_main(model_type: str, settings: ProbeSettings, torch_threads: int, connection) -> None:
    import warnings

    import torch
    from transformers.utils import logging as transformers_logging

    # Library warnings from N workers would bury the progress bar; the row records what matters.
    warnings.simplefilter("ignore")
    transformers_logging.set_verbosity_error()
    logging.getLogger("torch._dynamo").setLevel(logging.ERROR)  # e.g. the recompile-limit warning

    torch.set_num_threads(torch_threads)
    if settings.backend != "neuron":
        # Hard backstop under the parent's resident-memory watchdog: address space beyond this fails to
        # allocate. Not on the device: the Neuron runtime and neuronx-cc reserve far more address space
        # than they use.
        address_space = psutil.Process().memory_info().vms + 2 * settings.memory_mb * 1024 * 1024
        resource.setrlimit(resource.RLIMIT_AS, (address_space, address_space))
    if settings.self_signal is not None:
        os.kill(os.getpid(), settings.self_signal)
    task = split_probe_name(model_type)[0]
    if task in GENERATION_TASKS:
        from compat_matrix.probes import probe_architecture as probe
    elif task == TEXT_TO_IMAGE:
        from compat_matrix.diffusion_probes import probe_diffusion as probe
    else:
        from compat_matrix.forward_probes import probe_forward as probe
    measured = probe(model_type, settings)
    measured["peak_rss_mb"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)
    connection.send(measured)
    connection.close()


def empty_measurement() -> dict[str, Any]:
    from compat_matrix.probes import initial_measurement

    return initial_measurement()


def verdict_fields(verdict: str | Verdict, error: str | None, task: str = TEXT_GENERATION) -> dict[str, Any]:
    """The verdict fields of a row the probes did not finish (timeout, crash, a harness error on Ray):
    no stage was measured to the end, and the error is the reason."""
    verdict = Verdict(verdict)
    cause = Cause.HARNESS if verdict is Verdict.HARNESS_ERROR else None
    stages = [f"{stage}_verdict" for stage in judged_stages(task)]
    return {"verdict": verdict, **dict.fromkeys(stages, verdict), "cause": cause, "reason": error}


def make_row(name: str, settings: ProbeSettings, measured: dict, verdict: dict | str, seconds: float,
             peak_rss_mb: float | None) -> dict[str, Any]:  # fmt: skip
    """The result row (``schema.Row``), its fields in their documented order.
    ``verdict`` is ``compat_matrix.verdict.decide_verdict``'s fields, or a bare verdict for a row the probes did
    not finish. ``name`` is the probe's (``families.probe_name``): a model type, or ``task/model_type``."""
    task, model_type = split_probe_name(name)
    inference, training = support_of(name)
    fields = verdict if isinstance(verdict, dict) else verdict_fields(verdict, measured.get("error"), task)
    data = {
        "model_type": model_type,
        "rank": ranks().get(model_type) if task == TEXT_GENERATION else None,
        "task": task,
        "backend": settings.backend,
        "simulated": simulated(settings),
        **fields,
        "dtype": settings.dtype,
        "sim_device": settings.sim_device if settings.backend == "neuron-sim" else None,
        "recompile_limit": settings.recompile_limit,
        "measured_at": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "seconds": round(seconds, 2),
        "peak_rss_mb": measured.get("peak_rss_mb", peak_rss_mb),
        "optimum_neuron_inference": inference,
        "optimum_neuron_training": training,
        **config_choice(model_type, settings.config).row_fields(),
    }
    for name, value in measured.items():
        data.setdefault(name, value)
    data["env"] = run_env(settings, task)
    return Row(**data).to_dict()  # a key the schema does not declare fails here (TypeError)


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
    ready = _FORKSERVER.Process(target=int)  # a no-op worker, forked once the server's preload is done
    ready.start()
    ready.join()
    return time.monotonic() - start


def run_one_isolated(
    model_type: str, settings: ProbeSettings, torch_threads: int = 1, visible_cores: str | None = None
) -> dict[str, Any]:
    """Probe one architecture in a fresh process; never raises for anything the architecture does.
    ``visible_cores`` (neuron backend): the NeuronCores this worker may use, as NEURON_RT_VISIBLE_CORES."""
    from compat_matrix.verdict import decide_verdict

    context = _context(settings)
    if context is _FORKSERVER:
        start_worker_server()
    receiver, sender = context.Pipe(duplex=False)
    process = context.Process(
        target=_child_main, args=(model_type, settings, torch_threads, sender), daemon=True
    )
    start = time.monotonic()
    with _ENVIRON_LOCK, _environ(NEURON_RT_VISIBLE_CORES=visible_cores):
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
        measured["neuron_visible_cores"] = visible_cores
        return make_row(model_type, settings, measured, decide_verdict(measured), seconds, peak_mb)
    failure = empty_measurement()
    if killed_for == "timeout":
        failure["error"] = f"no result within --timeout {settings.timeout_s:g} s; the process was killed"
        return make_row(model_type, settings, failure, Verdict.TIMEOUT, seconds, peak_mb)
    if killed_for == "memory":
        failure["error"] = f"resident memory above --memory-mb {settings.memory_mb}; the process was killed"
    else:
        failure["error"] = describe_exit(process.exitcode)
    return make_row(model_type, settings, failure, Verdict.CRASH, seconds, peak_mb)


def describe_exit(exitcode: int | None) -> str:
    if exitcode is not None and exitcode < 0:
        name = signal.Signals(-exitcode).name
        hint = " (likely out of memory: the kernel's OOM killer)" if name == "SIGKILL" else ""
        return f"worker killed by {name}{hint}"
    return f"worker exited with code {exitcode} before reporting a result"


class _environ:
    """Set (or, with None, leave alone) environment variables for the duration of a ``with``."""

    def __init__(self, **values: str | None):
        self.values = {name: value for name, value in values.items() if value is not None}
        self.saved: dict[str, str | None] = {}

    def __enter__(self):
        for name, value in self.values.items():
            self.saved[name] = os.environ.get(name)
            os.environ[name] = value

    def __exit__(self, *exc):
        for name, value in self.saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


class CorePartitionError(ValueError):
    """-j N workers cannot each get --cores-per-task NeuronCores on this host."""


def partition_cores(device_count: int, jobs: int, cores_per_task: int) -> list[str]:
    """One NEURON_RT_VISIBLE_CORES range per local worker: worker i gets cores [i*c, (i+1)*c)."""
    if jobs * cores_per_task > device_count:
        raise CorePartitionError(
            f"-j {jobs} workers x --cores-per-task {cores_per_task} need {jobs * cores_per_task} NeuronCores; "
            f"this host has {device_count}. Lower -j or --cores-per-task."
        )
    ranges = []
    for worker in range(jobs):
        first, last = worker * cores_per_task, (worker + 1) * cores_per_task - 1
        ranges.append(str(first) if first == last else f"{first}-{last}")
    return ranges


def neuron_core_count() -> int:
    """NeuronCores visible to this process (torch_neuronx registers torch.neuron)."""
    import torch
    import torch_neuronx  # noqa: F401

    return int(torch.neuron.device_count())


def run_local(
    model_types: Iterable[str],
    settings: ProbeSettings,
    jobs: int,
    on_row: Callable[[dict], None],
    cores_per_task: int = 1,
) -> None:
    """Local scheduler: ``jobs`` isolated workers at a time; ``on_row`` gets each row as soon as it is done
    (in the calling thread, so it may write files and update progress without locks). On the neuron backend
    each worker slot owns ``cores_per_task`` NeuronCores of its own."""
    torch_threads = max(1, (os.cpu_count() or 1) // jobs)
    _STOP.clear()
    slots: queue.Queue[str | None] = queue.Queue()
    if settings.backend == "neuron":
        for cores in partition_cores(neuron_core_count(), jobs, cores_per_task):
            slots.put(cores)
    else:
        start_worker_server()  # here, not in the worker threads: they would each start a no-op process at once
        for _ in range(jobs):
            slots.put(None)

    def in_a_slot(model_type: str) -> dict[str, Any]:
        cores = slots.get()
        try:
            return run_one_isolated(model_type, settings, torch_threads, cores)
        finally:
            slots.put(cores)

    with ThreadPoolExecutor(max_workers=jobs) as pool:
        futures = [pool.submit(in_a_slot, model_type) for model_type in model_types]
        try:
            for future in as_completed(futures):
                on_row(future.result())
        except BaseException:
            _STOP.set()
            for future in futures:
                future.cancel()
            raise
