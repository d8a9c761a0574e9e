"""Rewrite fixture expectations (`<case>.expected.<ext>` and `<case>.findings`) from the current output, for
review with `git diff fixtures/`: `python -m tests.migrator.update_fixtures [CASE_OR_FOLDER ...]` (default:
every case). An `unchanged_*` case gets no expected file; one whose output differs is listed, not rewritten.
Nothing else is checked here: `test_fixtures.py` still runs each case twice."""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

from tests.migrator.test_fixtures import CASES, FIXTURES, expected_path, finding_lines, migrate
from usercode.sources import file_kind, read_text


def update(case: Path, tree: Path) -> str | None:
    """Write the case's expectations; returns what changed (None: nothing)."""
    kind = file_kind(case)
    text = read_text(case, kind)
    migrated, findings = migrate(case, text.content, tree)
    changed = []
    if case.name.startswith("unchanged_"):
        if migrated != text.content:
            return "its output differs from its input (an unchanged_ case): not written"
    else:
        expected = expected_path(case)
        old = read_text(expected, kind).content if expected.exists() else None
        if migrated != old:
            expected.write_bytes(text.encode(migrated))  # the input's encoding
            changed.append(expected.name)
    findings_file = case.with_suffix(".findings")
    lines = "".join(f"{line}\n" for line in finding_lines(findings))
    if not findings_file.exists() or findings_file.read_text() != lines:
        findings_file.write_text(lines)
        changed.append(findings_file.name)
    return ", ".join(changed) or None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("paths", nargs="*", type=Path, help="fixture cases or folders (default: all)")
    args = parser.parse_args(argv)
    chosen = [path.resolve() for path in args.paths]
    cases = [case for case in CASES if not chosen or any(case == p or p in case.parents for p in chosen)]
    if not cases:
        print("no fixture case under the paths given", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory() as tree:
        for case in cases:
            what = update(case, Path(tree))
            if what:
                print(f"{case.relative_to(FIXTURES)}: {what}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
