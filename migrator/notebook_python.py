"""A notebook's Python cells migrated as one module (cells share a namespace: an import in cell 1 is known when
cell 3 uses it), else one by one; each cell's findings moved back to its own lines, its IPython constructs
restored."""

from __future__ import annotations

import re

from migrator.rules import Finding
from migrator.transform import CELL_MARKER_PREFIX
from migrator.verify import MigrationError
from usercode.cells import PLACEHOLDER_RE, PythonCell

_CELL_MARKER = f"import {CELL_MARKER_PREFIX}{{}}__"
_CELL_MARKER_RE = re.compile(rf"^import {CELL_MARKER_PREFIX}(\d+)__\n", re.MULTILINE)


def migrate_python_cells(
    cells: list[PythonCell], migrate_python, failed: list[tuple[PythonCell, MigrationError]]
):
    """(cell, migrated python, findings) for each cell: all cells as one module, else one by one; a cell that
    cannot be migrated alone goes to `failed` with its error."""
    if not cells:
        return []
    joined = "".join(f"{_CELL_MARKER.format(c.index)}\n{c.python}\n" for c in cells)
    try:
        migrated, module_findings = migrate_python(joined)
    except MigrationError:
        return [result for cell in cells for result in _migrate_one(cell, migrate_python, failed)]
    by_index = {cell.index: cell for cell in cells}
    placed: dict[int, list[Finding]] = {cell.index: [] for cell in cells}
    starts = [(joined.count("\n", 0, m.start()) + 2, int(m[1])) for m in _CELL_MARKER_RE.finditer(joined)]
    for finding in module_findings:
        first, index = max((s for s in starts if s[0] <= finding.line), default=starts[0])
        placed[index].append(_in_python_cell(finding, by_index[index], finding.line - first))
    return [(by_index[i], text, placed[i]) for i, text in _split_cells(migrated)]


def _migrate_one(cell: PythonCell, migrate_python, failed: list[tuple[PythonCell, MigrationError]]):
    try:
        migrated, cell_findings = migrate_python(cell.python)
    except MigrationError as error:
        failed.append((cell, error))
        return []
    return [(cell, migrated, [_in_python_cell(f, cell, f.line - 1) for f in cell_findings])]


def _in_python_cell(finding: Finding, cell: PythonCell, python_line: int) -> Finding:
    """A finding on line `python_line` (0-based) of the placeholder text, moved to the cell's own lines."""
    line = cell.line_of[python_line] + 1 if 0 <= python_line < len(cell.line_of) else python_line + 1
    # Its other lines are in the same cell (a cell is a block of its own): moved the same way.
    first = finding.line - python_line
    others = {
        other: cell.line_of[other - first] + 1
        for other in finding.also
        if 0 <= other - first < len(cell.line_of)
    }
    return finding.moved(others, line=line, cell=cell.number)


def restore(text: str, magics: list[str | None]) -> str:
    out = []
    for line in text.splitlines(keepends=True):
        match = PLACEHOLDER_RE.fullmatch(line.rstrip("\n"))
        if match is None:
            out.append(line)
            continue
        magic = magics[int(match[1])]
        if magic is not None:
            out.append(magic if line.endswith("\n") else magic.rstrip("\n"))
    restored = "".join(out)
    return restored[:-1] if out and not text.endswith("\n") and restored.endswith("\n") else restored


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
