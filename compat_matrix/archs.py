"""Which architectures to run: the ranked top-100 list, every causal-LM ``model_type``, a family's probes, or a
comma list; plus the optimum-neuron 0.4.5 support columns."""

from __future__ import annotations

import csv
from functools import cache
from pathlib import Path

from compat_matrix.families import (
    FAMILIES,
    NOT_EXPORTED_BY_OPTIMUM_NEURON,
    TEXT_GENERATION,
    family_probes,
    split_probe_name,
)
from compat_matrix.tiny import causal_lm_model_types

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "compat"
TOP100_CSV = FIXTURES / "top100.csv"
OPTIMUM_NEURON_CSV = FIXTURES / "optimum_neuron_0.4.5.csv"
REFERENCE_RESULTS = FIXTURES / "results-neuron-sim.jsonl"


class UnknownArchitecture(ValueError):
    """A requested name is not a causal-LM ``model_type`` of the installed Transformers."""


@cache
def ranks() -> dict[str, int]:
    with TOP100_CSV.open(newline="") as handle:
        return {row["model_type"]: int(row["rank"]) for row in csv.DictReader(handle)}


def top100() -> list[str]:
    return sorted(ranks(), key=ranks().get)


def select_architectures(spec: str) -> list[str]:
    """``top100``, ``all``, ``checkpoint-differs`` (the architectures whose recorded checkpoint values build
    another tiny model than their class defaults), a family (``encoders``: each of its architectures for each
    of its tasks), a task of one (``feature-extraction``) or ``a,b,c`` -> probe names (``families.probe_name``:
    a causal-LM model type, or ``task/model_type``), checked against the installed Transformers."""
    if spec in FAMILIES:
        return family_probes(spec)
    for family, tasks in FAMILIES.items():
        if spec in tasks:
            return family_probes(family, spec)
    known = causal_lm_model_types()
    if spec == "top100":
        return [model_type for model_type in top100() if model_type in known]
    if spec == "all":
        return known
    if spec == "checkpoint-differs":
        from compat_matrix.checkpoints import differs_from_class_defaults, load_checkpoint_configs

        # The causal LMs' entries (the seq2seq family's encoder-decoders have theirs too).
        return [
            m
            for m in load_checkpoint_configs()
            if m in ranks() and m in known and differs_from_class_defaults(m)
        ]
    wanted = [name.strip() for name in spec.split(",") if name.strip()]
    every_family_probe = {name for family in FAMILIES for name in family_probes(family)}
    unknown = [name for name in wanted if name not in known and name not in every_family_probe]
    if unknown or not wanted:
        raise UnknownArchitecture(
            f"unknown architecture(s): {', '.join(unknown) or '(none given)'}. "
            "Use `neuron-compat list` to see the causal-LM model types of the installed Transformers, and "
            f"`neuron-compat list --archs {'|'.join(FAMILIES)}` for a family's probes (task/model_type)."
        )
    return list(dict.fromkeys(wanted))


def _tri_state(value: str) -> bool | None:
    return {"true": True, "false": False}.get(value.strip().lower())


@cache
def optimum_neuron_support() -> dict[str, tuple[bool | None, bool | None]]:
    """model_type -> (inference, training) for optimum-neuron 0.4.5; None where it is not documented."""
    with OPTIMUM_NEURON_CSV.open(newline="") as handle:
        return {
            row["model_type"]: (_tri_state(row["inference"]), _tri_state(row["training"]))
            for row in csv.DictReader(handle)
        }


def support_of(name: str) -> tuple[bool | None, bool | None]:
    """A probe's optimum-neuron 0.4.5 (inference, training) columns: a family's architectures are those its
    exporter lists for inference (``families``; BART and mT5 are probed beside them, not exported), whose
    training it does not document apart."""
    task, model_type = split_probe_name(name)
    if task == TEXT_GENERATION:
        return optimum_neuron_support().get(model_type, (None, None))
    return model_type not in NOT_EXPORTED_BY_OPTIMUM_NEURON, None


@cache
def reference_seconds() -> dict[str, float]:
    """Seconds per architecture in the committed reference run (empty when it is missing or unreadable)."""
    import json

    try:
        lines = REFERENCE_RESULTS.read_text().splitlines()
        return {
            row["model_type"]: float(row["seconds"]) for row in map(json.loads, lines) if row.get("seconds")
        }
    except (OSError, ValueError, KeyError, TypeError):
        return {}


def longest_first(model_types: list[str]) -> list[str]:
    """The order to start workers in: longest expected first (from the reference run), so no long
    architecture starts last and leaves the other workers idle; unknown ones first, in the given order."""
    seconds = reference_seconds()
    return sorted(model_types, key=lambda model_type: -seconds.get(model_type, float("inf")))
