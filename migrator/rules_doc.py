"""Generate docs/rules.md from the rule table: `python -m migrator.rules_doc [--check]`."""

from __future__ import annotations

import sys
from pathlib import Path

from migrator.registry import RULES
from migrator.rules import FAMILY_BY_PREFIX

DOC = Path(__file__).resolve().parent.parent / "docs" / "rules.md"
FAMILY_TITLES = {
    "inference": "Inference (NM1xx)",
    "training": "Training (NM2xx)",
    "xla": "PyTorch/XLA idioms (NM3xx)",
    "environment": "Environment variables and shell launchers (NM4xx)",
    "manual": "Manual work (NM9xx)",
}


def render() -> str:
    lines = [
        "# neuron-migrate rules",
        "",
        "Generated from the rule table by `python -m migrator.rules_doc`; do not edit by hand.",
        "",
        "Severity: `info` rewritten faithfully; `warning` rewritten or left with a TODO, review the",
        "behaviour; `error` manual work that blocks the migration. Each finding is reported with",
        "`fixed: true` when the codemod rewrote the code, `fixed: false` when it left a",
        "`# TODO(neuron-migrate)` comment instead.",
        "",
    ]
    for family in FAMILY_BY_PREFIX.values():
        rules = sorted((rule for rule in RULES.values() if rule.family == family), key=lambda rule: rule.code)
        if not rules:
            continue
        lines += [
            f"## {FAMILY_TITLES[family]}",
            "",
            "| code | severity | looks for | does / what to do |",
            "|---|---|---|---|",
        ]
        for rule in rules:
            cells = [
                f'<a id="{rule.code.lower()}"></a>{rule.code}',
                str(rule.severity),
                rule.title,
                rule.action,
            ]
            lines.append("| " + " | ".join(cell.replace("|", "\\|") for cell in cells) + " |")
        lines.append("")
    return "\n".join(lines)


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
