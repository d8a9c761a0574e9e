"""`neuron-compat run --ray` on a real local Ray cluster (2 CPUs, started once for the module): the rows equal
the local runner's, crashes and lost workers are retried once, Ctrl-C cancels what is still running."""

from __future__ import annotations

import json
import signal
import sys
import time
from pathlib import Path

import psutil
import pytest
from click.testing import CliRunner

from commands.neuron_compat import main
from compat_matrix.ray_runner import RaySetupError, check_capacity, check_reachable, run_on_ray, task_options
from compat_matrix.runner import run_one_isolated
from compat_matrix.settings import ProbeSettings

ARCHS = [
    "llama"
]  # one of the fastest tiny architectures to probe on CPU (the interrupt test runs two tasks at once)
# Fields a probe decides; timings and memory differ from run to run.
DETERMINISTIC_FIELDS = (
    "model_type", "rank", "backend", "simulated", "verdict", "stage", "error", "compile_count",
    "recompile_count", "recompile_reasons", "graph_breaks", "graph_break_reasons", "unsupported_ops",
    "outputs_match", "tokens_match", "train_compile_count", "train_padded_lengths", "unique_graphs",
    "eager_new_op_signatures", "schema_version", "cause", "generate_verdict", "train_verdict",
    "compiled_generation", "recompiles_every_step", "attn_implementation", "dtype", "sim_device",
)  # fmt: skip
SIM = ProbeSettings(backend="neuron-sim")
CRASHING = ProbeSettings(backend="neuron-sim", self_signal=signal.SIGSEGV)


def deterministic(row: dict) -> dict:
    env = {key: row["env"][key] for key in ("torch", "transformers", "backend", "simulated", "settings_id")}
    return {name: row.get(name) for name in DETERMINISTIC_FIELDS} | {"env": env}


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


# --- without a cluster -----------------------------------------------------------------------------------


def test_without_ray_the_cli_says_how_to_install_it_and_exits_2(monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "ray", None)  # makes `import ray` raise ImportError
    output = tmp_path / "results.jsonl"
    result = CliRunner().invoke(
        main, ["run", "--ray", "--archs", "llama", "--backend", "neuron-sim", "-o", output]
    )
    assert result.exit_code == 2
    assert "pip install '.[ray]'" in result.output
    assert not output.exists()


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (["--cores-per-task", "2"], "--cores-per-task applies to --backend neuron or to Ray tasks"),
        (["--ray", "127.0.0.1:6379", "-j", "2"], "-j sizes a local Ray instance"),
    ],
)
def test_inconsistent_ray_options_exit_2_before_any_work(tmp_path, arguments, message):
    output = tmp_path / "results.jsonl"
    result = CliRunner().invoke(
        main, ["run", "--archs", "llama", "--backend", "neuron-sim", "-o", output, *arguments]
    )
    assert result.exit_code == 2 and message in result.output
    assert not output.exists()


def test_an_address_where_nothing_listens_exits_2_in_seconds(tmp_path):
    pytest.importorskip("ray")
    output = tmp_path / "results.jsonl"
    started = time.monotonic()
    result = CliRunner().invoke(
        main, ["run", "--ray", "127.0.0.1:1", "--archs", "llama", "--backend", "neuron-sim", "-o", output]
    )
    assert result.exit_code == 2 and "no Ray cluster answers at 127.0.0.1:1" in result.output
    assert "ray start --head" in result.output
    assert time.monotonic() - started < 30 and not output.exists()


@pytest.mark.parametrize("address", ["6379", "host:", "host:port"])
def test_a_malformed_address_is_refused(address):
    with pytest.raises(RaySetupError, match="expected HOST:PORT"):
        check_reachable(address)


def test_neuron_tasks_ask_for_neuron_cores_and_simulated_tasks_for_cpus():
    assert task_options("neuron", 4) == {"num_cpus": 1, "resources": {"neuron_cores": 4}, "max_calls": 1}
    assert task_options("neuron-sim", 2) == {"num_cpus": 2}


def test_capacity_check_needs_one_live_node_with_everything():
    trn = {"Alive": True, "Resources": {"CPU": 192.0, "neuron_cores": 64.0}}
    cpu_only = {"Alive": True, "Resources": {"CPU": 8.0}}
    dead_trn = {"Alive": False, "Resources": {"CPU": 192.0, "neuron_cores": 64.0}}
    check_capacity([cpu_only, trn], task_options("neuron", 8))
    check_capacity([cpu_only], task_options("neuron-sim", 8))
    with pytest.raises(
        RaySetupError, match=r"needs 1 CPU, 8 neuron_cores .*nodes offer: 8 CPU, 0 neuron_cores.*neuron-ls"
    ):
        check_capacity([cpu_only, dead_trn], task_options("neuron", 8))
    with pytest.raises(RaySetupError, match=r"needs 16 CPU .*Lower --cores-per-task"):
        check_capacity([cpu_only], task_options("neuron-sim", 16))


# --- on a real local cluster -----------------------------------------------------------------------------


def on_cluster(test):
    """Runs on the module's Ray cluster; every such test on one xdist worker, so one cluster serves them all."""
    return pytest.mark.ray(pytest.mark.slow(pytest.mark.xdist_group("ray")(test)))


@pytest.fixture(scope="module")
def cluster():
    ray = pytest.importorskip("ray")
    # Declared NeuronCores: Ray assigns them and sets NEURON_RT_VISIBLE_CORES exactly as on a Trainium node.
    ray.init(num_cpus=2, resources={"neuron_cores": 2}, include_dashboard=False, log_to_driver=False)
    yield ray
    ray.shutdown()


@pytest.fixture(scope="module")
def local_rows(tmp_path_factory) -> dict[str, dict]:
    """The local runner's rows for ARCHS, through the CLI."""
    output = tmp_path_factory.mktemp("local") / "results.jsonl"
    result = CliRunner().invoke(
        main, ["run", "--archs", ",".join(ARCHS), "--backend", "neuron-sim", "-o", output]
    )
    assert result.exit_code == 0, result.output
    return {row["model_type"]: row for row in read_jsonl(output)}


@on_cluster
def test_ray_rows_equal_the_local_runner_rows_and_stream_into_results(cluster, local_rows, tmp_path):
    output = tmp_path / "results.jsonl"
    result = CliRunner().invoke(
        main, ["run", "--ray", "--archs", ",".join(ARCHS), "--backend", "neuron-sim", "-o", output]
    )
    assert result.exit_code == 0, result.output
    ray_rows = read_jsonl(output)
    assert sorted(row["model_type"] for row in ray_rows) == sorted(ARCHS)
    for row in ray_rows:
        assert deterministic(row) == deterministic(local_rows[row["model_type"]])
    assert output.with_suffix(".csv").is_file()

    # The file is the local runner's format: --resume finds everything done and submits nothing.
    again = CliRunner().invoke(
        main,
        ["run", "--ray", "--resume", "--archs", ",".join(ARCHS), "--backend", "neuron-sim", "-o", output],
    )
    assert again.exit_code == 0, again.output
    assert f"{len(ARCHS)} architecture(s) already in {output}, skipped" in again.output
    assert read_jsonl(output) == ray_rows


@on_cluster
def test_a_crashing_probe_is_retried_once_then_recorded_like_the_local_runner(cluster):
    rows, notes = [], []
    run_on_ray(["llama"], CRASHING, rows.append, note=notes.append)
    [row] = rows
    local = run_one_isolated("llama", CRASHING)
    assert row["verdict"] == local["verdict"] == "crash"
    assert deterministic(row) == deterministic(local)
    assert "SIGSEGV" in row["error"]
    assert notes == [f"llama: crash ({row['error']}); retrying once"]


@on_cluster
def test_rows_measured_under_other_versions_are_kept_with_a_warning(cluster):
    def other_transformers(model_type, settings, threads):
        from compat_matrix.runner import run_one_isolated

        row = run_one_isolated(model_type, settings, threads)
        row["env"]["transformers"] = "4.0.0"  # as if this node had another Transformers installed
        return row

    rows, notes = [], []
    run_on_ray(["llama"], CRASHING, rows.append, probe=other_transformers, note=notes.append)
    assert [row["env"]["transformers"] for row in rows] == ["4.0.0"]
    assert "warning: llama ran under torch" in notes[-1] and "transformers 4.0.0" in notes[-1]
    assert "Install the same versions on every node" in notes[-1]


@on_cluster
def test_a_timeout_is_retried_once_then_recorded(cluster):
    rows, notes = [], []
    run_on_ray(["qwen2"], ProbeSettings(backend="neuron-sim", timeout_s=0.5), rows.append, note=notes.append)
    [row] = rows
    assert row["verdict"] == "timeout" and "--timeout 0.5 s" in row["error"]
    assert len(notes) == 1 and notes[0].startswith("qwen2: timeout")


@on_cluster
def test_a_lost_worker_is_retried_and_the_second_attempt_is_the_row(cluster, tmp_path):
    attempts = tmp_path / "attempts"

    def dies_first(model_type, settings, threads):
        import os

        from compat_matrix.runner import run_one_isolated

        with open(attempts, "a") as log:
            log.write(f"{os.getpid()}\n")
        if len(attempts.read_text().split()) == 1:
            os._exit(1)  # the Ray worker process itself dies
        return run_one_isolated(model_type, settings, threads)

    rows, notes = [], []
    run_on_ray(["llama"], CRASHING, rows.append, probe=dies_first, note=notes.append)
    [row] = rows
    assert len(attempts.read_text().split()) == 2
    assert notes[0].startswith("llama: crash (Ray worker lost (WorkerCrashedError)")
    assert "SIGSEGV" in row["error"]  # the retry's own outcome, not the lost worker


@on_cluster
def test_a_worker_lost_twice_is_recorded_as_crash(cluster):
    def always_dies(model_type, settings, threads):
        import os

        os._exit(1)

    rows, notes = [], []
    run_on_ray(["llama"], SIM, rows.append, probe=always_dies, note=notes.append)
    [row] = rows
    assert row["verdict"] == "crash" and row["error"].startswith("Ray worker lost (WorkerCrashedError)")
    assert row["env"]["settings_id"] == SIM.settings_id() and row["rank"] == 1
    assert len(notes) == 1


@on_cluster
def test_a_probe_that_raises_is_a_harness_error_and_not_retried(cluster):
    def raises(model_type, settings, threads):
        raise RuntimeError("harness bug")

    rows, notes = [], []
    run_on_ray(["llama"], SIM, rows.append, probe=raises, note=notes.append)
    [row] = rows
    assert row["verdict"] == "harness-error" and "harness bug" in row["error"]
    assert notes == []


@on_cluster
def test_interrupt_cancels_running_tasks_and_their_probe_processes(cluster, tmp_path):
    pid_file = tmp_path / "sleeper.pid"

    def probe(model_type, settings, threads):
        import subprocess
        import sys
        import time

        from compat_matrix.runner import run_one_isolated

        if model_type == "qwen2":  # stands in for a long probe: a child process that outlives the test
            child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"])
            with open(pid_file, "w") as out:
                out.write(str(child.pid))
            child.wait()
        while not pid_file.exists():
            time.sleep(0.1)
        return run_one_isolated(model_type, settings, threads)

    def interrupt_after_first_row(row):
        recorded.append(row)
        raise KeyboardInterrupt

    recorded = []
    with pytest.raises(KeyboardInterrupt):
        run_on_ray(["llama", "qwen2"], CRASHING, interrupt_after_first_row, probe=probe, note=lambda _: None)
    assert [row["model_type"] for row in recorded] == ["llama"]
    sleeper = int(pid_file.read_text())
    deadline = time.monotonic() + 20
    while psutil.pid_exists(sleeper) and psutil.Process(sleeper).status() != psutil.STATUS_ZOMBIE:
        assert time.monotonic() < deadline, "the cancelled task's child process is still running"
        time.sleep(0.2)


@on_cluster
def test_neuron_tasks_get_their_own_cores_and_a_fresh_worker_each(cluster, tmp_path):
    seen = tmp_path / "seen"

    def probe(model_type, settings, threads):
        import os

        from compat_matrix.runner import run_one_isolated

        with open(seen, "a") as log:
            log.write(f"{os.getpid()} {os.environ.get('NEURON_RT_VISIBLE_CORES')}\n")
        return run_one_isolated(model_type, settings, threads)

    rows = []
    neuron = ProbeSettings(backend="neuron", self_signal=signal.SIGSEGV)  # crashes before touching a device
    run_on_ray(["llama"], neuron, rows.append, cores_per_task=2, probe=probe, note=lambda _: None)
    [row] = rows
    assert row["backend"] == "neuron" and row["verdict"] == "crash" and "SIGSEGV" in row["error"]
    attempts = [line.split() for line in seen.read_text().splitlines()]
    assert [cores for _, cores in attempts] == ["0,1", "0,1"]
    assert attempts[0][0] != attempts[1][0]  # max_calls=1: the retry ran in a new worker process


@on_cluster
def test_neuron_tasks_no_node_can_hold_fail_fast(cluster):
    with pytest.raises(
        RaySetupError, match=r"needs 1 CPU, 3 neuron_cores .*nodes offer: 2 CPU, 2 neuron_cores"
    ):
        run_on_ray(["llama"], ProbeSettings(backend="neuron"), lambda row: None, cores_per_task=3)
