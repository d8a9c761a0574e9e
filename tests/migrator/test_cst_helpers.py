"""The walks of cst_helpers against libcst's own visit: same nodes, same order, same result, on every Python
fixture."""

from __future__ import annotations

from pathlib import Path

import libcst as cst
import libcst.matchers as m
import pytest
from libcst.metadata import MetadataWrapper, ParentNodeProvider

from migrator.cst_helpers import (
    TOKEN_CLASSES,
    descendants,
    parents,
    transform,
    visit_read_only,
    without_empty_try,
)

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
    # A subtree's nodes are read from the module's walk once the module was walked.
    kinds = (cst.Name, cst.Call, cst.Arg, cst.Integer, cst.SimpleString)
    for subtree in descendants(module, (cst.FunctionDef, cst.If, cst.Call, cst.Arg)):
        assert [id(node) for node in descendants(subtree, cst.CSTNode)] == [
            id(n) for n in m.findall(subtree, m.MatchIfTrue(lambda node: True))
        ]
        assert [id(node) for node in descendants(subtree, kinds)] == [
            id(n) for n in m.findall(subtree, m.MatchIfTrue(lambda node: isinstance(node, kinds)))
        ]
    # Nodes stay alive (ids are not reused) while both recorders hold the module.
    by_libcst, read_only = _Recorder(), _Recorder()
    module.visit(by_libcst)
    visit_read_only(module, read_only)
    tokens = {id(node) for node in descendants(module, tuple(TOKEN_CLASSES))}
    assert read_only.calls == [call for call in by_libcst.calls if call[1] not in tokens]
    expected = MetadataWrapper(module, unsafe_skip_copy=True).resolve(ParentNodeProvider)
    assert parents(module) == dict(expected)


class _Editor(cst.CSTTransformer):
    """Records its calls and edits through every kind of result libcst accepts: a replaced node, a removed
    one (from a sequence, an optional field, a MaybeSentinel field), a flattened statement, and a statement
    line emptied of its only statement."""

    def __init__(self, edit_tokens: bool = True) -> None:
        super().__init__()
        self.calls: list[tuple[str, int]] = []
        self.edit_tokens = edit_tokens  # also remove commas

    def on_visit(self, node: cst.CSTNode) -> bool:
        self.calls.append(("visit", id(node)))
        return not isinstance(node, cst.Lambda)

    def on_leave(self, original: cst.CSTNode, updated: cst.CSTNode):
        self.calls.append(("leave", id(original)))
        if isinstance(updated, cst.Comma) and not self.edit_tokens:
            return updated
        if m.matches(updated, m.Name("x")):
            return updated.with_changes(value="renamed")
        if m.matches(updated, m.Expr(m.Call(m.Name("drop")))) or m.matches(
            updated, m.Arg(keyword=m.Name("gone"))
        ):
            return cst.RemoveFromParent()
        if m.matches(
            updated,
            m.Annotation(m.Name("Dropped"))
            | m.Comma()
            | m.Else(m.IndentedBlock([m.SimpleStatementLine([m.Expr(m.Call(m.Name("drop_else")))])])),
        ):
            return (
                cst.RemoveFromParent()
            )  # FunctionDef.returns / Param.annotation / If.orelse: None; Arg.comma: the default
        if m.matches(updated, m.SimpleStatementLine([m.Expr(m.Call(m.Name("twice")))])):
            return cst.FlattenSentinel([updated, updated])
        return updated


EDITS = """def f(a: Dropped, b) -> Dropped:
    if a:
        pass
    else:
        drop_else()
    drop()
    x = g(a, gone=1, keep=2)
    twice()
    h = lambda x: x
    return x
drop(); x += 1
"""


@pytest.mark.parametrize("source", [EDITS, FORMAT_SPECS, *FIXTURES], ids=str)
def test_transform_matches_libcst_visit(source):
    module = cst.parse_module(source if isinstance(source, str) else source.read_text())
    by_libcst, lazily = _Editor(), _Editor()
    expected = module.visit(by_libcst)
    result = transform(module, lazily)
    assert lazily.calls == by_libcst.calls
    assert result.code == expected.code
    assert transform(module, cst.CSTTransformer()) is module  # nothing changed: nothing rebuilt
    # Leaving tokens out: the same calls on every other node, the same result; tokens hold only tokens.
    by_libcst, passing_over = _Editor(edit_tokens=False), _Editor(edit_tokens=False)
    expected = module.visit(by_libcst)
    assert transform(module, passing_over, TOKEN_CLASSES).code == expected.code
    tokens = {id(node) for node in descendants(module, tuple(TOKEN_CLASSES))}
    assert passing_over.calls == [call for call in by_libcst.calls if call[1] not in tokens]
    for token in descendants(module, tuple(TOKEN_CLASSES)):
        assert all(type(node) in TOKEN_CLASSES for node in descendants(token, cst.CSTNode))


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("if is_xla:\n    xm.mark_step()\nx = 1\n", "x = 1\n"),  # nothing left: the `if` goes
        ("if is_xla:\n    xm.mark_step()\nelse:\n    sync()\n", "if not is_xla:\n    sync()\n"),
        ("if kind == 'xla':\n    xm.mark_step()\nelse:\n    sync()\n", "if kind != 'xla':\n    sync()\n"),
        ("if a and b:\n    xm.mark_step()\nelse:\n    sync()\n", "if not (a and b):\n    sync()\n"),
        ("if fast:\n    run()\nelse:\n    xm.mark_step()\n", "if fast:\n    run()\n"),  # the else goes
        ("if step():\n    xm.mark_step()\n", "step()\n"),  # the test may do something: it stays
        ("if int(os.environ.get('RANK', 0)) == 0:\n    xm.mark_step()\nx = 1\n", "x = 1\n"),
        ("if a:\n    xm.mark_step()\nelif b:\n    sync()\n", "if a:\n    pass\nelif b:\n    sync()\n"),
        # both branches of a chip switch emptied: the `elif` goes whole, then the `if`
        ("if chip == 'a':\n    xm.mark_step()\nelif chip == 'b':\n    xm.mark_step()\nx = 1\n", "x = 1\n"),
        ("if a:\n    run()\nelif b:\n    xm.mark_step()\n", "if a:\n    run()\n"),
    ],
)
def test_an_emptied_branch_is_simplified_away(source, expected):
    from migrator.cst_helpers import without_empty_branches

    class Drop(cst.CSTTransformer):
        def leave_If(self, original, updated):
            return without_empty_branches(original, updated)

        def leave_SimpleStatementLine(self, original, updated):
            return (
                cst.RemoveFromParent() if "mark_step" in cst.Module([]).code_for_node(original) else updated
            )

    assert cst.parse_module(source).visit(Drop()).code == expected


@pytest.mark.parametrize(
    ("source", "gone"),
    [
        ("try:\n    import torch_xla\nexcept ImportError:\n    pass\n", True),
        ("try:\n    import torch_xla\nexcept ImportError: pass\n", True),
        ("try:\n    import torch_xla\nexcept ImportError:\n    print('no xla')\n", False),
        ("try:\n    import torch_xla\nexcept ImportError:\n    pass\nelse:\n    print('xla')\n", False),
        ("try:\n    import torch_xla\nfinally:\n    done()\n", False),
    ],
)
def test_a_try_a_removal_emptied_goes_only_when_nothing_else_of_it_runs(source, gone):
    original = cst.parse_statement(source)
    emptied = original.with_changes(body=original.body.with_changes(body=[]))
    result = without_empty_try(original, emptied)
    assert isinstance(result, cst.RemovalSentinel) is gone


def test_unused_imports_go_wherever_they_are_and_statements_without_imports_are_not_printed_again() -> None:
    from migrator.imports import ImportRequest, code_without_unused_imports

    module = cst.parse_module(
        "import os\n"
        "import torch_xla.core.xla_model as xm\n"
        "\n"
        "def f():\n"
        "    import torch_xla.distributed.parallel_loader as pl\n"
        "    return 1\n"
        "\n"
        "def g():\n"
        "    return os.getcwd()\n"
    )
    requests: list[ImportRequest] = [
        ("torch_xla.core.xla_model", None, "xm"),
        ("torch_xla.distributed.parallel_loader", None, "pl"),
    ]
    g = module.body[-1]
    # `g` holds no import: the text already printed for it stands (a marker here shows it was not printed again).
    marker = "\ndef g():\n    return os.getcwd()  # printed once\n"
    code = code_without_unused_imports(module, requests, known={g: marker})
    assert code == "import os\n\ndef f():\n    return 1\n" + marker


def test_a_block_keeps_its_opening_blank_line_when_its_first_statement_stays() -> None:
    """Only a block whose first statement went loses the blank line it opened with (a function that holds no
    unused import is walked, not changed)."""
    from migrator.imports import code_without_unused_imports

    source = (
        "import torch_xla.core.xla_model as xm\n"
        "if training:\n"
        "\n"
        "    def forward():\n"
        "        return 1\n"
        "\n"
        "    import os\n"
        "    os.chdir(forward())\n"
    )
    code = code_without_unused_imports(cst.parse_module(source), [("torch_xla.core.xla_model", None, "xm")])
    assert code == source.removeprefix("import torch_xla.core.xla_model as xm\n")


def test_bound_arguments_reads_each_argument_by_its_parameter_or_gives_up():
    import libcst as cst

    from migrator.cst_helpers import bound_arguments

    def bound(code):
        found = bound_arguments(cst.parse_expression(code), ("a", "b", "c"))
        return None if found is None else {name: cst.Module([]).code_for_node(v) for name, v in found.items()}

    assert bound("f(1, c=3)") == {"a": "1", "c": "3"}
    for unreadable in ("f(*xs)", "f(**kw)", "f(1, 2, 3, 4)", "f(1, d=4)", "f(1, a=2)"):
        assert bound(unreadable) is None, unreadable
