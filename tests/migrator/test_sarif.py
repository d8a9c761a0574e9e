"""The SARIF report validates against the official SARIF 2.1.0 schema (OASIS, shipped as test data: see
tests/migrator/data/SOURCES.md), with URI formats checked, and keeps §3.27.9, which the schema cannot say."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import jsonschema
import pytest
from click.testing import CliRunner

from commands.neuron_migrate import main

DATA = Path(__file__).parent / "data"
FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "migrator"


@pytest.fixture(scope="module")
def validator():
    schema = json.loads((DATA / "sarif-schema-2.1.0.json").read_text(encoding="utf-8"))
    checker = jsonschema.FormatChecker()  # every format it knows: the draft-4 set lacks uri-reference
    assert "uri-reference" in checker.checkers, "rfc3986-validator (test extra) checks URI references"
    return jsonschema.Draft4Validator(schema, format_checker=checker)


def sarif_of(*args) -> dict:
    result = CliRunner().invoke(main, ["--format", "sarif", *map(str, args)], catch_exceptions=False)
    assert result.exit_code in (0, 1, 2), result.output
    return json.loads(result.stdout)


def problems(validator, sarif: dict) -> list[str]:
    found = [
        f"{'/'.join(map(str, error.absolute_path))}: {error.message}"
        for error in validator.iter_errors(sarif)
    ]
    for result in sarif["runs"][0]["results"]:  # §3.27.9
        if result.get("kind", "fail") != "fail" and result.get("level", "none") != "none":
            found.append(f"{result['ruleId']}: kind {result['kind']} with level {result['level']} (§3.27.9)")
    return found


@pytest.fixture
def awkward_tree(tmp_path, xla_script):
    """Every fixture, under names with a space, `#`, `?`, `%` and non-ASCII (a real notebook name had spaces)."""
    root = tmp_path / "my project #2?"
    shutil.copytree(FIXTURES / "notebook", root / "notebooks 100%")
    shutil.copytree(FIXTURES / "xla", root / "xla")
    (root / "données d'entraînement.py").write_text(xla_script)
    (root / "broken.py").write_text("import torch_xla\nx = (\n")  # an error: a notification
    return root


def test_check_mode_sarif_validates(validator, awkward_tree):
    sarif = sarif_of("--check", awkward_tree)
    assert problems(validator, sarif) == []
    results = sarif["runs"][0]["results"]
    assert len(results) > 100
    # Under --check nothing is fixed yet: every finding is a failing result at its rule's level.
    assert {result["kind"] for result in results} == {"fail"}
    uris = {result["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] for result in results}
    assert any("my%20project%20%232%3F/donn%C3%A9es%20d%27entra%C3%AEnement.py" in uri for uri in uris)
    notifications = sarif["runs"][0]["invocations"][0]["toolExecutionNotifications"]
    assert any(
        n["locations"][0]["physicalLocation"]["artifactLocation"]["uri"].endswith("/broken.py")
        for n in notifications
    )


def test_in_place_sarif_marks_what_it_fixed_as_informational(validator, awkward_tree):
    sarif = sarif_of(awkward_tree)
    assert problems(validator, sarif) == []
    results = sarif["runs"][0]["results"]
    fixed = [result for result in results if result["properties"]["fixed"]]
    manual = [result for result in results if not result["properties"]["fixed"]]
    assert fixed and manual
    assert {(r["kind"], r["level"]) for r in fixed} == {("informational", "none")}
    assert {r["kind"] for r in manual} == {"fail"} and "none" not in {r["level"] for r in manual}


def test_the_schema_check_catches_what_the_issue_found(validator):
    """The checks themselves fail on the two faults of the earlier writer."""
    sarif = {
        "version": "2.1.0",
        "runs": [
            {
                "tool": {"driver": {"name": "x"}},
                "results": [
                    {
                        "ruleId": "NM301",
                        "kind": "informational",
                        "level": "note",
                        "message": {"text": "m"},
                        "locations": [{"physicalLocation": {"artifactLocation": {"uri": "my nb.ipynb"}}}],
                    }
                ],
            }
        ],
    }
    found = problems(validator, sarif)
    assert any("is not a 'uri-reference'" in line for line in found)
    assert any("§3.27.9" in line for line in found)
