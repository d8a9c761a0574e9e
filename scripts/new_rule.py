"""Scaffold a rule of any kind: `python scripts/new_rule.py WHERE NAME [--code NMxyz]` (or `make new-rule
FAMILY=xla NAME=replication_calls`); WHERE is a Python family (`xla`, `training`, ...), `shell`, `notebook` or
`risk`.

Writes `<package>/<code>_NAME.py` in the package of its kind (`migrator.rules.KINDS`): its Rule with one Example
and what decides it (a Python `Handler`, a shell matcher taking the walk's `program` event, a notebook rule's
function taking the reading's `file_cell` event, a compile risk's `find`), which the registry finds there by its name (there is no list to edit); a Python
or shell rule also starts its scenario fixture `fixtures/migrator/<FAMILY or shell>/NAME.<py|sh>`. The families
and their codes are `migrator.rules.FAMILIES` (shell and notebook rules are NM4xx, of the environment family);
the code is the next free one after the highest module of the kind in the family (`--code` to choose). Until
their TODO texts are replaced, the rule's example test (tests/migrator/test_rule_examples.py,
test_risk_rules.py) and its fixture test fail, saying what is missing.
"""

from __future__ import annotations

import argparse
import re
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from migrator.rules import FAMILIES, KINDS  # noqa: E402  (the script runs from the repository, not installed)

PYTHON = '''"""{code}: TODO: what the rule rewrites, in one line."""

from __future__ import annotations

import libcst as cst

from migrator.rules import Example, Rule, Severity
from migrator.transform import Handler

{constant} = Rule(
    "{code}",
    Severity.INFO,
    "TODO: what the rule looks for (the `looks for` column of docs/reference/rules.md)",
    "TODO: what the rewrite does, or what to do where it leaves a TODO",
    examples=(
        Example(
            before="""\\
TODO: the smallest realistic file that triggers the rule, as a user writes it
""",
            after="""\\
TODO: the same file once migrated (after=None: reported, left byte-identical)
""",
        ),
    ),
)
RULES = ({constant},)


class {title}(Handler):
    # The walk's pre-filter (docs/contributing/writing-rules.md, "The matcher"): keep them accurate.
    HINTS = frozenset({{"TODO: a string every statement the rule acts on holds"}})
    CALLS = frozenset({{"TODO: the qualified name of each call leave_Call decides on"}})

    def leave_Call(self, original: cst.Call, updated: cst.Call):
        self.ctx.report(original, {constant})
        return updated


HANDLER = {title}
'''
SHELL = '''"""{code}: TODO: what the rule rewrites in a launcher, in one line."""

from __future__ import annotations

from migrator.rules import Rule, Severity
from migrator.shell import example
from migrator.shell.edits import Context
from usercode.shell import Node, Word

{constant} = Rule(
    "{code}",
    Severity.INFO,
    "TODO: what the rule looks for (the `looks for` column of docs/reference/rules.md)",
    "TODO: what the rewrite does, or what to do where it leaves a TODO",
    examples=(
        example(
            "TODO: the smallest realistic launcher that triggers the rule, as a user writes it\\n",
            "TODO: the same launcher once migrated (None: reported, left byte-identical)\\n",
        ),
    ),
)
RULES = ({constant},)
PROGRAM = "TODO: the program whose commands the rule decides"


class {title}Matcher:
    """Matcher of TODO: which commands (`shell/rewrite.py` lists the events of the walk a matcher can take)."""

    HOOKS = {{"program": "{name}_command"}}

    def {name}_command(self, ctx: Context, node: Node, words: list[Word], siblings: list[Word]) -> bool | None:
        if words[0].value != PROGRAM:
            return None  # not this rule's: the next matcher decides
        self.report(ctx.at(words[0].start), {constant})
        return True


MATCHER = {title}Matcher
'''
NOTEBOOK = '''"""{code}: TODO: what the rule finds in a notebook's cells, in one line."""

from __future__ import annotations

from migrator.notebook_rules import example
from migrator.rules import Example, Finding, Rule, Severity
from migrator.shell.scripts import ScriptParser

{constant} = Rule(
    "{code}",
    Severity.WARNING,
    "TODO: what the rule looks for (the `looks for` column of docs/reference/rules.md)",
    "TODO: what the codemod does, or what to do",
    examples=(
        Example(
            example("TODO: the cell that triggers the rule").before,
            example("TODO: the same cell once migrated").before,
            kind="notebook",
        ),
    ),
)
RULES = ({constant},)
HOOKS = {{"file_cell": "{name}"}}  # the events of `migrator/notebook.py` it takes (listed there)
TARGET = "TODO: the file whose `%%writefile` cell the rule decides"


def {name}(
    header: str,
    newline: str,
    target: str,
    body: str,
    number: int,
    findings: list[Finding],
    parser: ScriptParser | None,
    rules: dict[str, Rule],
) -> str | None:
    """The `%%writefile` cell changed, None when it stays. `parser`: the argument parser of the script a launch
    passes the file to, if any; `rules`: the shell rules by code."""
    if target != TARGET:
        return None
    findings.append(Finding({constant}, 1, 1, {constant}.action, False, number))
    return None
'''
RISK = '''"""{code}: TODO: what compile risk the checklist finds, in one line."""

from __future__ import annotations

from collections.abc import Iterator

from migrator.risks.base import Risk, at
from migrator.rules import Example, Rule, Severity
from usercode.python import callee
from usercode.reading import Code

{constant} = Rule(
    "{code}",
    Severity.WARNING,
    "TODO: what the checklist finds (the `looks for` column of docs/reference/rules.md)",
    "TODO: what to do",
    fixed_by=(),  # the codes whose rewrite removes the risk
    examples=(Example(before="TODO: the smallest realistic file that has the risk\\n"),),
)
RULES = ({constant},)
CALLEE = "TODO: the call that carries the risk"


def find(code: Code) -> Iterator[Risk]:
    for module in code.python:
        for call in module.calls:
            if callee(call) == CALLEE:
                yield at({constant}, module, call, "TODO: what was found, in a few words")
'''
FIXTURE = {
    "py": '''"""TODO: a whole script, written the way users write theirs (your own code), that {code} rewrites; then
`make fixtures CASES={fixture}` writes its expectations for review with git diff."""
''',
    "sh": """#!/bin/bash
# TODO: a whole launcher, written the way users write theirs (your own), that {code} rewrites; then
# `make fixtures CASES={fixture}` writes its expectations for review with git diff.
""",
}


@dataclass(frozen=True)
class Kind:
    """Where a rule of one kind goes: its package, its template, its family and its scenario fixture."""

    name: str
    family: str
    template: str
    fixture: str | None  # the fixture's suffix; None: its examples are its only test

    def package(self, root: Path) -> Path:
        parts = KINDS[self.name].split(".")
        if self.name == "python":
            parts.append(self.family)
        return root.joinpath(*parts)


PYTHON_FAMILIES = [
    family.name for family in FAMILIES if (ROOT / "migrator" / "families" / family.name).is_dir()
]
TARGETS = {
    **{family: Kind("python", family, PYTHON, "py") for family in PYTHON_FAMILIES},
    "shell": Kind("shell", "environment", SHELL, "sh"),
    "notebook": Kind("notebook", "environment", NOTEBOOK, None),
    "risk": Kind("risk", "risk", RISK, None),
}
PREFIXES = {family.name: family.prefix for family in FAMILIES}


def used_codes(root: Path) -> set[int]:
    """Every rule code defined under migrator/ (a `Rule("NMxyz"` literal)."""
    found = set()
    for path in (root / "migrator").rglob("*.py"):
        found.update(
            int(m[1]) for m in re.finditer(r'Rule\(\s*"NM(\d{3})"', path.read_text(encoding="utf-8"))
        )
    return found


def next_code(root: Path, kind: Kind) -> str:
    """The next free code after the highest module of the kind in its family (`nm327_*.py` -> NM328)."""
    base = int(PREFIXES[kind.family][2]) * 100
    modules = [int(p.name[2:5]) for p in kind.package(root).glob("nm[0-9][0-9][0-9]_*.py")]
    modules = [code for code in modules if base <= code < base + 100]
    used = used_codes(root)
    free = [code for code in range(max(modules, default=base), base + 100) if code not in used]
    if not free:
        raise SystemExit(f"no free code left after NM{max(modules)} in the {kind.family} family: pass --code")
    return f"NM{free[0]}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("where", choices=sorted(TARGETS), help="a Python family, shell, notebook or risk")
    parser.add_argument("name", help="what the rule is about, in snake_case (replication_calls)")
    parser.add_argument("--code", help="the rule code (default: the next free one)")
    parser.add_argument("--root", type=Path, default=ROOT, help=argparse.SUPPRESS)  # tests scaffold a copy
    args = parser.parse_args(argv)
    if not re.fullmatch(r"[a-z][a-z0-9_]*", args.name):
        parser.error(f"NAME must be snake_case: {args.name!r}")
    kind = TARGETS[args.where]
    prefix = PREFIXES[kind.family]
    code = args.code or next_code(args.root, kind)
    if not re.fullmatch(rf"{prefix}\d\d", code):
        parser.error(f"{code} is not a code of the {kind.family} family ({prefix}xx)")
    if int(code[2:]) in used_codes(args.root):
        parser.error(f"{code} is already defined")
    path = kind.package(args.root) / f"{code.lower()}_{args.name}.py"
    fixture = None
    if kind.fixture is not None:
        folder = kind.family if kind.name == "python" else kind.name
        fixture = args.root / "fixtures" / "migrator" / folder / f"{args.name}.{kind.fixture}"
    for existing in (path, fixture):
        if existing is not None and existing.exists():
            parser.error(f"{existing} exists")
    title = "".join(part.capitalize() for part in args.name.split("_"))
    text = kind.template.format(code=code, constant=args.name.upper(), title=title, name=args.name)
    path.write_text(text, encoding="utf-8")
    written = [str(path.relative_to(args.root))]
    if fixture is not None:
        fixture.parent.mkdir(parents=True, exist_ok=True)
        cases = fixture.relative_to(args.root)
        fixture.write_text(FIXTURE[kind.fixture].format(code=code, fixture=cases), encoding="utf-8")
        written.append(str(cases))
    print(f"wrote {written[0]} ({code})" + "".join(f" and {other}" for other in written[1:]))
    print("next: replace the TODO texts (rule, example, what decides it), write the fixture, then")
    print(
        f"  {f'make fixtures CASES={written[1]} && ' if fixture else ''}python -m migrator.rules_doc && make test"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
