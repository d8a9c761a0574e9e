"""The shared core of the shell rules: the pieces of a file parsed as scripts (`Context`), the edit list by
byte ranges with the escaping for the quoting around an edit, findings and TODOs, removal of words and
statements, and rendering the output. Everything outside the edited ranges stays byte-identical."""

from __future__ import annotations

import bisect
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from migrator.rules import Finding, Rule
from migrator.transform import TODO_PREFIX
from usercode.shell import BLOCKS, Node, Word, block_statement, statements


def _escape_for(quote: str | None) -> Callable[[str], str]:
    """How text inserted inside a quoting context must be written so bash reads it back unchanged."""
    if quote == '"':
        return lambda text: re.sub(r'([\\"$`])', r"\\\1", text)
    if quote == "'":
        return lambda text: text.replace("'", "'\\''")
    if quote == "heredoc":  # unquoted delimiter: the body is expanded
        return lambda text: re.sub(r"([\\$`])", r"\\\1", text)
    return lambda text: text


@dataclass
class Context:
    """A piece of the file parsed as a script of its own: the file, a string bash re-runs, a heredoc.

    Offsets inside a piece are offsets into `data`, the text bash runs: the file's bytes, except in an unquoted
    heredoc, whose backslash escapes (of a backslash, `$`, a backquote) bash undoes as it writes the body out:
    `where` maps its offsets back to the file."""

    start: int  # byte offset of the piece in the file
    end: int
    escape: Callable[[str], str]
    standalone: bool  # a script of its own (the file, a heredoc written to a script): gets its own export
    data: bytes  # the text parsed
    host: Node | None = None  # the command holding the piece (strings bash re-runs)
    host_context: Context | None = None
    anchor: int | None = None  # where TODOs go, for pieces nested in the file
    launchers: list[tuple[int, int]] = field(default_factory=list)  # byte ranges of its Python launches
    survey: list[tuple[int, list[Word]]] | None = None  # every Python launch in it (see `survey`)
    # (offset, variable) of its `unset`s (see `survey`)
    unsets: list[tuple[int, str]] = field(default_factory=list)
    where: tuple[int, ...] | None = (
        None  # file offset of each byte of `data` (and of its end), when not start+i
    )

    def at(self, offset: int) -> int:
        """The file offset of an offset into `data`."""
        return self.where[offset] if self.where is not None else self.start + offset

    def piece(
        self,
        start: int,
        end: int,
        escape: Callable[[str], str],
        standalone: bool,
        unescape: bool = False,
        **fields,
    ) -> Context:
        """The part [start, end) of this piece as a piece of its own; `unescape`: an unquoted heredoc body."""
        data, positions = self.data[start:end], None
        if unescape and b"\\" in data:
            data, positions = unescaped(data)
        if positions is not None:
            where = tuple(self.at(start + position) for position in positions)
        else:
            where = self.where[start : end + 1] if self.where is not None else None
        return Context(self.at(start), self.at(end), escape, standalone, data, where=where, **fields)


def unescaped(raw: bytes) -> tuple[bytes, list[int]]:
    """An unquoted heredoc body as bash writes it out (a backslash before a backslash, `$` or a backquote goes;
    one before a newline, which bash joins, stays: read as a line continuation it means the same), and the offset in `raw`
    of each of its bytes and of its end."""
    text, where, position = bytearray(), [], 0
    while position < len(raw):
        escaped = raw[position] == 0x5C and raw[position + 1 : position + 2] in (b"\\", b"$", b"`")
        where.append(position)
        text.append(raw[position + 1] if escaped else raw[position])
        position += 2 if escaped else 1
    return bytes(text), [*where, len(raw)]


@dataclass(frozen=True)
class Edit:
    start: int
    end: int
    text: str
    weak: bool = False  # re-indentation: gives way to any edit it overlaps
    owner: int = 0


class EditList:
    """Positions, findings, TODOs and edits of one file (`rewrite.ShellRewriter` sets its state)."""

    rules: Mapping[str, Rule]  # the shell rules by code: a matcher reports another module's code by it

    def position(self, offset: int) -> tuple[int, int]:
        line = bisect.bisect_right(self.line_starts, offset)
        start = self.line_starts[line - 1]
        return line, len(self.data[start:offset].decode(errors="replace")) + 1

    def line_start(self, offset: int) -> int:
        return self.line_starts[bisect.bisect_right(self.line_starts, offset) - 1]

    def report(self, offset: int, rule: Rule | str, message: str | None = None, fixed: bool = True) -> None:
        rule = self.rules[rule] if isinstance(rule, str) else rule
        line, column = self.position(offset)
        self.findings.append((Finding(rule, line, column, message or rule.action, fixed), self.owner))

    def todo(self, ctx: Context, node: Node, rule: Rule | str, message: str, at: int | None = None) -> None:
        """A manual finding at `at` (default: the node) and a TODO comment above the node's statement; `rule`: a
        rule, or the code of one."""
        rule = self.rules[rule] if isinstance(rule, str) else rule
        self.report(ctx.at(node.start_byte if at is None else at), rule, message, fixed=False)
        self.todos.append((self.anchor(ctx, node), f"{TODO_PREFIX} {rule.code} {message}", self.owner))

    def edit(self, ctx: Context, start: int, end: int, text: str = "", weak: bool = False) -> None:
        self.edits.append(Edit(ctx.at(start), ctx.at(end), ctx.escape(text), weak, self.owner))

    def anchor(self, ctx: Context, node: Node) -> int:
        """The line start where a comment about `node` can go: above the statement that holds it."""
        if ctx.anchor is not None:
            return ctx.anchor
        statement = block_statement(node) or node
        while True:
            block = statement.parent
            same_line = [
                s
                for s in (statements(block) if block is not None else [statement])
                if self.line_start(s.start_byte) == self.line_start(statement.start_byte)
            ]
            first = min(same_line, key=lambda s: s.start_byte)
            start = self.line_start(first.start_byte)
            if not self.data[start : first.start_byte].strip() or block is None:
                return start
            if block.type == "case_item" and self.line_start(block.start_byte) == start:
                return start  # `train) cmd ;;`: a comment may stand above the case item
            statement = block_statement(block) or block  # mid-line (`then cmd`): go one level out

    def remove_word(self, ctx: Context, item: Word, words: list[Word], through: Word | None = None) -> None:
        """Remove a word (through its value) with the blanks and continuation before it."""
        last = through or item
        index = next(i for i, w in enumerate(words) if w.start == item.start)
        if index > 0:
            self.edit(ctx, words[index - 1].end, last.end)
            return
        following = next((w for w in words if w.start >= last.end), None)
        self.edit(ctx, item.start, following.start if following else last.end)

    def remove_statement(self, ctx: Context, node: Node, placeholder: bool = True) -> bool:
        """Remove the statement `node` is, with its line when it has one of its own; False if it cannot go.

        The only statement of a block becomes `:` (a block cannot be empty), unless `placeholder` is False.
        """
        data = ctx.data
        if node.parent is not None and node.parent.type == "redirected_statement":
            node = node.parent  # `cmd > log 2>&1` goes with its redirections
        parent = node.parent
        if parent is not None and parent.type == "list":  # `A && B`: drop one side with its operator
            sides = [c for c in parent.named_children if c.type != "comment"]
            if len(sides) == 2 and parent.parent is not None and parent.parent.type in BLOCKS:
                if node == sides[0]:
                    self.edit(ctx, node.start_byte, sides[1].start_byte)
                else:
                    self.edit(ctx, sides[0].end_byte, node.end_byte)
                return True
            return False
        if parent is None or parent.type not in BLOCKS or node not in statements(parent):
            return False
        siblings = statements(parent)
        if len(siblings) == 1 and parent.type != "program":
            if placeholder:
                self.edit(ctx, node.start_byte, node.end_byte, ":")
            return placeholder
        if len(siblings) == 1 and ctx.host is not None:  # the whole string bash re-runs: drop its command
            return self.remove_statement(ctx.host_context, ctx.host)
        if self.remove_lines(ctx, node.start_byte, node.end_byte, data):
            return True
        index = siblings.index(node)
        if index + 1 < len(siblings):
            self.edit(ctx, node.start_byte, siblings[index + 1].start_byte)
        else:
            self.edit(ctx, siblings[index - 1].end_byte, node.end_byte)
        return True

    def remove_lines(self, ctx: Context, start: int, end: int, data: bytes) -> bool:
        """Remove [start, end) with its whole lines when nothing else is on them (a trailing comment goes)."""
        line_start = data.rfind(b"\n", 0, start) + 1
        if line_start == 0 and self.line_start(ctx.start) != ctx.start:
            return False  # the piece starts within a line (`bash -c "..."`)
        if data[line_start:start].strip():
            return False
        rest = re.match(rb"[ \t]*;?[ \t]*(#[^\n]*)?(\r?\n|$)", data[end:])
        if rest is None:
            return False
        self.edit(ctx, line_start, end + rest.end())
        return True

    def render(self) -> str:
        out: list[str] = []
        todos: dict[int, list[str]] = {}
        for offset, text, _ in self.todos:
            if text not in todos.setdefault(offset, []):
                todos[offset].append(text)
        inserts = [Edit(offset, offset, self.todo_lines(offset, texts)) for offset, texts in todos.items()]
        replacements = sorted((e for e in self.edits if e.start != e.end), key=lambda e: (e.start, -e.end))
        strong: list[Edit] = []
        for item in replacements:
            if item.weak and any(
                s.start < item.end and item.start < s.end for s in replacements if not s.weak
            ):
                continue
            if strong and item.start < strong[-1].end:
                if item.end <= strong[-1].end:
                    continue  # inside a range that is removed or replaced whole
                raise ValueError(f"overlapping shell edits at byte {item.start}")
            strong.append(item)
        # At one offset: whole lines (the export) first, then the TODO lines right above their command,
        # then a prefix of the command itself.
        added = [e for e in self.edits if e.start == e.end and e.text]
        lines = [e for e in added if e.text.endswith("\n")]
        insertions = [*lines, *inserts, *(e for e in added if not e.text.endswith("\n"))]
        insertions = [e for e in insertions if not any(s.start < e.start < s.end for s in strong)]
        position = 0
        events = sorted(
            [(e.start, 0, n, e) for n, e in enumerate(insertions)]
            + [(e.start, 1, n, e) for n, e in enumerate(strong)]
        )
        data = self.data
        for start, _, _, item in events:
            out.append(data[position:start].decode())
            out.append(item.text)
            position = item.end
        out.append(data[position:].decode())
        return "".join(out)

    def comments_above(self, offset: int) -> list[str]:
        """The comment lines right above the line of `offset`, nearest first, stripped."""
        line = bisect.bisect_right(self.line_starts, offset)
        above = []
        for number in range(line - 2, -1, -1):
            text = self.data[self.line_starts[number] : self.line_starts[number + 1]].decode().strip()
            if not text.startswith("#"):
                break
            above.append(text)
        return above

    def todo_lines(self, offset: int, texts: list[str]) -> str:
        """TODO comment lines for `offset`, without the ones already right above it (a rerun adds none)."""
        above = set(self.comments_above(offset))
        end = self.data.find(b"\n", offset)
        current = self.data[offset : end if end >= 0 else len(self.data)].decode()
        indent = current[: len(current) - len(current.lstrip(" \t"))]
        return "".join(f"{indent}{text}{self.newline}" for text in texts if text not in above)
