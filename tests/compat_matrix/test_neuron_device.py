"""The real-device path (backend ``neuron``) against a fake ``torch_neuronx`` module: explicit import in the
worker, the device resolved inside the probe's error handling, NeuronCores partitioned across -j workers,
spawned workers without an address-space limit, the Neuron environment on the row, fallback ops read from
torch_neuronx, and clear CLI errors. No Trainium is needed; what the fake cannot show (a compile on the device)
is not claimed here; test_standin.py runs the same path end to end against the neuron stand-in."""

import json
import resource
import sys
import textwrap
import threading
import time

import pytest
import torch
from click.testing import CliRunner

from commands import neuron_compat as cli
from compat_matrix import runner
from compat_matrix.environment import neuron_device_available, run_env
from compat_matrix.probe_device import DeviceUnavailable, device_fallback_ops, resolve_device
from compat_matrix.probes import probe_architecture
from compat_matrix.settings import ProbeSettings

FAKE_TORCH_NEURONX = """
import json, os, resource
import torch

__version__ = "2.14.0-fake"
torch.neuron = type("neuron", (), {{"device_count": staticmethod(lambda: {cores})}})
log = os.environ.get("FAKE_NEURON_LOG")
if log:  # what the worker that imported us sees
    with open(log, "a") as handle:
        handle.write(json.dumps({{
            "visible_cores": os.environ.get("NEURON_RT_VISIBLE_CORES"),
            "address_space_unlimited": resource.getrlimit(resource.RLIMIT_AS)[0] == resource.RLIM_INFINITY,
        }}) + "\\n")


def get_fallback_ops():
    return ["aten::nonzero", "aten::_local_scalar_dense"]


def get_dynamo_metrics():  # a list of per-graph NeuronCompilationMetrics on the device
    return []
"""


@pytest.fixture
def fake_neuronx(tmp_path, monkeypatch):
    """Installs a fake torch_neuronx with N NeuronCores for this process and the workers it spawns."""

    def install(cores: int):
        package = tmp_path / f"fake{cores}"
        package.mkdir()
        (package / "torch_neuronx.py").write_text(textwrap.dedent(FAKE_TORCH_NEURONX.format(cores=cores)))
        monkeypatch.syspath_prepend(str(package))
        monkeypatch.setenv("PYTHONPATH", f"{package}:{sys.path[1] if len(sys.path) > 1 else ''}")
        monkeypatch.delitem(sys.modules, "torch_neuronx", raising=False)
        monkeypatch.delattr(torch, "neuron", raising=False)
        return package

    yield install
    sys.modules.pop("torch_neuronx", None)
    if hasattr(torch, "neuron"):
        del torch.neuron


NEURON = ProbeSettings(backend="neuron", timeout_s=300)


def test_a_device_is_available_only_with_neuron_cores(fake_neuronx):
    fake_neuronx(0)
    assert not neuron_device_available()
    sys.modules.pop("torch_neuronx")
    fake_neuronx(2)
    assert neuron_device_available()


def test_the_worker_imports_torch_neuronx_itself_and_a_missing_device_is_a_row_not_a_crash(fake_neuronx):
    fake_neuronx(0)
    with pytest.raises(DeviceUnavailable, match="sees no Neuron device"):
        resolve_device(NEURON)
    assert "torch_neuronx" in sys.modules
    row = probe_architecture("llama", NEURON)
    assert (row["stage"], row["generate_failure"]["cause"]) == ("build", "harness")
    assert "the worker cannot use the device" in row["generate_failure"]["reason"]


def test_fallback_ops_are_read_from_torch_neuronx(fake_neuronx):
    fake_neuronx(2)
    assert device_fallback_ops(NEURON) == ["aten::_local_scalar_dense", "aten::nonzero"]


def test_the_row_env_names_the_neuron_variables_but_not_the_per_worker_cores(fake_neuronx, monkeypatch):
    fake_neuronx(2)
    monkeypatch.setenv("NEURON_COMPILE_CACHE_URL", "/fsx/neuron-cache")
    monkeypatch.setenv("NEURON_RT_VISIBLE_CORES", "0-1")
    env = run_env(NEURON)
    assert env["torch_neuronx"] == "2.14.0-fake"
    assert env["neuron_env"]["NEURON_COMPILE_CACHE_URL"] == "/fsx/neuron-cache"
    assert "NEURON_RT_VISIBLE_CORES" not in env["neuron_env"]


@pytest.mark.parametrize(
    ("cores", "jobs", "per_task", "ranges"),
    [(2, 2, 1, ["0", "1"]), (8, 2, 2, ["0-1", "2-3"]), (8, 4, 2, ["0-1", "2-3", "4-5", "6-7"])],
)
def test_neuron_cores_are_partitioned_across_workers(cores, jobs, per_task, ranges):
    assert runner.partition_cores(cores, jobs, per_task) == ranges


def test_more_cores_than_the_host_has_is_refused():
    with pytest.raises(runner.CorePartitionError, match="need 6 NeuronCores; this host has 4"):
        runner.partition_cores(4, 3, 2)


def test_concurrent_local_workers_never_share_cores(fake_neuronx, monkeypatch):
    fake_neuronx(4)
    running: set[str] = set()
    overlaps = []
    lock = threading.Lock()

    def probe(model_type, settings, threads, cores):
        with lock:
            overlaps.append(cores in running)
            running.add(cores)
        time.sleep(0.05)
        with lock:
            running.discard(cores)
        return {"model_type": model_type, "cores": cores}

    monkeypatch.setattr(runner, "run_one_isolated", probe)
    rows = []
    runner.run_local([f"arch{i}" for i in range(8)], NEURON, jobs=2, on_row=rows.append, cores_per_task=2)
    assert len(rows) == 8 and not any(overlaps)
    assert {row["cores"] for row in rows} == {"0-1", "2-3"}


def test_neuron_workers_are_spawned_with_their_cores_and_no_address_space_limit(
    fake_neuronx, tmp_path, monkeypatch
):
    fake_neuronx(0)  # the worker starts, imports torch_neuronx, finds no device: a row, quickly
    log = tmp_path / "worker.jsonl"
    monkeypatch.setenv("FAKE_NEURON_LOG", str(log))
    assert runner._context(NEURON) is runner._SPAWN
    assert runner._context(ProbeSettings()) is runner._FORKSERVER
    row = runner.run_one_isolated("llama", NEURON, visible_cores="2-3")
    assert (row["verdict"], row["cause"]) == ("harness-error", "harness")
    assert row["neuron_visible_cores"] == "2-3" and row["env"]["backend"] == "neuron"
    seen = [json.loads(line) for line in log.read_text().splitlines()]
    # The worker's own import (the parent imports the fake too, for the row's env, without the cores).
    assert {"visible_cores": "2-3", "address_space_unlimited": True} in seen
    assert resource.getrlimit(resource.RLIMIT_AS)[0] == resource.RLIM_INFINITY


def invoke(*args):
    return CliRunner().invoke(cli.main, list(args), catch_exceptions=False)


def test_cli_refuses_more_workers_than_neuron_cores(fake_neuronx, tmp_path):
    fake_neuronx(2)
    result = invoke(
        "run", "--archs", "llama", "--backend", "neuron", "-j", "3", "-o", str(tmp_path / "r.jsonl")
    )
    assert result.exit_code == 2 and "need 3 NeuronCores; this host has 2" in result.output
    assert not (tmp_path / "r.jsonl").exists()


def test_cli_gives_neuron_a_longer_timeout_and_cores_per_worker(fake_neuronx, tmp_path, monkeypatch):
    fake_neuronx(4)
    seen = {}

    def record(todo, settings, schedule, output, existing):
        seen.update(settings=settings, schedule=schedule)

    monkeypatch.setattr(cli, "run_and_record", record)
    result = invoke("run", "--archs", "llama", "--backend", "neuron", "-j", "2", "--cores-per-task", "2",
                    "-o", str(tmp_path / "r.jsonl"))  # fmt: skip
    assert result.exit_code == 0, result.output
    assert seen["settings"].timeout_s == 3600 and seen["settings"].backend == "neuron"
    assert seen["schedule"].keywords == {"jobs": 2, "cores_per_task": 2}
    assert "NEURON_RT_VISIBLE_CORES 0-1, 2-3" in result.output
