"""What a rule is and what it reports: `Rule` (code, severity, title, what to do, examples), `Finding`.

A rule lives in its own module, named after its code, in the package of its kind (`KINDS`; see
`docs/contributing/writing-rules.md`); `rule_modules` finds them there, `migrator.registry` puts them in dispatch order and
builds the table `docs/reference/rules.md` is generated from. `FAMILIES` says which codes belong to which family; the
docs, the reports, the checklist and `make new-rule` read it from here.
"""

from __future__ import annotations

import dataclasses
import pkgutil
from dataclasses import dataclass
from enum import Enum
from importlib import import_module
from types import ModuleType


@dataclass(frozen=True)
class Family:
    name: str  # what findings, reports and the checklist call it
    prefix: str  # its codes: NM1 for NM100-NM199
    title: str  # its section of docs/reference/rules.md

    @property
    def codes(self) -> str:
        return f"{self.prefix}xx"


# The rule families, in the order docs/reference/rules.md and the checklist list them.
FAMILIES = (
    Family("inference", "NM1", "Inference"),
    Family("training", "NM2", "Training"),
    Family("xla", "NM3", "PyTorch/XLA idioms"),
    Family("environment", "NM4", "Environment variables and shell launchers"),
    Family("leftovers", "NM5", "Leftovers, platforms and commands in strings"),
    Family("risk", "NM8", "Compile risks the checklist finds"),
    Family("manual", "NM9", "Manual work"),
)
FAMILY_BY_PREFIX = {family.prefix: family.name for family in FAMILIES}

# Where each kind of rule lives: a package, or (Python) a package of family packages.
KINDS = {
    "python": "migrator.families",
    "shell": "migrator.shell",
    "notebook": "migrator.notebook_rules",
    "risk": "migrator.risks",
}


def rule_modules(package: str) -> tuple[ModuleType, ...]:
    """The rule modules of a package (`nm<code>_<what>`), by code: nothing else lists them."""
    path = import_module(package).__path__
    names = sorted(info.name for info in pkgutil.iter_modules(path) if is_rule_module(info.name))
    return tuple(import_module(f"{package}.{name}") for name in names)


def is_rule_module(name: str) -> bool:
    return name[:2] == "nm" and name[2:5].isdigit() and name[5:6] == "_"


class Severity(str, Enum):
    ERROR = "error"  # blocks the migration until a person acts
    WARNING = "warning"  # rewritten or rewritable, but behaviour may differ: review it
    INFO = "info"  # rewritten faithfully

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True)
class Example:
    """A file the rule acts on, and what the codemod makes of it (`after=None`: left byte-identical, the
    rule only reports). `tests/migrator/test_rule_examples.py` runs every example; `docs/reference/rules.md` shows it."""

    before: str
    after: str | None = None
    kind: str = "python"  # or "shell", "notebook"
    # Files of the tree the example sits at the top of, (path, text): a rule that reads its neighbours.
    beside: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class Rule:
    code: str
    severity: Severity
    title: str  # what the rule looks for, one line
    action: str  # what the codemod does, or what the user must do when it cannot
    examples: tuple[Example, ...] = ()
    # Compile risks (NM8xx): the codes whose rewrite removes the risk, as `CODE` or `CODE:subject` (only
    # a finding about that subject, e.g. `NM203:padding_free` for that argument being dropped).
    fixed_by: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.code[:3] not in FAMILY_BY_PREFIX or len(self.code) != 5 or not self.code[2:].isdigit():
            expected = ", ".join(family.codes for family in FAMILIES)
            raise ValueError(f"bad rule code {self.code!r}: expected one of {expected}")

    @property
    def family(self) -> str:
        return FAMILY_BY_PREFIX[self.code[:3]]


def also_on(lines: tuple[int, ...] | list[int]) -> str:
    """What a finding that stands for several lines adds to its reason: ` (also on lines 12, 30)`."""
    if not lines:
        return ""
    return f" (also on line{'s' if len(lines) > 1 else ''} {', '.join(map(str, lines))})"


@dataclass(frozen=True)
class Finding:
    rule: Rule
    line: int
    column: int
    message: str
    fixed: bool
    cell: int | None = None  # notebooks: 1-based number among the code cells (as ruff counts), else None
    # Manual findings: why the code was left as it is, and what to do (the message joins them with "; ").
    why: str | None = None
    action: str | None = None
    subject: str | None = None  # the argument, variable or symbol the finding is about, when it has one
    file_line: int | None = None  # notebooks: the line of the .ipynb file that holds the cell's line
    # Manual findings: the other lines where the same decision is made again in its block (one TODO, above
    # `line`, stands for them).
    also: tuple[int, ...] = ()

    def moved(self, lines: dict[int, int], **changes) -> Finding:
        """The finding with its other lines (`also`) moved by `lines` (old line -> new line), and `changes`."""
        if not self.also:
            return dataclasses.replace(self, **changes)
        also = tuple(lines.get(line, line) for line in self.also)
        old, new = also_on(self.also), also_on(also)
        return dataclasses.replace(
            self,
            message=self.message.replace(old, new),
            why=self.why.replace(old, new) if self.why else self.why,
            also=also,
            **changes,
        )

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
            "why": self.why,
            "action": self.action or self.rule.action,
        }
        if self.subject is not None:
            data["subject"] = self.subject
        if self.also:
            data["also"] = list(self.also)
        if self.cell is not None:
            data["cell"] = self.cell
        return data
