"""Loading harness results (`neuron-compat run` JSONL) into runs and pandas tables.

A *run* is the set of rows measured under one environment (torch, transformers, backend, settings):
rows from different environments become different columns of the report, even when they come from
the same file, and several files with the same environment are merged into one run.
"""

from __future__ import annotations

import csv
import json
import os
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

import pandas as pd

# Verdicts in display order, with the headline bucket each one counts in. A crash is the model run
# dying on the backend, so it counts against the architecture; a timeout or a harness error says
# nothing about the architecture, so those rows are "not measured".
VERDICT_BUCKET = {
    "works": "works",
    "works-with-caveats": "works-with-caveats",
    "fails": "fails",
    "crash": "fails",
    "timeout": "not-measured",
    "harness-error": "not-measured",
}
VERDICTS = tuple(VERDICT_BUCKET)
BUCKETS = ("works", "works-with-caveats", "fails", "not-measured")
BUCKET_LABELS = {
    "works": "works",
    "works-with-caveats": "works with caveats",
    "fails": "fails",
    "not-measured": "not measured",
}
VERDICT_MEANINGS = {
    "works": "every stage passed (eager reference, compiled generation with a static cache, comparison with "
    "the CPU reference, a compiled training step) with no caveat",
    "works-with-caveats": "every stage passed, but with recompiles, graph breaks, reported op/dtype findings, "
    "or more training graphs than expected",
    "fails": "a device stage failed (compiled generation, comparison with the CPU reference, or training)",
    "crash": "the process running the model died (native crash or out of memory)",
    "timeout": "the run exceeded the harness time limit: not a verdict on the architecture",
    "harness-error": "the harness could not build the tiny model or run it eagerly on CPU: "
    "not a verdict on the architecture",
}
OK_VERDICTS = frozenset({"works", "works-with-caveats"})
RANK_BANDS = (("1-10", 1, 10), ("11-25", 11, 25), ("26-50", 26, 50), ("51-100", 51, 100))
UNRANKED_BAND = "unranked"
NOT_RUN = "not run"
TOP_N = 100
INTEGER_FIELDS = (
    "compile_count",
    "recompile_count",
    "graph_breaks",
    "unique_graphs",
    "train_compile_count",
    "train_expected_compile_count",
    "train_graph_breaks",
)
ENV_KEY_FIELDS = ("backend", "simulated", "torch", "transformers", "settings_id")
# The committed reference run and the top-100 list the harness writes next to it.
REPO_ROOT = Path(__file__).resolve().parents[1]
REFERENCE_RESULTS = REPO_ROOT / "fixtures" / "compat" / "results-neuron-sim.jsonl"
TOP100_NAME = "top100.csv"
OPTIMUM_NEURON_NAME = "optimum_neuron_0.4.5.csv"


class ResultsError(Exception):
    """Bad input a user can fix (missing file, corrupt line); the CLI prints it and exits 2."""


@dataclass
class Run:
    env: dict
    sources: list[Path] = field(default_factory=list)
    rows: dict[str, dict] = field(default_factory=dict)
    label: str = ""

    @property
    def simulated(self) -> bool:
        return bool(self.env.get("simulated"))

    @property
    def backend(self) -> str:
        return str(self.env.get("backend") or "unknown")

    @property
    def date(self) -> str:
        """When the results were written: the env's date if the harness recorded one, else the file time."""
        for key in ("date", "timestamp", "finished_at"):
            if self.env.get(key):
                return str(self.env[key])
        stamp = max(source.stat().st_mtime for source in self.sources)
        return datetime.fromtimestamp(stamp, tz=timezone.utc).strftime("%Y-%m-%d %H:%M UTC") + " (file time)"


@dataclass(frozen=True)
class Top100Entry:
    rank: int
    model_type: str
    optimum_neuron_inference: bool | None
    optimum_neuron_training: bool | None


def _env_key(env: dict) -> tuple:
    return tuple(str(env.get(name)) for name in ENV_KEY_FIELDS)


def _row_env(row: dict) -> dict:
    env = dict(row.get("env") or {})
    # Top-level backend/simulated are authoritative when the env block lacks them.
    for name in ("backend", "simulated"):
        if env.get(name) is None and row.get(name) is not None:
            env[name] = row[name]
    return env


def _parse_line(path: Path, number: int, line: str) -> dict:
    try:
        row = json.loads(line)
    except json.JSONDecodeError as error:
        raise ResultsError(
            f"{path}:{number}: not valid JSON ({error.msg}); is this a neuron-compat results file?"
        ) from None
    if not isinstance(row, dict) or not isinstance(row.get("model_type"), str):
        raise ResultsError(f"{path}:{number}: expected a JSON object with a 'model_type' string")
    if row.get("verdict") not in VERDICT_BUCKET:
        raise ResultsError(
            f"{path}:{number}: unknown verdict {row.get('verdict')!r} for {row['model_type']}; "
            f"expected one of {', '.join(VERDICTS)}"
        )
    return row


def load_runs(paths: list[Path]) -> list[Run]:
    """Reads results files and groups their rows by environment, in order of first appearance."""
    if not paths:
        raise ResultsError("no results file given")
    runs: dict[tuple, Run] = {}
    for path in paths:
        if not path.is_file():
            raise ResultsError(f"{path}: no such results file")
        with path.open(encoding="utf-8") as handle:
            lines = [(number, line) for number, line in enumerate(handle, start=1) if line.strip()]
        if not lines:
            raise ResultsError(f"{path}: the results file is empty")
        for number, line in lines:
            row = _parse_line(path, number, line)
            env = _row_env(row)
            run = runs.setdefault(_env_key(env), Run(env=env))
            if path not in run.sources:
                run.sources.append(path)
            # A later row for the same architecture in the same environment is a rerun: it wins.
            run.rows[row["model_type"]] = row
    result = list(runs.values())
    _label_runs(result)
    return result


def _label_runs(runs: list[Run]) -> None:
    """Labels name the backend plus whatever else tells the runs apart."""
    differing = [
        name
        for name in ("torch", "transformers", "settings_id")
        if len({str(run.env.get(name)) for run in runs}) > 1
    ]
    for run in runs:
        parts = [run.backend + (" (simulated)" if run.simulated else "")]
        parts += [f"{name} {run.env.get(name)}" for name in differing]
        run.label = " · ".join(parts)
    seen: dict[str, int] = {}
    for run in runs:
        seen[run.label] = seen.get(run.label, 0) + 1
        if seen[run.label] > 1:
            run.label += f" #{seen[run.label]}"


def _yes(value: str | None) -> bool | None:
    if value is None or value == "":
        return None
    return value.strip().lower().startswith("yes")


def load_top100(results_paths: list[Path]) -> list[Top100Entry]:
    """The ranked list the harness measured against: `top100.csv` next to a results file, else the repo's.

    optimum-neuron's documented support comes from the list's own columns or from
    `optimum_neuron_0.4.5.csv` beside it.
    """
    candidates = [path.parent / TOP100_NAME for path in results_paths]
    for candidate in [*candidates, REFERENCE_RESULTS.parent / TOP100_NAME]:
        if not candidate.is_file():
            continue
        support = _read_optimum_neuron(candidate.parent / OPTIMUM_NEURON_NAME)
        return [
            entry
            if entry.optimum_neuron_inference is not None
            else Top100Entry(entry.rank, entry.model_type, *support.get(entry.model_type, (None, None)))
            for entry in _read_top100(candidate)
        ]
    return []


def _read_optimum_neuron(path: Path) -> dict[str, tuple[bool | None, bool | None]]:
    """model_type -> (inference, training) from the harness's optimum-neuron support table, if present."""
    if not path.is_file():
        return {}
    flags = {"true": True, "yes": True, "false": False, "no": False}
    with path.open(encoding="utf-8", newline="") as handle:
        return {
            record["model_type"]: (
                flags.get((record.get("inference") or "").strip().lower()),
                flags.get((record.get("training") or "").strip().lower()),
            )
            for record in csv.DictReader(handle)
            if record.get("model_type")
        }


def _read_top100(path: Path) -> list[Top100Entry]:
    with path.open(encoding="utf-8", newline="") as handle:
        reader = csv.DictReader(handle)
        columns = reader.fieldnames or []
        inference_column = next((c for c in columns if "optimum" in c and "inference" in c), None)
        training_column = next((c for c in columns if "optimum" in c and "training" in c), None)
        entries = []
        for record in reader:
            if not record.get("model_type") or not (record.get("rank") or "").isdigit():
                continue
            entries.append(
                Top100Entry(
                    rank=int(record["rank"]),
                    model_type=record["model_type"],
                    optimum_neuron_inference=_yes(record.get(inference_column)) if inference_column else None,
                    optimum_neuron_training=_yes(record.get(training_column)) if training_column else None,
                )
            )
    return sorted(entries, key=lambda entry: entry.rank)[:TOP_N]


def rank_band(rank) -> str:
    if rank is None or pd.isna(rank):
        return UNRANKED_BAND
    for name, low, high in RANK_BANDS:
        if low <= int(rank) <= high:
            return name
    return UNRANKED_BAND


def _number(value, default=0):
    return value if isinstance(value, (int, float)) and not isinstance(value, bool) else default


def long_frame(runs: list[Run], top100: list[Top100Entry]) -> pd.DataFrame:
    """One row per (run, architecture) with every field the report shows; missing optional fields filled."""
    documented = {entry.model_type: entry for entry in top100}
    records = []
    for run_index, run in enumerate(runs):
        for model_type, row in run.rows.items():
            entry = documented.get(model_type)
            rank = row.get("rank") if isinstance(row.get("rank"), int) else (entry.rank if entry else None)
            inference = row.get("optimum_neuron_inference")
            training = row.get("optimum_neuron_training")
            records.append(
                {
                    "run": run_index,
                    "run_label": run.label,
                    "backend": run.backend,
                    "simulated": run.simulated,
                    "torch": run.env.get("torch"),
                    "transformers": run.env.get("transformers"),
                    "settings_id": run.env.get("settings_id"),
                    "model_type": model_type,
                    "rank": rank,
                    "rank_band": rank_band(rank),
                    "verdict": row["verdict"],
                    "bucket": VERDICT_BUCKET[row["verdict"]],
                    "stage": row.get("stage"),
                    "error": row.get("error"),
                    "compile_count": _number(row.get("compile_count")),
                    "recompile_count": _number(row.get("recompile_count")),
                    "graph_breaks": _number(row.get("graph_breaks")),
                    "unique_graphs": _number(row.get("unique_graphs"), None),
                    "train_compile_count": _number(row.get("train_compile_count"), None),
                    "train_expected_compile_count": _number(row.get("train_expected_compile_count"), None),
                    "train_graph_breaks": _number(row.get("train_graph_breaks"), None),
                    "seconds": _number(row.get("seconds"), None),
                    "peak_rss_mb": _number(row.get("peak_rss_mb"), None),
                    "outputs_match": row.get("outputs_match"),
                    "tokens_match": row.get("tokens_match"),
                    "max_logit_diff": _number(row.get("max_logit_diff"), None),
                    "recompile_reasons": list(row.get("recompile_reasons") or []),
                    "graph_break_reasons": list(row.get("graph_break_reasons") or []),
                    "unsupported_ops": list(row.get("unsupported_ops") or []),
                    "optimum_neuron_inference": inference
                    if isinstance(inference, bool)
                    else (entry.optimum_neuron_inference if entry else None),
                    "optimum_neuron_training": training
                    if isinstance(training, bool)
                    else (entry.optimum_neuron_training if entry else None),
                }
            )
    frame = pd.DataFrame.from_records(records)
    if frame.empty:
        return frame
    for column in ("rank", *INTEGER_FIELDS):
        frame[column] = frame[column].astype("Int64")
    return frame.sort_values(["run", "rank", "model_type"], na_position="last").reset_index(drop=True)


@dataclass(frozen=True)
class Headline:
    """Top-100 figures of one run. `documented_*` are optimum-neuron 0.4.5's supported-architecture lists."""

    total: int
    counts: dict[str, int]
    documented_inference: int | None
    documented_training: int | None
    not_measured_names: list[str]

    def percent(self, bucket: str) -> float:
        return 100.0 * self.counts[bucket] / self.total if self.total else 0.0


def headline(frame: pd.DataFrame, run_index: int, top100: list[Top100Entry]) -> Headline:
    rows = frame[frame["run"] == run_index] if not frame.empty else frame
    if top100:
        listed = {entry.model_type for entry in top100}
        in_list = rows[rows["model_type"].isin(listed)]
        missing = [entry.model_type for entry in top100 if entry.model_type not in set(in_list["model_type"])]
        inference = sum(bool(entry.optimum_neuron_inference) for entry in top100)
        training = sum(bool(entry.optimum_neuron_training) for entry in top100)
        has_inference = any(entry.optimum_neuron_inference is not None for entry in top100)
        has_training = any(entry.optimum_neuron_training is not None for entry in top100)
    else:
        # Without the list, the top 100 is whatever the results rank 1..100; unseen ranks are not measured.
        in_list = rows[rows["rank"].notna() & (rows["rank"] <= TOP_N)] if not rows.empty else rows
        seen = set(in_list["rank"].astype(int)) if not in_list.empty else set()
        missing = [f"rank {rank}" for rank in range(1, TOP_N + 1) if rank not in seen]
        inference = int(in_list["optimum_neuron_inference"].eq(True).sum()) if not in_list.empty else 0
        training = int(in_list["optimum_neuron_training"].eq(True).sum()) if not in_list.empty else 0
        has_inference = not in_list.empty and in_list["optimum_neuron_inference"].notna().any()
        has_training = not in_list.empty and in_list["optimum_neuron_training"].notna().any()
    counts = {bucket: 0 for bucket in BUCKETS}
    if not in_list.empty:
        counts.update(in_list["bucket"].value_counts().to_dict())
    counts["not-measured"] += len(missing)
    return Headline(
        total=len(top100) or TOP_N,
        counts={bucket: int(counts[bucket]) for bucket in BUCKETS},
        documented_inference=inference if has_inference else None,
        documented_training=training if has_training else None,
        not_measured_names=missing,
    )


def change_between(before: str | None, after: str | None) -> str:
    """How an architecture's verdict moved from the baseline run to a later one."""
    if before is None and after is None:
        return ""
    if before is None:
        return "new"
    if after is None:
        return "missing"
    if before == after:
        return "same"
    if before not in OK_VERDICTS and after in OK_VERDICTS:
        return "fixed"
    if before in OK_VERDICTS and after not in OK_VERDICTS:
        return "regressed"
    return "changed"


def verdict_matrix(frame: pd.DataFrame, runs: list[Run]) -> pd.DataFrame:
    """One row per architecture, one verdict column per run, plus each later run's change vs the first."""
    if frame.empty:
        return pd.DataFrame(columns=["model_type", "rank"])
    wide = frame.pivot_table(index="model_type", columns="run", values="verdict", aggfunc="last")
    wide.columns = [f"verdict_{column}" for column in wide.columns]
    ranks = frame.groupby("model_type")["rank"].min()
    wide = wide.join(ranks).reset_index()
    for index in range(len(runs)):
        column = f"verdict_{index}"
        if column not in wide:
            wide[column] = None
        wide[column] = wide[column].astype(object).where(wide[column].notna(), None)
    for index in range(1, len(runs)):
        wide[f"change_{index}"] = [
            change_between(before, after)
            for before, after in zip(wide["verdict_0"], wide[f"verdict_{index}"], strict=True)
        ]
    return wide.sort_values(["rank", "model_type"], na_position="last").reset_index(drop=True)


def recompile_histogram(frame: pd.DataFrame, run_index: int) -> list[tuple[str, int]]:
    """Architectures per recompile-count bin, over rows that got far enough to compile."""
    bins = [(-0.5, 0.5, "0"), (0.5, 1.5, "1"), (1.5, 2.5, "2"), (2.5, 5.5, "3-5"), (5.5, 10.5, "6-10")]
    rows = frame[(frame["run"] == run_index) & (frame["compile_count"] > 0)]
    edges = [low for low, _, _ in bins] + [bins[-1][1], float("inf")]
    labels = [label for _, _, label in bins] + [">10"]
    counts = pd.cut(rows["recompile_count"], bins=edges, labels=labels).value_counts()
    return [(label, int(counts.get(label, 0))) for label in labels]


def verdicts_by_band(frame: pd.DataFrame, run_index: int, top100: list[Top100Entry]) -> pd.DataFrame:
    """Counts of each verdict per rank band (rows: bands in rank order; columns: verdicts, then
    `not run` for listed architectures without a row in this run)."""
    rows = frame[frame["run"] == run_index]
    bands = [name for name, _, _ in RANK_BANDS] + [UNRANKED_BAND]
    table = pd.crosstab(rows["rank_band"], rows["verdict"]).reindex(
        index=bands, columns=VERDICTS, fill_value=0
    )
    measured = set(rows["model_type"])
    missing = pd.Series([rank_band(entry.rank) for entry in top100 if entry.model_type not in measured])
    table[NOT_RUN] = missing.value_counts().reindex(bands, fill_value=0)
    return table[table.sum(axis=1) > 0]


def display_path(path: Path) -> str:
    """Relative to the working directory when the file is under it, else absolute."""
    absolute = Path(os.path.abspath(path))
    try:
        return absolute.relative_to(Path.cwd()).as_posix()
    except ValueError:
        return str(absolute)
