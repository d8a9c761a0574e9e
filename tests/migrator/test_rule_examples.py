"""Every rule's own examples, run alone: the rule reports on `before`, the codemod turns it into `after`
(or leaves it byte-identical), and a second run changes nothing and fixes nothing."""

from __future__ import annotations

import pytest

from migrator.engine import REWRITERS, rewriter
from migrator.registry import RULES, SHELL_RULE_MODULES, SHELL_RULES
from migrator.rules import Rule

EXAMPLES = [
    pytest.param(rule, number, example, id=f"{rule.code}-{number}")
    for rule in RULES.values()
    if rule.family != "risk"  # compile risks are found by their `find`: test_risk_rules.py
    for number, example in enumerate(rule.examples, start=1)
]


@pytest.mark.parametrize(("rule", "number", "example"), EXAMPLES)
def test_example(rule, number, example, tmp_path) -> None:
    migrate = REWRITERS[example.kind]
    for path, text in example.beside:  # the tree the example sits at the top of
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text(text)
        migrate = rewriter(example.kind, tmp_path, tmp_path)
    after, findings = migrate(example.before)
    assert rule.code in {finding.code for finding in findings}, f"{rule.code} does not report its example"
    assert after == (example.after if example.after is not None else example.before)
    again, again_findings = migrate(after)
    assert again == after
    assert [finding.code for finding in again_findings if finding.fixed] == []


def test_every_rule_has_an_example() -> None:
    assert [code for code, rule in RULES.items() if not rule.examples] == []


def test_every_shell_rule_is_registered() -> None:
    # A shell rule is a module constant of a `migrator/shell/nm*.py`: none may be missing from the RULES.
    declared = {
        value for module in SHELL_RULE_MODULES for value in vars(module).values() if isinstance(value, Rule)
    }
    assert sorted(rule.code for rule in declared - set(SHELL_RULES)) == []
