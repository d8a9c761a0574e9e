"""The command line: modes, formats, exit codes, error paths (click's CliRunner)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from click.testing import CliRunner

from commands.neuron_migrate import main

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def tree(tmp_path, xla_script, plain_script):
    (tmp_path / "src" / "pkg").mkdir(parents=True)
    (tmp_path / "src" / "train.py").write_text(xla_script)
    (tmp_path / "src" / "pkg" / "plain.py").write_text(plain_script)
    return tmp_path / "src"


def invoke(*args):
    return CliRunner().invoke(main, [str(arg) for arg in args], catch_exceptions=False)


def snapshot(root):
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_in_place_rewrite_exits_0_when_nothing_manual_remains(tree):
    result = invoke(tree)
    assert result.exit_code == 0, result.output
    assert "mark_step" not in (tree / "train.py").read_text()
    assert "2 files checked, 1 rewritten" in result.stderr


def test_diff_writes_nothing(tree):
    before = snapshot(tree)
    result = invoke("--diff", tree)
    assert result.exit_code == 0
    assert "-    xm.mark_step()  # cut the graph" in result.stdout
    assert snapshot(tree) == before


def test_check_exits_1_when_something_would_change_and_0_when_clean(tree):
    before = snapshot(tree)
    assert invoke("--check", tree).exit_code == 1
    assert snapshot(tree) == before
    invoke(tree)
    clean = invoke("--check", tree)
    assert clean.exit_code == 0 and "no files were modified" in clean.stderr


def test_manual_work_exits_1(tmp_path):
    path = tmp_path / "infer.py"
    path.write_text("from optimum.neuron import NeuronSomethingUnknown\n")
    result = invoke(path)
    assert result.exit_code == 1
    assert f"{path}:1:28: NM901 [manual]" in result.stdout
    assert "# TODO(neuron-migrate): NM901" in path.read_text()


def test_output_dir_mirrors_tree_and_leaves_inputs_untouched(tree, tmp_path):
    before = snapshot(tree)
    out = tmp_path / "migrated"
    result = invoke("--output-dir", out, tree)
    assert result.exit_code == 0, result.output
    assert snapshot(tree) == before
    assert sorted(snapshot(out)) == ["pkg/plain.py", "train.py"]
    assert "mark_step" not in (out / "train.py").read_text()


def test_output_dir_writes_the_whole_tree_so_a_launcher_runs_from_it(tree, tmp_path):
    """A launcher passing `--config_file_path config/main.yaml` must find its config in the migrated tree."""
    (tree / "config").mkdir()
    (tree / "config" / "main.yaml").write_text("lr: 1e-4\n")
    (tree / "run.sh").write_text("python train.py --config_file_path config/main.yaml\n")
    (tree / "weights.bin").write_bytes(bytes(range(256)))
    (tree / "README.md").write_text("read me\n")
    (tree / ".git").mkdir()
    (tree / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    before = snapshot(tree)
    out = tmp_path / "migrated"
    result = invoke("--output-dir", out, tree)
    assert result.exit_code == 0, result.output
    assert snapshot(tree) == before
    assert sorted(snapshot(out)) == [
        "README.md",
        "config/main.yaml",
        "pkg/plain.py",
        "run.sh",
        "train.py",
        "weights.bin",
    ]
    assert (out / "weights.bin").read_bytes() == bytes(range(256))
    assert (out / "config" / "main.yaml").stat().st_mtime_ns == (
        tree / "config" / "main.yaml"
    ).stat().st_mtime_ns
    assert "mark_step" not in (out / "train.py").read_text()
    assert "3 other files copied" in result.stderr  # run.sh is a launcher: migrated


def test_output_dir_keeps_links_inside_the_tree_and_leaves_out_links_out_of_it(tree, tmp_path):
    secret = tmp_path / "secret.txt"
    secret.write_text("outside\n")
    (tree / "data").mkdir()
    (tree / "data" / "rows.jsonl").write_text("{}\n")
    (tree / "latest.jsonl").symlink_to("data/rows.jsonl")
    (tree / "pkg" / "rows").symlink_to(tree / "data")  # absolute, inside the tree
    (tree / "leak.txt").symlink_to(secret)
    (tree / "leak_dir").symlink_to(tmp_path)
    out = tmp_path / "migrated"
    result = invoke("--output-dir", out, tree)
    assert result.exit_code == 0, result.output
    assert os.readlink(out / "latest.jsonl") == "data/rows.jsonl"
    assert os.readlink(out / "pkg" / "rows") == "../data"
    assert (out / "pkg" / "rows" / "rows.jsonl").read_text() == "{}\n"
    assert not os.path.lexists(out / "leak.txt") and not os.path.lexists(out / "leak_dir")
    assert f"not copied: {tree / 'leak.txt'} (a link out of the tree, to {secret})" in result.stderr


def test_output_dir_never_copies_onto_an_input(tmp_path, xla_script):
    """`--output-dir A A/B`: A/B/B/x would be copied to A/B/x, an input."""
    inner = tmp_path / "a" / "b"
    (inner / "b").mkdir(parents=True)
    (inner / "b" / "notes.txt").write_text("mine\n")
    (inner / "notes.txt").write_text("also mine\n")
    (inner / "train.py").write_text(xla_script)
    result = invoke("--output-dir", tmp_path / "a", inner)
    assert result.exit_code == 2 and "inside the input; nothing was written" in result.stderr
    assert (inner / "notes.txt").read_text() == "also mine\n"
    assert "mark_step" in (inner / "train.py").read_text()


def test_output_dir_inside_input_is_refused(tree):
    result = invoke("--output-dir", tree / "out", tree)
    assert result.exit_code == 2 and "must not be inside" in result.stderr


def test_json_report_schema(tree, tmp_path):
    report = tmp_path / "r" / "report.json"
    result = invoke("--check", "--format", "json", "--report", report, tree)
    assert result.exit_code == 1
    data = json.loads(report.read_text())
    assert data["schema_version"] == 1 and data["tool"]["name"] == "neuron-migrate"
    (train,) = [f for f in data["files"] if f["path"].endswith("train.py")]
    assert set(train) == {"path", "changed", "error", "findings"} and train["changed"] is True
    finding = train["findings"][0]
    assert {"code", "severity", "line", "column", "message", "fixed"} <= set(finding)
    assert data["summary"]["files"] == 2 and data["summary"]["changed"] == 1
    assert data["summary"]["interrupted"] is False


def test_json_report_follows_its_documented_schema(tmp_path):
    """docs/using/json-report.schema.json, on every fixture (every kind, notebook cells, errors included)."""
    import jsonschema

    schema = json.loads((ROOT / "docs" / "using" / "json-report.schema.json").read_text())
    broken = tmp_path / "broken.py"
    broken.write_text("import torch_xla\nx = (\n")
    result = invoke("--check", "--format", "json", ROOT / "fixtures" / "migrator", broken)
    data = json.loads(result.stdout)
    jsonschema.Draft202012Validator(schema).validate(data)
    assert data["summary"]["errors"] >= 1 and data["summary"]["manual"] > 0
    documented = (ROOT / "docs" / "using" / "json-report.md").read_text()
    findings = [finding for file in data["files"] for finding in file["findings"]]
    fields = {*data, *data["summary"], *data["files"][0], *(name for finding in findings for name in finding)}
    assert {"subject", "cell", "also"} <= fields
    for name in fields:
        assert f"`{name}`" in documented, f"{name} is not documented"


def test_every_todo_written_has_its_finding_in_json_and_sarif_and_the_reverse(tmp_path):
    """A run in place over a copy of every fixture input: in each file, each code's TODO comments are at least
    its manual findings in the JSON report and at most those and the other lines they name (`also`), and the
    SARIF report holds the same findings (and their lines)."""
    import re
    import shutil
    from collections import Counter

    from migrator.report import artifact_uri

    tree = tmp_path / "fixtures"
    shutil.copytree(
        ROOT / "fixtures" / "migrator",
        tree,
        ignore=lambda _, names: [n for n in names if ".expected." in n or n.endswith(".findings")],
    )
    data = json.loads(invoke("--format", "json", "--output-dir", tmp_path / "out", tree).stdout)
    sarif = json.loads(invoke("--check", "--format", "sarif", tree).stdout)
    todo = re.compile(r"TODO\(neuron-migrate\): (NM\d{3})")
    checked = 0
    for file in data["files"]:
        written = (tmp_path / "out" / Path(file["path"]).relative_to(tree)).read_text(encoding="utf-8")
        manual = [f for f in file["findings"] if not f["fixed"]]
        todos = Counter(todo.findall(written))
        # Each manual finding has its TODO, and so does each other line it names as the same decision.
        assert Counter(f["code"] for f in manual) <= todos, file["path"]
        assert todos <= Counter(f["code"] for f in manual for _ in range(1 + len(f.get("also", [])))), file[
            "path"
        ]
        checked += bool(manual)
    assert checked > 100
    json_findings = sorted(
        (artifact_uri(file["path"]), f["code"], f.get("also", []))
        for file in data["files"]
        for f in file["findings"]
    )
    sarif_findings = sorted(
        (
            result["locations"][0]["physicalLocation"]["artifactLocation"]["uri"],
            result["ruleId"],
            result["properties"].get("also", []),
        )
        for result in sarif["runs"][0]["results"]
    )
    assert sarif_findings == json_findings
    assert any(also for _, _, also in json_findings)


def test_sarif_report(tree):
    result = invoke("--check", "--format", "sarif", tree)
    sarif = json.loads(result.stdout)
    assert sarif["version"] == "2.1.0"
    run = sarif["runs"][0]
    rule_ids = [rule["id"] for rule in run["tool"]["driver"]["rules"]]
    for item in run["results"]:
        assert rule_ids[item["ruleIndex"]] == item["ruleId"]
        region = item["locations"][0]["physicalLocation"]["region"]
        assert region["startLine"] >= 1 and region["startColumn"] >= 1
        assert item["level"] in {"error", "warning", "note"}


def test_jobs_give_the_same_report(tree):
    serial = invoke("--check", "--format", "json", "-j", "1", tree).stdout
    parallel = invoke("--check", "--format", "json", "-j", "2", tree).stdout
    assert serial == parallel


def test_progress_bar_for_many_files(tmp_path, plain_script):
    for index in range(25):
        (tmp_path / f"m{index}.py").write_text(plain_script)
    result = invoke("--check", tmp_path)
    assert result.exit_code == 0 and "migrating" in result.stderr


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["missing.py"], "no such file or directory"),
        (["--diff", "--check", "."], "exclude each other"),
    ],
)
def test_usage_errors_exit_2(tmp_path, monkeypatch, args, message):
    monkeypatch.chdir(tmp_path)
    result = invoke(*args)
    assert result.exit_code == 2 and message in result.stderr


def test_unsupported_file_type_exits_2(tmp_path):
    path = tmp_path / "notes.txt"
    path.write_text("optimum")
    result = invoke(path)
    assert result.exit_code == 2 and "unsupported file type" in result.stderr


def test_unparseable_file_exits_2_with_path_and_line(tree):
    (tree / "broken.py").write_text("import torch_xla\nx = (\n")
    result = invoke(tree)
    assert result.exit_code == 2
    assert f"{tree / 'broken.py'}: error: line 2" in result.stdout
    assert "mark_step" not in (tree / "train.py").read_text()  # the other files still ran


def test_slurm_batch_files_and_shebang_scripts_are_shell(tmp_path):
    job = tmp_path / "train.sbatch"
    job.write_text("#!/bin/bash\n#SBATCH --nodes=1\nexport NEURON_FUSE_SOFTMAX=1\nsrun torchrun train.py\n")
    launcher = tmp_path / "launch"
    launcher.write_text("#!/usr/bin/env bash\nexport NEURON_FUSE_SOFTMAX=1\n")
    result = invoke(str(job), str(launcher))
    assert result.exit_code == 0, result.output
    assert "NEURON_FUSE_SOFTMAX" not in job.read_text() and "NEURON_FUSE_SOFTMAX" not in launcher.read_text()
    assert job.read_text().startswith("#!/bin/bash\n#SBATCH --nodes=1\nexport HF_DEACTIVATE_ASYNC_LOAD=1\n")
