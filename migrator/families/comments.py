"""Keep the comments of statements a family removes.

A comment line above a removed statement usually introduces the code that follows it as well, so it
moves to the next statement of the same block (or to the end of the block when the removed statement
was the last one). Families that remove whole statements derive from `KeepsComments` and call
`self.removed(original_line)` before returning `cst.RemoveFromParent()`; a subclass that defines one of
the leave handlers below itself calls `self.adopt(original, updated)` from it.
"""

from __future__ import annotations

import libcst as cst

from migrator.transform import Family


class KeepsComments(Family):
    def __init__(self, ctx) -> None:
        super().__init__(ctx)
        self._next: dict[int, int] = {}  # statement -> next statement, or its block when it is the last
        self._orphans: dict[int, list[cst.EmptyLine]] = {}

    def _index(self, block, body) -> None:
        for statement, following in zip(body, [*body[1:], block], strict=True):
            self._next[id(statement)] = id(following)

    def visit_Module(self, node: cst.Module) -> None:
        self._index(node, node.body)

    def visit_IndentedBlock(self, node: cst.IndentedBlock) -> None:
        self._index(node, node.body)

    def removed(self, original: cst.CSTNode) -> None:
        """`original` (a statement) is being removed: its comment lines go to what follows it."""
        lines = [*self._orphans.pop(id(original), []), *getattr(original, "leading_lines", ())]
        if any(line.comment for line in lines) and id(original) in self._next:
            self._orphans.setdefault(self._next[id(original)], []).extend(lines)

    def adopt(self, original: cst.CSTNode, updated):
        lines = self._orphans.pop(id(original), None)
        if not lines:
            return updated
        if isinstance(updated, (cst.IndentedBlock, cst.Module)):
            return updated.with_changes(footer=[*lines, *updated.footer])
        if isinstance(updated, (cst.SimpleStatementLine, cst.BaseCompoundStatement)):
            return self.adopt_lines(updated, lines)
        if isinstance(updated, cst.FlattenSentinel) and updated.nodes:
            first, *rest = updated.nodes
            return cst.FlattenSentinel([self.adopt_lines(first, lines), *rest])
        self._orphans[id(original)] = lines  # removed as well: `removed` passes them on
        self.removed(original)
        return updated

    @staticmethod
    def adopt_lines(statement, lines):
        return statement.with_changes(leading_lines=[*lines, *statement.leading_lines])

    def leave_SimpleStatementLine(self, original, updated):
        return self.adopt(original, updated)

    def leave_IndentedBlock(self, original, updated):
        return self.adopt(original, updated)

    def leave_Module(self, original, updated):
        return self.adopt(original, updated)

    def leave_If(self, original, updated):
        return self.adopt(original, updated)

    def leave_For(self, original, updated):
        return self.adopt(original, updated)

    def leave_While(self, original, updated):
        return self.adopt(original, updated)

    def leave_With(self, original, updated):
        return self.adopt(original, updated)

    def leave_Try(self, original, updated):
        return self.adopt(original, updated)

    def leave_FunctionDef(self, original, updated):
        return self.adopt(original, updated)

    def leave_ClassDef(self, original, updated):
        return self.adopt(original, updated)
