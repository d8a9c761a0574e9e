"""Every before/after pair under fixtures/migrator/<family>/ runs twice: the output must equal the
expected file, the findings must equal the `.findings` file, and migrating the output changes nothing.

Layout: `<case>.<ext>` (input), `<case>.expected.<ext>` (output; omitted for `unchanged_*` cases, which
must come out byte-identical), `<case>.findings` (one `LINE CODE fixed|manual` per line; notebooks
`CELL:LINE CODE ...`; empty when nothing is reported).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from migrator.engine import rewriter
from migrator.sources import file_kind, read_text

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "migrator"
CASES = sorted(
    path
    for path in FIXTURES.rglob("*")
    if file_kind(path) and ".expected." not in path.name and path.suffix != ".findings"
)


def expected_path(case: Path) -> Path:
    return case.with_name(f"{case.stem}.expected{case.suffix}")


def finding_lines(findings) -> list[str]:
    lines = []
    for f in findings:
        where = f"{f.cell}:{f.line}" if f.cell is not None else str(f.line)
        lines.append(f"{where} {f.code} {'fixed' if f.fixed else 'manual'}")
    return lines


def migrate(case: Path, content: str):
    # In the fixture's directory, as the CLI runs it: a launcher reads the scripts it launches from there.
    return rewriter(file_kind(case), case.parent)(content)


@pytest.mark.parametrize("case", CASES, ids=lambda p: str(p.relative_to(FIXTURES)))
def test_fixture(case: Path) -> None:
    source = read_text(case, file_kind(case)).content
    migrated, findings = migrate(case, source)
    if case.name.startswith("unchanged_"):
        assert migrated == source
    else:
        assert migrated == read_text(expected_path(case), file_kind(case)).content
    findings_file = case.with_suffix(".findings")
    assert findings_file.exists(), f"missing {findings_file.name}"
    assert finding_lines(findings) == findings_file.read_text().splitlines()
    # Second run: the migrated file is stable; manual items are still reported, nothing is fixed twice.
    again, again_findings = migrate(case, migrated)
    assert again == migrated
    assert [f.code for f in again_findings if f.fixed] == []
    assert sorted(f.code for f in again_findings) == sorted(f.code for f in findings if not f.fixed)


def test_every_family_has_cases() -> None:
    families = {case.relative_to(FIXTURES).parts[0] for case in CASES}
    assert {"inference", "training", "xla", "environment", "shell", "notebook"} <= families
    assert len(CASES) >= 40
