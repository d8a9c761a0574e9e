"""Splitting one matrix across machines (``--shard I/N``) and merging the results files back.

Rows are keyed by architecture *and* measurement environment (torch, transformers, backend, settings_id:
the ``--resume`` key): rows measured under different environments are never folded together, they stay
separate runs (separate columns of the report). Within one environment, a later row for the same architecture is a
rerun and replaces the earlier one, the same rule the report applies when it reads a file; `merge` lists
every such replacement whose outcome differs, so nothing is overridden silently. "Later" means later in
the order the files are given, then later in the file (the harness only ever appends).
"""

from __future__ import annotations

import json
import os
import re
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from compat_matrix.families import row_probe_name
from compat_matrix.results_file import ResultsFileError, older_schema_note, read_rows, resume_key
from compat_matrix.schema import ENVIRONMENT_KEY, NEWER_ENVIRONMENT_FIELDS

REQUIRED_ENVIRONMENT_FIELDS = tuple(name for name in ENVIRONMENT_KEY if name not in NEWER_ENVIRONMENT_FIELDS)

# Measurements that change from one run to the next without the outcome changing.
VOLATILE_FIELDS = frozenset({"seconds", "probe_seconds", "peak_rss_mb", "measured_at"})


class MergeError(Exception):
    """Bad input a user can fix; the CLI prints it and exits 2."""


@dataclass(frozen=True)
class Shard:
    """Shard ``index`` of ``count`` (1-based): every ``count``-th architecture of the ranked list."""

    index: int
    count: int

    @classmethod
    def parse(cls, text: str) -> Shard:
        match = re.fullmatch(r"\s*(\d+)\s*/\s*(\d+)\s*", text)
        if not match:
            raise ValueError(f"{text!r} is not I/N (for example 1/4)")
        index, count = int(match[1]), int(match[2])
        if count < 1 or not 1 <= index <= count:
            raise ValueError(f"{text!r}: need 1 <= I <= N (shards are numbered from 1)")
        return cls(index, count)

    def select(self, model_types: list[str]) -> list[str]:
        """This shard's share of ``model_types``; round-robin keeps every shard's rank mix alike."""
        return model_types[self.index - 1 :: self.count]

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"


@dataclass(frozen=True)
class SourceRow:
    row: dict
    path: Path
    number: int  # 1-based position among the file's rows

    @property
    def where(self) -> str:
        return f"{self.path} row {self.number}"


@dataclass
class Replacement:
    """A rerun that replaced an earlier row with a different outcome."""

    model_type: str  # the probe name (families.probe_name): a model type, or task/model_type
    env_label: str
    kept: SourceRow
    dropped: SourceRow
    differing_fields: list[str]


@dataclass
class EnvGroup:
    env: dict
    label: str = ""
    rows: dict[str, SourceRow] = field(default_factory=dict)
    sources: list[Path] = field(default_factory=list)


@dataclass
class MergeResult:
    groups: list[EnvGroup]
    replacements: list[Replacement]
    identical_duplicates: int

    @property
    def rows(self) -> list[dict]:
        """Merged rows: environments in order of first appearance, each in rank order (unranked last)."""
        return [
            source.row
            for group in self.groups
            for source in sorted(group.rows.values(), key=lambda s: _rank_order(s.row))
        ]


def _rank_order(row: dict) -> tuple:
    rank = row.get("rank")
    ranked = isinstance(rank, int) and not isinstance(rank, bool)
    return (0, rank, row["model_type"]) if ranked else (1, 0, row["model_type"])


def environment_key(row: dict) -> tuple:
    """What a row was measured under: the ``--resume`` key without the architecture. KeyError when its env
    lacks a field that defines the measurement."""
    if any(name not in row["env"] for name in REQUIRED_ENVIRONMENT_FIELDS):
        raise KeyError("env")
    return resume_key(row)[1:]


def env_label(env: dict) -> str:
    simulated = " (simulated)" if env.get("simulated") else ""
    return (
        f"{env.get('backend')}{simulated}, torch {env.get('torch')}, transformers {env.get('transformers')}, "
        f"settings {env.get('settings_id')}"
    )


def differing_fields(old: dict, new: dict) -> list[str]:
    """Fields whose values differ between two rows for the same architecture, ignoring timings."""
    names = (old.keys() | new.keys()) - VOLATILE_FIELDS - {"env"}
    return sorted(name for name in names if old.get(name) != new.get(name))


def merge_results(paths: list[Path]) -> MergeResult:
    """Merges results files: one row per (environment, architecture), later rows replacing earlier ones."""
    if not paths:
        raise MergeError("no results file given")
    groups: dict[tuple, EnvGroup] = {}
    replacements: list[Replacement] = []
    identical = 0
    for path in paths:
        if not path.is_file():
            raise MergeError(f"{path}: no such results file")
        try:
            rows = read_rows(path)
        except ResultsFileError as error:
            raise MergeError(str(error)) from None
        for number, row in enumerate(rows, start=1):
            source = SourceRow(row, path, number)
            try:
                key = environment_key(row)
            except (KeyError, TypeError):
                raise MergeError(
                    f"{source.where}: its env lacks {'/'.join(REQUIRED_ENVIRONMENT_FIELDS)}"
                ) from None
            group = groups.setdefault(key, EnvGroup(env=row["env"], label=env_label(row["env"])))
            if path not in group.sources:
                group.sources.append(path)
            name = row_probe_name(row)
            earlier = group.rows.get(name)
            if earlier is not None:
                differing = differing_fields(earlier.row, row)
                if differing:
                    replacements.append(Replacement(name, group.label, source, earlier, differing))
                else:
                    identical += 1
            group.rows[name] = source
    return MergeResult(list(groups.values()), replacements, identical)


def write_rows_atomically(path: Path, rows: list[dict]) -> None:
    """Writes JSONL through a temporary file in the same folder, so an interruption never leaves half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            for row in rows:
                out.write(json.dumps(row, ensure_ascii=False) + "\n")
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def summary_lines(result: MergeResult) -> list[str]:
    """What the merge did, for the user: one line per environment, then every replaced outcome."""
    lines = []
    for group in result.groups:
        sources = ", ".join(str(path) for path in group.sources)
        lines.append(f"{len(group.rows)} architectures measured on {group.label}  (from {sources})")
    if len(result.groups) > 1:
        lines.append(
            f"note: {len(result.groups)} different environments: their rows are kept apart "
            "(separate columns in `neuron-compat report`), not merged into one matrix"
        )
    note = older_schema_note(result.rows)
    if note:
        lines.append(note)
    if result.identical_duplicates:
        lines.append(f"{result.identical_duplicates} duplicate rows with the same outcome dropped")
    for replaced in result.replacements:
        old, new = replaced.dropped.row, replaced.kept.row
        lines.append(
            f"rerun: {replaced.model_type} [{replaced.env_label}]: kept {new.get('verdict')} from "
            f"{replaced.kept.where} over {old.get('verdict')} from {replaced.dropped.where} "
            f"(differs in {', '.join(replaced.differing_fields)})"
        )
    return lines
