"""Shell syntax through tree-sitter's bash grammar: parsing, node helpers, problem counts.

Offsets are byte offsets into the UTF-8 text, as tree-sitter reports them. Carriage returns of CRLF files
are blanked (same length, so every offset stays valid) before parsing: the grammar would otherwise read
them as part of words.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache

import tree_sitter
import tree_sitter_bash

Node = tree_sitter.Node

# Nodes whose children are statements run one after the other.
BLOCKS = frozenset(
    {
        "program",
        "compound_statement",
        "do_group",
        "if_statement",
        "elif_clause",
        "else_clause",
        "subshell",
        "case_item",
    }
)
# Children of a block that are not statements of it.
_NOT_STATEMENTS = frozenset({"comment", "heredoc_body"})
_ASSIGNMENT = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)=")


@cache
def _parser() -> tree_sitter.Parser:
    return tree_sitter.Parser(tree_sitter.Language(tree_sitter_bash.language()))


def parse(data: bytes) -> tree_sitter.Tree:
    return _parser().parse(data.replace(b"\\\r\n", b" \\\n").replace(b"\r\n", b" \n"))


def problems(data: bytes) -> int:
    """ERROR and MISSING nodes in the parse of `data`: what a rewrite must never add."""
    root = parse(data).root_node
    count, stack = 0, [root] if root.has_error else []
    while stack:
        node = stack.pop()
        count += node.is_error or node.is_missing
        stack.extend(child for child in node.children if child.has_error or child.is_missing)
    return count


def statements(block: Node) -> list[Node]:
    """The statements of a block (its named children that run), in order."""
    return [
        child
        for index, child in enumerate(block.children)
        if child.is_named
        and child.type not in _NOT_STATEMENTS
        and block.field_name_for_child(index) not in ("condition", "variable", "value")
    ]


def block_statement(node: Node) -> Node | None:
    """The innermost ancestor-or-self of `node` that is a statement of a block."""
    while node.parent is not None:
        if node.parent.type in BLOCKS and node in statements(node.parent):
            return node
        node = node.parent
    return None


@dataclass(frozen=True)
class Word:
    """One word of a command (or a variable assignment), with its byte span."""

    start: int
    end: int
    text: str
    node: Node

    @property
    def value(self) -> str:
        """The word as the program sees it when it holds no expansion (quotes and escapes removed)."""
        return re.sub(r"""\\(.)|["']""", lambda m: m[1] or "", self.text)

    @property
    def assignment(self) -> str | None:
        """The variable name when the word is `NAME=value`."""
        match = _ASSIGNMENT.match(self.text)
        return match[1] if match else None


def word(node: Node, data: bytes) -> Word:
    return Word(node.start_byte, node.end_byte, data[node.start_byte : node.end_byte].decode(), node)


def quoted_body(node: Node) -> tuple[int, int, str] | None:
    """(start, end, quote) of the text inside a quoted string node, or None for other nodes."""
    if node.type == "string" and node.end_byte - node.start_byte >= 2:
        return node.start_byte + 1, node.end_byte - 1, '"'
    if node.type == "raw_string" and node.end_byte - node.start_byte >= 2:
        return node.start_byte + 1, node.end_byte - 1, "'"
    return None


def walk_expansions(node: Node):
    """Every `$NAME` / `${NAME...}` under `node`, with the variable name node."""
    stack = [node]
    while stack:
        current = stack.pop()
        if current.type in ("simple_expansion", "expansion"):
            name = next((c for c in current.children if c.type == "variable_name"), None)
            if name is not None:
                yield current, name
        stack.extend(reversed(current.children))


# Commands whose arguments are text shown to a person, and where text may go and still be only shown.
_SHELL_PRINTERS = frozenset({"echo", "printf"})
_SHOWN_FILES = (".log", ".txt", ".out", ".err", ".md")


def shown_by_shell(node: Node) -> bool:
    """Whether `node` is text a shell script only shows: an argument of `echo` / `printf` (to the terminal or a
    log; one that writes a file such as `~/.bashrc` decides what it holds), or the body of a heredoc that `cat`
    prints (no file to write)."""
    for ancestor in ancestors(node):
        if ancestor.type == "command":
            name = ancestor.child_by_field_name("name")
            program = name.text.decode().rsplit("/", 1)[-1] if name is not None else ""
            if program not in _SHELL_PRINTERS or name.start_byte <= node.start_byte < name.end_byte:
                return False
            statement = ancestor.parent if ancestor.parent is not None else ancestor
            targets = [
                redirect.child_by_field_name("destination")
                for redirect in statement.children
                if statement.type == "redirected_statement" and redirect.type == "file_redirect"
            ]
            return all(
                target is None
                or target.text.decode().strip("'\"").startswith(("/dev/", "&"))
                or target.text.decode().strip("'\"").endswith(_SHOWN_FILES)
                for target in targets
            )
        if ancestor.type == "heredoc_body":
            statement = ancestor.parent.parent if ancestor.parent is not None else None
            command = statement.child_by_field_name("body") if statement is not None else None
            name = command.child_by_field_name("name") if command is not None else None
            prints = name is not None and name.text.decode() == "cat"
            return prints and not any(child.type == "file_redirect" for child in _statement_nodes(statement))
    return False


def ancestors(node: Node):
    while node is not None:
        yield node
        node = node.parent


def _statement_nodes(statement):
    stack = [statement] if statement is not None else []
    while stack:
        current = stack.pop()
        yield current
        stack.extend(c for c in current.children if c.type != "heredoc_body")
