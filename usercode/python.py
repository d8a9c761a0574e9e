"""Python source read with `ast`, for readers that do not rewrite it: a module walked once (`PythonModule`), and
what a call, a literal or an assignment says."""

from __future__ import annotations

import ast
from dataclasses import dataclass, field


@dataclass
class PythonModule:
    """A script, or the Python of one notebook cell."""

    tree: ast.Module
    cell: int | None = None  # notebooks: 1-based number among the code cells
    # 0-based line of the module -> 0-based line of the cell or file it sits in (empty: the same line)
    line_map: tuple[int, ...] = ()
    nodes: list[ast.AST] = field(init=False)  # every node, in `ast.walk` order: the one walk readers share
    calls: list[ast.Call] = field(init=False)  # every call, in source order

    def __post_init__(self) -> None:
        self.nodes = list(ast.walk(self.tree))
        calls = [node for node in self.nodes if isinstance(node, ast.Call)]
        self.calls = sorted(calls, key=lambda call: (call.lineno, call.col_offset))

    def line(self, node: ast.AST) -> int:
        """The 1-based line of `node` in the file, or in its cell."""
        line = getattr(node, "lineno", 1)
        return self.line_map[line - 1] + 1 if 0 < line <= len(self.line_map) else line


def callee(call: ast.Call) -> str:
    """The name a call calls: `f` of `f()` and of `x.f()`, "" for anything else."""
    if isinstance(call.func, ast.Attribute):
        return call.func.attr
    if isinstance(call.func, ast.Name):
        return call.func.id
    return ""


def owner(call: ast.Call) -> str:
    """The name of what a method is called on: `AutoTokenizer` of `AutoTokenizer.from_pretrained()`."""
    value = call.func.value if isinstance(call.func, ast.Attribute) else None
    return value.id if isinstance(value, ast.Name) else value.attr if isinstance(value, ast.Attribute) else ""


def keyword(call: ast.Call, name: str) -> ast.expr | None:
    return next((keyword.value for keyword in call.keywords if keyword.arg == name), None)


def string(node: ast.AST | None) -> str | None:
    """The value of a string literal, None for any other node."""
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def is_constant(node: ast.AST | None, value: object) -> bool:
    """Whether `node` is the literal `True`, `False` or `None` given as `value`."""
    return isinstance(node, ast.Constant) and node.value is value


def target_names(node: ast.Assign | ast.AnnAssign) -> list[str]:
    """The names an assignment binds: `x` of `x = ...`, `attr` of `obj.attr = ...`."""
    targets = node.targets if isinstance(node, ast.Assign) else [node.target]
    return [
        target.id if isinstance(target, ast.Name) else target.attr
        for target in targets
        if isinstance(target, (ast.Name, ast.Attribute))
    ]
