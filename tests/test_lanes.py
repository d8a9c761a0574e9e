"""`make test` runs two pytest-xdist workers with `--dist loadgroup`: the tests of one `xdist_group` (the Ray
tests share one local cluster, the browser tests one Chromium) must run on one worker. On pytest 9.2 the group
mark is silently ignored (pytest-xdist#1386); constraints.txt pins a pytest where it works."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

GROUPED = """
import os

import pytest

WORKERS = os.environ.get("WORKERS_FILE")


def _record(name):
    with open(WORKERS, "a") as file:
        file.write(f"{name} {os.environ['PYTEST_XDIST_WORKER']}\\n")


@pytest.mark.xdist_group("shared")
@pytest.mark.parametrize("index", range(6))
def test_grouped(index):
    _record("grouped")


@pytest.mark.parametrize("index", range(6))
def test_free(index):
    _record("free")
"""


def test_tests_of_one_xdist_group_run_on_one_worker(tmp_path: Path) -> None:
    (tmp_path / "test_grouped.py").write_text(GROUPED)
    workers = tmp_path / "workers.txt"
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", "2", "--dist", "loadgroup"],
        cwd=tmp_path,
        env={"PATH": "/usr/bin:/bin", "WORKERS_FILE": str(workers)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    runs = [line.split() for line in workers.read_text().splitlines()]
    assert len(runs) == 12
    assert len({worker for name, worker in runs if name == "grouped"}) == 1, runs
