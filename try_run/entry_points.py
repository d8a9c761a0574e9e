"""The entry points of a tree, for `neuron-migrate try DIR`: what its users start, and with which arguments.

Read with the readers of users' code (`usercode.reading`: Python's `ast`, notebooks' cells, tree-sitter's bash
grammar); nothing is parsed here.

- a shell launcher that launches a program (`python X.py`, `torchrun`, `accelerate launch`, `trl`, what
  `plan.classify` calls a launch) is an entry point; the scripts it launches are tried through it, with the
  arguments it passes them;
- a notebook is an entry point; the scripts its `!python X.py` lines launch are tried through it;
- a Python script is an entry point when it runs something of its own (an `if __name__ == "__main__":` block, or
  top-level calls and loops), no launcher or notebook of the tree launches it, and no file of the tree imports
  it (a module imported by others is part of a program, not one).

A table the user passes (`--entry-points FILE`: JSON or CSV rows of `path` and `arguments`) replaces the
discovery: its rows are tried as they are.
"""

from __future__ import annotations

import ast
import csv
import json
import os
import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path

from try_run import plan
from try_run.runner import TryUsageError, file_kind
from usercode.python import imported_names
from usercode.reading import Code, ShellAssignment, ShellCommand, read_code
from usercode.sources import discover

KINDS = {"python": "script", "notebook": "notebook", "shell": "launcher"}
# Statements that run something when a module is executed, beyond defining names.
_PROGRAM_STATEMENTS = (ast.Expr, ast.For, ast.While, ast.With, ast.AsyncFor, ast.AsyncWith, ast.Try)


class EntryPointsError(Exception):
    """A table of entry points that cannot be read (the message is the one line shown)."""


@dataclass
class EntryPoint:
    path: Path  # relative to the tree's root
    kind: str  # script / launcher / notebook
    arguments: list[str] = field(default_factory=list)
    launches: list[str] = field(default_factory=list)  # the tree's scripts it launches (relative paths)

    def as_dict(self) -> dict:
        return {
            "path": self.path.as_posix(),
            "kind": self.kind,
            "arguments": self.arguments,
            "launches": self.launches,
        }


@dataclass
class Discovery:
    entries: list[EntryPoint]
    not_entries: dict[str, str]  # a Python file that is not tried on its own -> why


def find(root: Path) -> Discovery:
    """The entry points of the folder `root`, in path order."""
    codes: dict[Path, tuple[str, Code]] = {}
    for source in discover([root]):
        if source.kind in KINDS and source.problem is None:
            codes[source.relative] = (source.kind, read_code(source.path, source.kind))
    launched_by: dict[Path, str] = {}
    launchers: list[EntryPoint] = []
    for relative, (kind, code) in codes.items():
        if kind == "python":
            continue
        launches = [
            (
                f"cell {command.cell}" if command.cell else f"line {command.line}",
                _expanded(command, code.assignments),
            )
            for command in code.commands
            if (plan.classify(list(command.words)) or ("",))[0] == "launch"
        ]
        if kind == "shell" and not launches:
            continue  # set-up only (installs, downloads): nothing of the program starts here
        entry = EntryPoint(relative, KINDS[kind])
        for where, words in launches:
            script = _launched_script(words, relative.parent, codes)
            if script is not None:
                launched_by.setdefault(script, f"launched by {relative.as_posix()} ({where})")
                if script.as_posix() not in entry.launches:
                    entry.launches.append(script.as_posix())
        launchers.append(entry)
    imported = _imported_names(code for kind, code in codes.values() if kind == "python")
    entries, not_entries = list(launchers), {}
    for relative, (kind, code) in codes.items():
        if kind != "python":
            continue
        why = launched_by.get(relative)
        if why is None and _module_names(relative) & imported:
            why = "imported by another file of the tree"
        if why is None and not _runs_something(code):
            why = "defines names only (no __main__ block, no top-level calls)"
        if why is None:
            entries.append(EntryPoint(relative, "script"))
        else:
            not_entries[relative.as_posix()] = why
    return Discovery(sorted(entries, key=lambda entry: entry.path.as_posix()), not_entries)


def _expanded(command: ShellCommand, assignments: list[ShellAssignment]) -> tuple[str, ...]:
    """The command's words with `$NAME` / `${NAME}` replaced by the literal value the launcher assigned NAME last
    before the command (`CODE=scripts` then `python $CODE/train.py`); a word expanding anything else stays as
    it is."""
    values: dict[str, str] = {}
    for assignment in assignments:
        if assignment.cell == command.cell and assignment.line < command.line:
            values[assignment.name] = assignment.value
    if not values:
        return command.words

    def value(match: re.Match) -> str:
        found = values.get(match.group(1) or match.group(2))
        return match.group(0) if found is None or "$" in found else found

    return tuple(_EXPANSION.sub(value, word) if "$" in word else word for word in command.words)


_EXPANSION = re.compile(r"\$\{(\w+)\}|\$(\w+)")


def _launched_script(words: tuple[str, ...], folder: Path, codes: dict) -> Path | None:
    """The tree's Python file a launch runs: `X.py` from the launcher's folder or the tree's root
    (`../scripts/X.py` from a notebook in `notebooks/` is `scripts/X.py`)."""
    for word in plan.program_words(list(words)):
        if word.endswith(".py"):
            for candidate in (folder / word, Path(word)):
                normal = Path(os.path.normpath(candidate))
                if normal in codes:
                    return normal
    return None


def _runs_something(code: Code) -> bool:
    for module in code.python:
        for statement in module.tree.body:
            if isinstance(statement, ast.If) and _is_main_guard(statement.test):
                return True
            if isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Constant):
                continue  # a docstring
            if isinstance(statement, _PROGRAM_STATEMENTS):
                return True
    return False


def _is_main_guard(test: ast.expr) -> bool:
    return (
        isinstance(test, ast.Compare)
        and len(test.comparators) == 1
        and {_name(test.left), _name(test.comparators[0])} == {"__name__", "__main__"}
    )


def _name(node: ast.expr) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def _imported_names(codes) -> set[str]:
    """Every dotted name the tree's Python imports (`usercode.python.imported_names`)."""
    return {name for code in codes for module in code.python for name in imported_names(module.nodes)}


def _module_names(relative: Path) -> set[str]:
    """The names a file can be imported by: `pack` and `utils.pack` of `scripts/utils/pack.py`."""
    parts = [*relative.parent.parts, relative.stem]
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return {".".join(parts[index:]) for index in range(len(parts))} - {""}


# -- a table the user passes -------------------------------------------------------------------------------
def read_table(table: Path, root: Path) -> list[EntryPoint]:
    """Rows of `path` (relative to `root`) and `arguments` (a list, or one string split as a shell would),
    from a JSON list of objects or a CSV file with those columns."""
    try:
        text = table.read_text(encoding="utf-8")
        rows = (
            json.loads(text) if table.suffix.lower() == ".json" else list(csv.DictReader(text.splitlines()))
        )
    except (OSError, ValueError, csv.Error) as error:
        raise EntryPointsError(f"--entry-points {table}: cannot read it ({error})") from error
    if not isinstance(rows, list):
        raise EntryPointsError(f"--entry-points {table}: expected a list of rows with `path` and `arguments`")
    entries = []
    for number, row in enumerate(rows, start=1):
        if not isinstance(row, dict) or not row.get("path"):
            raise EntryPointsError(f"--entry-points {table}: row {number} has no `path`")
        arguments = row.get("arguments") or []
        try:
            arguments = shlex.split(arguments) if isinstance(arguments, str) else [str(a) for a in arguments]
        except (ValueError, TypeError) as error:
            raise EntryPointsError(f"--entry-points {table}: row {number}: arguments: {error}") from error
        path = Path(row["path"])
        if path.is_absolute() or ".." in path.parts:
            raise EntryPointsError(
                f"--entry-points {table}: row {number}: {path} is not a path inside {root}"
            )
        if not (root / path).is_file():
            raise EntryPointsError(f"--entry-points {table}: row {number}: {root / path}: no such file")
        try:
            kind = file_kind(root / path)
        except TryUsageError as error:
            raise EntryPointsError(f"--entry-points {table}: row {number}: {error}") from error
        entries.append(EntryPoint(path, kind, arguments))
    return entries
