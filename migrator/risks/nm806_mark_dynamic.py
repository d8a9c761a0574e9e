"""NM806: `torch._dynamo.mark_dynamic()`."""

from __future__ import annotations

from collections.abc import Iterator

from migrator.risks.base import STATIC_SHAPES, Risk, at
from migrator.rules import Example, Rule, Severity
from usercode.python import callee
from usercode.reading import Code

MARK_DYNAMIC = Rule(
    "NM806",
    Severity.WARNING,
    "`torch._dynamo.mark_dynamic()` asks for a dynamic dimension",
    STATIC_SHAPES,
    examples=(Example(before="torch._dynamo.mark_dynamic(input_ids, 1)\n"),),
)
RULES = (MARK_DYNAMIC,)


def find(code: Code) -> Iterator[Risk]:
    for module in code.python:
        for call in module.calls:
            if callee(call) == "mark_dynamic":
                yield at(MARK_DYNAMIC, module, call, "mark_dynamic() asks for a dynamic dimension")
