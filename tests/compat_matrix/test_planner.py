"""The planner and the TP readiness table: parameter counts against published sizes, the plan's verdicts and
bad input, and the measured TP facts of issue 30 (Transformers 5.23)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from commands.neuron_compat import main
from compat_matrix import plan_measure
from compat_matrix.meta_model import FullSizeConfig, build_config, build_meta_model, checkpoint_full_size
from compat_matrix.planner import instances, make_plan, measure_sizes, per_rank, sizes_for
from compat_matrix.tp_readiness import measure

PUBLISHED = json.loads((Path(__file__).parent / "data" / "published_sizes.json").read_text())["checkpoints"]


def _printed(count: int, published: str) -> str:
    """``count`` printed like ``published`` ("8.03B", "124M"): same unit, same number of decimals."""
    number, unit = published[:-1], published[-1]
    decimals = len(number.partition(".")[2])
    return f"{count / {'B': 1e9, 'M': 1e6}[unit]:.{decimals}f}{unit}"


@pytest.mark.parametrize("checkpoint", sorted(PUBLISHED))
def test_parameter_count_is_the_published_size(checkpoint: str) -> None:
    model = build_meta_model(build_config(checkpoint_full_size(checkpoint)))
    model.tie_weights()
    count = sum(p.numel() for p in model.parameters())
    assert _printed(count, PUBLISHED[checkpoint]["published"]) == PUBLISHED[checkpoint]["published"]


def test_the_plan_counts_the_meta_models_parameters_and_the_llama_kv_cache() -> None:
    sizes = measure_sizes(checkpoint_full_size("meta-llama/Llama-3.1-8B"), "generate", 2, 1024, "bf16")
    assert sizes.parameters == 8_030_261_248
    # 32 layers x (key + value) x 8 KV heads x 128 x 1024 positions x 2 sequences x 2 bytes, plus the cache's
    # own bookkeeping tensors (under a kilobyte).
    assert 0 <= sizes.kv_cache - 32 * 2 * 8 * 128 * 1024 * 2 * 2 < 1024
    assert sizes.tp_plan == "full" and sizes.clean_degrees == [2, 4, 8]  # 8 KV heads: 16 splits a head


def test_checkpointing_keeps_less_and_lora_trains_a_sliver() -> None:
    sizes = measure_sizes(checkpoint_full_size("Qwen/Qwen3-0.6B"), "sft-lora", 1, 512, "bf16")
    assert 0 < sizes.activations_checkpointed < sizes.activations / 2
    assert sizes.trainable == 28 * 8 * ((1024 + 16 * 128) + (1024 + 8 * 128))  # r=8 on q_proj and v_proj
    whole = per_rank(sizes, "sft-lora", "bf16", tp=1, fsdp=1, checkpointing=False)
    assert whole.gradients == pytest.approx(whole.weights * sizes.trainable / sizes.parameters)
    assert per_rank(sizes, "sft-lora", "bf16", 2, 2, False).weights < whole.weights / 3


def test_a_model_too_big_for_the_instance_names_the_one_that_fits() -> None:
    sizes = measure_sizes(checkpoint_full_size("meta-llama/Llama-3.1-70B"), "train", 1, 1024, "bf16")
    plan = make_plan("llama-70b", sizes, "train", "bf16", instances()["trn2.3xlarge"], 0.15)
    assert plan.fits is None
    assert list(plan.alternatives) == ["trn2.48xlarge"]
    found = plan.alternatives["trn2.48xlarge"]
    assert found.total <= instances()["trn2.48xlarge"].hbm_per_rank * 0.85


def test_plan_command_lines_and_exit_codes(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("NEURON_MIGRATE_CACHE", str(tmp_path / "cache"))
    runner = CliRunner()
    result = runner.invoke(
        main, ["plan", "meta-llama/Llama-3.1-8B", "--seq-len", "1024", "--instance", "trn2.48xlarge"]
    )
    assert result.exit_code == 0, result.output
    assert "8.03B parameters" in result.output
    assert "DistributedConfig(tp_size=" in result.output and "torchrun --nproc_per_node" in result.output

    unknown = runner.invoke(main, ["plan", "acme/never-heard-of"])
    assert unknown.exit_code == 2 and "--config" in unknown.output
    known_unsized = runner.invoke(main, ["plan", "mistralai/Mistral-7B-Instruct-v0.3"])
    assert known_unsized.exit_code == 2 and "mistral checkpoint" in known_unsized.output

    config = tmp_path / "config.json"
    config.write_text(json.dumps({"model_type": "llama", "hidden_size": 512, "intermediate_size": 1024,
                                  "num_hidden_layers": 2, "num_attention_heads": 8, "num_key_value_heads": 2,
                                  "vocab_size": 1000}))  # fmt: skip
    from_file = runner.invoke(main, ["plan", "my-model", "--config", str(config), "--task", "generate"])
    assert from_file.exit_code == 0, from_file.output
    assert "tp 1 x fsdp 1" in from_file.output

    broken = tmp_path / "broken.json"
    broken.write_text(json.dumps({"model_type": "dbrx"}))
    cannot = runner.invoke(main, ["plan", str(broken)])
    assert (
        cannot.exit_code == 2 and "cannot build it" in cannot.output and len(cannot.output.splitlines()) == 1
    )

    too_big = runner.invoke(main, ["plan", "meta-llama/Llama-3.1-70B", "--instance", "trn2.3xlarge"])
    assert too_big.exit_code == 1 and "smallest instance that fits: trn2.48xlarge" in too_big.output


def test_a_composite_config_builds_the_causal_lm_of_its_text_part() -> None:
    """As AutoModelForCausalLM loads it: Llama4Config's causal LM is built from its text config."""
    from compat_matrix.meta_model import architecture_full_size

    model = build_meta_model(build_config(architecture_full_size("llama4")))
    assert type(model).__name__ == "Llama4ForCausalLM" and type(model.config).__name__ == "Llama4TextConfig"


def test_a_plan_measured_once_is_read_back_from_the_cache(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("NEURON_MIGRATE_CACHE", str(tmp_path))
    small = FullSizeConfig("llama", {"hidden_size": 256, "intermediate_size": 512, "num_hidden_layers": 2,
                                     "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 1000},
                           "a small llama")  # fmt: skip
    measured = sizes_for(small, "train", 1, 64, "bf16")
    assert len(list((tmp_path / "plan-sizes").iterdir())) == 1

    def not_again(*args):
        raise AssertionError("measured again")

    monkeypatch.setattr(plan_measure, "measure", not_again)
    assert sizes_for(small, "train", 1, 64, "bf16") == measured
    with pytest.raises(AssertionError, match="measured again"):  # another job shape is another measurement
        sizes_for(small, "train", 2, 64, "bf16")


@pytest.mark.parametrize(
    ("model_type", "plan"),
    [("gpt2", "none"), ("opt", "none"), ("bloom", "none"), ("gpt_oss", "lm_head only"), ("lfm2", "lm_head only"),
     ("falcon_h1", "lm_head only"), ("qwen3", "full")],
)  # fmt: skip
def test_measured_plan_of_known_architectures(model_type: str, plan: str) -> None:
    assert measure(model_type).plan == plan


def test_update_measures_only_the_rows_asked_and_keeps_the_others(tmp_path) -> None:
    from migrator.tp_readiness import TABLE_PATH

    committed = json.loads(TABLE_PATH.read_text())
    table = tmp_path / "tp.json"
    table.write_text(json.dumps({**committed, "architectures": {**committed["architectures"], "gpt2": {}}}))
    gpt2 = ["--archs", "gpt2", "--checkpoints", "openai-community/gpt2", "--update", "-o", str(table)]
    result = CliRunner().invoke(main, ["tp-readiness", *gpt2])
    assert result.exit_code == 0, result.output
    written = json.loads(table.read_text())
    assert written["architectures"] == committed["architectures"]  # gpt2 measured again, the rest kept
    assert written["checkpoints"] == committed["checkpoints"]
    assert written["seconds"] == committed["seconds"] and "updated_seconds" in written
    unknown = CliRunner().invoke(
        main, ["tp-readiness", "--archs", "gpt2", "--checkpoints", "acme/x", "-o", str(table)]
    )
    assert unknown.exit_code == 2 and "not a recorded checkpoint: acme/x" in unknown.output

    table.write_text(json.dumps({**committed, "versions": {"transformers": "4.0.0", "torch": "2.0.0"}}))
    stale = CliRunner().invoke(main, ["tp-readiness", *gpt2])
    assert stale.exit_code == 2 and "measure every architecture again" in stale.output


def test_committed_table_has_the_issues_top100_facts() -> None:
    """Issue 30 on Transformers 5.23: 24 top-100 architectures without a plan (gpt2, opt, bloom, gpt_neo,
    falcon, ...). Of the five it lists as lm_head only, three build at full size from their class defaults here
    (gpt_oss, lfm2, falcon_h1); hunyuan_v1_dense and dbrx do not (the table says why)."""
    from compat_matrix.archs import top100
    from migrator.tp_readiness import TABLE_PATH, tp_support

    table = json.loads(TABLE_PATH.read_text())
    assert table["versions"]["transformers"] == "5.23.0"
    rows = [
        table["architectures"][model_type] for model_type in top100() if model_type in table["architectures"]
    ]
    assert sum(row["plan"] == "none" for row in rows) == 24
    lm_head_only = {m for m in top100() if (support := tp_support(m)) and support.plan == "lm_head only"}
    assert lm_head_only == {"gpt_oss", "lfm2", "falcon_h1"}
    for model_type in ("gpt2", "opt", "bloom", "gpt_neo", "falcon"):
        assert tp_support(model_type).plan == "none"
    for model_type in ("hunyuan_v1_dense", "dbrx"):
        assert (
            tp_support(model_type).plan is None
            and "cannot build" in table["architectures"][model_type]["error"]
        )
