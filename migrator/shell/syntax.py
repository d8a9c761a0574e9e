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
