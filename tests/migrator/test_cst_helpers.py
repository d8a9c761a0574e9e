"""The read-only walks of cst_helpers against libcst's own visit: same nodes, same order, on every Python
fixture."""

from __future__ import annotations

from pathlib import Path

import libcst as cst
import libcst.matchers as m
import pytest

from migrator.cst_helpers import descendants, visit_read_only

FIXTURES = sorted(Path("fixtures/migrator").rglob("*.py"))
# A node class is learnt from its first instance: here the f-string without a format spec comes first.
FORMAT_SPECS = 'print(f"{loss}")\nprint(f"{loss:.{digits}f} {step!r:>{width}}")\n'


class _Recorder(cst.CSTVisitor):
    def __init__(self) -> None:
        super().__init__()
        self.calls: list[tuple[str, int]] = []

    def on_visit(self, node: cst.CSTNode) -> bool:
        self.calls.append(("visit", id(node)))
        return not isinstance(node, cst.Lambda)  # a pruned subtree is left alike

    def on_leave(self, original_node: cst.CSTNode) -> None:
        self.calls.append(("leave", id(original_node)))


@pytest.mark.parametrize("source", [FORMAT_SPECS, *FIXTURES], ids=str)
def test_read_only_walks_match_libcst_visit(source):
    module = cst.parse_module(source if isinstance(source, str) else source.read_text())
    for kinds in (
        (cst.Call,),
        (cst.Name, cst.Arg, cst.Attribute),
        (cst.IfExp, cst.Decorator, cst.Param, cst.FormattedStringText),
    ):
        matchers = [getattr(m, kind.__name__)() for kind in kinds]
        matcher = m.OneOf(*matchers) if len(matchers) > 1 else matchers[0]
        assert [id(node) for node in descendants(module, kinds)] == [
            id(n) for n in m.findall(module, matcher)
        ]
    # Nodes stay alive (ids are not reused) while both recorders hold the module.
    by_libcst, read_only = _Recorder(), _Recorder()
    module.visit(by_libcst)
    visit_read_only(module, read_only)
    assert read_only.calls == by_libcst.calls
