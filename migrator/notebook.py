r"""Jupyter notebooks, read the way IPython runs them (`IPython.core.inputtransformer2`).

A code cell is what IPython's input transformer makes of it: `!cmd` / `%magic` lines (continued with `\`
onto the next lines), `x = !cmd`, `%%` cell magics. Python cells are migrated as one module (cells share
a namespace: an import in cell 1 is known when cell 3 uses it), each IPython construct standing in as a
placeholder import line; `!`, `%pip`, `%env`, `%sx`/`%system` commands and `%%bash`/`%%sh` cells go through
the shell rewriter. `%%writefile PATH` cells are migrated as the file PATH names (.py, .sh); a config file
is scanned for optimum-neuron / XLA keys and flagged. A cell IPython cannot parse is left byte-identical
with an error finding; the other cells are still migrated. Every rewritten cell is checked again with the
transformer and Python's parser, and the JSON is written back in the notebook's own formatting
(`migrator.ipynb`), so a one-line rewrite is a one-line diff.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial

from migrator.ipynb import (
    JUPYTER_STYLE,
    at_file_line,
    cell_file_lines,
    dump,
    json_style,
    read_document,
    source_text,
    validate,
    write_back,
)
from migrator.notebook_rules.nm470_cell_error import CELL_ERROR
from migrator.notebook_rules.nm471_writefile_config import WRITEFILE_CONFIG
from migrator.rules import Finding, also_on
from migrator.shell.commands import launches
from migrator.shell.installs import python_imports
from migrator.shell.requirements import migrate_requirements
from migrator.sources import is_requirements
from migrator.transform import CELL_MARKER_PREFIX, TODO_PREFIX
from migrator.verify import MigrationError

Rewriter = Callable[[str], tuple[str, list[Finding]]]


_CELL_MARKER = f"import {CELL_MARKER_PREFIX}{{}}__"
_CELL_MARKER_RE = re.compile(rf"^import {CELL_MARKER_PREFIX}(\d+)__\n", re.MULTILINE)
_PLACEHOLDER = "import __neuron_migrate_magic_{}__"
_PLACEHOLDER_RE = re.compile(r"[ \t]*import __neuron_migrate_magic_(\d+)__")
_SHELL_MARKER = "# __neuron_migrate_command_{}__"
_SHELL_MARKER_RE = re.compile(r"^# __neuron_migrate_command_(\d+)__\n", re.MULTILINE)
# Line magics whose argument is a shell command: magic -> (shell text prefix, magic text prefix).
_SHELL_MAGICS = {"!": ("", "!"), "!!": ("", "!!"), "%sx": ("", "%sx "), "%system": ("", "%system ")}
_SHELL_MAGICS |= {"%pip": ("pip ", "%pip "), "%env": ("export ", "%env ")}
_PYTHON_CELL_MAGICS = {"time", "timeit", "capture", "prun"}  # their body runs as Python in the namespace
_CONFIG_KEYS = re.compile(
    r"optimum[-_.]neuron|torch[-_]xla|neuronx[-_]distributed|neuron_parallel_compile|\b(?:XLA|NEURON)_[A-Z0-9_]+"
    r"|\bzero_1\b|\btensor_parallel_size\b|\bpipeline_parallel_size\b|\basync_save\b"
)
_TOP_LEVEL_AWAIT = ast.PyCF_ONLY_AST | ast.PyCF_ALLOW_TOP_LEVEL_AWAIT


class CellError(Exception):
    """A cell IPython cannot turn into Python."""

    def __init__(self, line: int, message: str) -> None:
        super().__init__(message)
        self.line = line


@dataclass
class Span:
    """One IPython construct: original lines [first, last] of the cell, the escape at `column`."""

    first: int
    last: int
    column: int
    escape: str  # "!", "!!", "%", "%%", "?" ... or "" for `x = !cmd` / `x = %magic` and `name?`


@dataclass
class PythonCell:
    index: int  # in document["cells"]
    number: int  # among code cells, from 1
    lines: list[str]  # the cell's original lines
    spans: list[Span]
    python: str = ""  # the cell with placeholders for the spans
    line_of: list[int] = field(default_factory=list)  # python line -> cell line (0-based)
    magics: list[str | None] = field(default_factory=list)  # placeholder -> its text (None: removed)


def migrate_notebook(content: str, migrate_python: Rewriter, migrate_shell) -> tuple[str, list[Finding]]:
    """`migrate_shell(text, inline=True, imported=modules)` rewrites shell commands as notebook lines run them."""
    document = read_document(content)
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
    for number, (index, cell) in enumerate(code_cells, start=1):
        source = source_text(cell)
        try:
            if _writes_requirements(source):
                requirement_cells.append((index, number, source))
                continue
            if source.startswith("%%"):
                following = frozenset().union(*launched[number:])
                migrate_cell = partial(migrate_shell, following=following)
                migrated = _cell_magic(source, number, migrate_python, migrate_cell, findings)
                if migrated is not None:
                    new_sources[index] = migrated
                    continue
                if (source[2:].split(None, 1) or [""])[0] not in _PYTHON_CELL_MAGICS:
                    continue
            lines = source.splitlines(keepends=True)
            python_cells.append(PythonCell(index, number, lines, _spans(lines)))
        except CellError as error:
            findings.append(
                Finding(CELL_ERROR, error.line, 1, f"{CELL_ERROR.action} ({error})", False, number)
            )
        except MigrationError as error:
            findings.append(Finding(CELL_ERROR, 1, 1, f"{CELL_ERROR.action} ({error})", False, number))

    shell_lines = [line for cell in python_cells for line in _placeholders(cell)]
    # The kernel runs these cells as one process; a `%%writefile` script is launched (torchrun included).
    migrated_cells = _migrate_python_cells(python_cells, partial(migrate_python, notebook=True), findings)
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
    _migrate_shell_lines(shell_lines, migrate_lines, findings)
    for index, number, source in requirement_cells:
        header, newline, body = source.partition("\n")
        migrated, body_findings = migrate_requirements(
            body, _imported_beside(header, code_cells, new_sources)
        )
        findings += [_in_cell(f, number, line_offset=1) for f in body_findings]
        new_sources[index] = f"{header}{newline}{migrated}"
    for cell, text, cell_findings in migrated_cells:
        findings += cell_findings
        new_sources[cell.index] = _restore(text, cell.magics)

    # A cell left as it is because it does not parse says so above its code, as every manual finding does.
    for finding in findings:
        if finding.rule is CELL_ERROR and finding.cell is not None:
            index, cell = code_cells[finding.cell - 1]
            flagged = _with_error_todo(new_sources.get(index, source_text(cell)))
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
                _python_of(text.splitlines(keepends=True))
            except CellError as error:
                number = cells_by_index[index].number
                message = f"internal error: the rewritten cell would not parse ({error}); cell left unchanged"
                findings = [f for f in findings if f.cell != number]
                findings.append(Finding(CELL_ERROR, error.line, 1, message, False, number))
                text = _with_error_todo(source_text(cell))
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


def _cell_magic(source: str, number: int, migrate_python, migrate_shell, findings) -> str | None:
    """Migrate a `%%bash` / `%%writefile` cell; None for other cell magics."""
    header, newline, body = source.partition("\n")
    kind = _body_kind(header)
    if kind == "file":
        return _flag_config(header, newline, _writefile_target(header), body, number, findings)
    if kind is None:
        return None
    migrated, body_findings = (migrate_python if kind == "python" else migrate_shell)(body)
    findings += [_in_cell(f, number, line_offset=1) for f in body_findings]
    return f"{header}{newline}{migrated}"


def _body_kind(header: str) -> str | None:
    """What the body of a `%%` cell is: "shell" (`%%bash`, `%%sh`, `%%script bash`, `%%writefile` of a .sh),
    "python" (`%%writefile` of a .py), "file" (`%%writefile` of anything else); None for other cell magics."""
    words = header[2:].split()
    name, arguments = (words[0], words[1:]) if words else ("", [])
    if name in ("bash", "sh") or (
        name == "script" and arguments[:1] and arguments[0].endswith(("bash", "sh"))
    ):
        return "shell"
    if name in ("writefile", "file"):
        target = _writefile_target(header)
        return (
            "python" if target.endswith(".py") else "shell" if target.endswith((".sh", ".bash")) else "file"
        )
    return None


_CELL_ERROR_TODO = (
    f"{TODO_PREFIX} {CELL_ERROR.code} IPython cannot parse this cell, so it is left as it is: fix it so that it "
    "runs, then migrate again"
)


def _with_error_todo(source: str) -> str | None:
    """The cell with the TODO of a cell that does not parse above its code (after a `%%bash` line; a cell of
    another magic, whose first line must stay first, cannot take one); None when it has one or cannot."""
    if _CELL_ERROR_TODO in source:
        return None
    header, newline, body = source.partition("\n")
    if source.startswith(("%%bash", "%%sh")):
        return f"{header}\n{_CELL_ERROR_TODO}\n{body}"
    if source.startswith("%%"):
        return None
    # Indented as the cell's first line: IPython strips that indentation from every line only when the first
    # line has it, so a TODO at column 0 would make an indented cell that runs stop parsing.
    first = next((line for line in source.splitlines() if line.strip()), "")
    return f"{first[: len(first) - len(first.lstrip())]}{_CELL_ERROR_TODO}\n{source}"


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
    target = _writefile_target(source.partition("\n")[0])
    return bool(target) and is_requirements(target.rsplit("/", 1)[-1])


def _imported_beside(header: str, code_cells, new_sources: dict[int, str]) -> frozenset[str]:
    """What the scripts the notebook writes next to a `%%writefile DIR/requirements.txt` import once migrated:
    the packages that file installs for them (a SageMaker `code/` or `scripts/` directory) must stay."""
    directory = _writefile_target(header).rpartition("/")[0]
    imported: set[str] = set()
    for index, cell in code_cells:
        source = new_sources.get(index, source_text(cell))
        path, body = written_script(source)
        if path is not None and path.rpartition("/")[0] == directory:
            imported |= python_imports(body)
    return frozenset(imported)


def _writefile_target(header: str) -> str:
    """The path a `%%writefile [-a] PATH` line writes ("" for another line)."""
    words = header.split()
    if not words or words[0] not in ("%%writefile", "%%file"):
        return ""
    return next((w for w in reversed(words[1:]) if not w.startswith("-")), "").strip("'\"")


def written_script(source: str) -> tuple[str | None, str]:
    """(PATH, body) of a `%%writefile PATH` cell that writes a Python script, else (None, "")."""
    header, _, body = source.partition("\n")
    target = _writefile_target(header)
    return (target, body) if target.endswith(".py") else (None, "")


# Files whose format reads `#` lines as comments: the TODO of a configuration cell can go into them.
_COMMENTED_CONFIGS = (".yaml", ".yml", ".toml", ".cfg", ".ini", ".conf", ".env", ".properties")


def _flag_config(
    header: str, newline: str, target: str, body: str, number: int, findings: list[Finding]
) -> str | None:
    """Findings for the optimum-neuron / XLA keys a configuration cell writes, and the cell with one TODO below
    its `%%writefile` line naming them, where the file's format has `#` comments (None: the cell stays)."""
    named_keys: list[str] = []
    where: list[tuple[int, int]] = []  # (line, column) of each line naming keys
    for line_number, line in enumerate(body.splitlines(), start=2):
        if line.lstrip().startswith("#"):
            continue
        keys = list(dict.fromkeys(m[0] for m in _CONFIG_KEYS.finditer(line)))
        if keys:
            where.append((line_number, line.find(keys[0]) + 1))
            named_keys += keys
    if not named_keys:
        return None
    # One decision (review the file's settings): one finding, at the first line, naming the others.
    keys = ", ".join(f"`{key}`" for key in dict.fromkeys(named_keys))
    also = tuple(line for line, _ in where[1:])
    why = f"{keys} in `{target}`, which this cell writes{also_on(also)}"
    message = f"{why}. {WRITEFILE_CONFIG.action}"
    findings.append(Finding(WRITEFILE_CONFIG, *where[0], message, False, number, why=why, also=also))
    if not target.endswith(_COMMENTED_CONFIGS) or TODO_PREFIX in body:
        return None
    todo = f"{TODO_PREFIX} {WRITEFILE_CONFIG.code} {keys} in this file are optimum-neuron / XLA settings: review them"
    return f"{header}{newline}{todo}\n{body}"


def _spans(lines: list[str]) -> list[Span]:
    """The IPython constructs of a cell, found by IPython's own token transformers."""
    _, spans = _python_of(lines)
    return spans


def _python_of(lines: list[str]) -> tuple[str, list[Span]]:
    """The Python IPython runs for `lines`, and where its constructs were; CellError if it cannot parse."""
    from IPython.core import inputtransformer2 as ipt  # IPython loads in ~70 ms: only for notebooks

    lines = list(lines)
    if lines and not lines[-1].endswith("\n"):
        lines[-1] += "\n"
    skipped = len(lines) - len(ipt.leading_empty_lines(lines))
    current = lines[skipped:]
    # IPython also strips pasted `>>>` / `In [1]:` prompts and a common indentation: such a cell runs, but
    # its lines are not the Python it runs, so it is not rewritten (textwrap.dedent also blanks whitespace-only
    # lines, hence the test on the first line rather than on the result).
    shifted = bool(current) and current[0][:1] in (" ", "\t")
    if shifted or any(strip(current) != current for strip in (ipt.classic_prompt, ipt.ipython_prompt)):
        raise CellError(skipped + 1, "pasted prompts or an indented first line; not rewritten")
    origin = list(range(skipped, len(lines)))
    spans: list[Span] = []
    manager = ipt.TransformerManager()
    for _ in range(ipt.TRANSFORM_LOOP_LIMIT):
        tokens = ipt.make_tokens_by_line(current)
        candidates = sorted(
            filter(None, (t.find(tokens) for t in manager.token_transformers)),
            key=ipt.TokenTransformBase.sortby,
        )
        for transformer in candidates:
            try:
                after = transformer.transform(current)
            except SyntaxError:
                continue
            first = transformer.start_line
            last = first + len(current) - len(after)
            line = current[first]
            escape = ""
            if isinstance(transformer, ipt.EscapedCommand):
                rest = line[transformer.start_col :]
                escape = rest[:2] if rest[:2] in ipt.ESCAPE_DOUBLES else rest[:1]
            spans.append(Span(origin[first], origin[last], transformer.start_col, escape))
            origin[first : last + 1] = [origin[first]]
            current = after
            break
        else:
            break
    code = "".join(current)
    try:
        compile(code, "<cell>", "exec", _TOP_LEVEL_AWAIT)
    except SyntaxError as error:
        line = origin[min(max((error.lineno or 1) - 1, 0), len(origin) - 1)] + 1 if origin else 1
        raise CellError(line, f"line {line}: {error.msg}") from None
    return code, spans


@dataclass
class ShellLine:
    """A `!cmd` / `%pip` / `%env` construct of a cell, as the shell command it runs."""

    cell: PythonCell
    span: Span
    slot: int  # its placeholder number in the cell
    indent: str
    magic: str
    command: str  # shell text, with the shell prefix (`pip `, `export `)
    columns: int  # characters before the command on its first line
    ending: str


def _placeholders(cell: PythonCell) -> list[ShellLine]:
    """Replace each IPython construct by a placeholder import; returns the ones that run shell commands."""
    by_first = {span.first: span for span in cell.spans}
    python_lines: list[str] = []
    shell_lines: list[ShellLine] = []
    position = 0
    while position < len(cell.lines):
        span = by_first.get(position)
        if span is None:
            python_lines.append(cell.lines[position])
            cell.line_of.append(position)
            position += 1
            continue
        original = "".join(cell.lines[span.first : span.last + 1])
        cell.magics.append(original)
        shell = _shell_line(cell, span, original, len(cell.magics) - 1)
        shell_lines += [shell] if shell is not None else []
        indent = cell.lines[span.first][: len(cell.lines[span.first]) - len(cell.lines[span.first].lstrip())]
        ending = "\n" if original.endswith("\n") else ""
        python_lines.append(f"{indent}{_PLACEHOLDER.format(len(cell.magics) - 1)}{ending}")
        cell.line_of.append(span.first)
        position = span.last + 1
    cell.python = "".join(python_lines)
    return shell_lines


def _shell_line(cell: PythonCell, span: Span, original: str, slot: int) -> ShellLine | None:
    ending = "\n" if original.endswith("\n") else ""
    body = original[: len(original) - len(ending)]
    indent, text = body[: span.column], body[span.column :]
    magic = (
        span.escape if span.escape in ("!", "!!") else text.split(None, 1)[0] if span.escape == "%" else None
    )
    if magic not in _SHELL_MAGICS or not span.escape:
        return None
    command = text[len(magic) :].lstrip(" ") if magic.startswith("%") else text[len(magic) :]
    if magic == "%env" and not re.fullmatch(r"[A-Za-z_]\w*=\S*", command):
        return None  # `%env NAME` reads a variable; only `%env NAME=value` sets one
    shell_prefix = _SHELL_MAGICS[magic][0]
    return ShellLine(
        cell, span, slot, indent, magic, shell_prefix + command, len(text) - len(command), ending
    )


def _migrate_shell_lines(lines: list[ShellLine], migrate_shell, findings: list[Finding]) -> None:
    """Migrate the notebook's shell commands as one script, in the order the cells run.

    One script, so that a pre-compilation run (`!neuron_parallel_compile torchrun ...`) is recognised
    when the same launch follows in a later cell. Each command still runs in a shell of its own
    (`inline`). A command tree-sitter cannot parse is left out, so it cannot disturb the others.
    """
    from migrator.shell.syntax import problems

    lines = [line for line in lines if problems(line.command.encode()) == 0]
    if not lines:
        return
    joined = "".join(f"{_SHELL_MARKER.format(n)}\n{line.command}\n" for n, line in enumerate(lines))
    try:
        migrated, shell_findings = migrate_shell(joined, inline=True)
    except MigrationError:
        if len(lines) > 1:  # one command the rewriter cannot handle must not hold the others back
            for line in lines:
                _migrate_shell_lines([line], migrate_shell, findings)
        return
    markers = [joined.count("\n", 0, m.start()) + 1 for m in _SHELL_MARKER_RE.finditer(joined)]
    texts = dict(_split_shell(migrated))
    for number, line in enumerate(lines):
        first, end = markers[number], markers[number + 1] if number + 1 < len(markers) else None
        own = [f for f in shell_findings if f.line > first and (end is None or f.line < end)]
        own = [_shell_finding(f, line, f.line - first) for f in own]
        _rebuild(line, texts.get(number, ""), own, findings)


def _split_shell(migrated: str) -> list[tuple[int, str]]:
    parts = _SHELL_MARKER_RE.split(migrated)
    return [
        (int(parts[i]), parts[i + 1][:-1] if parts[i + 1].endswith("\n") else parts[i + 1])
        for i in range(1, len(parts), 2)
    ]


def _rebuild(line: ShellLine, migrated: str, own: list[Finding], findings: list[Finding]) -> None:
    """Put the migrated command back as its magic (TODO comments above it); None in the cell: removed."""
    shell_prefix, magic_prefix = _SHELL_MAGICS[line.magic]
    if migrated == line.command:
        findings += own
        return
    cell = line.cell
    above = set()  # TODOs already above the command: a rerun must not add them again
    for previous in reversed(cell.lines[: line.span.first]):
        if not previous.lstrip().startswith(TODO_PREFIX):
            break
        above.add(previous.strip())
    out, command_lines = [], migrated.splitlines(keepends=True)
    while command_lines and command_lines[0].lstrip().startswith("#"):
        comment = command_lines.pop(0).strip()
        if comment not in above:
            out.append(f"{line.indent}{comment}\n")
    remainder = "".join(command_lines).rstrip("\n")
    if remainder and not remainder.startswith(shell_prefix):
        return  # the rewrite changed what the magic runs in a way it cannot say: keep the original
    findings += own
    if remainder:
        out.append(f"{line.indent}{magic_prefix}{remainder[len(shell_prefix) :]}{line.ending}")
    cell.magics[line.slot] = "".join(out) or None


def _shell_finding(finding: Finding, line: ShellLine, line_in_command: int) -> Finding:
    column = finding.column + line.span.column + line.columns if line_in_command == 1 else finding.column
    shift = line.span.first + line_in_command - finding.line
    others = {other: other + shift for other in finding.also}
    return finding.moved(others, line=finding.line + shift, column=column, cell=line.cell.number)


def _migrate_python_cells(cells: list[PythonCell], migrate_python, findings):
    """(cell, migrated python, findings) for each cell: all cells as one module, else one by one."""
    if not cells:
        return []
    joined = "".join(f"{_CELL_MARKER.format(c.index)}\n{c.python}\n" for c in cells)
    try:
        migrated, module_findings = migrate_python(joined)
    except MigrationError:
        return [result for cell in cells for result in _migrate_one(cell, migrate_python, findings)]
    by_index = {cell.index: cell for cell in cells}
    placed: dict[int, list[Finding]] = {cell.index: [] for cell in cells}
    starts = [(joined.count("\n", 0, m.start()) + 2, int(m[1])) for m in _CELL_MARKER_RE.finditer(joined)]
    for finding in module_findings:
        first, index = max((s for s in starts if s[0] <= finding.line), default=starts[0])
        placed[index].append(_in_python_cell(finding, by_index[index], finding.line - first))
    return [(by_index[i], text, placed[i]) for i, text in _split_cells(migrated)]


def _migrate_one(cell: PythonCell, migrate_python, findings):
    try:
        migrated, cell_findings = migrate_python(cell.python)
    except MigrationError as error:
        findings.append(Finding(CELL_ERROR, 1, 1, f"{CELL_ERROR.action} ({error})", False, cell.number))
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


def _restore(text: str, magics: list[str | None]) -> str:
    out = []
    for line in text.splitlines(keepends=True):
        match = _PLACEHOLDER_RE.fullmatch(line.rstrip("\n"))
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


def _in_cell(finding: Finding, cell_number: int, line_offset: int) -> Finding:
    others = {other: other + line_offset for other in finding.also}
    return finding.moved(others, line=finding.line + line_offset, cell=cell_number)


# -- reading without rewriting --------------------------------------------------------------------------


@dataclass(frozen=True)
class CellCode:
    """A code cell as IPython runs it, for readers that do not rewrite it (the checklist's scan)."""

    number: int  # among code cells, from 1
    source: str  # the cell as written
    python: str | None = None  # the Python it runs (IPython constructs as placeholder lines); None: none
    python_lines: tuple[int, ...] = ()  # 0-based line of `python` -> 0-based line of the cell
    shell: tuple[tuple[int, str], ...] = ()  # (0-based line of the cell, script) of each shell construct


def read_cells(content: str) -> list[CellCode]:
    """The code cells of a notebook, their Python and shell commands found as `migrate_notebook` finds them:
    `!cmd` / `%pip` / `%env` lines, `%%bash` and `%%writefile` bodies. MigrationError when it is not a
    notebook; a cell IPython cannot parse holds neither Python nor commands."""
    cells = []
    code_cells = [cell for cell in read_document(content).get("cells", []) if cell.get("cell_type") == "code"]
    for number, cell in enumerate(code_cells, start=1):
        source = source_text(cell)
        if source.startswith("%%"):
            header, _, body = source.partition("\n")
            kind = _body_kind(header)
            if kind == "shell":
                cells.append(CellCode(number, source, shell=((1, body),)))
                continue
            if kind == "python":
                cells.append(CellCode(number, source, body, tuple(range(1, body.count("\n") + 2))))
                continue
            if (source[2:].split(None, 1) or [""])[0] not in _PYTHON_CELL_MAGICS:
                cells.append(CellCode(number, source))
                continue
        cells.append(_read_python_cell(number, source))
    return cells


def _read_python_cell(number: int, source: str) -> CellCode:
    lines = source.splitlines(keepends=True)
    try:
        cell = PythonCell(0, number, lines, _spans(lines))
    except CellError:
        return CellCode(number, source)
    shell = tuple((line.span.first, line.command) for line in _placeholders(cell))
    return CellCode(number, source, cell.python, tuple(cell.line_of), shell)
