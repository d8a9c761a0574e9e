"""The matrix on a Ray cluster: one Ray task per architecture, each running the local runner's isolated probe
(``runner.run_one_isolated``), so both schedulers share one probe code path and produce the same rows.

Rows stream back as tasks finish and go to the same ``on_row`` callback as the local scheduler's (the CLI
appends each one to results.jsonl at once). A task whose Ray worker dies, or whose probe crashes or times out,
runs once more and the second outcome is the row. On Ctrl-C every queued or running task is cancelled (Ray
kills the worker and the probe processes under it) and the interrupt goes on to the caller, so the rows
already recorded stay and ``--resume`` picks up the rest.

Ray is an optional extra: it is imported only when a Ray run starts.
"""

from __future__ import annotations

import logging
import socket
import sys
import time
from collections.abc import Callable, Iterable
from typing import Any

from compat_matrix.environment import run_env
from compat_matrix.runner import empty_measurement, make_row, run_one_isolated
from compat_matrix.schema import Verdict
from compat_matrix.settings import ProbeSettings

LOCAL = "local"  # ray.init's word for "start a new local instance, even if one is running"
# The resource Ray's Neuron accelerator manager registers on Trainium/Inferentia nodes (neuron-ls nc_count).
NEURON_CORES = "neuron_cores"
RETRIED_VERDICTS = frozenset({Verdict.CRASH, Verdict.TIMEOUT})
INSTALL_HINT = "pip install '.[ray]'  (from a checkout; or: pip install 'neuron-migrate[ray]')"


class RaySetupError(Exception):
    """Ray is missing, unreachable, or no node has what one task needs; the CLI prints it and exits 2."""


def import_ray():
    try:
        import ray
    except ImportError:
        raise RaySetupError(f"--ray needs Ray, an optional extra: {INSTALL_HINT}") from None
    return ray


def task_options(backend: str, cores_per_task: int) -> dict[str, Any]:
    """What one architecture asks the scheduler for: NeuronCores on the device, CPUs on the simulator."""
    if backend == "neuron":
        # Ray sets NEURON_RT_VISIBLE_CORES in the worker for each task and the probe process is spawned
        # from it with that environment; one task per worker process keeps Ray's Neuron runtime state
        # from one task out of the next.
        return {"num_cpus": 1, "resources": {NEURON_CORES: cores_per_task}, "max_calls": 1}
    return {"num_cpus": cores_per_task}


def _needs(options: dict[str, Any]) -> dict[str, float]:
    return {"CPU": options["num_cpus"], **options.get("resources", {})}


def check_capacity(nodes: list[dict], options: dict[str, Any]) -> None:
    """Fail fast instead of queueing forever: some live node must hold everything one task asks for."""
    needs = _needs(options)
    alive = [node.get("Resources", {}) for node in nodes if node.get("Alive")]
    if any(all(resources.get(name, 0) >= amount for name, amount in needs.items()) for resources in alive):
        return
    asked = ", ".join(f"{amount:g} {name}" for name, amount in needs.items())
    offered = "; ".join(
        ", ".join(f"{resources.get(name, 0):g} {name}" for name in needs) for resources in alive
    )
    hint = (
        " Ray finds NeuronCores with /opt/aws/neuron/bin/neuron-ls on each node; run `ray start` on the Trainium "
        "instances themselves, or lower --cores-per-task."
        if NEURON_CORES in needs
        else " Lower --cores-per-task or add nodes."
    )
    raise RaySetupError(
        f"no Ray node can run a task that needs {asked} (nodes offer: {offered or 'none'}).{hint}"
    )


START_HINT = (
    "Start it with `ray start --head` on one node and `ray start --address HEAD_IP:6379` on the others, then "
    "pass HEAD_IP:6379 (or `auto` on a cluster node)."
)


def check_reachable(address: str, timeout_s: float = 5.0) -> None:
    """A HOST:PORT nobody listens on makes ray.init wait for minutes; a plain TCP connect fails in seconds."""
    host, _, port = address.removeprefix("ray://").rpartition(":")
    if not host or not port.isdigit():
        raise RaySetupError(f"--ray {address!r}: expected HOST:PORT (for example 10.0.0.5:6379) or auto")
    try:
        socket.create_connection((host, int(port)), timeout=timeout_s).close()
    except OSError as error:
        raise RaySetupError(f"no Ray cluster answers at {address} ({error}). {START_HINT}") from None


def connect(ray, address: str, local_cpus: int | None) -> None:
    quiet = {"log_to_driver": False, "logging_level": logging.WARNING}
    try:
        if address == LOCAL:
            ray.init(address=LOCAL, num_cpus=local_cpus, include_dashboard=False, **quiet)
        else:
            ray.init(address=address, **quiet)
    except (ConnectionError, ValueError) as error:
        raise RaySetupError(
            f"cannot connect to the Ray cluster at {address!r}: {error}. {START_HINT}"
        ) from None


def _probe_on_worker(
    probe: Callable[..., dict], model_type: str, settings: ProbeSettings, threads: int
) -> dict:
    return probe(model_type, settings, threads)


def _worker_lost_row(model_type: str, settings: ProbeSettings, error: Exception, seconds: float) -> dict:
    failure = empty_measurement()
    first_line = str(error).strip().splitlines()[0] if str(error).strip() else ""
    failure["error"] = f"Ray worker lost ({type(error).__name__}): {first_line}"[:500]
    return make_row(model_type, settings, failure, Verdict.CRASH, seconds, None)


def _harness_error_row(model_type: str, settings: ProbeSettings, error: Exception, seconds: float) -> dict:
    failure = empty_measurement()
    failure["error"] = f"the probe raised on the Ray worker: {error}".strip()[:500]
    return make_row(model_type, settings, failure, Verdict.HARNESS_ERROR, seconds, None)


def _versions(env: dict) -> tuple:
    return env["torch"], env["transformers"]


def _note(text: str) -> None:
    from tqdm import tqdm

    tqdm.write(text, file=sys.stderr)  # above the CLI's progress bar, not through it


def run_on_ray(
    model_types: Iterable[str],
    settings: ProbeSettings,
    on_row: Callable[[dict], None],
    *,
    address: str = LOCAL,
    cores_per_task: int = 1,
    local_tasks: int | None = None,
    probe: Callable[..., dict] = run_one_isolated,
    note: Callable[[str], None] = _note,
) -> None:
    """One Ray task per architecture; ``on_row`` gets each final row in this thread as soon as it is known.

    ``address``: ``local`` starts a private instance with room for ``local_tasks`` tasks (default: every
    CPU); ``auto`` or ``HOST:PORT`` joins a running cluster; a process already connected to Ray uses that
    connection instead. ``probe`` is the per-architecture function (the local runner's, by default). The
    ``seconds`` of a row made here for a lost worker count from submission, queueing included.
    """
    model_types = list(model_types)
    if not model_types:  # e.g. --resume with every row already written: no cluster to start
        return
    ray = import_ray()
    from ray.exceptions import RayTaskError, TaskCancelledError

    options = task_options(settings.backend, cores_per_task)
    # A caller already connected (a notebook, the tests' module cluster) keeps its connection and cluster.
    owns_connection = not ray.is_initialized()
    if owns_connection:
        local_cpus = local_tasks * options["num_cpus"] if local_tasks else None
        connect(ray, address, local_cpus)
    pending: dict[Any, tuple[str, int, float]] = {}  # object ref -> (model_type, attempt, submitted at)
    driver_versions = _versions(run_env(settings))
    foreign_versions: set[tuple] = set()
    try:
        check_capacity(ray.nodes(), options)
        # Retries are ours (once, also for crash/timeout rows), so Ray's own are off.
        task = ray.remote(max_retries=0, retry_exceptions=False, **options)(_probe_on_worker)

        def submit(model_type: str, attempt: int) -> None:
            ref = task.remote(probe, model_type, settings, options["num_cpus"])
            pending[ref] = (model_type, attempt, time.monotonic())

        for model_type in model_types:
            submit(model_type, 1)
        while pending:
            [ref], _ = ray.wait(list(pending), num_returns=1)
            model_type, attempt, submitted = pending.pop(ref)
            try:
                row = ray.get(ref)
            except TaskCancelledError:
                raise
            except RayTaskError as error:  # the probe function itself raised: a harness bug, not the model
                row = _harness_error_row(
                    model_type, settings, error.cause or error, time.monotonic() - submitted
                )
            except ray.exceptions.RayError as error:  # worker process, node or its object lost
                row = _worker_lost_row(model_type, settings, error, time.monotonic() - submitted)
            if row["verdict"] in RETRIED_VERDICTS and attempt == 1:
                note(f"{model_type}: {row['verdict']} ({row['error']}); retrying once")
                submit(model_type, 2)
                continue
            on_row(row)
            if _versions(row["env"]) not in (driver_versions, *foreign_versions):
                foreign_versions.add(_versions(row["env"]))
                note(
                    f"warning: {model_type} ran under torch {row['env']['torch']}, transformers "
                    f"{row['env']['transformers']}, but this driver has torch {driver_versions[0]}, transformers "
                    f"{driver_versions[1]}: those rows form a separate column and --resume will not count them. "
                    "Install the same versions on every node."
                )
    finally:
        for ref in pending:
            ray.cancel(ref, force=True)
        if owns_connection:
            ray.shutdown()
