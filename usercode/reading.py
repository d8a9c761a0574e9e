"""A file's code as it runs, for readers that do not rewrite it (the compile risks, the checklist's scan of
models and targets).

Python with `ast` (one walk per module, `usercode.python`), a notebook's cells with IPython's input transformer
(`usercode.notebook.read_cells`: `!cmd`, `%pip`, `%env` lines and `%%bash` bodies are shell, the rest Python),
shell with tree-sitter's bash grammar: its commands (wrappers and `VAR=1` prefixes looked through, `bash -c "..."` and
`eval "..."` strings and script heredocs parsed again), its variable assignments and `${NAME:-default}`
expansions. Comments are not code: nothing is read from them.
"""

from __future__ import annotations

import ast
import contextlib
from dataclasses import dataclass, field
from pathlib import Path

from usercode.launchers import SHELLS, command_parts, heredoc_kind, look_through
from usercode.notebook import NotANotebook, read_cells
from usercode.python import PythonModule
from usercode.shell import Node, Word, parse, quoted_body, word


@dataclass(frozen=True)
class ShellCommand:
    """What a command runs: the program and its arguments (quotes removed), wrappers looked through."""

    words: tuple[str, ...]
    lines: tuple[int, ...]  # the line of each word
    cell: int | None = None

    @property
    def line(self) -> int:
        return self.lines[0]


@dataclass(frozen=True)
class ShellAssignment:
    """`NAME=value`: on its own, after `export` / `local` / `declare`, or before a command."""

    name: str
    value: str  # quotes removed; it holds `$` when it expands a variable
    line: int
    cell: int | None = None


@dataclass(frozen=True)
class ShellDefault:
    """`${NAME:-value}` (or `${NAME-value}`): the value used when NAME is unset."""

    name: str
    value: str
    line: int
    cell: int | None = None


@dataclass
class Code:
    """What runs in one file: its Python modules, shell commands, assignments and defaults, each list in file
    order; and its text (the file's, or each code cell's with its number)."""

    texts: list[tuple[int | None, str]] = field(default_factory=list)
    python: list[PythonModule] = field(default_factory=list)
    commands: list[ShellCommand] = field(default_factory=list)
    assignments: list[ShellAssignment] = field(default_factory=list)
    defaults: list[ShellDefault] = field(default_factory=list)


def read_code(path: Path, kind: str) -> Code:
    """`kind` as the migrator reads the file (python, notebook, shell); any other kind is text only. What cannot
    be read or parsed adds nothing: the migrator's own error on the file says why."""
    code = Code()
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return code
    if kind == "notebook":
        _read_notebook(code, text)
        return code
    code.texts.append((None, text))
    if kind == "python":
        _read_python(code, text)
    elif kind == "shell":
        _read_shell(code, text)
    return code


def _read_python(code: Code, text: str, cell: int | None = None, line_map: tuple[int, ...] = ()) -> None:
    # What Python's parser refuses, or nests too deep for it, is not read.
    with contextlib.suppress(SyntaxError, ValueError, RecursionError, MemoryError):
        code.python.append(PythonModule(ast.parse(text), cell, line_map))


def _read_notebook(code: Code, text: str) -> None:
    try:
        cells = read_cells(text)
    except NotANotebook:
        return
    for cell in cells:
        code.texts.append((cell.number, cell.source))
        for line, script in cell.shell:
            _read_shell(code, script, cell.number, line)
        if cell.python is not None:
            _read_python(code, cell.python, cell.number, cell.python_lines)


def _read_shell(code: Code, text: str, cell: int | None = None, line_offset: int = 0) -> None:
    data = text.encode()
    with contextlib.suppress(RecursionError):  # nesting deeper than Python's stack: what was read stays
        _ShellReader(code, data, cell, line_offset).walk(parse(data).root_node)


@dataclass
class _ShellReader:
    code: Code
    data: bytes
    cell: int | None
    line_offset: int

    def line(self, node: Node) -> int:
        return node.start_point[0] + 1 + self.line_offset

    def walk(self, node: Node) -> None:
        if node.type in ("ERROR", "comment", "heredoc_body"):  # guesses, and text that does not run here
            return
        scripts: list[Node] = []  # strings read as scripts of their own
        if node.type == "command":
            scripts = self.command(node)
        elif node.type == "variable_assignment" and node.parent is not None and node.parent.type != "command":
            self.assignment(node)  # a command's prefix is read with its command
        elif node.type == "expansion":
            self.default(node)
        elif node.type == "redirected_statement":
            self.heredocs(node)
        for child in node.children:
            if child not in scripts:
                self.walk(child)

    def heredocs(self, node: Node) -> None:
        """Heredoc bodies that are scripts (fed to bash or python, written to a .sh or .py file), as the
        migrator's shell rewriter tells them from data."""
        command = node.child_by_field_name("body")
        for redirect in (child for child in node.children if child.type == "heredoc_redirect"):
            body = next((child for child in redirect.children if child.type == "heredoc_body"), None)
            kind = (
                heredoc_kind(command, node, self.data[body.start_byte : body.end_byte])
                if body is not None
                else None
            )
            if body is None or kind is None:
                continue
            text = self.text(body)
            first = self.line(body) - 1
            if kind == "shell":
                _read_shell(self.code, text, self.cell, first)
            else:
                _read_python(self.code, text, self.cell, tuple(range(first, first + text.count("\n") + 1)))

    def assignment(self, node: Node) -> None:
        name = node.child_by_field_name("name")
        value = node.child_by_field_name("value")
        if name is not None:
            text = word(value, self.data).value if value is not None else ""
            self.code.assignments.append(ShellAssignment(self.text(name), text, self.line(node), self.cell))

    def default(self, node: Node) -> None:
        children = node.children
        for index, child in enumerate(children[:-1]):
            if child.type == "variable_name" and children[index + 1].type in (":-", "-"):
                value = next((c for c in children[index + 2 :] if c.is_named), None)
                if value is not None:
                    text = word(value, self.data).value
                    self.code.defaults.append(
                        ShellDefault(self.text(child), text, self.line(node), self.cell)
                    )

    def command(self, node: Node) -> list[Node]:
        scripts = []
        for part in command_parts(node, self.data):
            for child in part:
                if child.type == "variable_assignment":
                    self.assignment(child)
            words = [
                word(c, self.data)
                for c in part
                if c.type != "variable_assignment" and "redirect" not in c.type
            ]
            words, assignments = look_through(words)
            for assignment in assignments:  # `env NAME=value program`
                name, _, value = assignment.value.partition("=")
                line = self.line(assignment.node)
                self.code.assignments.append(ShellAssignment(name, value, line, self.cell))
            if words:
                lines = tuple(self.line(w.node) for w in words)
                self.code.commands.append(ShellCommand(tuple(w.value for w in words), lines, self.cell))
                scripts += self.nested(words)
        return scripts

    def nested(self, words: list[Word]) -> list[Node]:
        """`bash -c "..."`, `eval "..."`: the string is a script of its own; returns the nodes read so."""
        program = words[0].value
        if program in SHELLS and len(words) > 2 and words[1].value == "-c":
            scripts = words[2:3]
        elif program == "eval":
            scripts = words[1:]
        else:
            return []
        for script in scripts:
            body = quoted_body(script.node)
            start, end = (body[0], body[1]) if body is not None else (script.start, script.end)
            line_offset = self.line(script.node) - 1
            _read_shell(self.code, self.data[start:end].decode(errors="replace"), self.cell, line_offset)
        return [script.node for script in scripts]

    def text(self, node: Node) -> str:
        return self.data[node.start_byte : node.end_byte].decode(errors="replace")
