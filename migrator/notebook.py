r"""Jupyter notebooks migrated, each cell read the way IPython runs it (`usercode.cells`: `!cmd` / `%magic`
lines, `x = !cmd`, `%%` cell magics, found by `IPython.core.inputtransformer2`).

Python cells are migrated as one module (`notebook_python`), each IPython construct standing in as a
placeholder import line; the `!`, `%pip`, `%env`, `%sx`/`%system` commands of those cells as one shell script
(`notebook_shell`); `%%bash`/`%%sh` cells through the shell rewriter. `%%writefile PATH` cells are migrated as
the file PATH names (.py, .sh); a config file is scanned for optimum-neuron / XLA keys and flagged. A cell
IPython cannot parse is left byte-identical with an error finding; the other cells are still migrated. Every
rewritten cell is checked again with the transformer and Python's parser, and the JSON is written back in the
notebook's own formatting (`migrator.ipynb`), so a one-line rewrite is a one-line diff.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from functools import partial
from pathlib import Path

from migrator.exported_loads import columns_back, load_cell_exports
from migrator.ipynb import (
    JUPYTER_STYLE,
    at_file_line,
    cell_file_lines,
    dump,
    json_style,
    write_back,
)
from migrator.notebook_python import migrate_python_cells, restore
from migrator.notebook_shell import migrate_shell_lines
from migrator.rules import KINDS, Finding, rule_modules
from migrator.shell.commands import configured_launches, launches
from migrator.shell.requirements import migrate_requirements
from migrator.shell.rewrite import SHELL_RULES
from migrator.shell.scripts import ScriptParser
from migrator.transform import TODO_PREFIX
from migrator.verify import MigrationError
from usercode.cells import (
    PYTHON_CELL_MAGICS,
    CellError,
    PythonCell,
    placeholders,
    python_of,
    spans,
)
from usercode.launchers import CONFIG_SUFFIXES
from usercode.notebook import (
    NotANotebook,
    body_kind,
    cd_in_tree,
    read_document,
    source_text,
    validate,
    writefile_target,
    written_script,
)
from usercode.python import python_imports
from usercode.sources import is_requirements

# The notebook rules (found as the registry finds them: nothing lists them) and the events of the reading each
# takes, by the name of its function in its `HOOKS`; every rule that takes an event is called, by code:
# - "unparsed_cell" (source) -> the cell with its TODO, None when it cannot take one: a cell IPython cannot
#   parse, or whose rewrite would not parse, is left as it is;
# - "file_cell" (header, newline, target, body, number, findings, parser, rules) -> the cell, None when it
#   stays: a `%%writefile` cell of a file that is neither Python nor shell (a configuration file); `parser`: that
#   of the script a launch of the notebook passes the file to, or None; `rules`: the shell rules by code.
_RULE_MODULES = rule_modules(KINDS["notebook"])
_HOOKS = {
    event: tuple(getattr(module, module.HOOKS[event]) for module in _RULE_MODULES if event in module.HOOKS)
    for event in ("unparsed_cell", "file_cell")
}
CELL_ERROR = next(rule for module in _RULE_MODULES for rule in module.RULES if rule.code == "NM470")

Rewriter = Callable[[str], tuple[str, list[Finding]]]


def _document(content: str) -> dict:
    """The notebook's JSON; MigrationError, with the reader's reason, when it is not a version 4 notebook."""
    try:
        return read_document(content)
    except NotANotebook as error:
        raise MigrationError(str(error)) from None


def migrate_notebook(
    content: str,
    migrate_python: Rewriter,
    migrate_shell,
    parser_of: Callable[..., ScriptParser],
    directory: Path | None = None,
) -> tuple[str, list[Finding]]:
    """`migrate_shell(text, inline=True, imported=modules)` rewrites shell commands as notebook lines run them;
    `parser_of(script, written=...)` is the argument parser of a script a cell launches
    (`migrator.shell.scripts.script_parser`, with the notebook's folder); `directory`: the notebook's folder."""
    document = _document(content)
    style = json_style(content, document)
    file_lines = cell_file_lines(content, document)
    findings: list[Finding] = []
    new_sources: dict[int, str] = {}
    python_cells: list[PythonCell] = []
    code_cells = [(i, c) for i, c in enumerate(document.get("cells", [])) if c.get("cell_type") == "code"]
    # A launch of a script the notebook writes (`%%writefile train.py`) reads that script's argument parser.
    written = dict(map(written_script, (source_text(cell) for _, cell in code_cells)))
    written.pop(None, None)
    migrate_shell = partial(migrate_shell, written=written)
    # (index, number, source) of `%%writefile requirements.txt` cells: migrated once the imports are known.
    requirement_cells: list[tuple[int, int, str]] = []
    # What each cell launches: a compile run in a `%%bash` cell goes when a later cell runs the same launch.
    launched = [launches(_shell_text(source_text(cell))) for _, cell in code_cells]
    # The scripts the launches run are looked for where they run from (a `%cd` first moves there).
    folder = _launch_folder(code_cells, launched, directory)
    migrate_shell, parser_of = partial(migrate_shell, directory=folder), partial(parser_of, directory=folder)
    # The configuration files the launches pass their scripts (`--config sft.yaml`), with those scripts' parsers.
    configs = {
        os.path.normpath(path): parser_of(script, written=written)
        for _, cell in code_cells
        for script, path in configured_launches(_shell_text(source_text(cell)), CONFIG_SUFFIXES)
    }
    for number, (index, cell) in enumerate(code_cells, start=1):
        source = source_text(cell)
        try:
            if _writes_requirements(source):
                requirement_cells.append((index, number, source))
                continue
            if source.startswith("%%"):
                following = frozenset().union(*launched[number:])
                migrate_cell = partial(migrate_shell, following=following)
                migrated = _cell_magic(source, number, migrate_python, migrate_cell, findings, configs)
                if migrated is not None:
                    new_sources[index] = migrated
                    continue
                if (source[2:].split(None, 1) or [""])[0] not in PYTHON_CELL_MAGICS:
                    continue
            lines = source.splitlines(keepends=True)
            python_cells.append(PythonCell(index, number, lines, spans(lines)))
        except CellError as error:
            findings.append(
                Finding(CELL_ERROR, error.line, 1, f"{CELL_ERROR.action} ({error})", False, number)
            )
        except MigrationError as error:
            findings.append(Finding(CELL_ERROR, 1, 1, f"{CELL_ERROR.action} ({error})", False, number))

    shell_lines = [line for cell in python_cells for line in placeholders(cell)]
    # A load of the folder an `!optimum-cli export neuron` line writes becomes that export at load time (NM452).
    exported = load_cell_exports(python_cells, shell_lines, findings)
    # The kernel runs these cells as one process; a `%%writefile` script is launched (torchrun included).
    failed: list[tuple[PythonCell, MigrationError]] = []
    migrated_cells = migrate_python_cells(python_cells, partial(migrate_python, notebook=True), failed)
    findings += [
        Finding(CELL_ERROR, 1, 1, f"{CELL_ERROR.action} ({error})", False, c.number) for c, error in failed
    ]
    # An install must not remove a package that a cell still imports once migrated (a symbol left with a TODO),
    # nor one a script written by a `%%writefile` cell imports (a shell cell body is no Python: no imports).
    bodies = (text.partition("\n")[2] for text in new_sources.values())
    imported = python_imports("\n".join(text for _, text, _ in migrated_cells)).union(
        *map(python_imports, bodies)
    )
    # An export whose output folder a Python cell loads must stay until that load changes (NM452).
    python_code = tuple((cell.number, cell.python) for cell in python_cells)
    # The `!` lines run as one script here; what the `%%bash` cells launch may follow them.
    in_cells = frozenset().union(*(launched[n - 1] for n, (_, c) in enumerate(code_cells, 1) if _is_bash(c)))
    migrate_lines = partial(migrate_shell, imported=imported, python_cells=python_code, following=in_cells)
    migrate_shell_lines(shell_lines, migrate_lines, findings)
    for index, number, source in requirement_cells:
        header, newline, body = source.partition("\n")
        migrated, body_findings = migrate_requirements(
            body, _imported_beside(header, code_cells, new_sources)
        )
        findings += [_in_cell(f, number, line_offset=1) for f in body_findings]
        new_sources[index] = f"{header}{newline}{migrated}"
    for cell, text, cell_findings in migrated_cells:
        findings += columns_back(cell_findings, exported.get(cell.index, []))
        new_sources[cell.index] = restore(text, cell.magics)

    # A cell left as it is because it does not parse says so above its code, as every manual finding does.
    for finding in findings:
        if finding.rule is CELL_ERROR and finding.cell is not None:
            index, cell = code_cells[finding.cell - 1]
            flagged = _first("unparsed_cell", new_sources.get(index, source_text(cell)))
            if flagged is not None:
                new_sources[index] = flagged
    old_sources: dict[int, object] = {}
    cells_by_index = {cell.index: cell for cell in python_cells}
    for index, text in new_sources.items():
        cell = document["cells"][index]
        if text == source_text(cell):
            continue
        if index in cells_by_index:
            try:  # the rewritten cell must still be one IPython can run
                python_of(text.splitlines(keepends=True))
            except CellError as error:
                number = cells_by_index[index].number
                message = f"internal error: the rewritten cell would not parse ({error}); cell left unchanged"
                findings = [f for f in findings if f.cell != number]
                findings.append(Finding(CELL_ERROR, error.line, 1, message, False, number))
                text = _first("unparsed_cell", source_text(cell))
                if text is None:
                    continue
        old_sources[index] = cell["source"]
        cell["source"] = text.splitlines(keepends=True) if isinstance(cell["source"], list) else text
    findings.sort(key=lambda f: (f.cell or 0, f.line, f.column, f.code))
    findings = [at_file_line(finding, file_lines) for finding in findings]
    if not old_sources:
        return content, findings
    # A cell whose every command went (`xm.mark_step()` alone, a compile-only run) goes too: what is left of
    # it (the comments about those commands, a `%%bash` line) does nothing.
    emptied = [index for index in old_sources if _does_nothing(source_text(document["cells"][index]))]
    for index in sorted(emptied, reverse=True):
        del document["cells"][index]
        del old_sources[index]
    validate(document)
    if emptied and style is None:  # cells cannot be spliced out of the text: Jupyter's own format
        return dump(document, JUPYTER_STYLE), findings
    return write_back(content, document, style, old_sources), findings


# -- cells ----------------------------------------------------------------------------------------------


def _cell_magic(source: str, number: int, migrate_python, migrate_shell, findings, configs) -> str | None:
    """Migrate a `%%bash` / `%%writefile` cell; None for other cell magics. `configs`: the parsers of the
    scripts launched with a configuration file, by its path."""
    header, newline, body = source.partition("\n")
    kind = body_kind(header)
    if kind == "file":
        target = writefile_target(header)
        parser = configs.get(os.path.normpath(target)) if target else None
        return _first("file_cell", header, newline, target, body, number, findings, parser, SHELL_RULES)
    if kind is None:
        return None
    migrated, body_findings = (migrate_python if kind == "python" else migrate_shell)(body)
    findings += [_in_cell(f, number, line_offset=1) for f in body_findings]
    return f"{header}{newline}{migrated}"


def _first(event: str, *args) -> str | None:
    """What the first notebook rule that takes `event` and changes the cell made of it (None: none did)."""
    for hook in _HOOKS[event]:
        changed = hook(*args)
        if changed is not None:
            return changed
    return None


def _launch_folder(code_cells, launched, directory: Path | None) -> Path | None:
    """Where the notebook's launches run their scripts from: its folder, or the folder of the tree that a `%cd`
    to the author's copy of it names (`%cd /home/ubuntu/workshop/labs/x`) before its first launch."""
    if directory is None:
        return None
    for (_, cell), launches_here in zip(code_cells, launched, strict=True):
        moved = next(
            filter(None, (cd_in_tree(line, directory) for line in source_text(cell).splitlines())), None
        )
        if moved is not None or launches_here:
            return moved or directory
    return directory


def _does_nothing(source: str) -> bool:
    """A cell with no code left: blank and comment lines only (none of them a TODO of neuron-migrate), after a
    `%%bash` / `%%sh` line."""
    lines = source.splitlines()
    if lines and lines[0].split()[:1] in (["%%bash"], ["%%sh"]):
        lines = lines[1:]
    return (
        all(not line.strip() or line.lstrip().startswith("#") for line in lines) and TODO_PREFIX not in source
    )


def _is_bash(cell: dict) -> bool:
    words = source_text(cell).partition("\n")[0][2:].split()
    return source_text(cell).startswith("%%") and bool(words) and words[0] in ("bash", "sh")


def _shell_text(source: str) -> str:
    """The shell a cell runs, roughly (for the launches it makes): a `%%bash` body, else its `!` lines."""
    header, _, body = source.partition("\n")
    if source.startswith(("%%bash", "%%sh")):
        return body
    return "\n".join(line.strip()[1:] for line in source.splitlines() if line.strip().startswith("!"))


def _writes_requirements(source: str) -> bool:
    """Whether the cell is `%%writefile .../requirements*.txt` (a pip requirements file, as a SageMaker
    `code/requirements.txt`)."""
    target = writefile_target(source.partition("\n")[0])
    return bool(target) and is_requirements(target.rsplit("/", 1)[-1])


def _imported_beside(header: str, code_cells, new_sources: dict[int, str]) -> frozenset[str]:
    """What the scripts the notebook writes next to a `%%writefile DIR/requirements.txt` import once migrated:
    the packages that file installs for them (a SageMaker `code/` or `scripts/` directory) must stay."""
    directory = writefile_target(header).rpartition("/")[0]
    imported: set[str] = set()
    for index, cell in code_cells:
        source = new_sources.get(index, source_text(cell))
        path, body = written_script(source)
        if path is not None and path.rpartition("/")[0] == directory:
            imported |= python_imports(body)
    return frozenset(imported)


def _in_cell(finding: Finding, cell_number: int, line_offset: int) -> Finding:
    others = {other: other + line_offset for other in finding.also}
    return finding.moved(others, line=finding.line + line_offset, cell=cell_number)
