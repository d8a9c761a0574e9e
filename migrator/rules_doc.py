"""Generate docs/reference/rules.md from the rule table and each rule's own examples:
`python -m migrator.rules_doc [--check]`."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from migrator.registry import RULE_MODULES, RULES
from migrator.rules import FAMILIES

REPO = Path(__file__).resolve().parent.parent
DOC = REPO / "docs" / "reference" / "rules.md"
FENCES = {"python": "python", "shell": "bash", "notebook": "json"}


def render() -> str:
    lines = [
        "# neuron-migrate rules",
        "",
        "Generated from the rule modules (their texts and examples) by `python -m migrator.rules_doc`; do not",
        "edit by hand. Every example is also a test (`tests/migrator/test_rule_examples.py`).",
        "",
        "Severity: `info` rewritten faithfully; `warning` rewritten or left with a TODO, review the",
        "behaviour; `error` manual work that blocks the migration. Each finding is reported with",
        "`fixed: true` when the codemod rewrote the code, `fixed: false` when it left a",
        "`# TODO(neuron-migrate)` comment instead.",
        "",
    ]
    for family in FAMILIES:
        rules = sorted(
            (rule for rule in RULES.values() if rule.family == family.name), key=lambda rule: rule.code
        )
        lines += [
            f"## {family.title} ({family.codes})",
            "",
            "| code | severity | looks for | does / what to do | defined in |",
            "|---|---|---|---|---|",
        ]
        for rule in rules:
            cells = [
                f'<a id="{rule.code.lower()}"></a>'
                + (f"[{rule.code}](#{rule.code.lower()}-examples)" if rule.examples else rule.code),
                str(rule.severity),
                rule.title,
                rule.action,
                _home(rule.code),
            ]
            if rule.fixed_by:
                cells[3] += f" Fixed by: {', '.join(_fix(fix) for fix in rule.fixed_by)}."
            lines.append("| " + " | ".join(cell.replace("|", "\\|") for cell in cells) + " |")
        lines.append("")
        for rule in rules:
            lines += _examples(rule)
    return "\n".join(lines)


def _home(code: str) -> str:
    """A link to the module that defines the rule, relative to the page."""
    path = RULE_MODULES[code].replace(".", "/") + ".py"
    return f"[{path.rpartition('/')[2]}]({os.path.relpath(REPO / path, DOC.parent)})"


def _fix(fix: str) -> str:
    """`NM203:padding_free` -> a link to NM203, with the subject its finding must be about."""
    code, _, subject = fix.partition(":")
    return f"[{code}](#{code.lower()})" + (f" (on `{subject}`)" if subject else "")


def _examples(rule) -> list[str]:
    if not rule.examples:
        return []
    lines = [f'<a id="{rule.code.lower()}-examples"></a>', f"### {rule.code} examples", ""]
    for example in rule.examples:
        fence = FENCES[example.kind]
        lines += ["Before:", "", f"```{fence}", example.before.rstrip("\n"), "```", ""]
        if example.beside:
            lines += [
                "Beside it in the tree: " + ", ".join(f"`{path}`" for path, _ in example.beside) + ".",
                "",
            ]
        if example.after is None:
            lines += ["Left unchanged (reported only).", ""]
        else:
            lines += ["After:", "", f"```{fence}", example.after.rstrip("\n"), "```", ""]
    return lines


def main(argv: list[str]) -> int:
    text = render()
    if "--check" in argv:
        if not DOC.exists() or DOC.read_text() != text:
            print(f"{DOC} is out of date: run `python -m migrator.rules_doc`", file=sys.stderr)
            return 1
        return 0
    DOC.parent.mkdir(exist_ok=True)
    DOC.write_text(text)
    print(f"wrote {DOC} ({len(RULES)} rules)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
