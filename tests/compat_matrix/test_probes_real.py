"""Every probe and every verdict on real tiny architectures, each in its own isolated worker."""

import dataclasses
import signal

import pytest

from compat_matrix.runner import run_one_isolated
from compat_matrix.schema import GENERATION_COMPILE_FIGURES, SCHEMA_VERSION, Row

pytestmark = pytest.mark.slow


def test_llama_works_and_every_probe_reports(settings):
    row = run_one_isolated("llama", settings)
    assert row["verdict"] == "works", (row["generate_reason"], row["train_reason"])
    assert (row["rank"], row["simulated"], row["stage"], row["error"], row["cause"], row["reason"]) == (
        1, True, None, None, None, None)  # fmt: skip
    assert (row["generate_verdict"], row["train_verdict"], row["schema_version"]) == (
        "works",
        "works",
        SCHEMA_VERSION,
    )
    assert (row["generate_reason"], row["train_reason"], row["recompile_limit"]) == (None, None, 8)
    # Every key the probes wrote is a declared field of the schema, in its order (nothing beside it).
    assert list(row) == list(Row.field_names())
    # Built from Llama-3.1-8B-Instruct's code-path values (its llama3 rope scaling), and the row says so.
    assert (row["config_source"], row["checkpoint"]) == ("checkpoint", "meta-llama/Llama-3.1-8B-Instruct")
    assert row["checkpoint_values"]["rope_scaling"]["rope_type"] == "llama3"
    # Training evidence: one recompile per new padded length, none for other tokens at the same length.
    assert row["train_content_compiles"] == 0 and row["train_graph_break_reasons"] == []
    # The code path a user's model takes: attention as Transformers chooses it, the run's dtype.
    assert (row["attn_implementation"], row["dtype"], row["sim_device"]) == ("sdpa", "float32", "cpu")
    # b. compiled generation through Transformers' CompileConfig: the decode step compiles once for both
    # prompts and all 32 new tokens.
    assert (row["compile_count"], row["recompile_count"], row["graph_breaks"], row["unique_graphs"]) == (
        1,
        0,
        0,
        1,
    )
    assert row["compiled_generation"] is True and row["recompiles_every_step"] is False
    # The uncompiled prefill is TorchNeuron eager mode: the second prompt length brings new op signatures.
    assert row["eager_new_op_signatures"] > 0
    # c. three-way compare: eager static and compiled static against the eager dynamic reference.
    assert row["outputs_match"] and row["tokens_match"]
    assert row["max_diff_static_vs_dynamic"] < row["logit_tolerance"] == 1e-4
    assert row["max_diff_compiled_vs_dynamic"] < row["logit_tolerance"]
    # d. training pads to multiples of 128 and compiles once per distinct padded length.
    assert row["train_padded_lengths"] == [128, 256]
    assert row["train_compile_count"] == row["train_expected_compile_count"] == 2
    # e. wall time per probe, the worker's peak memory, when it was measured.
    assert set(row["probe_seconds"]) >= {"eager", "eager_static", "generate", "train"}
    assert row["seconds"] >= sum(row["probe_seconds"].values()) and row["peak_rss_mb"] > 100
    assert row["measured_at"].endswith("+00:00")
    assert (row["optimum_neuron_inference"], row["optimum_neuron_training"]) == (True, True)


def test_a_tie_artifact_is_not_blamed_and_an_op_the_device_raises_on_is_avoided_by_a_measured_path(settings):
    # deepseek_v32's tiny indexer keeps 8 of up to 64 positions and ties at the k-th ReLU score: the static
    # cache differs from the dynamic one at the first tiny size only. Its float32 MoE training graph holds
    # Transformers' opaque grouped_mm_fallback, which the device raises on; batched_mm avoids it.
    row = run_one_isolated("deepseek_v32", dataclasses.replace(settings, train_lengths=(100,)))
    check = row["artifact_check"]["generate"]
    assert check["outcome"] == "dropped" and check["first"]["max_diff_static_vs_dynamic"] > 1e-3
    assert (
        check["second"]["ties_broken"] == {"index_topk": settings.max_cache_len}
        and check["second"]["failure"] is None
    )
    assert row["generate_verdict"] == "works" and "an artifact of the tiny model" in row["generate_reason"]
    assert row["max_diff_static_vs_dynamic"] < row["logit_tolerance"]  # the measurement that counts
    assert (
        row["avoided_by"] == 'AutoModelForCausalLM.from_pretrained(..., experts_implementation="batched_mm")'
    )
    paths = {path["path"]: path for path in row["code_paths"]}
    assert paths["experts_implementation=batched_mm"]["raising_ops"] == []
    assert paths["experts_implementation=batched_mm"]["loss_difference"] < 1e-5  # the same loss, plain ATen
    assert "aten._grouped_mm" in paths["bfloat16"]["lowering_unverified_ops"]  # bf16 takes grouped_mm
    assert (row["verdict"], row["train_verdict"], row["cause"]) == (
        "works-with-caveats",
        "works-with-caveats",
        None,
    )
    assert (
        "which the device raises on" in row["train_reason"] and "aten.topk" in row["lowering_unverified_ops"]
    )


def test_checkpoint_values_change_what_is_measured(settings):
    # MistralConfig defaults to a 4096-token window (every decode step recompiles); Mistral-7B-Instruct-v0.2
    # has none, and compiles one decode graph.
    one_length = dataclasses.replace(settings, train_lengths=(100,))
    checkpoint = run_one_isolated("mistral", one_length)
    defaults = run_one_isolated("mistral", dataclasses.replace(one_length, config="class-defaults"))
    assert (checkpoint["config_source"], defaults["config_source"]) == ("checkpoint", "class-defaults")
    assert checkpoint["verdict"] == "works" and checkpoint["compile_count"] == 1
    assert (
        defaults["recompiles_every_step"]
        and defaults["env"]["settings_id"] != checkpoint["env"]["settings_id"]
    )


def test_gemma2_recompiles_at_every_decode_step_until_the_default_limit(settings):
    # One training length is enough here (llama covers the per-length count); it halves the training compiles.
    row = run_one_isolated("gemma2", dataclasses.replace(settings, train_lengths=(100,)))
    assert (row["verdict"], row["generate_verdict"], row["train_verdict"]) == (
        "works-with-caveats", "works-with-caveats", "works")  # fmt: skip
    assert row["recompiles_every_step"] and row["recompile_limit_hit"]
    assert row["compile_count"] == 8 == row["recompile_count"] + 1  # Dynamo's default limit, then eager
    assert "cumulative_length" in row["recompile_guard"]  # the sliding-window cache length
    assert "recompile_limit (8)" in row["generate_reason"] and row["outputs_match"]


def test_cpmant_is_a_transformers_failure_not_a_device_one(settings):
    # CPM-Ant prepends its learned prompt tokens, so the static cache sized for the prompts overflows
    # already in uncompiled generation on CPU; its training step still runs.
    row = run_one_isolated("cpmant", dataclasses.replace(settings, train_lengths=(100,)))
    assert (row["verdict"], row["stage"], row["cause"]) == ("fails", "generate", "transformers")
    assert (row["generate_verdict"], row["train_verdict"]) == ("fails", "works")
    assert row["generate_reason"].startswith("uncompiled static-cache generation on CPU already fails")
    assert row["compile_count"] is None and row["train_compile_count"] == 1


def test_a_strided_view_in_training_is_a_simulator_limitation(settings):
    row = run_one_isolated("qwen3_next", dataclasses.replace(settings, train_lengths=(100,)))
    assert (row["verdict"], row["cause"], row["stage"]) == ("not-measured", "simulator", "train")
    assert (row["generate_verdict"], row["train_verdict"]) == ("works", "not-measured")
    assert "view size is not compatible" in row["error"] and "stride-agnostically" in row["train_reason"]
    assert row["probe_seconds"]["attribution"] > 0


def test_generation_transformers_does_not_compile_is_works_eager(settings):
    row = run_one_isolated("llama4_text", dataclasses.replace(settings, train_lengths=(100,)))
    assert (row["verdict"], row["generate_verdict"], row["compiled_generation"]) == (
        "works-eager", "works-eager", False)  # fmt: skip
    assert row["compile_count"] == 0 and "never compiles llama4" in row["generate_reason"]
    # Nothing compiled: recompiles and graph breaks were not measured, so they are null, not 0.
    assert [row[name] for name in GENERATION_COMPILE_FIGURES] == [None] * 4


def test_unbuildable_tiny_model_is_a_harness_error_not_a_failure(settings):
    row = run_one_isolated("musicgen", settings)
    assert (row["verdict"], row["stage"], row["cause"]) == ("harness-error", "build", "harness")
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


def test_on_the_standin_every_row_starts_with_an_empty_fake_tensor_cache(settings):
    """The warm-up fills FakeTensor's op cache on CPU tensors; on the stand-in, what that cache held decided
    whether AOT autograd's functionalization of the stand-in's tensors asserted (longcat_flash trained in a fresh
    process and failed after the warm-up). configure_dynamo empties it there, and keeps it on CPU."""
    import torch
    from torch._subclasses.fake_tensor import FakeTensorMode

    from compat_matrix.probes import configure_dynamo

    def cache_filled() -> bool:
        with FakeTensorMode():
            torch.empty(3) + 1
        return FakeTensorMode.cache_info().size > 0

    assert cache_filled()
    configure_dynamo(settings)
    assert FakeTensorMode.cache_info().size > 0
    assert cache_filled()
    configure_dynamo(dataclasses.replace(settings, sim_device="neuron"))
    assert FakeTensorMode.cache_info().size == 0
