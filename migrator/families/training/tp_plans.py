"""Whether a model's architecture can be loaded with tensor parallelism (`DistributedConfig(tp_size=...)`):
Transformers shards only by an architecture's plan, and raises at load ("... has no tp_plan") without one.
The table, `tp_plans.json`, is read from the installed Transformers by `scripts/tp_plans.py`."""

from __future__ import annotations

import json
from functools import cache
from importlib import resources

from usercode.model_ids import table_entry

# What a degree above 1 cannot keep, where the architecture does not shard; what the owner chooses instead.
_CHOOSE = (
    "remove the tensor-parallel degree (tp_size=1: every process holds the whole model, data parallel over "
    "WORLD_SIZE), or train a model whose architecture has a plan (llama, qwen3, mistral, gemma3_text, ...)"
)


@cache
def _table() -> dict:
    path = resources.files("migrator.families.training").joinpath("tp_plans.json")
    return json.loads(path.read_text(encoding="utf-8"))


def tp_refusal(model: str | None) -> tuple[str, str] | None:
    """None when `model` (a Hub id, or None when the load's model is not a literal) is of an architecture whose
    tensor-parallel plan shards its layers; else (why, what to do) for the TODO that keeps the degree."""
    entry = table_entry(model) if model else None
    if entry is None or not entry.model_type:
        shown = f"`{model}`" if model else "the model this load reads"
        return (
            f"{shown} is not a model id this tool resolves to its architecture (the table of well-known ids), and "
            "Transformers loads tp_size > 1 only for architectures with a tensor-parallel plan",
            "check that the model's architecture has one (its config class's base_model_tp_plan) and pass "
            "the DistributedConfig yourself, or " + _CHOOSE,
        )
    table = _table()
    found = table["architectures"].get(entry.model_type)
    if found is None:
        return (
            f"`{model}` is {entry.model_type}, which Transformers {table['transformers']} does not know",
            "check that the model's architecture has a tensor-parallel plan, or " + _CHOOSE,
        )
    if found["plan"] == "layers":
        return None
    has = "shards only lm_head" if found["plan"] == "lm_head" else "has no tp_plan"
    return (
        f"`{model}` is {entry.model_type} ({found['class']}), which {has} in Transformers {table['transformers']}: "
        "from_pretrained cannot shard its layers with any tp_size > 1; the degree that works is 1",
        _CHOOSE,
    )
