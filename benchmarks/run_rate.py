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
- needs private data: the corpus marks it (credentials, the owner's data): not tried; or the run reached AWS,
  which needs the owner's account (the try's evidence: the AWS client's error);
- time limit: the run ran past --timeout.

    python benchmarks/run_rate.py --mirrors /work/.mirror -j 2 --output benchmarks/run_rate.json \
        --markdown run_rate.md
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from try_run.packages import CANNOT_INSTALL, INSTALLED, declared
from try_run.runner import NEEDS_AWS
from usercode.names import NEURON_SDK_MODULES as SDK_MODULES

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
TODO = re.compile(r"TODO\(neuron-migrate\): (NM\d+)")
MISSING_MODULE = re.compile(r"No module named '([^']+)'")
EXCEPTION_LINE = re.compile(r"^([A-Za-z_][\w.]*(?:Error|Exception)): (.*)$")
FRAME = re.compile(r'File "([^"]+)", line (\d+)')
SANDBOX_FRAME = re.compile(r'File "[^"]*neuron-migrate-try-[^/"]+/run/([^"]+)"')
FEATURE_OBJECT = re.compile(r"'(Value|Sequence|ClassLabel|List)' object has no attribute")
FAILED_CELL = re.compile(r'neuron-migrate-try-failed-cell: \{"cell": (\d+)')
# What a failed shell command (a %%bash cell) printed last, as the try's reason quotes it, and an argument
# parser's refusal among it (`run_sft.py: error: argument --bf16: expected one argument`).
COMMAND_OUTPUT = re.compile(r"; the command's output ends: (.*)$", re.DOTALL)
EXIT_STATUS = re.compile(r"returned non-zero exit status (-?\d+)")
ARGUMENT_ERROR = re.compile(r"([\w.-]+\.py): error: (.+?)(?= \| |$)")
FLAG = re.compile(r"argument (--[\w-]+)")
# A launcher whose bash stopped at one of its own commands before any launch (try's plan names its line).
LAUNCHER_STOPPED = re.compile(r"bash stopped before any launch: \S+: line (\d+): (.+)$")
CANNOT_OPEN_ANY = re.compile(r"can't open file '[^']*/([^/']+)': \[Errno 2\]")  # a script's file name
CANNOT_OPEN = re.compile(r"can't open file '[^']*neuron-migrate-try-[^/']+/run/([^']+)': \[Errno 2\]")
# A load_dataset of a Hub id the try served no stand-in for (datasets' offline miss).
DATASET_MISS = re.compile(r"Couldn't reach '([^']+)' on the Hub \(OfflineModeIsEnabled\)")
HUB_MISSES = ("LocalEntryNotFoundError", "offline mode", "outgoing traffic has been disabled")
# A download from elsewhere than the Hub (a torchvision dataset's files, a URL the code fetches): no network in a try.
NETWORK_MISSES = (
    "Temporary failure in name resolution",
    "Name or service not known",
    "Network is unreachable",
)
# Hub API paths of writes; a try records create_repo and commits (docs/using/try.md), so one here was made another way
HUB_WRITE = re.compile(r"huggingface\.co/api/(?:repos/create|\w+/[^\s/]+/[^\s/]+/(?:commit|preupload))")
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


def run_repo(repo: dict, git_dir: Path, work: Path, jobs: int, timeout: int, keep: Path | None) -> list[dict]:
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
        ],
        text=True,
    )
    results = {}
    if report.is_file():
        results = {entry["path"]: entry for entry in json.loads(report.read_text())["entry_points"]}
    for row in rows:
        if "class" not in row:
            row.update(classify(results.get(row["path"]), migrated))
    if keep is not None:  # the reports behind the rows, for reading the evidence again
        kept = keep / repo["repo"].replace("/", "+")
        kept.mkdir(parents=True, exist_ok=True)
        for name in ("migrate.json", "try.json"):
            if (work / name).is_file():
                shutil.copy(work / name, kept / name)
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
    if reason.startswith(NEEDS_AWS):
        return {"class": PRIVATE, "evidence": reason[:400], "fix": "an AWS account: the run reached AWS"}
    error = run.get("error") or {}
    if not error.get("file") or error.get("type") == "CalledProcessError":
        # A child's failure (torchrun's summary, a %%bash cell): the child's own traceback is in the output.
        error = _tail_error(run.get("output_tail", ""), migrated / result["path"]) or error
    failed_cell = FAILED_CELL.search(run.get("output_tail", ""))
    if failed_cell and error.get("cell") is None and "ipykernel" in str(error.get("file")):
        error = {**error, "file": "notebook", "cell": int(failed_cell.group(1))}  # the kernel names the cell
    opened = CANNOT_OPEN.search(run.get("output_tail", ""))
    where = _where(error, migrated)
    said = COMMAND_OUTPUT.search(reason) if error.get("type") == "CalledProcessError" else None
    evidence = _evidence(error, where, reason, said, opened)
    lines = _source_lines(error, migrated, result["path"])
    todo = _todo_above(lines, error.get("line"))

    def row(kind: str, fix: str) -> dict:
        return {"class": kind, "evidence": evidence[:400], "fix": fix}

    text = f"{error.get('type', '')}: {error.get('message', '')} {reason}"
    module = MISSING_MODULE.search(text)
    # A missing module first: try reports one as "not run: install X", and a Neuron SDK module kept behind a
    # TODO is manual work left, not a package the try lacks.
    if module:
        return _missing_module(module.group(1), row, todo, where, migrated, result["path"], error, run)
    stopped = None if error else _launcher_stopped_at_todo(reason, migrated, result["path"])
    if stopped:
        return stopped
    launched = None if error.get("file") else _launch_under_todo(run, migrated, result["path"])
    if launched:
        return launched
    # ("was installed for the try": the release the try installed lacks a name the code imports)
    if run["status"] == "not-run" or any(
        mark in reason for mark in ("stand-in", "could not be built", "was installed for the try")
    ):
        return row(STAND_IN, f"try: {reason[:300]}")
    if todo:
        return row(MANUAL, f"{todo[0]} at {where}: {todo[1]}")
    dataset = DATASET_MISS.search(text)
    if dataset:
        return row(
            STAND_IN,
            f"try: no stand-in for the dataset {dataset.group(1)} (the try serves datasets it reads)",
        )
    if any(miss in text for miss in HUB_MISSES) and HUB_WRITE.search(text):
        return row(
            STAND_IN,
            "try: a Hub upload outside the calls it records in place of sending (create_repo, commits, branches, "
            "tags: what push_to_hub and upload_folder come down to), e.g. an LFS pre-upload made directly",
        )
    if any(miss in text for miss in HUB_MISSES):
        return row(STAND_IN, "try: a Hub download it does not serve (snapshot_download, hf_hub_download)")
    limit = _try_limit(text)
    if limit:
        return row(STAND_IN, limit)
    if "Unable to create tensor" in text and "max_length" in " ".join(lines):
        return row(
            STAND_IN,
            "try: the stand-in tokenizer has no model_max_length, which padding='max_length' pads to",
        )
    if error.get("type") == "CalledProcessError":
        return _failed_command(said.group(1) if said else None, where, run, migrated, result["path"], row)
    if opened:
        return row(
            STAND_IN,
            f"try: {opened.group(1)} is named from another folder than the launcher's own (the try runs a launcher in a copy of its folder)",
        )
    if error.get("type") == "FileNotFoundError" or (not error and "No such file" in reason):
        return row(STAND_IN, "try: a file the run reads is not in the tried folder")
    return row(FAILS, f"{error.get('type') or 'exit'} in migrated code")


def _try_limit(text: str) -> str | None:
    """What the try could not stand in for, read from the error's text alone."""
    if any(miss in text for miss in NETWORK_MISSES):
        return "try: a download from the network it does not serve (a dataset's files, a URL)"
    if "magic function" in text:
        return "try: a magic of another Jupyter kernel (the try's kernel is IPython)"
    if FEATURE_OBJECT.search(text):
        return "try: the stand-in dataset's column types (a Value where the code reads a Sequence)"
    return None


def _launcher_stopped_at_todo(reason: str, migrated: Path, entry: str) -> dict | None:
    """A launcher whose bash stopped at one of its own commands before any launch, under a TODO: manual work."""
    stopped = LAUNCHER_STOPPED.search(reason)
    if stopped is None:
        return None
    lines = _source_lines({"file": str(migrated / entry)}, migrated, entry)
    todo = _todo_above(lines, int(stopped.group(1)))
    if todo is None:
        return None
    at = f"{entry}:{stopped.group(1)}"
    return {
        "class": MANUAL,
        "evidence": f"{at}: {stopped.group(2)}"[:400],
        "fix": f"{todo[0]} at {at}: {todo[1]}",
    }


def _launch_under_todo(run: dict, migrated: Path, entry: str) -> dict | None:
    """A launch that failed before any of the user's code ran (no frame of it: the launcher's own import, such as
    Accelerate's of DeepSpeed), whose command in the launcher carries a TODO: manual work at that command."""
    if not entry.endswith((".sh", ".sbatch")) or not run.get("command"):
        return None
    words = run["command"].split()
    script = next((word for word in words if word.endswith(".py")), None)
    lines = _source_lines({"file": str(migrated / entry)}, migrated, entry)
    for number, text in enumerate(lines, start=1):
        if not text.strip().startswith(words[0]):
            continue
        command = " ".join(_continued(lines, number))
        if script is None or script.rsplit("/", 1)[-1] in command:
            todo = _todo_above(lines, number)
            if todo:
                at = f"{entry}:{number}"
                return {
                    "class": MANUAL,
                    "evidence": f"{at}: {run['reason']}"[:400],
                    "fix": f"{todo[0]} at {at}: {todo[1]}",
                }
    return None


def _continued(lines: list[str], number: int) -> list[str]:
    """The shell command starting on line `number` (1-based), its `\\`-continued lines included."""
    command = [lines[number - 1]]
    while command[-1].rstrip().endswith("\\") and number < len(lines):
        number += 1
        command.append(lines[number - 1])
    return command


def _evidence(error: dict, where: str, reason: str, said, opened) -> str:
    """The evidence line: where and what failed; for a shell command, what it printed (the command itself is in
    the cell)."""
    if said:
        status = EXIT_STATUS.search(error.get("message", ""))
        return (
            f"{where}: the command exited with {status.group(1) if status else 'an error'}: {said.group(1)}"
        )
    if error.get("type"):
        return f"{where}: {error.get('type')}: {error.get('message')}"
    return opened.group(0) if opened else reason


def _failed_command(output: str | None, where: str, run: dict, migrated: Path, entry: str, row) -> dict:
    """A shell command that failed with no traceback of the user's code: by what it printed. An argument its
    script's parser refuses is the migrated launch's (the migration's when the original entry point does not
    pass it: the original is the `src` folder beside `migrated`); a set-up command the try ran in its sandbox
    is the try's limit."""
    if output is None:
        return row(STAND_IN, "try: the command printed nothing, so its failure cannot be read")
    refused = ARGUMENT_ERROR.search(output)
    if refused:
        flag = FLAG.search(refused.group(2))
        original = migrated.parent / "src" / entry
        by = ""
        if flag and original.is_file():
            passed = flag.group(1) in original.read_text(encoding="utf-8", errors="replace")
            by = " (the user's own)" if passed else " (added by the migration)"
        return row(
            FAILS,
            f"{refused.group(1)}'s parser refuses an argument the launch at {where} passes{by}: {refused.group(2)}",
        )
    missing = CANNOT_OPEN_ANY.search(output)
    fetched = missing and next(
        (s for s in run.get("skipped", []) if s["command"].split()[-1].endswith("/" + missing.group(1))), None
    )
    if fetched:  # the file the command runs is one an earlier set-up command downloads
        lines = _code_cells(migrated / entry)[fetched["cell"] - 1].splitlines() if fetched.get("cell") else []
        at = next((n for n, line in enumerate(lines, start=1) if fetched["command"] in line), None)
        todo = _todo_above(lines, at)
        if todo:
            return row(
                MANUAL,
                f"{todo[0]} at cell {fetched['cell']}:{at}, the download of {missing.group(1)}: {todo[1]}",
            )
        return row(
            STAND_IN,
            f"try: {missing.group(1)} comes from a download (cell {fetched['cell']}) the sandbox cannot make",
        )
    cell = int(where.split()[1].split(":")[0]) if where.startswith("cell ") else None
    set_up = next(
        (
            s
            for s in run.get("skipped", [])
            if s.get("cell") == cell and "in the sandbox" in s.get("outcome", "")
        ),
        None,
    )
    if set_up:
        return row(
            STAND_IN,
            f"try: a set-up command ({set_up['reason']}: {set_up['command'][:80]}) failed in the sandbox",
        )
    return row(FAILS, f"the command at {where} fails on the migrated code")


def _missing_module(name, row, todo, where, migrated: Path, entry: str, error: dict, run: dict) -> dict:
    top = name.split(".")[0]
    if top in {module.split(".")[0] for module in SDK_MODULES}:
        if todo:
            return row(MANUAL, f"{todo[0]} at {where}: {todo[1]}")
        kept_for = _all_todos(migrated, entry, error)
        if kept_for:  # the import stays for a use left under a TODO further down: that is the manual work
            codes = ", ".join(f"{code} ({line})" for code, line in kept_for[:4])
            return row(
                MANUAL, f"{codes}; the import of {name} at {where}, which fails first, has no TODO of its own"
            )
        return row(FAILS, f"migrator: the import of {name} at {where} is kept with no TODO in the file")
    if (migrated / top).exists() or (migrated / f"{top}.py").exists():
        return row(
            STAND_IN, f"try: `{top}` is the tree's own package at its root, outside the tried file's folder"
        )
    tried = next(
        (i for i in run.get("installs", []) if i["module"] == top and i["outcome"] != INSTALLED), None
    )
    if tried:
        return row(
            STAND_IN,
            f"try: {tried['requirement']} ({declared(tried['declared_in'])}) {tried['outcome']}"[:300],
        )
    if top in CANNOT_INSTALL:
        return row(STAND_IN, f"try: package {name}: {CANNOT_INSTALL[top]}")
    return row(
        STAND_IN,
        f"try: package {name} is not in the try environment, and the repository declares none for it",
    )


def _tail_error(tail: str, tried: Path) -> dict | None:
    """The last traceback's exception and its innermost frame in the tried file's folder (the try runs a copy
    of it: `.../neuron-migrate-try-*/run/REL` is `REL` there), from a run's output."""
    lines = tail.splitlines()
    for index in range(len(lines) - 1, -1, -1):
        match = EXCEPTION_LINE.match(lines[index].strip())
        if not match:
            continue
        frames = [(SANDBOX_FRAME.search(line), FRAME.search(line)) for line in lines[:index]]
        ours = [(copy, frame) for copy, frame in frames if copy and frame]
        copy, frame = ours[-1] if ours else (None, None)
        return {
            "type": match.group(1).split(".")[-1],
            "message": match.group(2),
            "file": str(tried.parent / copy.group(1)) if copy else None,
            "line": int(frame.group(2)) if frame else None,
        }
    return None


def _where(error: dict, migrated: Path) -> str:
    file = error.get("file")
    if not file:
        return "(no frame of the user's code)"
    if error.get("cell") is not None:
        return f"cell {error['cell']}:{error.get('line')}"
    path = Path(file)
    path = path.relative_to(migrated) if path.is_relative_to(migrated) else path
    return f"{path}:{error.get('line')}"


def _todo_above(lines: list[str], line: int | None) -> tuple[str, str] | None:
    """(code, text) of the TODO(neuron-migrate) on or just above the failing line, if there is one."""
    if not lines or not line:
        return None
    for text in reversed(lines[max(0, line - 1 - LOOK_ABOVE) : line]):
        match = TODO.search(text)
        if match:
            return match.group(1), text.split(match.group(0), 1)[1].strip()[:160]
    return None


def _all_todos(migrated: Path, entry: str, error: dict) -> list[tuple[str, str]]:
    """(code, where) of every TODO in the failing file: a script, or every code cell of the notebook."""
    if error.get("cell") is None:
        lines = _source_lines(error, migrated, entry)
        return [
            (match.group(1), f"line {n}") for n, text in enumerate(lines, 1) if (match := TODO.search(text))
        ]
    found = []
    for number, source in enumerate(_code_cells(migrated / entry), start=1):
        for line, text in enumerate(source.splitlines(), start=1):
            if match := TODO.search(text):
                found.append((match.group(1), f"cell {number}:{line}"))
    return found


def _code_cells(notebook: Path) -> list[str]:
    try:
        cells = json.loads(notebook.read_text(encoding="utf-8")).get("cells", [])
    except (OSError, ValueError):
        return []
    sources = [cell.get("source", "") for cell in cells if cell.get("cell_type") == "code"]
    return ["".join(source) if isinstance(source, list) else source for source in sources]


def _source_lines(error: dict, migrated: Path, entry: str) -> list[str]:
    """The migrated lines the error points at: a file's, or a notebook's code cell (the tried notebook's)."""
    file = error.get("file")
    if not file:
        return []
    if error.get("cell") is not None:
        cells = _code_cells(migrated / entry)
        return cells[error["cell"] - 1].splitlines() if len(cells) >= error["cell"] else []
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
    parser.add_argument("--keep", type=Path, help="keep each repository's migrate and try reports here")
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
            rows += run_repo(repo, git_dir, Path(work), args.jobs, args.timeout, args.keep)
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
