"""A notebook's file as the migrator writes it (its JSON is read by `usercode.notebook`): the file line of
each cell's source line (``cell_file_lines``), the JSON written back in the notebook's own formatting so a one-line
rewrite is a one-line diff (``json_style``, ``write_back``), and the per-cell diff a reviewer reads (``cell_diff``).
Migrating the cells is `migrator.notebook`'s job.
"""

from __future__ import annotations

import difflib
import json
import re
from dataclasses import dataclass, replace

from migrator.rules import Finding
from usercode.notebook import source_text


def cell_file_lines(content: str, document: dict) -> dict[int, list[int]]:
    """For each code cell (by number), the line of the .ipynb file that holds each of its source lines:
    what a SARIF location points at. A source written as one JSON string sits on one line."""
    match = re.match(r"\{\r?\n([ \t]+)\"", content)
    unit = match[1] if match else None
    newline = "\r\n" if "\r\n" in content else "\n"
    lines: dict[int, list[int]] = {}
    position = 0
    code_cells = [cell for cell in document.get("cells", []) if cell.get("cell_type") == "code"]
    for number, cell in enumerate(code_cells, start=1):
        source = cell.get("source", "")
        candidates = [_value_text(source, unit, ascii_only, newline) for ascii_only in (False, True)]
        candidates.append('"source":' + json.dumps(source, separators=(",", ":")))  # minified
        found = next((at for at in (content.find(c, position) for c in candidates) if at >= 0), -1)
        if found < 0:
            continue  # a writer whose layout we cannot find: the finding keeps the cell and its line only
        position = found
        first = content.count("\n", 0, found) + 1
        many = isinstance(source, list) and unit is not None and len(source) > 0
        count = len(source_text(cell).splitlines()) or 1
        lines[number] = [first + 1 + i if many else first for i in range(count)]
    return lines


def at_file_line(finding: Finding, file_lines: dict[int, list[int]]) -> Finding:
    lines = file_lines.get(finding.cell or 0)
    if not lines:
        return finding
    return replace(finding, file_line=lines[min(finding.line, len(lines)) - 1])


@dataclass(frozen=True)
class JsonStyle:
    indent: int | str | None
    ensure_ascii: bool
    sort_keys: bool
    trailing: str
    newline: str


# Jupyter's own format: what a notebook is written in when its own cannot be reproduced.
JUPYTER_STYLE = JsonStyle(1, False, True, "\n", "\n")


def json_style(content: str, document: dict) -> JsonStyle | None:
    """The json.dumps settings that reproduce the file byte for byte; None when none does."""
    match = re.match(r"\{\r?\n([ \t]+)\"", content)
    indent = (len(match[1]) if match[1].strip(" ") == "" else match[1]) if match else None
    trailing = content[len(content.rstrip()) :]
    newline = "\r\n" if "\r\n" in content else "\n"
    for ensure_ascii in (False, True):
        for sort_keys in (False, True):
            style = JsonStyle(indent, ensure_ascii, sort_keys, trailing, newline)
            if dump(document, style) == content:
                return style
    return None


def dump(document: dict, style: JsonStyle) -> str:
    text = json.dumps(
        document, indent=style.indent, ensure_ascii=style.ensure_ascii, sort_keys=style.sort_keys
    )
    return text.replace("\n", style.newline) + style.trailing


def write_back(content: str, document: dict, style: JsonStyle | None, old_sources: dict[int, object]) -> str:
    """The notebook with its new cell sources, formatted as the file was, so the diff is the rewrite.

    When no json.dumps setting reproduces the file (another writer's number or escape style), each changed
    `source` value is replaced where it sits in the text; Jupyter's own format is the last resort.
    """
    if style is not None:
        return dump(document, style)
    match = re.match(r"\{\r?\n([ \t]+)\"", content)
    unit = match[1] if match else None
    newline = "\r\n" if "\r\n" in content else "\n"
    spliced = content
    for index, old in old_sources.items():
        new = document["cells"][index]["source"]
        for ensure_ascii in (False, True):
            before = _value_text(old, unit, ensure_ascii, newline)
            if spliced.count(before) == 1:
                spliced = spliced.replace(before, _value_text(new, unit, ensure_ascii, newline))
                break
        else:
            return dump(document, JUPYTER_STYLE)
    return spliced


def _value_text(value: object, unit: str | None, ensure_ascii: bool, newline: str) -> str:
    """A cell's `"source": value` as an indenting writer puts it (the value sits three levels deep)."""
    if unit is None:
        return '"source": ' + json.dumps(value, ensure_ascii=ensure_ascii)
    text = json.dumps(value, indent=len(unit) if unit.strip(" ") == "" else unit, ensure_ascii=ensure_ascii)
    return '"source": ' + text.replace("\n", newline + unit * 3)


def cell_diff(before: str, after: str, path: str) -> str:
    """A unified diff of each code cell whose source the migration changed, headed `a/PATH (cell N)` with N
    counted among the code cells as the findings count them: what a reviewer reads, where a diff of the
    JSON text would shift every quoted line of a cell around a removed one."""
    cells = [
        [cell for cell in json.loads(text).get("cells", []) if cell.get("cell_type") == "code"]
        for text in (before, after)
    ]
    sources = [[source_text(cell) for cell in side] for side in cells]
    hunks: list[str] = []
    for old, new in _aligned(*sources):
        old_lines = _diff_lines(sources[0][old]) if old is not None else []
        new_lines = _diff_lines(sources[1][new]) if new is not None else []
        if old_lines != new_lines:
            number = old + 1 if old is not None else new + 1
            names = (f"{side}/{path.lstrip('/')} (cell {number})" for side in "ab")
            hunks += difflib.unified_diff(old_lines, new_lines, *names)
    return "".join(hunks)


def _aligned(old: list[str], new: list[str]) -> list[tuple[int | None, int | None]]:
    """Pairs (old cell, new cell) of two versions of a notebook's code cells, None for a cell the other lacks
    (a cell the migration removed): runs of changed cells pair each new cell with the most similar old one."""
    pairs: list[tuple[int | None, int | None]] = []
    for _, i1, i2, j1, j2 in difflib.SequenceMatcher(None, old, new, autojunk=False).get_opcodes():
        if i2 - i1 <= j2 - j1:
            pairs += zip(range(i1, i2), range(j1, j1 + i2 - i1), strict=True)
            pairs += [(None, j) for j in range(j1 + i2 - i1, j2)]
            continue
        start = i1
        for j in range(j1, j2):
            last = i2 - (j2 - j)  # leave an old cell for each new cell still to pair
            best = max(
                range(start, last + 1), key=lambda i: difflib.SequenceMatcher(None, old[i], new[j]).ratio()
            )
            pairs += [(i, None) for i in range(start, best)] + [(best, j)]
            start = best + 1
        pairs += [(i, None) for i in range(start, i2)]
    return pairs


def _diff_lines(source: str) -> list[str]:
    """A cell's lines, each ending with a newline (a cell's last line has none; a diff line needs one)."""
    return [line if line.endswith("\n") else line + "\n" for line in source.splitlines(keepends=True)]
