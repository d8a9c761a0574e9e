"""Jupyter notebooks: migrate code cells as one module (cells share a namespace), shell lines as shell.

Cells are joined with a marker statement between them so that an import in cell 1 is known when cell 3
uses it. Markers (and the placeholders of magic lines) are import statements on purpose: libcst's
AddImportsVisitor only sees the module's leading import block, which they must not interrupt. `!cmd`, `%pip`, `%env` lines and
`%%bash` cells go through the shell rewriter; other magics are kept as they are. Outputs, metadata and
every untouched cell are kept; the result is written the way Jupyter writes notebooks.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable

import nbformat

from migrator.rules import Finding
from migrator.transform import TODO_PREFIX
from migrator.verify import MigrationError

Rewriter = Callable[[str], tuple[str, list[Finding]]]

_CELL_MARKER = "import __neuron_migrate_cell_{}__"
_CELL_MARKER_RE = re.compile(r"^import __neuron_migrate_cell_(\d+)__\n", re.MULTILINE)
_MAGIC_PLACEHOLDER = "import __neuron_migrate_magic_{}__"
_MAGIC_PLACEHOLDER_RE = re.compile(r"([ \t]*)import __neuron_migrate_magic_(\d+)__")
_SHELL_CELL = re.compile(r"^%%(bash|sh|script (ba)?sh)\b")
# Line magics that carry a shell command: `!cmd`, `%pip ...` (as `pip ...`), `%env K=V` (as `export K=V`).
_SHELL_LINE = re.compile(r"^(?P<indent>[ \t]*)(?P<magic>!|%pip |%env |%sx |%system )(?P<command>.*)$")
_SHELL_FORMS = {
    "!": ("", ""),
    "%pip ": ("pip ", "%pip "),
    "%env ": ("export ", "%env "),
    "%sx ": ("", "%sx "),
}
_SHELL_FORMS["%system "] = ("", "%system ")


def migrate_notebook(
    content: str, migrate_python: Rewriter, migrate_shell: Rewriter
) -> tuple[str, list[Finding]]:
    try:
        document = json.loads(content)
        nbformat.validate(nbformat.from_dict(document))
    except (json.JSONDecodeError, nbformat.ValidationError) as error:
        raise MigrationError(f"not a valid notebook: {str(error).splitlines()[0]}") from error
    cells = [
        (index, cell) for index, cell in enumerate(document.get("cells", [])) if cell["cell_type"] == "code"
    ]
    findings: list[Finding] = []
    python_cells: list[tuple[int, str, list[str]]] = []  # cell number, python text, magic lines
    new_sources: dict[int, str] = {}
    for number, (index, cell) in enumerate(cells, start=1):
        source = _source_text(cell)
        if _SHELL_CELL.match(source):
            header, _, body = source.partition("\n")
            new_body, shell_findings = migrate_shell(body)
            new_sources[index] = f"{header}\n{new_body}" if body or new_body else header
            findings += [_in_cell(f, number, line_offset=1) for f in shell_findings]
            continue
        if source.startswith("%%"):
            continue  # another cell magic (%%time, %%writefile...): not Python, not shell
        python_text, magics, magic_findings = _shell_lines(source, number, migrate_shell)
        findings += magic_findings
        python_cells.append((index, python_text, magics))

    joined = "".join(f"{_CELL_MARKER.format(i)}\n{text}\n" for i, text, _ in python_cells)
    migrated, python_findings = migrate_python(joined)
    findings += _place_in_cells(joined, python_findings, {i: n for n, (i, _) in enumerate(cells, start=1)})
    for index, text in _split_cells(migrated):
        magics = next(m for i, _, m in python_cells if i == index)
        new_sources[index] = _restore_magics(text, magics)

    changed = False
    for index, text in new_sources.items():
        cell = document["cells"][index]
        if text != _source_text(cell):
            cell["source"] = text.splitlines(keepends=True) if isinstance(cell["source"], list) else text
            changed = True
    if not changed:
        return content, sorted(findings, key=_order)
    nbformat.validate(nbformat.from_dict(document))
    out = json.dumps(document, indent=1, sort_keys=True, ensure_ascii=False) + "\n"
    return out, sorted(findings, key=_order)


def _order(finding: Finding) -> tuple:
    return (finding.cell or 0, finding.line, finding.column, finding.code)


def _source_text(cell: dict) -> str:
    source = cell.get("source", "")
    return "".join(source) if isinstance(source, list) else source


def _shell_lines(
    source: str, cell_number: int, migrate_shell: Rewriter
) -> tuple[str, list[str | None], list[Finding]]:
    """Replace shell-carrying magic lines by placeholders; migrate each as shell."""
    lines = source.split("\n")
    magics: list[str | None] = []  # per placeholder: its line(s), None when the command was removed
    findings: list[Finding] = []
    for line_number, line in enumerate(lines, start=1):
        match = _SHELL_LINE.match(line)
        if not match and not line.lstrip().startswith("%"):
            continue
        if match:
            shell_prefix, magic_prefix = _SHELL_FORMS[match["magic"]]
            migrated, shell_findings = migrate_shell(shell_prefix + match["command"])
            findings += [_in_cell(f, cell_number, line_offset=line_number - 1) for f in shell_findings]
            above = set()  # TODOs already above this line: a rerun must not add them again
            for previous in reversed(lines[: line_number - 1]):
                if not previous.lstrip().startswith(TODO_PREFIX):
                    break
                above.add(previous.strip())
            magic = magic_prefix or match["magic"]
            magics.append(_as_magic_lines(match["indent"], magic, shell_prefix, migrated, above))
        else:
            magics.append(line)
        indent = line[: len(line) - len(line.lstrip())]
        lines[line_number - 1] = f"{indent}{_MAGIC_PLACEHOLDER.format(len(magics) - 1)}"
    return "\n".join(lines), magics, findings


def _as_magic_lines(indent: str, magic: str, shell_prefix: str, migrated: str, above: set[str]) -> str | None:
    """Shell output back into notebook lines: comments (TODOs) stay comments, commands get their magic."""
    lines = []
    for shell_line in migrated.splitlines():
        if not shell_line.strip() or shell_line.strip() in above:
            continue
        if shell_line.lstrip().startswith("#"):
            lines.append(indent + shell_line.strip())
            continue
        body = (
            shell_line[len(shell_prefix) :]
            if shell_prefix and shell_line.startswith(shell_prefix)
            else shell_line
        )
        lines.append(f"{indent}{magic}{body}")
    return "\n".join(lines) or None  # None: the command was removed


def _restore_magics(text: str, magics: list[str | None]) -> str:
    lines = []
    for line in text.split("\n"):
        match = _MAGIC_PLACEHOLDER_RE.fullmatch(line)
        if match is None:
            lines.append(line)
        elif magics[int(match[2])] is not None:
            lines.append(magics[int(match[2])])
    return "\n".join(lines)


def _split_cells(migrated: str) -> list[tuple[int, str]]:
    parts = _CELL_MARKER_RE.split(migrated)
    head, rest = parts[0], parts[1:]
    cells = []
    for position in range(0, len(rest), 2):
        index, text = int(rest[position]), rest[position + 1]
        text = text[:-1] if text.endswith("\n") else text  # the newline added after each cell
        if position == 0 and head:  # imports added above the first marker belong to the first cell
            text = head + text
        cells.append((index, text))
    return cells


def _place_in_cells(joined: str, findings: list[Finding], numbers: dict[int, int]) -> list[Finding]:
    """Turn lines of the joined module into (cell number, line in cell)."""
    starts = [(joined.count("\n", 0, m.start()) + 2, int(m[1])) for m in _CELL_MARKER_RE.finditer(joined)]
    placed = []
    for finding in findings:
        first_line, index = max((s for s in starts if s[0] <= finding.line), default=starts[0])
        placed.append(_in_cell(finding, numbers[index], line_offset=-(first_line - 1)))
    return placed


def _in_cell(finding: Finding, cell_number: int, line_offset: int) -> Finding:
    return Finding(
        finding.rule, finding.line + line_offset, finding.column, finding.message, finding.fixed, cell_number
    )
