"""An `optimum-cli export neuron --model M ... OUT` (a notebook's `!` line, a shell script beside the code) whose
folder Python code loads with an optimum-neuron class (`NeuronModelForSequenceClassification.from_pretrained("OUT")`):
the load becomes optimum-neuron's own export at load time, `from_pretrained("M", export=True, batch_size=...,
sequence_length=..., auto_cast_type=...)`, the form the inference rules migrate (NM101, NM112, NM113...: the
original checkpoint on device "neuron" with the export's shapes and dtype); NM452 then finds nothing in the file
that needs the export, and removes it. Done only where every option of the export is one a load takes or one that
only tuned the compile, the model and the folder are literal, and the load names the folder as a literal that it
does not also pass those settings with; otherwise NM452's TODO says what to change."""

from __future__ import annotations

import ast
import dataclasses
import json
import re
import shlex
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from migrator.rules import Finding
from migrator.shell.nm452_optimum_cli import EXPORT_COMMAND
from usercode.cells import PythonCell, ShellLine
from usercode.python import parsed

# Export options whose value a load at export time takes under the same name (`NeuronModelFor*.from_pretrained(...,
# export=True, **settings)` and the pipelines'), and those that only tuned the compile (dropped with it).
_CARRIED = frozenset(
    {
        "batch_size",
        "sequence_length",
        "auto_cast",
        "auto_cast_type",
        "num_cores",
        "tensor_parallel_size",
        "torch_dtype",
        "height",
        "width",
        "num_images_per_prompt",
        "num_beams",
    }
)
_COMPILE_ONLY = frozenset({"task", "compiler_workdir", "optlevel", "O1", "O2", "O3"})
_COMPILE_ONLY_FLAGS = frozenset(
    {"disable-validation", "disable_validation", "disable_neuron_cache", "inline-weights-neff"}
)
_LITERAL = re.compile(r"[\w./:@+-]+")


@dataclass(frozen=True)
class Export:
    """An export's model id, output folder (as a load spells it: no `./`, no trailing `/`), and the keywords a load
    at export time takes for its settings (Python source of each value)."""

    model: str
    output: str
    settings: tuple[tuple[str, str], ...]
    where: str  # "cell 1", "export.sh"


def exports(commands: Iterable[tuple[str, str]]) -> dict[str, Export]:
    """The `optimum-cli export neuron` commands among `commands` ((shell text, where it is: "cell 1", "export.sh"))
    that a load can stand for, by output folder (the first export of a folder)."""
    found: dict[str, Export] = {}
    for command, where in commands:
        export = _export(command.replace("\\\n", " "), where)
        if export is not None:
            found.setdefault(export.output, export)
    return found


@cache
def beside(directory: Path) -> dict[str, Export]:
    """The exports of the shell scripts in `directory` (the folder of the code that loads their output: a README's
    `./export.sh` then `python infer.py`, run from one folder)."""
    commands = []
    for path, text in folder_texts(directory, "*.sh", "optimum-cli"):
        commands += [(line, path.name) for line in text.replace("\\\n", " ").splitlines()]
    return exports(commands)


def folder_texts(directory: Path, pattern: str, marker: str) -> Iterator[tuple[Path, str]]:
    """The files of `directory` matching `pattern` (sorted) that read as UTF-8 and mention `marker`, with their text."""
    for path in sorted(directory.glob(pattern)):
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        if marker in text:
            yield path, text


def _export(command: str, where: str) -> Export | None:
    try:
        words = shlex.split(command)
    except ValueError:
        return None
    if words[:3] != ["optimum-cli", "export", "neuron"] or len(words) < 5:
        return None
    options: dict[str, str] = {}
    positional = []
    index = 3
    while index < len(words):
        word = words[index]
        if not word.startswith("-"):
            positional.append(word)
            index += 1
            continue
        name, equals, value = word.lstrip("-").partition("=")
        if name in _COMPILE_ONLY_FLAGS and not equals:
            index += 1
            continue
        if name not in _CARRIED | _COMPILE_ONLY | {"model", "m"}:
            return None  # an option whose effect a load cannot be said to keep
        if not equals:
            if index + 1 >= len(words):
                return None
            value, index = words[index + 1], index + 1
        options[name] = value
        index += 1
    model = options.get("model") or options.get("m")
    values = [model, *positional, *options.values()]
    if len(positional) != 1 or not model or not all(_LITERAL.fullmatch(value or "") for value in values):
        return None  # a folder or value from a variable (`$OUT`, `{out}`): not known here
    output = positional[0].removeprefix("./").rstrip("/")
    settings = tuple(
        (name, value if value.isdigit() else json.dumps(value))
        for name, value in options.items()
        if name in _CARRIED
    )
    return Export(model, output, settings, where) if output not in ("", ".") else None


@dataclass(frozen=True)
class Placed:
    """A load rewritten by `load_exports`: its 1-based line and column (of the folder's literal, in characters),
    the export, and how many characters longer the line became."""

    line: int
    column: int
    export: Export
    grown: int


def load_exports(python: str, found: dict[str, Export], classes: frozenset[str]) -> tuple[str, list[Placed]]:
    """`python` with its loads of an export's folder (`Class.from_pretrained("OUT", ...)`, `Class` one of `classes`,
    the names bound to optimum-neuron's classes) rewritten to that export at load time, and where (the lines stay
    as they are: only the folder's literal is replaced)."""
    tree = parsed(python) if found and classes else None
    if tree is None:
        return python, []
    edits = [
        (node.args[0], export)
        for node in ast.walk(tree)
        for export in [_loaded_export(node, classes, found)]
        if export
    ]
    lines = _LINE.findall(python)  # (as Python numbers lines: at \n, \r\n and \r)
    placed = []
    for literal, export in sorted(edits, key=lambda edit: (edit[0].lineno, edit[0].col_offset), reverse=True):
        line = lines[literal.lineno - 1].encode()
        before, after = line[: literal.col_offset].decode(), line[literal.end_col_offset :].decode()
        keywords = "".join(f", {name}={value}" for name, value in export.settings)
        replacement = f"{json.dumps(export.model)}, export=True{keywords}"
        old = line[literal.col_offset : literal.end_col_offset].decode()
        lines[literal.lineno - 1] = before + replacement + after
        placed.append(Placed(literal.lineno, len(before) + 1, export, len(replacement) - len(old)))
    return "".join(lines), sorted(placed, key=lambda place: (place.line, place.column))


_LINE = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+$")


def columns_back(findings: list[Finding], placed: list[Placed]) -> list[Finding]:
    """`findings` placed on the rewritten lines moved back to the input's columns (a finding inside the
    replacement: the literal's)."""
    if not placed:
        return findings
    moved = []
    for finding in findings:
        for place in placed:
            if finding.line == place.line and finding.column > place.column:
                end = place.column + place.grown  # (past the replacement: shifted back by what it added)
                column = place.column if finding.column <= end else finding.column - place.grown
                finding = dataclasses.replace(finding, column=column)
        moved.append(finding)
    return moved


def finding(export: Export, line: int, column: int, cell: int | None = None) -> Finding:
    """The fixed NM452 finding of a load rewritten to the export at load time."""
    settings = ", ".join(f"{name}={value}" for name, value in export.settings) or "no settings"
    return Finding(
        EXPORT_COMMAND,
        line,
        column,
        f"`{export.output}`, which `optimum-cli export neuron` in {export.where} writes, is loaded as that export at "
        f"load time: `{export.model}` with export=True and the export's settings ({settings}), which this load's "
        "rewrite carries; the export goes",
        True,
        cell,
    )


def load_cell_exports(
    cells: list[PythonCell], lines: list[ShellLine], findings: list[Finding]
) -> dict[int, list[Placed]]:
    """A notebook's loads of the folders its `!optimum-cli export neuron` lines write, rewritten in each cell's
    `python` (see `load_exports`), a finding for each; returns, by cell index, where (the cell's own lines)."""
    found = exports((line.command, f"cell {line.cell.number}") for line in lines)
    classes = neuron_classes(cell.python for cell in cells) if found else frozenset()
    placed_in: dict[int, list[Placed]] = {}
    for cell in cells:
        cell.python, placed = load_exports(cell.python, found, classes)
        for place in placed:
            at = cell.line_of[place.line - 1] + 1 if place.line - 1 < len(cell.line_of) else place.line
            placed_in.setdefault(cell.index, []).append(dataclasses.replace(place, line=at))
            findings.append(finding(place.export, at, place.column, cell.number))
    return placed_in


def neuron_classes(codes: Iterable[str]) -> frozenset[str]:
    """The names the code binds to optimum-neuron's classes (`from optimum.neuron import NeuronModelForX`)."""
    names = set()
    for code in codes:
        tree = parsed(code)
        for node in ast.walk(tree) if tree is not None else ():
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("optimum.neuron"):
                names |= {
                    alias.asname or alias.name for alias in node.names if alias.name.startswith("Neuron")
                }
    return frozenset(names)


def _loaded_export(node: ast.AST, classes: frozenset[str], found: dict[str, Export]) -> Export | None:
    """The export a `Class.from_pretrained("OUT", ...)` call loads, where nothing it passes clashes with the
    export's settings."""
    if not (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "from_pretrained"
        and isinstance(node.func.value, ast.Name)
        and node.func.value.id in classes
        and node.args
        and isinstance(node.args[0], ast.Constant)
        and isinstance(node.args[0].value, str)
        and node.args[0].lineno == node.args[0].end_lineno
    ):
        return None
    export = found.get(node.args[0].value.removeprefix("./").rstrip("/"))
    given = {keyword.arg for keyword in node.keywords}
    if export is None or None in given or given & ({"export"} | {name for name, _ in export.settings}):
        return None
    return export
