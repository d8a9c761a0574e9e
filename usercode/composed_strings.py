"""Strings a module builds from its own constants, resolved statically: `"openai/whisper-" + SIZE`,
`f"{ORG}/{NAME}"`, `"{}/{}".format(ORG, NAME)`, `"openai/whisper-%s" % SIZE`.

A name is a constant when the module binds it exactly once (anywhere: module level or a function; a function
argument, loop variable or import of the same name counts as another binding), to a string or integer literal
or to a composition of constants. Folding replaces each composition whose parts are all constants with the
literal it evaluates to, so the readers of the module see the id the script will load; a composition with a
part known only at run time is replaced by the tuple of those parts (its literal fragments are not ids:
`"openai/whisper-"` is not a model; what it reads at run time, `len(dataset['test'])` of a printed f-string,
is still read) and returned as unresolved, with a pattern (`*` for the unknown parts) to say which id it builds.
"""

from __future__ import annotations

import ast
from collections import Counter
from dataclasses import dataclass

UNKNOWN = "*"


@dataclass(frozen=True)
class Unresolved:
    code: str  # the expression as written
    pattern: str  # its literal text with `*` for each part known only at run time
    line: int


def fold(tree: ast.Module) -> list[Unresolved]:
    """Folds the string compositions of `tree` in place; returns those with a part known only at run time."""
    folder = _Folder(constants(tree))
    folder.visit(tree)
    ast.fix_missing_locations(tree)
    return folder.unresolved


def constants(tree: ast.Module) -> dict[str, str | int]:
    """The module's constants (see the module's docstring) and their values."""
    bindings = Counter()
    assigned: dict[str, ast.expr] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store | ast.Del):
            bindings[node.id] += 1
        elif isinstance(node, ast.arg):
            bindings[node.arg] += 1
        elif isinstance(node, ast.alias):
            bindings[(node.asname or node.name).split(".")[0]] += 1
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            bindings[node.name] += 1
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            assigned[node.targets[0].id] = node.value
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value is not None:
            assigned[node.target.id] = node.value
        elif isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Name):
            bindings[node.target.id] += 1  # `NAME += ...` rebinds it
    constants: dict[str, str | int] = {}
    pending = {name: value for name, value in assigned.items() if bindings[name] == 1}
    while pending:  # a constant may be built from constants bound later in the file
        resolved = {name: _value(value, constants) for name, value in pending.items()}
        resolved = {name: value for name, value in resolved.items() if value is not None}
        if not resolved:
            break
        constants |= resolved
        pending = {name: value for name, value in pending.items() if name not in resolved}
    return constants


def _is_composition(node: ast.AST, constants: dict[str, str | int]) -> bool:
    if isinstance(node, ast.JoinedStr):
        return True
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        return _is_text(node.left, constants) or _is_text(node.right, constants)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mod):
        return _is_literal_string(node.left)
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "format"
        and _is_literal_string(node.func.value)
    )


def _is_literal_string(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) and isinstance(node.value, str)


def _is_text(node: ast.AST, constants: dict[str, str | int]) -> bool:
    named_text = isinstance(node, ast.Name) and isinstance(constants.get(node.id), str)
    return named_text or _is_literal_string(node) or _is_composition(node, constants)


def _value(node: ast.AST, constants: dict[str, str | int]) -> str | int | None:
    """The value of a literal, a constant's name or a composition of those; None when a part is not known."""
    return _evaluate(node, lambda part: _leaf(part, constants), constants)


def _leaf(node: ast.AST, constants: dict[str, str | int]) -> str | int | None:
    if isinstance(node, ast.Constant) and type(node.value) in (str, int):
        return node.value
    if isinstance(node, ast.Name):
        return constants.get(node.id)
    return None


def _evaluate(node: ast.AST, leaf, constants: dict[str, str | int]) -> str | int | None:
    """Evaluates a composition with `leaf` giving the value of each part that is not one."""
    if not _is_composition(node, constants):
        return leaf(node)
    if isinstance(node, ast.JoinedStr):
        parts = []
        for value in node.values:
            if isinstance(value, ast.FormattedValue):
                if value.conversion != -1 or value.format_spec is not None:
                    part = None  # `!r` and format specs: leave to run time
                else:
                    part = _evaluate(value.value, leaf, constants)
            else:
                part = _evaluate(value, leaf, constants)
            if part is None:
                return None
            parts.append(str(part))
        return "".join(parts)
    if isinstance(node, ast.BinOp):
        left, right = _evaluate(node.left, leaf, constants), _evaluate(node.right, leaf, constants)
        if isinstance(node.op, ast.Mod):
            arguments = node.right.elts if isinstance(node.right, ast.Tuple) else [node.right]
            values = [_evaluate(argument, leaf, constants) for argument in arguments]
            if left is None or None in values:
                return None
            try:
                return left % tuple(values)
            except (TypeError, ValueError):
                return None
        if isinstance(left, str) and isinstance(right, str):
            return left + right
        return None
    template = _evaluate(node.func.value, leaf, constants)
    if any(isinstance(argument, ast.Starred) for argument in node.args) or any(
        keyword.arg is None for keyword in node.keywords
    ):
        return None
    arguments = [_evaluate(argument, leaf, constants) for argument in node.args]
    keywords = {keyword.arg: _evaluate(keyword.value, leaf, constants) for keyword in node.keywords}
    if template is None or None in arguments or None in keywords.values():
        return None
    try:
        return template.format(*arguments, **keywords)
    except (IndexError, KeyError, ValueError):
        return None


def _known_or_unknown(value: str | int | None) -> str | int:
    return UNKNOWN if value is None else value


class _Folder(ast.NodeTransformer):
    def __init__(self, constants: dict[str, str | int]):
        self.constants = constants
        self.unresolved: list[Unresolved] = []

    def visit(self, node: ast.AST) -> ast.AST:
        if not _is_composition(node, self.constants):
            return super().visit(node)
        value = _value(node, self.constants)
        if value is None:
            pattern = _evaluate(
                node, lambda part: _known_or_unknown(_leaf(part, self.constants)), self.constants
            )
            self.unresolved.append(
                Unresolved(ast.unparse(node), str(pattern or UNKNOWN), getattr(node, "lineno", 0))
            )
            parts = [self.visit(part) for part in _run_time_parts(node)]
            return ast.copy_location(ast.Tuple(parts, ast.Load()), node)
        return ast.copy_location(ast.Constant(value), node)


def _run_time_parts(node: ast.expr) -> list[ast.expr]:
    """The expressions a composition formats, without its literal text: the values of an f-string, the
    operands of `+` and `%`, the arguments of `.format`."""
    if isinstance(node, ast.JoinedStr):
        parts = [value.value for value in node.values if isinstance(value, ast.FormattedValue)]
    elif isinstance(node, ast.BinOp):
        right = (
            node.right.elts
            if isinstance(node.op, ast.Mod) and isinstance(node.right, ast.Tuple)
            else [node.right]
        )
        parts = [node.left, *right]
    else:
        parts = [*node.args, *(keyword.value for keyword in node.keywords)]
    return [part for part in parts if not _is_literal_string(part)]
