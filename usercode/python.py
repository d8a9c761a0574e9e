"""Python source read with `ast`, for readers that do not rewrite it: a module walked once (`PythonModule`), and
what a call, a literal or an assignment says."""

from __future__ import annotations

import ast
import os
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path


def ast_nodes(node: ast.AST) -> tuple[ast.AST, ...]:
    """`tuple(ast.walk(node))`, the same nodes in the same order, at about half its cost (no generator per
    node and field). The last node walked keeps its walk: several readers of one tree walk it once."""
    global _WALKED
    if _WALKED[0] is node:
        return _WALKED[1]
    found = [node]
    for current in found:  # grows as it goes: breadth first, as ast.walk
        for name in current._fields:
            value = getattr(current, name, None)
            if type(value) is list:
                found.extend([item for item in value if isinstance(item, ast.AST)])
            elif isinstance(value, ast.AST):
                found.append(value)
    _WALKED = (node, tuple(found))  # held: its id is never another node's
    return _WALKED[1]


_WALKED: tuple[ast.AST | None, tuple[ast.AST, ...]] = (None, ())


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
        self.nodes = list(ast_nodes(self.tree))
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


@lru_cache(maxsize=1)
def parsed(python: str) -> ast.Module | None:
    """Python's parse of a user's text; None where Python refuses it (a syntax error, a NUL byte, nesting too deep).
    The last parse is kept (the migrated text is read by the import pass, then by the leftover scan): its tree
    is shared, and no reader changes it."""
    try:
        return ast.parse(python)
    except (SyntaxError, ValueError, RecursionError):
        return None


def python_imports(python: str) -> frozenset[str]:
    """The modules a Python text imports (none when it does not parse): what an install must keep."""
    try:
        tree = ast.parse(python)
    except SyntaxError:
        return frozenset()
    return frozenset(imported_names(statements(tree), relative=False))


def required_imports(python: str) -> frozenset[str]:
    """The modules a Python text imports outside a `try:` whose `except` lets the import fail (ImportError,
    ModuleNotFoundError, Exception, a bare `except`, without re-raising): the code runs without the others."""
    try:
        tree = ast.parse(python)
    except SyntaxError:
        return frozenset()
    optional = {
        id(inner)
        for node in statements(tree)
        if isinstance(node, ast.Try) and any(map(_handles_import_failure, node.handlers))
        for inner in statements(node)  # (the `try:` block and what it nests: not its `else:` or handlers)
    }
    return frozenset(imported_names((s for s in statements(tree) if id(s) not in optional), relative=False))


IMPORT_FAILURES = frozenset({"ImportError", "ModuleNotFoundError", "Exception", "BaseException"})


def _handles_import_failure(handler: ast.ExceptHandler) -> bool:
    kinds = handler.type.elts if isinstance(handler.type, ast.Tuple) else [handler.type]
    caught = handler.type is None or any(getattr(kind, "id", None) in IMPORT_FAILURES for kind in kinds)
    reraises = any(isinstance(statement, ast.Raise) for statement in handler.body)
    return caught and not reraises


def statements(tree: ast.Module):
    """Every statement of `tree`, nested blocks included: imports are statements, and walking only statement
    blocks costs about a fifth of `ast.walk` over every expression."""
    pending = list(tree.body)
    while pending:
        node = pending.pop()
        yield node
        for block in _BLOCKS:
            pending.extend(getattr(node, block, ()))


# The fields that hold statements: compound statements' bodies, `except` handlers, `match` cases.
_BLOCKS = ("body", "orelse", "finalbody", "handlers", "cases")


def imported_names(nodes, relative: bool = True) -> set[str]:
    """Every dotted name `nodes` import: `a.b` of `import a.b`, `a.b` and `a.b.c` of `from a.b import c` (`c` a
    module or a name of `a.b`); `relative`: also `c` of `from . import c` and `x`, `x.c` of `from .x import c`
    (without their dots)."""
    names = set()
    for node in nodes:
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and (relative or not node.level):
            base = node.module or ""
            if base:
                names.add(base)
            names |= {f"{base}.{alias.name}".lstrip(".") for alias in node.names if alias.name != "*"}
    return names


@dataclass(frozen=True)
class EnvironmentRead:
    """A read of one environment variable: `os.environ["X"]`, `os.environ.get("X", default)`,
    `os.getenv("X", default)` (and the same on `environ` / `getenv` imported from os)."""

    name: str
    default: ast.expr | None  # the default the read falls back to; None: none (or `os.environ["X"]`)
    required: bool  # `os.environ["X"]`: a KeyError where it is not set (`.get` and `getenv` give None)


def environment_read(node: ast.AST) -> EnvironmentRead | None:
    """The variable `node` reads from the process environment, None when it reads none (or names it by a value
    known only at run time)."""
    if isinstance(node, ast.Subscript) and _is_environ(node.value) and string(node.slice) is not None:
        return EnvironmentRead(string(node.slice), None, required=True)
    if not (isinstance(node, ast.Call) and node.args and string(node.args[0]) is not None):
        return None
    function = node.func
    getter = isinstance(function, ast.Attribute) and function.attr == "get" and _is_environ(function.value)
    getenv = (
        isinstance(function, ast.Attribute) and function.attr == "getenv" and _names(function.value, "os")
    ) or (isinstance(function, ast.Name) and function.id == "getenv")
    if not (getter or getenv):
        return None
    default = node.args[1] if len(node.args) > 1 else keyword(node, "default")
    return EnvironmentRead(string(node.args[0]), default, required=False)


def _is_environ(node: ast.AST) -> bool:
    """`os.environ`, or `environ` imported from os."""
    if isinstance(node, ast.Attribute):
        return node.attr == "environ" and _names(node.value, "os")
    return isinstance(node, ast.Name) and node.id == "environ"


def _names(node: ast.AST, name: str) -> bool:
    return isinstance(node, ast.Name) and node.id == name


def sys_path_folders(tree: ast.Module, file: Path) -> list[Path]:
    """The folders a script puts on `sys.path` itself, from paths it builds out of its own location
    (`sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))`, `sys.path.append(str(Path(__file__)
    .parent.parent))`): where its imports are found besides its own folder. `file`: where the script is."""
    folders = []
    for node in ast_nodes(tree):
        if not (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in ("insert", "append")
            and _dotted(node.func.value) == "sys.path"
            and node.args
        ):
            continue
        value = _file_path(node.args[-1], file.absolute())
        if value is not None and os.path.isabs(
            value
        ):  # (a relative entry is relative to the working directory)
            folders.append(Path(os.path.normpath(value)))
    return list(dict.fromkeys(folders))


def _dotted(node: ast.AST) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        base = _dotted(node.value)
        return f"{base}.{node.attr}" if base else ""
    return ""


# Calls whose value is their argument's path, lexically normalised (`..` resolved), and those that keep it as it is.
_NORMALISING = frozenset({"os.path.abspath", "os.path.realpath", "os.path.normpath", "abspath", "realpath"})
_SAME = frozenset({"str", "Path", "pathlib.Path", "os.fspath"})


def _file_path(node: ast.AST, file: Path) -> str | None:
    """The path an expression built from `__file__` and literals names, for the script at `file` (an absolute
    path); None for any other expression (what it reads at run time is not known here)."""
    if isinstance(node, ast.Name) and node.id == "__file__":
        return str(file)
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div):  # Path / "part"
        left, right = _file_path(node.left, file), _file_path(node.right, file)
        return os.path.join(left, right) if left is not None and right is not None else None
    if isinstance(node, ast.Attribute) and node.attr == "parent":
        inner = _file_path(node.value, file)
        return str(Path(inner).parent) if inner is not None else None
    if (
        isinstance(node, ast.Subscript)
        and isinstance(node.value, ast.Attribute)
        and node.value.attr == "parents"
    ):
        inner, index = _file_path(node.value.value, file), node.slice
        if inner is None or not (isinstance(index, ast.Constant) and type(index.value) is int):
            return None
        parents = Path(inner).parents
        return str(parents[index.value]) if 0 <= index.value < len(parents) else None
    if not isinstance(node, ast.Call) or node.keywords:
        return None
    if isinstance(node.func, ast.Attribute) and node.func.attr in ("resolve", "absolute") and not node.args:
        inner = _file_path(node.func.value, file)
        return os.path.normpath(inner) if inner is not None and os.path.isabs(inner) else None
    values = [_file_path(argument, file) for argument in node.args]
    if not values or None in values:
        return None
    name = _dotted(node.func)
    if name in _NORMALISING and len(values) == 1:  # (relative to a working directory not known here)
        return os.path.normpath(values[0]) if os.path.isabs(values[0]) else None
    if name in _SAME and len(values) == 1:
        return values[0]
    if name in ("os.path.dirname", "dirname") and len(values) == 1:
        return os.path.dirname(values[0])
    if name in ("os.path.join", "join"):
        return os.path.join(*values)
    return None
