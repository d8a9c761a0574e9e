r"""A notebook cell as IPython runs it (`IPython.core.inputtransformer2`): `!cmd` / `%magic` lines (continued
with `\` onto the next lines), `x = !cmd`, `%%` cell magics, each found by IPython's own token transformers.
The Python of a cell is its text with each construct standing in as a placeholder import line (`placeholders`),
so Python's parser reads it; the shell commands of `!`, `%pip`, `%env`, `%sx`/`%system` lines come out with
where they sit. The migrator rewrites cells on this reading; the checklist and `neuron-migrate try` read them.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field

_PLACEHOLDER = "import __neuron_migrate_magic_{}__"
PLACEHOLDER_RE = re.compile(r"[ \t]*import __neuron_migrate_magic_(\d+)__")
# Line magics whose argument is a shell command: magic -> (shell text prefix, magic text prefix).
SHELL_MAGICS = {"!": ("", "!"), "!!": ("", "!!"), "%sx": ("", "%sx "), "%system": ("", "%system ")}
SHELL_MAGICS |= {"%pip": ("pip ", "%pip "), "%env": ("export ", "%env ")}
PYTHON_CELL_MAGICS = {"time", "timeit", "capture", "prun"}  # their body runs as Python in the namespace
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


def spans(lines: list[str]) -> list[Span]:
    """The IPython constructs of a cell, found by IPython's own token transformers."""
    _, spans = python_of(lines)
    return spans


def python_of(lines: list[str]) -> tuple[str, list[Span]]:
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


def placeholders(cell: PythonCell) -> list[ShellLine]:
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
    if magic not in SHELL_MAGICS or not span.escape:
        return None
    command = text[len(magic) :].lstrip(" ") if magic.startswith("%") else text[len(magic) :]
    if magic == "%env" and not re.fullmatch(r"[A-Za-z_]\w*=\S*", command):
        return None  # `%env NAME` reads a variable; only `%env NAME=value` sets one
    shell_prefix = SHELL_MAGICS[magic][0]
    return ShellLine(
        cell, span, slot, indent, magic, shell_prefix + command, len(text) - len(command), ending
    )
