"""The contributor tools: `scripts/new_rule.py` scaffolds a rule that the registry loads, and
`tests/migrator/update_fixtures.py` rewrites nothing where the expectations match the output."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.migrator.test_fixtures import FIXTURES
from tests.migrator.update_fixtures import update

REPO = Path(__file__).resolve().parents[2]


def test_a_scaffolded_rule_is_found_by_the_registry_with_the_next_free_code(tmp_path: Path) -> None:
    """In a copy of the package (~3 s: a fresh interpreter imports the registry)."""
    shutil.copytree(REPO / "migrator", tmp_path / "migrator", ignore=shutil.ignore_patterns("__pycache__"))
    new_rule = [sys.executable, str(REPO / "scripts" / "new_rule.py"), "--root", str(tmp_path)]
    highest = max(int(path.name[2:5]) for path in (REPO / "migrator" / "families" / "xla").glob("nm3*.py"))
    code = f"NM{highest + 1}"  # (the next free code after the family's highest module)
    module_name = f"{code.lower()}_replication_calls"
    done = subprocess.run([*new_rule, "xla", "replication_calls"], capture_output=True, text=True, check=True)
    assert f"{module_name}.py ({code})" in done.stdout
    module = tmp_path / "migrator" / "families" / "xla" / f"{module_name}.py"
    assert f'Rule(\n    "{code}"' in module.read_text() and "HANDLER = ReplicationCalls" in module.read_text()
    assert (tmp_path / "fixtures" / "migrator" / "xla" / "replication_calls.py").exists()
    # Found by its name: the registry, which lists no module, is not edited.
    assert (tmp_path / "migrator" / "registry.py").read_text() == (
        REPO / "migrator" / "registry.py"
    ).read_text()
    loaded = subprocess.run(
        [sys.executable, "-c", f"from migrator.registry import RULE_MODULES; print(RULE_MODULES['{code}'])"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=True,
    )
    assert loaded.stdout.strip() == f"migrator.families.xla.{module_name}"
    again = subprocess.run([*new_rule, "xla", "other", "--code", code], capture_output=True, text=True)
    assert again.returncode == 2 and f"{code} is already defined" in again.stderr


@pytest.mark.parametrize("case", ["xla/bench_step_sync_helper.py", "shell/crlf_launcher.sh"])
def test_updating_expectations_that_match_the_output_writes_nothing(case: str, tmp_path: Path) -> None:
    assert update(FIXTURES / case, tmp_path) is None
