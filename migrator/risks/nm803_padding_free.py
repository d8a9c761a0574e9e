"""NM803: TRL's padding-free batches (every batch one row of varying length)."""

from __future__ import annotations

from collections.abc import Iterator

from migrator.risks.base import PAD_BATCHES, Risk, literal_arguments
from migrator.rules import Example, Rule, Severity
from usercode.reading import Code

PADDING_FREE = Rule(
    "NM803",
    Severity.WARNING,
    "`SFTConfig(padding_free=True)` flattens batches to varying lengths",
    PAD_BATCHES,
    fixed_by=("NM203:padding_free",),
    examples=(Example(before='config = SFTConfig(output_dir="out", padding_free=True)\n'),),
)
RULES = (PADDING_FREE,)


def find(code: Code) -> Iterator[Risk]:
    yield from literal_arguments(
        code,
        PADDING_FREE,
        "padding_free",
        True,
        lambda name: f"{name}(padding_free=True) flattens batches to varying lengths",
        called=lambda name: name.endswith("Config"),
    )
