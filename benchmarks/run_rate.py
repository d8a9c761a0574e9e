"""The run rate: real entry points of public repositories, migrated as a user would and then tried.

For each repository of the corpus (`benchmarks/corpus.json`: repository, commit, entry points with the
arguments their README or notebook passes), from a local mirror (`--mirrors DIR`, holding `OWNER+NAME/repo`,
the git directory the fetch tool writes, or `OWNER+NAME` itself): the commit is extracted into a temporary
folder, migrated with `neuron-migrate --output-dir`, and its entry points tried with `neuron-migrate try DIR
--entry-points` (`-j` at a time). Each entry point gets one row: ran, or not run with its cause class and the
evidence line (file:line and the message):

- manual work left: the run stopped at a statement the migrator left under a TODO(neuron-migrate) (the TODO's
  code is the evidence), or at an import of a Neuron SDK module (optimum.neuron, torch_xla, ...) it kept;
- migrated code fails: the run failed in code the migrator wrote or left unchanged, with no TODO there;
- try could not stand in: a package the try environment lacks, a model or dataset it could not stand in, a
  file the tree does not hold, a launcher it could not follow;
- needs private data: the corpus marks it (credentials, the owner's data): not tried;
- time limit: the run ran past --timeout.

    python benchmarks/run_rate.py --mirrors /work/.mirror -j 2 --output benchmarks/run_rate.json \
        --markdown run_rate.md
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CLI = [sys.executable, "-c", "from commands.neuron_migrate import main; main()"]
RAN, MANUAL, FAILS, STAND_IN, PRIVATE, TIME, NO_MIRROR = (
    "ran",
    "manual work left",
    "migrated code fails",
    "try could not stand in",
    "needs private data",
    "time limit",
    "mirror missing",
)
CLASSES = (RAN, MANUAL, FAILS, STAND_IN, PRIVATE, TIME)
# The Neuron SDK modules a migrated file must no longer import (the migrator's sources: migration-map.md).
SDK_MODULES = (
    "optimum.neuron",
    "optimum",
    "torch_xla",
    "torch_neuronx",
    "neuronx_distributed",
    "neuronx_distributed_inference",
    "transformers_neuronx",
    "libneuronxla",
    "neuronxcc",
    "nki",
    "neuron",
)
TODO = re.compile(r"TODO\(neuron-migrate\): (NM\d+)")
MISSING_MODULE = re.compile(r"No module named '([^']+)'")
LOOK_ABOVE = 8  # lines above a failing statement searched for its TODO (a TODO sits above what it is about)


def mirror_of(mirrors: Path, repo: str) -> Path | None:
    base = mirrors / repo.replace("/", "+")
    for candidate in (base / "repo", base):
        if (candidate / "HEAD").is_file():
            return candidate
    return None


def extract(git_dir: Path, commit: str, target: Path, folders: list[str]) -> None:
    target.mkdir(parents=True)
    archive = subprocess.run(
        ["git", "--git-dir", str(git_dir), "archive", commit, *folders], capture_output=True, check=True
    )
    subprocess.run(["tar", "-x", "-C", str(target)], input=archive.stdout, check=True)


def run_repo(repo: dict, git_dir: Path, work: Path, jobs: int, timeout: int) -> list[dict]:
    source, migrated = work / "src", work / "migrated"
    extract(git_dir, repo["commit"], source, repo.get("extract", []))
    migration = subprocess.run(
        [
            *CLI,
            "-j",
            str(jobs),
            "--output-dir",
            str(migrated),
            str(source),
            "-q",
            "--format",
            "json",
            "--report",
            str(work / "migrate.json"),
        ],
        capture_output=True,
        text=True,
    )
    if migration.returncode not in (0, 1):
        print(f"  migration exit {migration.returncode}: {migration.stderr.strip()[-300:]}", file=sys.stderr)
    print(
        f"  migrated: {migration.stderr.strip().splitlines()[-1] if migration.stderr.strip() else ''}",
        file=sys.stderr,
    )
    rows, tried = [], []
    for entry in repo["entries"]:
        row = {
            "repo": repo["repo"],
            "path": entry["path"],
            "kind": entry["kind"],
            "arguments": entry["arguments"],
        }
        if entry["needs_private_data"]:
            rows.append({**row, "class": PRIVATE, "evidence": entry["needs_private_data"], "fix": "—"})
        else:
            tried.append(entry)
            rows.append(row)
    if not tried:
        return rows
    table = work / "entries.json"
    table.write_text(json.dumps([{"path": e["path"], "arguments": e["arguments"]} for e in tried]))
    report = work / "try.json"
    subprocess.run(
        [
            *CLI,
            "try",
            str(migrated),
            "--entry-points",
            str(table),
            "-j",
            str(jobs),
            "--timeout",
            str(timeout),
            "--format",
            "json",
            "--report",
            str(report),
            "-q",
        ],
        text=True,
    )
    results = {}
    if report.is_file():
        results = {entry["path"]: entry for entry in json.loads(report.read_text())["entry_points"]}
    for row in rows:
        if "class" not in row:
            row.update(classify(results.get(row["path"]), migrated))
    return rows


def classify(result: dict | None, migrated: Path) -> dict:
    if result is None:
        return {"class": STAND_IN, "evidence": "the try wrote no report for it", "fix": "try: see its output"}
    if result["status"] == "ran":
        return {"class": RAN, "evidence": result["reason"], "fix": ""}
    run = next(run for run in result["runs"] if run["status"] != "ran")
    reason = run["reason"]
    if "ran over the --timeout" in reason:
        return {"class": TIME, "evidence": reason, "fix": "a faster run, or a longer --timeout"}
    error = run.get("error") or {}
    where = _where(error, migrated)
    evidence = f"{where}: {error.get('type')}: {error.get('message')}" if error.get("type") else reason
    todo = _todo_above(error, migrated, result["path"])
    module = MISSING_MODULE.search(f"{error.get('message', '')} {reason}")
    if run["status"] == "not-run" or "stand-in" in reason or "could not be built" in reason:
        return {"class": STAND_IN, "evidence": evidence, "fix": f"try: {reason[:200]}"}
    if module:
        name = module.group(1)
        if name.split(".")[0] in {m.split(".")[0] for m in SDK_MODULES} and name.split(".")[0] != "neuron":
            if todo:
                return {"class": MANUAL, "evidence": evidence, "fix": f"{todo[0]} at {where}: {todo[1]}"}
            kept_for = _todos(_source_lines(error, migrated, result["path"]))
            if kept_for:  # the import stays for a use left under a TODO further down: that is the manual work
                codes = ", ".join(f"{code} (line {line})" for code, line in kept_for[:4])
                return {
                    "class": MANUAL,
                    "evidence": evidence,
                    "fix": f"{codes}; the import of {name} at {where}, which fails first, has no TODO of its own",
                }
            return {
                "class": FAILS,
                "evidence": evidence,
                "fix": f"migrator: the import of {name} at {where} is kept with no TODO in the file",
            }
        return {
            "class": STAND_IN,
            "evidence": evidence,
            "fix": f"package {name} is not in the try environment",
        }
    if todo:
        return {"class": MANUAL, "evidence": evidence, "fix": f"{todo[0]} at {where}: {todo[1]}"}
    if error.get("type") == "FileNotFoundError" or (not error and "No such file" in reason):
        return {"class": STAND_IN, "evidence": evidence, "fix": "a file the run reads is not in the tree"}
    return {"class": FAILS, "evidence": evidence, "fix": f"{error.get('type') or 'exit'} in migrated code"}


def _where(error: dict, migrated: Path) -> str:
    file = error.get("file")
    if not file:
        return "(no frame of the user's code)"
    if error.get("cell") is not None:
        return f"cell {error['cell']}:{error.get('line')}"
    path = Path(file)
    path = path.relative_to(migrated) if path.is_relative_to(migrated) else path
    return f"{path}:{error.get('line')}"


def _todos(lines: list[str]) -> list[tuple[str, int]]:
    return [(match.group(1), number) for number, text in enumerate(lines, 1) if (match := TODO.search(text))]


def _todo_above(error: dict, migrated: Path, entry: str) -> tuple[str, str] | None:
    """(code, text) of the TODO(neuron-migrate) on or just above the failing line, if there is one."""
    lines = _source_lines(error, migrated, entry)
    line = error.get("line")
    if not lines or not line:
        return None
    for text in reversed(lines[max(0, line - 1 - LOOK_ABOVE) : line]):
        match = TODO.search(text)
        if match:
            return match.group(1), text.split(match.group(0), 1)[1].strip()[:160]
    return None


def _source_lines(error: dict, migrated: Path, entry: str) -> list[str]:
    """The migrated lines the error points at: a file's, or a notebook's code cell (the tried notebook's)."""
    file = error.get("file")
    if not file:
        return []
    if error.get("cell") is not None:
        try:
            cells = json.loads((migrated / entry).read_text(encoding="utf-8")).get("cells", [])
        except (OSError, ValueError):
            return []
        code = [cell for cell in cells if cell.get("cell_type") == "code"]
        if len(code) < error["cell"]:
            return []
        source = code[error["cell"] - 1].get("source", "")
        return ("".join(source) if isinstance(source, list) else source).splitlines()
    path = Path(file)
    if not path.is_absolute():
        path = migrated / path
    try:
        return path.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return []


def markdown(rows: list[dict]) -> str:
    counted = [row for row in rows if row["class"] != NO_MIRROR]
    lines = ["| class | entry points |", "|---|---|"]
    for name in CLASSES:
        lines.append(f"| {name} | {sum(row['class'] == name for row in counted)} |")
    lines += [
        "",
        "| repository | entry point | class | evidence | what would fix it |",
        "|---|---|---|---|---|",
    ]
    for row in rows:
        cells = [row["repo"], f"`{row['path']}`", row["class"], row["evidence"], row["fix"]]
        lines.append(
            "| " + " | ".join(str(cell).replace("|", "\\|").replace("\n", " ") for cell in cells) + " |"
        )
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mirrors", type=Path, required=True, help="folder of the repositories' git mirrors")
    parser.add_argument("--corpus", type=Path, default=ROOT / "benchmarks" / "corpus.json")
    parser.add_argument("-j", "--jobs", type=int, default=2, help="entry points tried at once")
    parser.add_argument("--timeout", type=int, default=300, help="seconds per run")
    parser.add_argument("--repo", action="append", default=[], help="only these repositories (OWNER/NAME)")
    parser.add_argument("--output", type=Path, default=ROOT / "benchmarks" / "run_rate.json")
    parser.add_argument("--markdown", type=Path, help="also write the table as Markdown here")
    args = parser.parse_args()
    corpus = json.loads(args.corpus.read_text())
    repos = [repo for repo in corpus["repos"] if not args.repo or repo["repo"] in args.repo]
    rows, started = [], time.monotonic()
    for number, repo in enumerate(repos, start=1):
        print(f"[{number}/{len(repos)}] {repo['repo']} @ {repo['commit'][:10]}", file=sys.stderr)
        git_dir = mirror_of(args.mirrors, repo["repo"])
        if git_dir is None:
            print(
                f"  MIRROR MISSING: no {repo['repo'].replace('/', '+')} under {args.mirrors}; "
                "its entry points are left out of the figures",
                file=sys.stderr,
            )
            rows += [
                {
                    "repo": repo["repo"],
                    "path": e["path"],
                    "kind": e["kind"],
                    "arguments": e["arguments"],
                    "class": NO_MIRROR,
                    "evidence": f"no mirror under {args.mirrors}",
                    "fix": "",
                }
                for e in repo["entries"]
            ]
            continue
        with tempfile.TemporaryDirectory(prefix="run-rate-") as work:
            rows += run_repo(repo, git_dir, Path(work), args.jobs, args.timeout)
    counted = [row for row in rows if row["class"] != NO_MIRROR]
    figures = {name: sum(row["class"] == name for row in counted) for name in CLASSES}
    public = [row for row in counted if row["class"] != PRIVATE]
    document = {
        "corpus": str(args.corpus.relative_to(ROOT) if args.corpus.is_relative_to(ROOT) else args.corpus),
        "entry_points": len(counted),
        "figures": figures,
        "ran_of_public": f"{figures[RAN]}/{len(public)}",
        "missing_mirrors": sorted({row["repo"] for row in rows if row["class"] == NO_MIRROR}),
        "seconds": round(time.monotonic() - started),
        "rows": rows,
    }
    args.output.write_text(json.dumps(document, indent=1) + "\n")
    if args.markdown:
        args.markdown.write_text(markdown(rows))
    print(
        f"run rate: {figures[RAN]} of {len(public)} entry points that need nothing private ran "
        f"({len(counted)} in all; {figures}); {args.output}",
        file=sys.stderr,
    )


if __name__ == "__main__":
    main()
