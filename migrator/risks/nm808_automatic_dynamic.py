"""NM808: dynamo's automatic dynamic shapes switched on."""

from __future__ import annotations

import ast
from collections.abc import Iterator

from migrator.risks.base import STATIC_SHAPES, Risk, at
from migrator.rules import Example, Rule, Severity
from usercode.python import is_constant, target_names
from usercode.reading import Code

AUTOMATIC_DYNAMIC = Rule(
    "NM808",
    Severity.WARNING,
    "`torch._dynamo.config.automatic_dynamic_shapes = True`",
    STATIC_SHAPES,
    examples=(Example(before="torch._dynamo.config.automatic_dynamic_shapes = True\n"),),
)
RULES = (AUTOMATIC_DYNAMIC,)


def find(code: Code) -> Iterator[Risk]:
    for module in code.python:
        for node in module.nodes:
            if (
                isinstance(node, (ast.Assign, ast.AnnAssign))
                and "automatic_dynamic_shapes" in target_names(node)
                and is_constant(node.value, True)
            ):
                yield at(
                    AUTOMATIC_DYNAMIC, module, node, "torch._dynamo automatic_dynamic_shapes is switched on"
                )
