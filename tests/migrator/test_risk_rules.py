"""The compile-risk rules (NM8xx): each rule's own examples, read alone, raise that rule."""

from __future__ import annotations

import pytest

from migrator.registry import RISK_MODULES, RULES, find_risks
from usercode.reading import read_code

SUFFIXES = {"python": ".py", "shell": ".sh"}
EXAMPLES = [
    pytest.param(rule, example, id=f"{rule.code}-{number}")
    for module in RISK_MODULES
    for rule in module.RULES
    for number, example in enumerate(rule.examples, start=1)
]


@pytest.mark.parametrize(("rule", "example"), EXAMPLES)
def test_example_raises_its_rule(tmp_path, rule, example) -> None:
    path = tmp_path / f"example{SUFFIXES[example.kind]}"
    path.write_text(example.before)
    found = find_risks(read_code(path, example.kind))
    assert rule.code in {risk.rule.code for risk in found}


def test_every_risk_rule_has_an_example_and_only_names_known_codes() -> None:
    for rule in (rule for module in RISK_MODULES for rule in module.RULES):
        assert rule.examples, rule.code
        assert all(fix.partition(":")[0] in RULES for fix in rule.fixed_by), rule.code
