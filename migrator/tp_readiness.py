"""What the measured TP readiness table (``tp_readiness.json``, written by ``neuron-compat tp-readiness``) says
of an architecture: whether ``DistributedConfig(tp_size=N)`` has a plan for it and which degrees shard whole.
The migrator reads the table, not the harness that measures it."""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from pathlib import Path

TABLE_PATH = Path(__file__).with_name("tp_readiness.json")


@dataclass(frozen=True)
class TpSupport:
    plan: str | None  # "none", "lm_head only", "full"; None: not measured (the model could not be built)
    clean_degrees: tuple[int, ...]
    versions: str  # the Transformers and torch it was measured with


@cache
def table() -> dict:
    """The whole table: ``versions``, ``seconds``, ``architectures`` (model_type -> plan, clean_degrees, problems
    per degree, sizes, error)."""
    return json.loads(TABLE_PATH.read_text(encoding="utf-8"))


def tp_support(model_type: str) -> TpSupport | None:
    """None where the table has no row for ``model_type``."""
    row = table()["architectures"].get(model_type)
    if row is None:
        return None
    versions = ", ".join(f"{name} {version}" for name, version in table()["versions"].items())
    return TpSupport(row["plan"], tuple(row["clean_degrees"]), versions)
