"""Mutation fuzzing of neuron-migrate, the way a careful user or a security reviewer tries it.

Mutants of the bundled fixture inputs (every kind: Python, notebooks, shell, requirements), seeded and
reproducible: bytes deleted, duplicated or inserted (NUL, invalid UTF-8, CR), lines swapped, files truncated,
code nested thousands of levels deep (calls, brackets, unary operators, lambdas, flat sums), CR-only line ends,
notebooks of another nbformat or JSON that is not a notebook. They are migrated the way a user runs the tool, as
whole runs of the installed command over a tree of mutants (`--check --format json`, then in place, then in
place again), and every run and file is held to what must always hold:

- a run ends (no hang) with exit code 0, 1 or 2 and no traceback, and its JSON report is complete;
- `--check` changes no file;
- a file is left byte-identical, or its output parses with the parser of its kind (and is never worse for
  bash), a second run changes nothing, and every change has a finding;
- no temporary file is left behind.

A handful of command-line misuses (bad paths, options, outputs) must each exit 2 with a message.

    .venv/bin/python benchmarks/mutation_fuzz.py [--mutants 300] [--seed 0] [--json figures.json]

Prints the figures (mutants by outcome, violations, the slowest file) as JSON; exits 1 on any violation.
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "fixtures" / "migrator"
NEURON_MIGRATE = (sys.executable, "-c", "from commands.neuron_migrate import main; main()")
RUN_LIMIT_S = 900  # a whole run over the tree; a file has the tool's own --timeout


def seeds() -> list[Path]:
    from usercode.sources import file_kind

    return sorted(
        path
        for path in FIXTURES.rglob("*")
        if path.is_file()
        and file_kind(path)
        and ".expected." not in path.name
        and "repositories" not in path.parts
    )


# -- mutations: each takes (bytes, random) and returns bytes -------------------------------------------------


def _span(data: bytes, rng: random.Random) -> tuple[int, int]:
    start = rng.randrange(len(data) + 1)
    return start, min(len(data), start + rng.randint(1, 200))


def delete_span(data, rng):
    start, end = _span(data, rng)
    return data[:start] + data[end:]


def duplicate_span(data, rng):
    start, end = _span(data, rng)
    return data[:end] + data[start:end] + data[end:]


def insert_bytes(data, rng):
    junk = rng.choice(
        [b"\x00", b"\xff\xfe", b"\r", b"\xe9", b"(", b"]]]", b"'''", b'"', b"\\", b"\t\t", b"\x1b[31m"]
    )
    at = rng.randrange(len(data) + 1)
    return data[:at] + junk + data[at:]


def swap_lines(data, rng):
    lines = data.splitlines(keepends=True)
    if len(lines) > 1:
        i, j = rng.randrange(len(lines)), rng.randrange(len(lines))
        lines[i], lines[j] = lines[j], lines[i]
    return b"".join(lines)


def truncate(data, rng):
    return data[: rng.randrange(len(data) + 1)]


def carriage_returns(data, rng):
    return data.replace(b"\r\n", b"\n").replace(b"\n", b"\r")


def latin1_comment(data, rng):
    return b"# r\xe9sum\xe9 \xb5s\n" + data


def deep_nesting(data, rng):
    depth = rng.choice([150, 199, 500, 1200, 3000])
    shape = rng.choice(["call", "list", "paren", "unary", "not", "lambda", "sum", "attribute", "subscript"])
    expression = {
        "call": "f(" * depth + ")" * depth,
        "list": "[" * depth + "]" * depth,
        "paren": "(" * depth + "1" + ")" * depth,
        "unary": "-" * depth + "1",
        "not": "not " * depth + "x",
        "lambda": "lambda: " * depth + "0",
        "sum": " + ".join(["a"] * depth),
        "attribute": "a" + ".b" * depth,
        "subscript": "a" + "[0]" * depth,
    }[shape]
    lines = data.splitlines(keepends=True)
    at = rng.randrange(len(lines) + 1)
    return b"".join(lines[:at] + [f"deep = {expression}\n".encode()] + lines[at:])


def notebook_shape(data, rng):
    try:
        document = json.loads(data)
    except ValueError:
        return data
    if not isinstance(document, dict):
        return data
    choice = rng.choice(["nbformat3", "list", "no_cells_key", "cell_not_object", "source_number", "big_int"])
    if choice == "nbformat3":
        cells = [cell | {"input": cell.pop("source", "")} for cell in document.pop("cells", [])]
        document = {"nbformat": 3, "nbformat_minor": 0, "metadata": {}, "worksheets": [{"cells": cells}]}
    elif choice == "list":
        return json.dumps(document.get("cells", [])).encode()
    elif choice == "no_cells_key":
        document.pop("cells", None)
    elif choice == "cell_not_object":
        document.setdefault("cells", []).insert(0, "not a cell")
    elif choice == "source_number":
        for cell in document.get("cells", [])[:1]:
            cell["source"] = 42
    else:  # an integer longer than Python reads by default (4,300 digits)
        return json.dumps(document | {"big": 0}).replace('"big": 0', '"big": ' + "9" * 5000).encode()
    return json.dumps(document, indent=1).encode()


BYTE_MUTATIONS = (
    delete_span,
    duplicate_span,
    insert_bytes,
    swap_lines,
    truncate,
    carriage_returns,
    latin1_comment,
)


def mutate(path: Path, rng: random.Random) -> tuple[bytes, str]:
    data = path.read_bytes()
    options = list(BYTE_MUTATIONS)
    if path.suffix == ".py":
        options += [deep_nesting] * 3
    if path.suffix == ".ipynb":
        options += [notebook_shape] * 3
    names = []
    for mutation in rng.sample(options, k=rng.choice([1, 1, 2])):
        data = mutation(data, rng)
        names.append(mutation.__name__)
    return data, "+".join(names)


# -- checks ---------------------------------------------------------------------------------------------------


def parses(kind: str, before: bytes, after: bytes) -> bool:
    """The output parses with the parser of its kind (bash: no worse than the input)."""
    if kind == "python":
        try:
            ast.parse(after)
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            return False
        return True
    if kind == "notebook":
        import nbformat

        try:
            nbformat.validate(nbformat.reads(after.decode("utf-8"), as_version=4))
        except Exception:
            return False
        return True
    if kind == "shell":
        return _bash_ok(after) or not _bash_ok(before)
    return True


def _bash_ok(script: bytes) -> bool:
    return subprocess.run(["bash", "-n"], input=script, capture_output=True, timeout=60).returncode == 0


def run_tool(*args: str, cwd: Path) -> tuple[subprocess.CompletedProcess, float]:
    started = time.monotonic()
    try:
        run = subprocess.run(
            [*NEURON_MIGRATE, *args], cwd=cwd, capture_output=True, text=True, timeout=RUN_LIMIT_S
        )
    except subprocess.TimeoutExpired as error:
        run = subprocess.CompletedProcess(error.cmd, -1, "", f"HANG: no exit after {RUN_LIMIT_S} s")
    return run, time.monotonic() - started


def check_run(run: subprocess.CompletedProcess, what: str, violations: list[str]) -> None:
    if run.returncode not in (0, 1, 2):
        violations.append(f"{what}: exit code {run.returncode}")
    if "Traceback" in run.stderr or "Traceback" in run.stdout:
        violations.append(f"{what}: traceback: {run.stderr[-300:]}")


def read_report(path: Path, what: str, run: subprocess.CompletedProcess, violations: list[str]) -> dict:
    """The run's JSON report; a run that wrote none (it died) is a violation, and reads as no file."""
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        violations.append(f"{what}: no report written (exit {run.returncode})")
        return {"files": []}


def fuzz(count: int, seed: int, jobs: int) -> dict:
    work = Path(tempfile.mkdtemp(prefix="nm-fuzz-"))
    try:
        return _fuzz(count, seed, jobs, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _fuzz(count: int, seed: int, jobs: int, work: Path) -> dict:
    from usercode.sources import file_kind

    rng = random.Random(seed)
    corpus = seeds()
    tree = work / "mutants"
    kinds: dict[str, str] = {}
    mutations: dict[str, str] = {}
    for index in range(count):
        source = rng.choice(corpus)
        data, how = mutate(source, rng)
        # each in a folder of its own, under its own name: a file's kind can depend on it (pyproject.toml)
        relative = f"{source.parent.name}/m{index:04}/{source.name}"
        (tree / relative).parent.mkdir(parents=True, exist_ok=True)
        (tree / relative).write_bytes(data)
        kinds[relative], mutations[relative] = file_kind(source), how
    originals = {relative: (tree / relative).read_bytes() for relative in kinds}
    violations: list[str] = []

    # 1. --check: nothing written, a complete report.
    check, check_s = run_tool(
        "--check",
        "-j",
        str(jobs),
        "--format",
        "json",
        "--report",
        str(work / "check.json"),
        "mutants",
        cwd=work,
    )
    check_run(check, "--check", violations)
    report = read_report(work / "check.json", "--check", check, violations)
    if report.get("schema_version") != 1 or len(report["files"]) != count:
        violations.append(
            f"--check report: {len(report['files'])} of {count} files, schema_version {report.get('schema_version')}"
        )
    for relative, data in originals.items():
        if (tree / relative).read_bytes() != data:
            violations.append(f"{relative}: changed by --check")
    outcome: Counter[str] = Counter()
    notable: dict[str, str] = {}  # files that hit the time limit, killed a worker, or met a bug of a rule
    for entry in report["files"]:
        error = entry["error"] or ""
        if any(
            words in error
            for words in ("took longer than", "process migrating this file died", "internal error")
        ):
            relative = Path(entry["path"]).relative_to("mutants").as_posix()
            notable[relative] = f"{mutations[relative]}: {error[:300]}"
        outcome[
            "error: time limit"
            if "took longer than" in error
            else "error: worker died"
            if "process migrating this file died" in error
            else "error: internal"
            if "internal error" in error
            else "error: cannot parse or read"
            if error
            else "would change"
            if entry["changed"]
            else "manual only"
            if entry["findings"]
            else "nothing to do"
        ] += 1

    # 2. In place, then again: outputs parse, a second run is a no-op, every change has a finding.
    written, write_s = run_tool(
        "-j", str(jobs), "--format", "json", "--report", str(work / "write.json"), "mutants", cwd=work
    )
    check_run(written, "in place", violations)
    written_report = read_report(work / "write.json", "in place", written, violations)
    by_path = {
        Path(entry["path"]).relative_to("mutants").as_posix(): entry for entry in written_report["files"]
    }
    changed = 0
    for relative, before in originals.items():
        after = (tree / relative).read_bytes()
        entry = by_path.get(relative)
        if entry is None:
            violations.append(f"{relative}: missing from the report")
            continue
        if after == before:
            continue
        changed += 1
        if entry["error"]:
            violations.append(f"{relative}: written although reported as an error ({entry['error']})")
        if not entry["findings"]:
            violations.append(f"{relative}: changed with no finding ({mutations[relative]})")
        if not parses(kinds[relative], before, after):
            violations.append(f"{relative}: output does not parse ({mutations[relative]})")
    snapshot = {relative: (tree / relative).read_bytes() for relative in originals}
    again, again_s = run_tool("-j", str(jobs), "mutants", cwd=work)
    check_run(again, "second run", violations)
    for relative, data in snapshot.items():
        if (tree / relative).read_bytes() != data:
            violations.append(f"{relative}: changed again by a second run ({mutations[relative]})")
    debris = [str(path) for path in tree.rglob("*") if path.name.endswith(".neuron-migrate-tmp")]
    violations += [f"{path}: temporary file left" for path in debris]

    misuse = bad_input_runs(work, violations)
    return {
        "mutants": count,
        "seed": seed,
        "jobs": jobs,
        "mutations": dict(Counter(how for how in mutations.values()).most_common()),
        "outcome_under_check": dict(sorted(outcome.items())),
        "notable_errors": notable,
        "files_changed_in_place": changed,
        "runs": {
            "check_s": round(check_s, 1),
            "in_place_s": round(write_s, 1),
            "second_run_s": round(again_s, 1),
        },
        "exit_codes": {
            "check": check.returncode,
            "in_place": written.returncode,
            "second_run": again.returncode,
        },
        "bad_input_runs": misuse,
        "violations": violations,
    }


def bad_input_runs(work: Path, violations: list[str]) -> int:
    """Command-line misuse: each must exit 2 with a message, never a traceback."""
    script = work / "train.py"
    script.write_text("import torch_xla.core.xla_model as xm\nxm.mark_step()\n")
    (work / "loop_a.py").symlink_to(work / "loop_b.py")
    (work / "loop_b.py").symlink_to(work / "loop_a.py")
    os.mkfifo(work / "pipe.py")
    cases = [
        ["missing.py"],
        ["notes.txt"],
        ["--check", "--diff", "train.py"],
        ["--output-dir", ".", "train.py"],
        ["--output-dir", "train.py", "train.py"],
        ["--report", "train.py", "--format", "json", "--check", "train.py"],
        ["--report", ".", "--check", "train.py"],
        ["-j", "-1", "train.py"],
        ["--timeout", "-5", "train.py"],
        ["--format", "xml", "train.py"],
        ["--check", "loop_a.py"],
        ["--check", "pipe.py"],
        ["checklist", "missing_dir"],
        ["checklist", "train.py", "-o", "out.pdf"],
        ["checklist", "train.py", "--results", "train.py"],
    ]
    (work / "notes.txt").write_text("x")
    for args in cases:
        run, _ = run_tool(*args, cwd=work)
        if run.returncode != 2 or "Traceback" in run.stderr or not (run.stderr.strip() or run.stdout.strip()):
            violations.append(f"neuron-migrate {' '.join(args)}: exit {run.returncode}: {run.stderr[-200:]}")
    return len(cases)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mutants", type=int, default=300)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("-j", "--jobs", type=int, default=2)
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args()
    figures = fuzz(args.mutants, args.seed, args.jobs)
    text = json.dumps(figures, indent=2)
    print(text)
    if args.json:
        args.json.write_text(text + "\n")
    sys.exit(1 if figures["violations"] else 0)


if __name__ == "__main__":
    main()
