"""Line and column of a few nodes of a module, as libcst's PositionProvider gives them, for less.

PositionProvider tracks the line and column of every token and builds a range for every node of the
module. Findings only need the start of a handful of nodes, so this codegen records where each node's
syntactic start falls as an index into the token list, with PositionProvider's rules (a node may take
its start from a child, e.g. a decorated function from its first decorator), and counts lines only up
to the requested nodes.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from contextlib import contextmanager

import libcst as cst
from libcst._nodes.internal import CodegenState  # not exported; PositionProvider derives from it too

_NEWLINE = re.compile(r"\r\n?|\n")  # PositionProvider's newline rule


class _StartRecordingState(CodegenState):
    def __init__(self, module: cst.Module) -> None:
        super().__init__(default_indent=module.default_indent, default_newline=module.default_newline)
        self.starts: dict[int, int] = {}  # id(node) -> index of its first token
        self._open: list[int] = []

    def before_codegen(self, node: cst.CSTNode) -> None:
        self._open.append(len(self.tokens))

    def after_codegen(self, node: cst.CSTNode) -> None:
        start = self._open.pop()
        self.starts.setdefault(id(node), start)  # a syntactic start recorded inside wins

    @contextmanager
    def record_syntactic_position(
        self, node: cst.CSTNode, *, start_node: cst.CSTNode | None = None, end_node: cst.CSTNode | None = None
    ) -> Iterator[None]:
        start = len(self.tokens)
        yield
        self.starts[id(node)] = self.starts[id(start_node)] if start_node is not None else start


def start_positions(module: cst.Module, nodes: Iterable[cst.CSTNode]) -> dict[int, tuple[int, int]]:
    """id(node) -> (line from 1, column from 0) of the syntactic start of each node found in `module`."""
    state = _StartRecordingState(module)
    module._codegen(state)
    wanted = {id(node): state.starts[id(node)] for node in nodes if id(node) in state.starts}
    positions: dict[int, tuple[int, int]] = {}
    line, column, done = 1, 0, 0
    for node_id, index in sorted(wanted.items(), key=lambda item: item[1]):
        text = "".join(state.tokens[done:index])
        segments = _NEWLINE.split(text)
        if len(segments) == 1:
            column += len(text)
        else:
            line += len(segments) - 1
            column = len(segments[-1])
        done = index
        positions[node_id] = (line, column)
    return positions
