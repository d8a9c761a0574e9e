"""SourceMap must place every node where libcst's PositionProvider does, and span each statement's text."""

from __future__ import annotations

from pathlib import Path

import libcst as cst
import pytest
from libcst.metadata import MetadataWrapper, PositionProvider

from migrator.source_map import TOKEN_CLASSES, SourceIndex, SourceMap, module_code

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "migrator"
SNIPPETS = {
    "crlf": "import os\r\nif True:\r\n    x = os.environ['A']  # c\r\n",
    "lone_cr": "a = 1\rb = (a,\r     2)\r",
    "no_trailing_newline": "def f():\n    return 1",
    "decorated": "@torch.compile\n@other(a=1)\ndef f(x):\n    '''doc'''\n    return x\n\n\nclass C:\n    y: int = 2\n",
    "tabs_and_unicode": "if x:\n\ts = 'é∂'; t = s\n\tdef g(): pass\n# trailing comment",
    "empty": "",
}
CASES = {
    **{name: code for name, code in SNIPPETS.items()},
    **{
        str(path.relative_to(FIXTURES)): path.read_text()
        for path in sorted(FIXTURES.rglob("*.py"))
        if ".expected." not in path.name
    },
}
# PositionProvider places nodes in libcst's own rendering, which differs from inputs libcst does not round-trip
# (a whitespace-only line before trailing comments): there it is no reference.
CASES = {name: code for name, code in CASES.items() if cst.parse_module(code).code == code}


class _AllNodes(cst.CSTVisitor):
    def __init__(self) -> None:
        self.nodes: list[cst.CSTNode] = []

    def on_visit(self, node: cst.CSTNode) -> bool:
        self.nodes.append(node)
        return True


@pytest.mark.parametrize("name", CASES)
def test_positions_equal_libcst_position_provider(name: str) -> None:
    code = CASES[name]
    module = cst.parse_module(code)
    expected = MetadataWrapper(module, unsafe_skip_copy=True).resolve(PositionProvider)
    source_map = SourceMap(module, code)
    walker = _AllNodes()
    module.visit(walker)
    assert walker.nodes
    for node in walker.nodes:
        start = expected[node].start
        found = source_map.position(node)
        if found is None:  # whitespace and operators may have none: no finding is placed there
            assert type(node) in TOKEN_CLASSES, type(node).__name__
        else:
            assert found == (start.line, start.column + 1), type(node).__name__


@pytest.mark.parametrize("name", ["crlf", "decorated", "tabs_and_unicode", "no_trailing_newline"])
def test_statement_span_covers_the_whole_statement(name: str) -> None:
    code = SNIPPETS[name]
    module = cst.parse_module(code)
    source_map = SourceMap(module, code)
    for statement in module.body:
        start, end = source_map.statement_span(statement)
        # Decorators and leading comment lines belong to the statement: hints there must be seen.
        assert code[start:end] == module.code_for_node(statement).rstrip("\r\n") or code[start:end] == (
            module.code_for_node(statement)
        )


class _SevensInOddStatements(cst.CSTTransformer):
    """Every integer becomes 7 in the odd top-level statements; the even ones stay the same objects."""

    def __init__(self, module: cst.Module) -> None:
        super().__init__()
        self.left_alone = set(module.body[::2])

    def on_visit(self, node: cst.CSTNode) -> bool:
        return node not in self.left_alone

    def leave_Integer(self, original: cst.Integer, updated: cst.Integer) -> cst.Integer:
        return updated.with_changes(value="7")


@pytest.mark.parametrize("name", CASES)
def test_module_code_reuses_the_text_of_unchanged_statements_and_prints_the_rest(name: str) -> None:
    code = CASES[name]
    module = cst.parse_module(code)
    known = SourceMap(module, code).top_level_texts()
    assert module_code(module, known).code == code
    updated = module.visit(_SevensInOddStatements(module))
    printed = module_code(updated, known)
    assert printed.code == updated.code
    assert module_code(updated, printed.statements).code == printed.code
    if module.body and module.has_trailing_newline:  # what is known is written, not printed again
        assert "pass  # known\n" in module_code(module, {**known, module.body[0]: "pass  # known\n"}).code
        # Each statement's lines, as Python numbers them (its leading comment lines included).
        lines = printed.code.splitlines(keepends=True)
        for statement, first, after in printed.statement_lines():
            assert "".join(lines[first - 1 : after - 1]) == printed.statements[statement]


def test_the_index_sees_a_value_compared_through_string_methods() -> None:
    code = (
        'if device == "xla": pass\n'
        'if args.accel.lower() in {"xla", "cuda"}: pass\n'
        'if target.startswith("xla"): pass\n'
        'if f(x) == "xla": pass\n'
        'if str(dev).lower() in ("xla", "neuron"): pass\n'
    )
    compared = SourceIndex.of(code).compared
    assert {
        ("device", "xla"),
        ("accel", "xla"),
        ("accel", "cuda"),
        ("target", "xla"),
        ("dev", "xla"),
    } <= compared
    assert not any(name == "f" or name == "x" for name, _ in compared)


def test_a_device_string_handed_to_a_function_that_tests_its_text_keeps_its_value_with_a_todo() -> None:
    """nanoGPT-style: `device = 'xla'`, tested as `str(device).lower() in (...)` in a helper; rewriting the
    value alone to a neuron device would send the script down its other branch (no autocast, no XLA path)."""
    from migrator.engine import migrate_python

    source = (
        "import torch_xla.core.xla_model as xm\n\n"
        "device = 'xla'\n\n\n"
        "def wants_xla(device_config):\n"
        "    return str(device_config).lower() in ('xla', 'trainium')\n\n\n"
        "if wants_xla(device):\n"
        "    device = xm.xla_device()\n"
    )
    migrated, findings = migrate_python(source)
    assert "device = 'xla'" in migrated
    assert any(f.code == "NM320" and not f.fixed and "wants_xla" in f.message for f in findings)
