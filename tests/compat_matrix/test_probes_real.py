"""Every probe and every verdict on real tiny architectures, each in its own isolated worker."""

import dataclasses
import signal

import pytest

from compat_matrix.runner import run_one_isolated

pytestmark = pytest.mark.slow


def test_llama_works_and_every_probe_reports(settings):
    row = run_one_isolated("llama", settings)
    assert row["verdict"] == "works", row["error"]
    assert (row["rank"], row["simulated"], row["stage"], row["error"]) == (1, True, None, None)
    # b. compiled generation through Transformers' CompileConfig: the decode step compiles once for both prompts.
    assert (row["compile_count"], row["recompile_count"], row["graph_breaks"], row["unique_graphs"]) == (
        1,
        0,
        0,
        1,
    )
    # The uncompiled prefill is TorchNeuron eager mode: the second prompt length brings new op signatures.
    assert row["eager_new_op_signatures"] > 0
    # c. outputs match the eager reference.
    assert row["outputs_match"] and row["tokens_match"] and row["max_logit_diff"] < row["logit_tolerance"]
    # d. training pads to multiples of 128 and compiles once per distinct padded length.
    assert row["train_padded_lengths"] == [128, 256]
    assert row["train_compile_count"] == row["train_expected_compile_count"] == 2
    # e. wall time per probe, and the worker's peak memory.
    assert set(row["probe_seconds"]) >= {"eager", "generate", "train"}
    assert row["seconds"] >= sum(row["probe_seconds"].values()) and row["peak_rss_mb"] > 100
    assert (row["optimum_neuron_inference"], row["optimum_neuron_training"]) == (True, True)


def test_gemma2_recompiles_and_is_a_caveat(settings):
    # One training length is enough here (llama covers the per-length count); it halves the training compiles.
    row = run_one_isolated("gemma2", dataclasses.replace(settings, train_lengths=(100,)))
    assert row["verdict"] == "works-with-caveats", row["error"]
    assert row["recompile_count"] > 0 and row["compile_count"] == row["recompile_count"] + 1
    assert len(row["recompile_reasons"]) == row["recompile_count"]
    assert all("past_key_values" in reason for reason in row["recompile_reasons"])  # the sliding-window guard
    assert row["outputs_match"]


def test_cpmant_fails_generation_with_a_static_cache(settings):
    # CPM-Ant prepends its learned prompt tokens, so the static cache sized for the prompts overflows.
    row = run_one_isolated("cpmant", settings)
    assert (row["verdict"], row["stage"]) == ("fails", "generate")
    assert row["error"].startswith("IndexError: index_copy_(): index 32 is out of bounds")
    assert row["compile_count"] is None and row["train_compile_count"] is None


def test_unbuildable_tiny_model_is_a_harness_error_not_a_failure(settings):
    row = run_one_isolated("musicgen", settings)
    assert (row["verdict"], row["stage"]) == ("harness-error", "build")
    assert row["error"].startswith("AttributeError")


def test_hang_becomes_timeout(settings):
    row = run_one_isolated("llama", dataclasses.replace(settings, timeout_s=2))
    assert row["verdict"] == "timeout" and "--timeout 2" in row["error"]
    assert 2 <= row["seconds"] < 30


def test_segfault_becomes_crash(settings):
    row = run_one_isolated("llama", dataclasses.replace(settings, self_signal=signal.SIGSEGV))
    assert row["verdict"] == "crash" and row["error"] == "worker killed by SIGSEGV"


def test_memory_cap_kills_the_worker(settings):
    row = run_one_isolated("llama", dataclasses.replace(settings, memory_mb=100))
    assert row["verdict"] == "crash" and "--memory-mb 100" in row["error"]


COLD_PROBE = """
import json, sys, warnings
warnings.simplefilter("ignore")
import torch
torch.set_num_threads(1)  # as run_one_isolated's worker: reductions sum in the same order
from compat_matrix.probes import probe_architecture
from compat_matrix.settings import ProbeSettings
fields = json.loads(sys.argv[2])
settings = ProbeSettings(**{k: tuple(v) if isinstance(v, list) else v for k, v in fields.items()})
print(json.dumps(probe_architecture(sys.argv[1], settings)))
"""


def test_warmed_worker_server_measures_the_same_as_a_cold_process(settings):
    """Workers fork from a server that probed llama once (worker_warmup): only speed may differ."""
    import json
    import subprocess
    import sys

    settings = dataclasses.replace(settings, train_lengths=(100,))  # one training compile is enough here
    cold_run = subprocess.run(
        [sys.executable, "-c", COLD_PROBE, "ctrl", json.dumps(dataclasses.asdict(settings))],
        capture_output=True,
        text=True,
        check=True,
    )
    cold = json.loads(cold_run.stdout.strip().splitlines()[-1])
    warm = run_one_isolated("ctrl", settings)
    timing = {"probe_seconds", "traceback_tail", "peak_rss_mb"}
    assert cold["graph_breaks"] > 0  # an architecture with something to count
    assert {k: v for k, v in cold.items() if k not in timing} == {k: warm[k] for k in cold if k not in timing}
