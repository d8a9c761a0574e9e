"""What the measured TP readiness table (``tp_readiness.json``, written by ``neuron-compat tp-readiness``) says
of an architecture: whether ``DistributedConfig(tp_size=N)`` has a plan for it and which degrees shard whole.
The migrator reads the table, not the harness that measures it (the migrator imports no Transformers), and
refuses a tensor-parallel degree the table says cannot shard the model (NM208)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from usercode.model_ids import table_entry

TABLE_PATH = Path(__file__).with_name("tp_readiness.json")
FULL = "full"

# What a degree above 1 cannot keep, where the architecture does not shard; what the owner chooses instead.
_CHOOSE = (
    "remove the tensor-parallel degree (tp_size=1: every process holds the whole model, data parallel over "
    "WORLD_SIZE), or train a model whose architecture has a plan (llama, qwen3, mistral, gemma3_text, ...)"
)
_CHECK = "check that the model's architecture has one (its config class's base_model_tp_plan) and "


@dataclass(frozen=True)
class TpSupport:
    model_type: str
    plan: str | None  # "none", "lm_head only", "full"; None: not measured (the model could not be built)
    clean_degrees: tuple[int, ...]
    sizes: str  # the full-size config it was measured at (a checkpoint, or the class defaults)
    problems: dict[str, list[str]]  # degree -> why it does not shard whole
    error: str  # why the model could not be built
    transformers: str  # the Transformers version it was measured with


@cache
def table() -> dict:
    """The whole table: ``versions``, ``seconds``, ``architectures`` (model_type -> plan, clean_degrees, problems
    per degree, sizes, error)."""
    return json.loads(TABLE_PATH.read_text(encoding="utf-8"))


def _support(row: dict, model_type: str) -> TpSupport:
    return TpSupport(
        model_type,
        row["plan"],
        tuple(row["clean_degrees"]),
        row["sizes"],
        row["problems"],
        row["error"],
        table()["versions"]["transformers"],
    )


def tp_support(model_type: str) -> TpSupport | None:
    """The architecture's row (measured at its recorded checkpoint's sizes, else its class defaults); None where
    the table has none."""
    row = table()["architectures"].get(model_type)
    return None if row is None else _support(row, model_type)


def checkpoint_support(model_id: str) -> TpSupport | None:
    """The row of a recorded checkpoint (Hub id, any case), measured at its own sizes; None where not measured."""
    rows = {name.lower(): row for name, row in table().get("checkpoints", {}).items()}
    row = rows.get(model_id.lower())
    return None if row is None else _support(row, row["model_type"])


def degrees_that_work(support: TpSupport, checkpoint: str = "") -> str:
    """The degrees a tp_size may take, as a finding says them."""
    if support.plan != FULL:
        return "the degree that works is 1"
    degrees = ", ".join(map(str, (1, *support.clean_degrees)))
    return f"the degrees that shard {checkpoint} whole are {degrees}"


def resolves(model: str | None) -> bool:
    """Whether `model` (a Hub id, or None when the load's model is not a literal) resolves to an architecture."""
    entry = table_entry(model) if model else None
    return entry is not None and bool(entry.model_type)


def unresolved_tp(model: str) -> tuple[str, str]:
    """(why, the owner's choice) for the TODO of a degree moved to a load whose model (`model`, as the code
    names it) does not resolve: Transformers checks the plan at the load itself, so the rewrite runs."""
    return (
        f"{model} is not a model id this tool resolves to its architecture, so whether it has a tensor-parallel "
        "plan is known at the load, which raises ValueError where it has none (the degree is moved there as given)",
        "which models this job trains with a tp_size above 1 is the owner's choice: architectures with a plan "
        "(llama, qwen3, mistral, gemma3_text, ...), tp_size=1 for the others (gpt2, opt, bloom, falcon, ...)",
    )


def tp_refusal(model: str, degree: int | None = None) -> tuple[str, str] | None:
    """None when `model` (a Hub id that `resolves`) is of an architecture whose measured tensor-parallel plan
    shards its layers, whole at ``degree`` where that is a literal and the table measured the checkpoint `model`
    at its own sizes; else (why, what to do) for the TODO that keeps the degree."""
    entry = table_entry(model)
    support = tp_support(entry.model_type)
    if support is None or support.plan is None:
        why = (
            "is not in the measured TP readiness table (migrator/tp_readiness.json)"
            if support is None
            else f"could not be built to measure its plan ({support.error})"
        )
        return (
            f"`{model}` is {entry.model_type}, which {why}",
            _CHECK + "pass the DistributedConfig yourself, or " + _CHOOSE,
        )
    measured = f"in Transformers {support.transformers} (measured by neuron-compat tp-readiness)"
    if support.plan != FULL:
        has = (
            "shards only lm_head (every rank holds the whole decoder)"
            if support.plan == "lm_head only"
            else "has no tp_plan"
        )
        return (
            f"`{model}` is {entry.model_type}, which {has} {measured}: from_pretrained cannot shard its layers "
            f"with any tp_size > 1; {degrees_that_work(support)}",
            _CHOOSE,
        )
    sized = checkpoint_support(model)
    if degree is not None and degree > 1 and sized is not None and degree not in sized.clean_degrees:
        problems = sized.problems.get(str(degree), ["not measured at this degree"])
        return (
            f"`{model}` is {entry.model_type}, whose plan does not shard it whole at tp_size={degree} "
            f"in Transformers {sized.transformers} (measured by neuron-compat tp-readiness at its own sizes): "
            f"{problems[0]}; {degrees_that_work(sized, model)}",
            f"choose one of those degrees for tp_size, or {_CHOOSE.split(', or ')[0]}",
        )
    return None
