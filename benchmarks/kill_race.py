"""Kills and races against in-place runs of neuron-migrate, as they happen to users.

- **Kills**: a run rewriting a tree in place (`-j 2`) is sent SIGKILL, SIGINT (Ctrl-C) or SIGTERM at a random
  moment. Afterwards every file must be its original bytes or its complete migrated bytes (never a mix, never
  empty), no temporary file may be left in the tree once the next run has passed, no worker may outlive the
  command, and SIGINT / SIGTERM must exit 130 / 143 with the summary printed.
- **Edits**: while a run migrates a large file, another process appends an edit to it at a random moment. The
  edit must never be lost: the run refuses the file (it changed since it was read) or the edit came before the
  read (it is migrated with the rest) or after the rename (it follows the migrated text).
- **Concurrent runs**: two runs in place over the same tree at once; every file ends original or migrated, whole.

    .venv/bin/python benchmarks/kill_race.py [--kills 30] [--edits 20] [--concurrent 5] [--copies 3] [--json out]

Prints the figures as JSON; exits 1 on any violation.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "fixtures" / "migrator"
NEURON_MIGRATE = (sys.executable, "-c", "from commands.neuron_migrate import main; main()")
SUFFIX = ".neuron-migrate-tmp"


def build_tree(folder: Path, copies: int) -> None:
    """`copies` copies of the XLA and training fixture scripts (files to migrate, a few seconds of work)."""
    sources = sorted(
        p
        for family in ("xla", "training")
        for p in (FIXTURES / family).glob("*.py")
        if ".expected." not in p.name
    )
    for copy in range(copies):
        for source in sources:
            target = folder / f"c{copy}" / source.name
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(source.read_bytes())


def snapshot(folder: Path) -> dict[str, bytes]:
    return {
        p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()
    }


def start(*args: str, cwd: Path) -> subprocess.Popen:
    return subprocess.Popen(
        [*NEURON_MIGRATE, *args],
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )


def session_alive(session: int) -> list[int]:
    """Processes still in the session a run was started in (its workers, were they orphaned)."""
    alive = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if os.getsid(int(entry.name)) == session and (entry / "stat").read_text().split()[2] != "Z":
                    alive.append(int(entry.name))
            except (OSError, IndexError):
                continue
    return alive


def kills(count: int, rng: random.Random, work: Path, violations: list[str], copies: int) -> dict:
    pristine = work / "pristine"
    build_tree(pristine, copies)
    reference = work / "reference"
    shutil.copytree(pristine, reference)
    started = time.monotonic()
    subprocess.run([*NEURON_MIGRATE, "-j", "2", "reference"], cwd=work, capture_output=True, timeout=600)
    full_run_s = time.monotonic() - started
    original, migrated = snapshot(pristine), snapshot(reference)
    outcomes: Counter[str] = Counter()
    signals = [signal.SIGKILL, signal.SIGKILL, signal.SIGINT, signal.SIGTERM]
    debris_after_kill = 0
    for index in range(count):
        tree = work / f"kill{index}"
        shutil.copytree(pristine, tree)
        signum = signals[index % len(signals)]
        run = start("-j", "2", tree.name, cwd=work)
        run.stderr.readline()  # "migrating N files": the run has started, past Python's own start-up
        time.sleep(rng.uniform(0.0, max(0.1, full_run_s * 0.9)))
        os.kill(run.pid, signum)  # the command itself, as `kill PID` or Ctrl-C in its terminal would
        if signum == signal.SIGINT:
            with contextlib.suppress(ProcessLookupError):  # a group whose run is already over
                os.killpg(run.pid, signum)  # a terminal sends Ctrl-C to the whole foreground group
        out, err = run.communicate(timeout=120)
        time.sleep(0.2)
        orphans = session_alive(run.pid)
        if orphans:
            violations.append(f"kill {index} ({signum.name}): workers outlived the command: {orphans}")
            for pid in orphans:
                os.kill(pid, signal.SIGKILL)
        expected_code = {signal.SIGKILL: -9, signal.SIGINT: 130, signal.SIGTERM: 143}[signum]
        if run.returncode == expected_code and signum != signal.SIGKILL and "interrupted:" not in err:
            violations.append(f"kill {index} ({signum.name}): no summary")
        if run.returncode not in (expected_code, 0, 1):  # 0/1: the run was over before the signal
            violations.append(f"kill {index} ({signum.name}): exit {run.returncode}: {err[-300:]}")
        if "Traceback" in err:
            violations.append(f"kill {index} ({signum.name}): traceback: {err[-300:]}")
        now = snapshot(tree)
        debris = [name for name in now if name.endswith(SUFFIX)]
        debris_after_kill += len(debris)
        rewritten = 0
        for name, data in now.items():
            if name.endswith(SUFFIX):
                continue
            if data == migrated[name]:
                rewritten += int(data != original[name])
            elif data != original[name]:
                violations.append(
                    f"kill {index} ({signum.name}): {name} is neither the original nor the migrated file"
                )
        if set(now) - set(original) - set(debris):
            violations.append(f"kill {index}: new files {sorted(set(now) - set(original) - set(debris))}")
        # The next run finishes the job and removes what a kill at the rename left.
        subprocess.run([*NEURON_MIGRATE, "-j", "2", tree.name], cwd=work, capture_output=True, timeout=600)
        final = snapshot(tree)
        if final != migrated:
            left = sorted(set(final) ^ set(migrated)) or [n for n in final if final[n] != migrated.get(n)]
            violations.append(
                f"kill {index}: after the next run the tree differs from a clean run: {left[:3]}"
            )
        outcomes[signum.name] += 1
        outcomes["files rewritten before the signal"] += rewritten
        shutil.rmtree(tree)
    return {
        "runs": count,
        "by_signal": {name: outcomes[name] for name in ("SIGKILL", "SIGINT", "SIGTERM")},
        "files_per_run": len(original),
        "files_rewritten_before_the_signal": outcomes["files rewritten before the signal"],
        "full_run_s": round(full_run_s, 1),
        "temporaries_left_by_a_kill": debris_after_kill,
    }


def edits(count: int, rng: random.Random, work: Path, violations: list[str]) -> dict:
    """A second process appends to a large file while it is migrated."""
    body = (FIXTURES / "xla" / "mnist_ddp_torchrun.py").read_text()
    big = body + "".join(f"\ndef helper_{i}(x):\n    return x * {i}\n" for i in range(3000))
    outcomes: Counter[str] = Counter()
    for index in range(count):
        folder = work / f"edit{index}"
        folder.mkdir()
        path = folder / "train.py"
        path.write_text(big)
        edit = f"# edit {index} saved while neuron-migrate ran\n"
        run = start(str(path), cwd=work)
        time.sleep(rng.uniform(0.0, 4.0))
        with open(path, "a") as handle:  # another process's write, as an editor's save in place
            handle.write(edit)
        out, err = run.communicate(timeout=600)
        text = path.read_text()
        if edit not in text:
            violations.append(f"edit {index}: the edit was lost (exit {run.returncode})")
        if "changed while it was being migrated" in out:
            outcomes["refused: changed since it was read"] += 1
            if text != big + edit:
                violations.append(f"edit {index}: refused, yet the file changed")
        elif text.startswith(big) and text == big + edit:
            outcomes["edit after the run (file left as it was)"] += 1
        elif "xm.xla_device" not in text:
            outcomes["edit kept with the migrated file (before the read or after the rename)"] += 1
        else:
            outcomes["other"] += 1
            violations.append(f"edit {index}: unexpected result (exit {run.returncode}): {out[-200:]}")
        if [p for p in folder.iterdir() if p.name.endswith(SUFFIX)]:
            violations.append(f"edit {index}: temporary file left")
        shutil.rmtree(folder)
    return {"runs": count, "outcomes": dict(outcomes)}


def concurrent(count: int, work: Path, violations: list[str]) -> dict:
    pristine = work / "pristine"
    original = snapshot(pristine)
    migrated = snapshot(work / "reference")
    for index in range(count):
        tree = work / f"both{index}"
        shutil.copytree(pristine, tree)
        first, second = start("-j", "2", tree.name, cwd=work), start("-j", "2", tree.name, cwd=work)
        codes = []
        for run in (first, second):
            _, err = run.communicate(timeout=600)
            codes.append(run.returncode)
            if "Traceback" in err:
                violations.append(f"concurrent {index}: traceback: {err[-300:]}")
        for name, data in snapshot(tree).items():
            if data != migrated.get(name) and data != original.get(name):
                violations.append(f"concurrent {index}: {name} is neither the original nor the migrated file")
        shutil.rmtree(tree)
    return {"runs": count}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kills", type=int, default=30)
    parser.add_argument("--edits", type=int, default=20)
    parser.add_argument("--concurrent", type=int, default=5)
    parser.add_argument(
        "--copies", type=int, default=3, help="copies of the fixture scripts in the killed tree"
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    work = Path(tempfile.mkdtemp(prefix="nm-kill-"))
    violations: list[str] = []
    try:
        figures = {
            "kills": kills(args.kills, rng, work, violations, args.copies),
            "edits_during_a_run": edits(args.edits, rng, work, violations),
            "concurrent_runs": concurrent(args.concurrent, work, violations),
            "seed": args.seed,
            "violations": violations,
        }
    finally:
        shutil.rmtree(work, ignore_errors=True)
    text = json.dumps(figures, indent=2)
    print(text)
    if args.json:
        args.json.write_text(text + "\n")
    sys.exit(1 if violations else 0)


if __name__ == "__main__":
    main()
