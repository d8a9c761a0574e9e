"""The rule table: every finding the migrator can emit, with a stable code.

Codes by family: NM1xx inference, NM2xx training, NM3xx PyTorch/XLA, NM4xx environment and shell,
NM9xx manual work that no family can rewrite. Family modules declare their rules with `define`;
`docs/rules.md` is generated from this table (`python -m migrator.rules_doc`).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

FAMILY_BY_PREFIX = {
    "NM1": "inference",
    "NM2": "training",
    "NM3": "xla",
    "NM4": "environment",
    "NM9": "manual",
}


class Severity(str, Enum):
    ERROR = "error"  # blocks the migration until a person acts
    WARNING = "warning"  # rewritten or rewritable, but behaviour may differ: review it
    INFO = "info"  # rewritten faithfully

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True)
class Rule:
    code: str
    severity: Severity
    title: str  # what the rule looks for, one line
    action: str  # what the codemod does, or what the user must do when it cannot

    @property
    def family(self) -> str:
        return FAMILY_BY_PREFIX[self.code[:3]]


RULES: dict[str, Rule] = {}


def define(code: str, severity: Severity, title: str, action: str) -> Rule:
    """Register a rule; codes are unique and their prefix names the family."""
    if code in RULES:
        raise ValueError(f"rule {code} defined twice")
    if code[:3] not in FAMILY_BY_PREFIX or len(code) != 5 or not code[2:].isdigit():
        raise ValueError(f"bad rule code {code!r}: expected NM1xx..NM4xx or NM9xx")
    rule = Rule(code, severity, title, action)
    RULES[code] = rule
    return rule


@dataclass(frozen=True)
class Finding:
    rule: Rule
    line: int
    column: int
    message: str
    fixed: bool
    cell: int | None = None  # notebooks: 1-based number among the code cells (as ruff counts), else None

    @property
    def code(self) -> str:
        return self.rule.code

    def to_dict(self) -> dict:
        data = {
            "code": self.rule.code,
            "family": self.rule.family,
            "severity": str(self.rule.severity),
            "line": self.line,
            "column": self.column,
            "message": self.message,
            "fixed": self.fixed,
        }
        if self.cell is not None:
            data["cell"] = self.cell
        return data


UNKNOWN_OPTIMUM_SYMBOL = define(
    "NM901",
    Severity.ERROR,
    "An optimum-neuron symbol that has no TorchNeuron equivalent the codemod can write",
    "Left in place with a TODO; replace it by hand with the plain Transformers/TRL/PEFT/Diffusers API on "
    'device "neuron" (see the migration guide).',
)
