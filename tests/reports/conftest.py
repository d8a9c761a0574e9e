from __future__ import annotations

import json
from pathlib import Path

import pytest

DATA = Path(__file__).parent / "data"


@pytest.fixture(autouse=True)
def offline(monkeypatch, tmp_path_factory):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    # The checklist's real-size plans are measured once for the session, not kept in the user's cache.
    monkeypatch.setenv("NEURON_MIGRATE_CACHE", str(tmp_path_factory.getbasetemp() / "neuron-migrate-cache"))


@pytest.fixture
def data() -> Path:
    return DATA


@pytest.fixture
def rows(data) -> dict[str, list[dict]]:
    """The synthetic results files, parsed, keyed by file stem."""
    return {
        path.stem: [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
        for path in sorted(data.glob("*.jsonl"))
    }


def write_jsonl(path: Path, records: list[dict]) -> Path:
    path.write_text("".join(json.dumps(record) + "\n" for record in records), encoding="utf-8")
    return path


def measured(row: dict, name: str):
    """A row's figure as measured: recompiles and graph breaks of generation that was not compiled are not."""
    from compat_matrix.schema import GENERATION_COMPILE_FIGURES

    if name in GENERATION_COMPILE_FIGURES and row.get("compiled_generation") is False:
        return None
    return row.get(name)
