"""The migrator refuses a tensor-parallel degree where the measured TP readiness table
(`migrator/tp_readiness.json`, written by `neuron-compat tp-readiness`) says it cannot shard the model: no plan,
a plan of lm_head only, an architecture the table could not measure, a model id it cannot resolve, or a literal
degree that does not shard the very checkpoint the table measured."""

from __future__ import annotations

from migrator.tp_readiness import tp_refusal, tp_support


def test_architectures_with_a_full_plan_load_at_their_clean_degrees() -> None:
    assert tp_refusal("meta-llama/Llama-3.2-1B") is None
    assert tp_refusal("Qwen/Qwen3-8B", 8) is None
    assert tp_refusal("Qwen/Qwen3-0.6B", 8) is None
    # Declared only on lm_head by its ForConditionalGeneration class; the measured load shards its text layers.
    assert tp_support("gemma3").plan == "full"
    assert tp_refusal("google/gemma-3-4b-it") is None
    # Declared lm_head only; built as the Auto classes build it (its text config), its layers shard too.
    assert tp_support("qwen3_5").plan == "full"
    assert tp_refusal("Qwen/Qwen3.5-9B", 4) is None


def test_no_plan_or_lm_head_only_names_the_architecture_and_the_degree_that_works() -> None:
    why, what = tp_refusal("openai-community/gpt2")
    assert "is gpt2, which has no tp_plan" in why and "the degree that works is 1" in why
    assert "tp_size=1" in what
    why, _ = tp_refusal("openai/gpt-oss-20b", 8)
    assert "gpt_oss, which shards only lm_head" in why


def test_a_degree_that_splits_the_measured_checkpoints_heads_is_refused() -> None:
    why, what = tp_refusal("Qwen/Qwen3-0.6B", 16)
    assert "does not shard it whole at tp_size=16" in why
    assert "not a whole number of heads" in why
    assert "the degrees that shard Qwen/Qwen3-0.6B whole are 1, 2, 4, 8" in why
    assert what.startswith("choose one of those degrees")
    # Each recorded checkpoint is measured at its own sizes: Llama-3.1-70B has 8 KV heads too.
    why, _ = tp_refusal("meta-llama/Llama-3.1-70B", 16)
    assert "the degrees that shard meta-llama/Llama-3.1-70B whole are 1, 2, 4, 8" in why
    assert tp_refusal("meta-llama/Llama-3.1-70B", 8) is None
    # A checkpoint whose sizes are not recorded: the table says nothing of its degrees, only of its plan.
    assert tp_refusal("Qwen/Qwen3-1.7B", 16) is None


def test_unmeasured_and_unresolved_models_keep_the_todo() -> None:
    assert tp_support("nemotron").plan is None
    why, _ = tp_refusal("nvidia/Minitron-8B-Base")
    assert why.startswith(
        "`nvidia/Minitron-8B-Base` is nemotron, which could not be built to measure its plan"
    )
    why, _ = tp_refusal("someone/private-model")
    assert "not a model id this tool resolves" in why
    why, _ = tp_refusal(None)
    assert why.startswith("the model this load reads")
