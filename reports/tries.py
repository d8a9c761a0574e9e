"""`neuron-migrate try` reports (`--format json --report FILE`, of a file or of a folder's entry points) read
into one line per run of a tried file, for the checklist: `python train.py` ran 3 steps on the stand-in,
2 recompiles at lines 13, 27."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

# The statuses try_run/report.py writes in a try report; reports reads them as data (it does not import try_run).
RAN, FAILED = "ran", "failed"


class TryReportError(ValueError):
    """A --try-report file that cannot be read (the message is the one line shown)."""


@dataclass(frozen=True)
class TriedFile:
    path: Path  # the tried file, resolved
    lines: tuple[tuple[str, str], ...]  # (command, what it did on the stand-in), one per run
    ok: bool  # every run ran


def load_try_reports(paths: list[Path]) -> list[TriedFile]:
    """A report of one tried file, or of a folder's entry points (`neuron-migrate try DIR`): one TriedFile each."""
    tried = []
    for path in paths:
        try:
            document = json.loads(path.read_text(encoding="utf-8"))
            root = Path(document.get("file") or document["path"])
            files = (
                [(root / entry["path"], entry["runs"]) for entry in document["entry_points"]]
                if "entry_points" in document
                else [(root, document["runs"])]
            )
        except (OSError, ValueError, KeyError, TypeError) as error:
            raise TryReportError(f"--try-report {path}: not a neuron-migrate try report ({error})") from error
        for tried_path, runs in files:
            tried.append(
                TriedFile(
                    tried_path,
                    tuple(_line(run) for run in runs),
                    all(run.get("status") == RAN for run in runs),
                )
            )
    return tried


def _line(run: dict) -> tuple[str, str]:
    device = "the stand-in" if "stand-in" in str(run.get("device", "")) else str(run.get("device") or "CPU")
    command = run.get("command", "")
    if run.get("status") != RAN:
        after = f" after {run['steps']} steps" if run.get("steps") else ""
        return command, f"{run.get('status', FAILED)} on {device}{after}: {run.get('reason', '')}"
    recompiles = run.get("recompile_count", 0)
    places = sorted({_place(reason) for reason in run.get("recompile_reasons", []) if reason.get("line")})
    at = f" at {'lines' if len(places) > 1 else 'line'} {', '.join(places)}" if places else ""
    loss = (
        ""
        if run.get("loss_finite") is None
        else ", loss finite"
        if run["loss_finite"]
        else ", loss NOT finite"
    )
    return command, f"ran {run.get('steps', 0)} steps on {device}{loss}, {recompiles} recompiles{at}"


def _place(reason: dict) -> str:
    return f"cell {reason['cell']}:{reason['line']}" if reason.get("cell") else str(reason["line"])


def _real(path: Path) -> Path:
    # realpath, unlike Path.resolve, does not raise on a loop of symbolic links (the checklist lists those).
    return Path(os.path.realpath(path))


def match(tried: list[TriedFile], section_path: Path) -> list[TriedFile]:
    """The tries of a checklist file: the same file, else a file of the same name whose trailing path parts
    agree best (the checklist reads the original scripts; a try normally runs their migrated copies)."""
    if not tried:
        return []
    resolved = _real(section_path)
    same = [entry for entry in tried if _real(entry.path) == resolved]
    if same:
        return same
    named = [entry for entry in tried if entry.path.name == resolved.name]
    if not named:
        return []

    def shared_tail(entry: TriedFile) -> int:
        count = 0
        for mine, theirs in zip(reversed(resolved.parts), reversed(_real(entry.path).parts), strict=False):
            if mine != theirs:
                break
            count += 1
        return count

    best = max(shared_tail(entry) for entry in named)
    return [entry for entry in named if shared_tail(entry) == best]
