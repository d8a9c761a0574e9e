"""A notebook file read for its code: the JSON checked against nbformat's schema (`read_document`), and its
code cells as IPython runs them (`read_cells`: each cell's Python and shell commands, `%%bash` and
`%%writefile` bodies), for readers that do not rewrite it (the checklist, the compile risks, `try`)."""

from __future__ import annotations

import json
import warnings
from dataclasses import dataclass
from pathlib import Path

import nbformat
from nbformat.validator import MissingIDFieldWarning

from usercode.cells import PYTHON_CELL_MAGICS, CellError, PythonCell, placeholders, spans


class NotANotebook(ValueError):
    """The file is not a version 4 notebook; the message says why."""


def read_document(content: str) -> dict:
    """The notebook's JSON, checked against nbformat's schema; NotANotebook saying why it is not one."""
    try:
        document = json.loads(content)
    except (ValueError, RecursionError) as error:  # bad JSON, an integer over 4,300 digits, nesting too deep
        raise NotANotebook(f"not a valid notebook: {_first_line(error)}") from None
    if not isinstance(document, dict):
        raise NotANotebook(f"not a valid notebook: the JSON is {_json_kind(document)}, not an object")
    version = document.get("nbformat")
    if isinstance(version, int) and not isinstance(version, bool) and version < 4:
        raise NotANotebook(
            f"a version {version} notebook (IPython 2 or older): neuron-migrate reads version 4, which Jupyter "
            "has written since 2015; convert it (`jupyter nbconvert --to notebook --nbformat 4 --inplace FILE`, "
            "or open and save it in Jupyter), then migrate again"
        )
    if version != 4:
        raise NotANotebook(
            f"not a valid notebook: format version {version!r}; neuron-migrate reads version 4"
        )
    try:
        validate(document)
    except (nbformat.ValidationError, ValueError, TypeError, KeyError, ImportError, RecursionError) as error:
        raise NotANotebook(f"not a valid notebook: {_first_line(error)}") from None
    return document


def _first_line(error: BaseException) -> str:
    return (str(error).splitlines() or [type(error).__name__])[0]


def _json_kind(value: object) -> str:
    kinds = {list: "a list", str: "a string", bool: "a boolean", type(None): "null", int: "a number"}
    return kinds.get(type(value), "a number")


def validate(document: dict) -> None:
    """nbformat's schema check, on a copy (the file is never normalised; its missing cell ids stay missing)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", MissingIDFieldWarning)
        nbformat.validate(nbformat.from_dict(document))


def source_text(cell: dict) -> str:
    source = cell.get("source", "")
    return "".join(source) if isinstance(source, list) else source


def body_kind(header: str) -> str | None:
    """What the body of a `%%` cell is: "shell" (`%%bash`, `%%sh`, `%%script bash`, `%%writefile` of a .sh),
    "python" (`%%writefile` of a .py), "file" (`%%writefile` of anything else); None for other cell magics."""
    words = header[2:].split()
    name, arguments = (words[0], words[1:]) if words else ("", [])
    if name in ("bash", "sh") or (
        name == "script" and arguments[:1] and arguments[0].endswith(("bash", "sh"))
    ):
        return "shell"
    if name in ("writefile", "file"):
        target = writefile_target(header)
        return (
            "python" if target.endswith(".py") else "shell" if target.endswith((".sh", ".bash")) else "file"
        )
    return None


def writefile_target(header: str) -> str:
    """The path a `%%writefile [-a] PATH` line writes ("" for another line)."""
    words = header.split()
    if not words or words[0] not in ("%%writefile", "%%file"):
        return ""
    return next((w for w in reversed(words[1:]) if not w.startswith("-")), "").strip("'\"")


def written_file(source: str) -> tuple[str | None, str]:
    """(PATH, body) of a `%%writefile PATH` cell, else (None, "")."""
    header, _, body = source.partition("\n")
    target = writefile_target(header)
    return (target, body) if target else (None, "")


def written_script(source: str) -> tuple[str | None, str]:
    """(PATH, body) of a `%%writefile PATH` cell that writes a Python script, else (None, "")."""
    target, body = written_file(source)
    return (target, body) if target and target.endswith(".py") else (None, "")


def cell_python(source: str) -> str:
    """The Python a code cell runs, for a reader of its names and strings: the script a `%%writefile x.py` cell
    writes, else the cell as IPython transforms it (`!cmd` / `%magic` lines as IPython's own calls, whose
    string arguments stay readable)."""
    path, body = written_script(source)
    return body if path else as_ipython_runs(source)


def as_ipython_runs(source: str) -> str:
    """A code cell as IPython transforms it before running it (what its traceback's cell file holds)."""
    from IPython.core.inputtransformer2 import TransformerManager  # (~70 ms to load: only for notebooks)

    return TransformerManager().transform_cell(source)


@dataclass(frozen=True)
class CellCode:
    """A code cell as IPython runs it, for readers that do not rewrite it (the checklist's scan)."""

    number: int  # among code cells, from 1
    source: str  # the cell as written
    python: str | None = None  # the Python it runs (IPython constructs as placeholder lines); None: none
    python_lines: tuple[int, ...] = ()  # 0-based line of `python` -> 0-based line of the cell
    shell: tuple[tuple[int, str], ...] = ()  # (0-based line of the cell, script) of each shell construct


def read_cells(content: str) -> list[CellCode]:
    """The code cells of a notebook, their Python and shell commands found as the migrator finds them:
    `!cmd` / `%pip` / `%env` lines, `%%bash` and `%%writefile` bodies. NotANotebook when it is not a
    notebook; a cell IPython cannot parse holds neither Python nor commands."""
    cells = []
    code_cells = [cell for cell in read_document(content).get("cells", []) if cell.get("cell_type") == "code"]
    for number, cell in enumerate(code_cells, start=1):
        source = source_text(cell)
        if source.startswith("%%"):
            header, _, body = source.partition("\n")
            kind = body_kind(header)
            if kind == "shell":
                cells.append(CellCode(number, source, shell=((1, body),)))
                continue
            if kind == "python":
                cells.append(CellCode(number, source, body, tuple(range(1, body.count("\n") + 2))))
                continue
            if (source[2:].split(None, 1) or [""])[0] not in PYTHON_CELL_MAGICS:
                cells.append(CellCode(number, source))
                continue
        cells.append(_read_python_cell(number, source))
    return cells


def _read_python_cell(number: int, source: str) -> CellCode:
    lines = source.splitlines(keepends=True)
    try:
        cell = PythonCell(0, number, lines, spans(lines))
    except CellError:
        return CellCode(number, source)
    shell = tuple((line.span.first, line.command) for line in placeholders(cell))
    return CellCode(number, source, cell.python, tuple(cell.line_of), shell)


def folders_up(start: Path) -> list[Path]:
    """`start` and the folders above it, up to the repository's root (the folder with .git)."""
    folders = [start]
    while not (folders[-1] / ".git").exists() and folders[-1].parent != folders[-1]:
        folders.append(folders[-1].parent)
    return folders


def cd_in_tree(line: str, folder: Path) -> Path | None:
    """For a notebook's `%cd /home/ubuntu/workshop/labs/x` where that folder is not here (the notebook's
    repository on its author's machine): the folder of the tree it names, found above `folder` (the notebook's)
    as the longest end of the path; None for another line or a folder that is here or that the tree lacks."""
    words = line.split(maxsplit=1)
    if len(words) != 2 or words[0] != "%cd" or not words[1].strip().strip("'\"").startswith("/"):
        return None
    named = Path(words[1].strip().strip("'\""))
    if named.exists():
        return None
    for start in range(1, len(named.parts)):
        for base in folders_up(folder.absolute()):
            if base.joinpath(*named.parts[start:]).is_dir():
                return base.joinpath(*named.parts[start:])
    return None
