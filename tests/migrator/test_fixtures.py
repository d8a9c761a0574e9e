"""Every before/after pair under fixtures/migrator/<family>/ runs twice: the output must equal the
expected file, the findings must equal the `.findings` file, and migrating the output changes nothing.

Layout: `<case>.<ext>` (input), `<case>.expected.<ext>` (output; omitted for `unchanged_*` cases, which
must come out byte-identical), `<case>.findings` (one `LINE CODE fixed|manual` per line; notebooks
`CELL:LINE CODE ...`; empty when nothing is reported).
"""

from __future__ import annotations

import re
import shutil
from collections import Counter
from pathlib import Path

import pytest

from migrator.engine import rewriter
from usercode.sources import file_kind, read_text

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "migrator"
TODO_CODE = re.compile(r"TODO\(neuron-migrate\): (NM\d{3})")
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


def migrate(case: Path, content: str, tree: Path):
    """In the fixture's directory, as the CLI runs it: a launcher reads the scripts it launches from there, an
    install keeps what the code of its folder still imports. A case in a subfolder of its family is one file of
    a repository: it is migrated in a copy of that repository without the expected files, from its top (as
    `neuron-migrate REPOSITORY` would)."""
    family_dir = FIXTURES / case.relative_to(FIXTURES).parts[0]
    if case.parent == family_dir:
        return rewriter(file_kind(case), case.parent, name=case.name)(content)
    repository = family_dir / case.relative_to(family_dir).parts[0]
    copy = tree / repository.name
    if not copy.exists():
        shutil.copytree(repository, copy, ignore=lambda _, names: [n for n in names if _expectation(n)])
    where = copy / case.relative_to(repository)
    return rewriter(file_kind(case), where.parent, copy, case.name)(content)


def _expectation(name: str) -> bool:
    return ".expected." in name or name.endswith(".findings")


@pytest.mark.parametrize("case", CASES, ids=lambda p: str(p.relative_to(FIXTURES)))
def test_fixture(case: Path, tmp_path: Path) -> None:
    source = read_text(case, file_kind(case)).content
    migrated, findings = migrate(case, source, tmp_path)
    if case.name.startswith("unchanged_"):
        assert migrated == source
    else:
        assert migrated == read_text(expected_path(case), file_kind(case)).content
    findings_file = case.with_suffix(".findings")
    assert findings_file.exists(), f"missing {findings_file.name}"
    assert finding_lines(findings) == findings_file.read_text().splitlines()
    # Every manual finding has its TODO comment, and each line it names as the same decision has one too;
    # every TODO comment belongs to a finding.
    todos = Counter(TODO_CODE.findall(migrated))
    manual = [f for f in findings if not f.fixed]
    assert Counter(f.code for f in manual) <= todos
    assert todos <= Counter(f.code for f in manual for _ in range(1 + len(f.also)))
    # Second run: the migrated file is stable; manual items are still reported, nothing is fixed twice.
    again, again_findings = migrate(case, migrated, tmp_path)
    assert again == migrated
    assert [f.code for f in again_findings if f.fixed] == []
    assert sorted(f.code for f in again_findings) == sorted(f.code for f in findings if not f.fixed)


def test_every_family_has_cases() -> None:
    families = {case.relative_to(FIXTURES).parts[0] for case in CASES}
    assert {"inference", "training", "xla", "environment", "shell", "notebook"} <= families
    assert len(CASES) >= 40
