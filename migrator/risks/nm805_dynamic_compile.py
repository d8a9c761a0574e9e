"""NM805: `torch.compile(dynamic=True)`."""

from __future__ import annotations

from collections.abc import Iterator

from migrator.reading import Code, callee, is_constant, keyword
from migrator.risks.base import STATIC_SHAPES, Risk, at
from migrator.rules import Example, Rule, Severity

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
    for module in code.python:
        for call in module.calls:
            if callee(call) == "compile" and is_constant(keyword(call, "dynamic"), True):
                yield at(
                    DYNAMIC_COMPILE,
                    module,
                    call,
                    "torch.compile(dynamic=True): the neuron backend rejects it",
                )
