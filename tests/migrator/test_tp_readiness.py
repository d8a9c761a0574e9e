"""The migrator refuses a tensor-parallel degree where the measured TP readiness table
(`migrator/tp_readiness.json`, written by `neuron-compat tp-readiness`) says it cannot shard the model: no plan,
a plan of lm_head only, an architecture the table could not measure, or a literal degree that does not shard the
very checkpoint the table measured. A model id it cannot resolve gets the degree at its load, where Transformers
checks the plan, and a TODO for the owner."""

from __future__ import annotations

from migrator.engine import REWRITERS
from migrator.tp_readiness import resolves, tp_refusal, tp_support


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


def test_unmeasured_models_keep_the_todo() -> None:
    assert tp_support("nemotron").plan is None
    why, _ = tp_refusal("nvidia/Minitron-8B-Base")
    assert why.startswith(
        "`nvidia/Minitron-8B-Base` is nemotron, which could not be built to measure its plan"
    )


def test_an_unresolved_model_gets_its_degree_at_the_load_and_the_owners_todo() -> None:
    # Transformers checks the plan at the load (ValueError where there is none): the rewrite runs, and which
    # models the job trains with tp_size > 1 stays the owner's choice.
    assert not resolves("someone/private-model") and not resolves(None) and resolves("Qwen/Qwen3-0.6B")
    migrated, findings = REWRITERS["python"](
        "import argparse\n"
        "from optimum.neuron import NeuronTrainer, NeuronTrainingArguments\n"
        "from transformers import AutoModelForCausalLM\n"
        "cli = argparse.ArgumentParser()\n"
        'cli.add_argument("--model")\n'
        'cli.add_argument("--tp", type=int)\n'
        "a = cli.parse_args()\n"
        'args = NeuronTrainingArguments(output_dir="o", tensor_parallel_size=a.tp, zero_1=False)\n'
        "model = AutoModelForCausalLM.from_pretrained(a.model)\n"
        "NeuronTrainer(model=model, args=args).train()\n"
    )
    assert "optimum" not in migrated
    assert (
        'DistributedConfig(tp_size=a.tp, dp_replicate_size=int(os.environ.get("WORLD_SIZE", "1")) // a.tp)'
        in migrated
    )
    todo = next(f for f in findings if f.code == "NM208")
    assert not todo.fixed and todo.message.startswith("`a.model` is not a model id this tool resolves")
