"""NM805: `torch.compile(dynamic=True)`."""

from __future__ import annotations

from collections.abc import Iterator

from migrator.risks.base import STATIC_SHAPES, Risk, literal_arguments
from migrator.rules import Example, Rule, Severity
from usercode.reading import Code

DYNAMIC_COMPILE = Rule(
    "NM805",
    Severity.WARNING,
    "`torch.compile(dynamic=True)`: the neuron backend compiles static shapes only",
    STATIC_SHAPES,
    fixed_by=("NM406",),
    examples=(Example(before="compiled = torch.compile(model, dynamic=True)\n"),),
)
RULES = (DYNAMIC_COMPILE,)


def find(code: Code) -> Iterator[Risk]:
    yield from literal_arguments(
        code,
        DYNAMIC_COMPILE,
        "dynamic",
        True,
        lambda name: "torch.compile(dynamic=True): the neuron backend rejects it",
        called=lambda name: name == "compile",
    )
