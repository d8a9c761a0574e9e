"""NM804: TRL's padding to a multiple of 128 turned off."""

from __future__ import annotations

from collections.abc import Iterator

from migrator.risks.base import PAD_BATCHES, Risk, literal_arguments
from migrator.rules import Example, Rule, Severity
from usercode.reading import Code

NO_PAD_MULTIPLE = Rule(
    "NM804",
    Severity.WARNING,
    "`SFTConfig(pad_to_multiple_of=None)` turns off TRL's padding to a multiple of 128 on neuron",
    PAD_BATCHES,
    examples=(Example(before='config = SFTConfig(output_dir="out", pad_to_multiple_of=None)\n'),),
)
RULES = (NO_PAD_MULTIPLE,)


def find(code: Code) -> Iterator[Risk]:
    yield from literal_arguments(
        code,
        NO_PAD_MULTIPLE,
        "pad_to_multiple_of",
        None,
        lambda name: f"{name}(pad_to_multiple_of=None) turns off TRL's padding",
        called=lambda name: name.endswith("Config"),
    )
