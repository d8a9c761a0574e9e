"""A notebook's `!optimum-cli export neuron --model M ... OUT` whose folder a Python cell loads with an optimum-neuron
class (`NeuronModelForSequenceClassification.from_pretrained("OUT")`): the load becomes optimum-neuron's own export
at load time, `from_pretrained("M", export=True, batch_size=..., sequence_length=..., auto_cast_type=...)`, the
form the inference rules migrate (NM101, NM112, NM113...: the original checkpoint on device "neuron" with the
export's shapes and dtype); NM452 then finds nothing that needs the export, and removes it. Done only where every
option of the export is one a load takes or one that only tuned the compile, the model and the folder are literal,
and the load names the folder as a literal; otherwise NM452's TODO says what to change."""

from __future__ import annotations

import ast
import json
import re
import shlex
from dataclasses import dataclass

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
    cell: int


def exports(lines: list[ShellLine]) -> dict[str, Export]:
    """The `optimum-cli export neuron` commands of a notebook's `!` lines that a load can stand for, by output."""
    found = {}
    for line in lines:
        export = _export(line.command.replace("\\\n", " "), line.cell.number)
        if export is not None:
            found.setdefault(export.output, export)
    return found


def _export(command: str, cell: int) -> Export | None:
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
    return Export(model, output, settings, cell) if output not in ("", ".") else None


def load_exports(cells: list[PythonCell], found: dict[str, Export], rule_findings: list[Finding]) -> None:
    """Each Python cell's loads of an export's folder (`Neuron*.from_pretrained("OUT", ...)`, the class imported
    from optimum.neuron) rewritten to that export at load time, in `cell.python`; a fixed NM452 finding for each."""
    if not found:
        return
    neuron_classes = _neuron_classes(cells)
    for cell in cells:
        tree = parsed(cell.python)
        if tree is None:
            continue
        lines = cell.python.splitlines(keepends=True)
        edits = []
        for node in ast.walk(tree):
            export = _loaded_export(node, neuron_classes, found)
            if export is not None:
                edits.append((node.args[0], export))
        for literal, export in sorted(
            edits, key=lambda edit: (edit[0].lineno, edit[0].col_offset), reverse=True
        ):
            line = lines[literal.lineno - 1].encode()
            keywords = "".join(f", {name}={value}" for name, value in export.settings)
            replacement = f"{json.dumps(export.model)}, export=True{keywords}".encode()
            lines[literal.lineno - 1] = (
                line[: literal.col_offset] + replacement + line[literal.end_col_offset :]
            ).decode()
            settings = ", ".join(f"{name}={value}" for name, value in export.settings) or "no settings"
            rule_findings.append(
                Finding(
                    EXPORT_COMMAND,
                    cell.line_of[literal.lineno - 1] + 1 if literal.lineno - 1 < len(cell.line_of) else 1,
                    literal.col_offset + 1,
                    f"`{export.output}`, which `optimum-cli export neuron` in cell {export.cell} wrote, is loaded "
                    f"as that export at load time: `{export.model}` with export=True and the export's settings "
                    f"({settings}), which this load's rewrite carries; the export goes",
                    True,
                    cell.number,
                )
            )
        cell.python = "".join(lines)


def _neuron_classes(cells: list[PythonCell]) -> frozenset[str]:
    """The names the notebook binds to optimum-neuron's classes (`from optimum.neuron import NeuronModelForX`)."""
    names = set()
    for cell in cells:
        tree = parsed(cell.python)
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
