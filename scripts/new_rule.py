"""Scaffold a Python rewrite rule: `python scripts/new_rule.py FAMILY NAME [--code NMxyz]` (or `make new-rule
FAMILY=xla NAME=replication_calls`).

Writes `migrator/families/FAMILY/<code>_NAME.py` (its Rule with one Example, a Handler, HANDLER), which the
registry finds there by its name (there is no list to edit), and starts its scenario fixture
`fixtures/migrator/FAMILY/NAME.py`. The families and their codes are `migrator.rules.FAMILIES`; the code is the
next free one of the family (`--code` to choose). Until their TODO texts are replaced, the rule's example test
(tests/migrator/test_rule_examples.py) and its fixture test fail, saying what is missing.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from migrator.rules import FAMILIES  # noqa: E402  (the script runs from the repository, not installed)

# The families whose rules are Python rewrites: a package under migrator/families/.
PREFIXES = {
    family.name: family.prefix
    for family in FAMILIES
    if (ROOT / "migrator" / "families" / family.name).is_dir()
}

MODULE = '''"""{code}: TODO: what the rule rewrites, in one line."""

from __future__ import annotations

import libcst as cst

from migrator.rules import Example, Rule, Severity
from migrator.transform import Handler

{constant} = Rule(
    "{code}",
    Severity.INFO,
    "TODO: what the rule looks for (the `looks for` column of docs/rules.md)",
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


class {handler}(Handler):
    # The walk's pre-filter (docs/writing-rules.md, "The matcher"): keep them accurate.
    HINTS = frozenset({{"TODO: a string every statement the rule acts on holds"}})
    CALLS = frozenset({{"TODO: the qualified name of each call leave_Call decides on"}})

    def leave_Call(self, original: cst.Call, updated: cst.Call):
        self.ctx.report(original, {constant})
        return updated


HANDLER = {handler}
'''
FIXTURE = '''"""TODO: a whole script, written the way users write theirs (your own code), that {code} rewrites; then
`make fixtures CASES=fixtures/migrator/{family}/{name}.py` writes its expectations for review with git diff."""
'''


def used_codes(root: Path) -> set[int]:
    """Every rule code defined under migrator/ (a `Rule("NMxyz"` literal)."""
    found = set()
    for path in (root / "migrator").rglob("*.py"):
        found.update(
            int(m[1]) for m in re.finditer(r'Rule\(\s*"NM(\d{3})"', path.read_text(encoding="utf-8"))
        )
    return found


def next_code(root: Path, family: str) -> str:
    """The next free code after the family's highest Python rule module (`nm327_*.py` -> NM328)."""
    base = int(PREFIXES[family][2]) * 100
    modules = [
        int(p.name[2:5]) for p in (root / "migrator" / "families" / family).glob("nm[0-9][0-9][0-9]_*.py")
    ]
    used = used_codes(root)
    free = [code for code in range(max(modules, default=base), base + 100) if code not in used]
    if not free:
        raise SystemExit(f"no free code left after NM{max(modules)} in the {family} family: pass --code")
    return f"NM{free[0]}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("family", choices=sorted(PREFIXES))
    parser.add_argument("name", help="what the rule is about, in snake_case (replication_calls)")
    parser.add_argument("--code", help="the rule code (default: the family's next free one)")
    parser.add_argument("--root", type=Path, default=ROOT, help=argparse.SUPPRESS)  # tests scaffold a copy
    args = parser.parse_args(argv)
    if not re.fullmatch(r"[a-z][a-z0-9_]*", args.name):
        parser.error(f"NAME must be snake_case: {args.name!r}")
    code = args.code or next_code(args.root, args.family)
    if not re.fullmatch(rf"{PREFIXES[args.family]}\d\d", code):
        parser.error(f"{code} is not a code of the {args.family} family ({PREFIXES[args.family]}xx)")
    if int(code[2:]) in used_codes(args.root):
        parser.error(f"{code} is already defined")
    module = f"{code.lower()}_{args.name}"
    path = args.root / "migrator" / "families" / args.family / f"{module}.py"
    fixture = args.root / "fixtures" / "migrator" / args.family / f"{args.name}.py"
    for existing in (path, fixture):
        if existing.exists():
            parser.error(f"{existing} exists")
    handler = "".join(part.capitalize() for part in args.name.split("_"))
    path.write_text(MODULE.format(code=code, constant=args.name.upper(), handler=handler), encoding="utf-8")
    fixture.parent.mkdir(parents=True, exist_ok=True)
    fixture.write_text(FIXTURE.format(code=code, family=args.family, name=args.name), encoding="utf-8")
    print(f"wrote {path.relative_to(args.root)} ({code}) and {fixture.relative_to(args.root)}")
    print("next: replace the TODO texts (rule, example, hints, matcher), write the fixture, then")
    print(
        f"  make fixtures CASES={fixture.relative_to(args.root)} && python -m migrator.rules_doc && make test"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
