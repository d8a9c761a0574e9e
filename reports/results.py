"""Loading harness results (`neuron-compat run` JSONL) into runs and pandas tables.

A *run* is the set of rows of one results file measured under one environment (torch, transformers,
backend, settings). Runs are never blended: several files are always several runs, side by side, and one
file with two environments is two runs. Only an explicit merge folds files of the same environment into
one run, and then every row that replaced another is listed. Rows are read through the harness's own
schema (`compat_matrix.schema.Row`), so rows of the older schema load with the newer fields unset (None),
and an unset figure stays None here: unmeasured is not zero.
"""

from __future__ import annotations

import csv
import dataclasses
import json
import os
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

import pandas as pd

from compat_matrix.results import ResultsFileError, json_lines
from compat_matrix.schema import (
    GENERATION_COMPILE_FIGURES,
    SCHEMA_VERSION,
    Cause,
    Row,
    Stage,
    Verdict,
    environment_key,
)
from compat_matrix.schema import OK_VERDICTS as OK_VERDICT_ENUMS

# Display order of the schema's verdicts (the overall one and each stage's).
VERDICTS = (
    "works",
    "works-eager",
    "works-with-caveats",
    "fails",
    "crash",
    "timeout",
    "not-measured",
    "harness-error",
)
OK_VERDICTS = frozenset(verdict.value for verdict in OK_VERDICT_ENUMS)
NOT_MEASURED_VERDICTS = frozenset({"not-measured", "harness-error", "timeout"})
# Headline buckets follow the harness's causes: a failure is the device's or Transformers' own; rows the
# harness could not measure say nothing about the architecture, and are split by why (the simulator's own
# graph execution, a tiny model the harness could not build, anything else: a time limit, a listed
# architecture without a row). Rows of the older schema carry no cause, so their failures are counted apart
# rather than blamed on either.
BUCKETS = (
    "works",
    "works-eager",
    "works-with-caveats",
    "fails-device",
    "fails-transformers",
    "fails-unattributed",
    "not-measured-simulator",
    "not-measured-harness",
    "not-measured",
)
BUCKET_LABELS = {
    "works": "works (compiled)",
    "works-eager": "works (eager generation)",
    "works-with-caveats": "works with caveats",
    "fails-device": "fails on device",
    "fails-transformers": "fails: Transformers bug",
    "fails-unattributed": "fails, cause not recorded",
    "not-measured-simulator": "not measured: simulator",
    "not-measured-harness": "not measured: harness error",
    "not-measured": "not measured: time limit or no row",
}
NOT_MEASURED_BUCKETS = ("not-measured-simulator", "not-measured-harness", "not-measured")
# Shown only where a run has some: they exist only in older rows, timeouts, or rows missing from a run.
OPTIONAL_BUCKETS = ("fails-unattributed", "not-measured")
OK_BUCKETS = ("works", "works-eager", "works-with-caveats")
VERDICT_MEANINGS = {
    "works": "every stage passed (eager reference, compiled generation with a static cache, comparison with "
    "the CPU reference, a compiled training step) with no caveat",
    "works-eager": "works, but Transformers does not compile this architecture's generation path: generation "
    "runs eagerly (slower), training compiled",
    "works-with-caveats": "every stage passed, but with recompiles, graph breaks, CPU fallbacks or more "
    "training graphs than expected",
    "fails": "a stage failed; the cause says whose failure it is (the device path, or Transformers itself, "
    "which already fails on CPU with a static cache)",
    "crash": "the process running the model died (native crash or out of memory)",
    "timeout": "the run exceeded the harness time limit: not a verdict on the architecture",
    "not-measured": "the harness could not measure this (the cause says why, e.g. the simulator's own limits): "
    "not a verdict on the architecture",
    "harness-error": "the harness could not build the tiny model or run it eagerly on CPU: "
    "not a verdict on the architecture",
}
CAUSE_LABELS = {
    "device": "device",
    "transformers": "Transformers",
    "simulator": "simulator",
    "harness": "harness",
}
CAUSE_MEANINGS = {
    "device": "fails only on the compiled / device path, or its compiled graph holds an op the device's own rule "
    "says raises and no measured code path avoids it",
    "transformers": "already fails or differs in uncompiled static-cache generation on CPU: a Transformers bug",
    "simulator": "fails only under the simulator's own graph execution: not measured on the device",
    "harness": "the tiny model could not be built, or a failure could not be confirmed at a second tiny size",
}
CONFIG_LABELS = {
    "checkpoint": "checkpoint configs",
    "class-defaults": "class-default configs",
}
RANK_BANDS = (("1-10", 1, 10), ("11-25", 11, 25), ("26-50", 26, 50), ("51-100", 51, 100))
UNRANKED_BAND = "unranked"
NOT_RUN = "no row"
TOP_N = 100
INTEGER_FIELDS = (
    "compile_count",
    "recompile_count",
    "graph_breaks",
    "unique_graphs",
    "train_compile_count",
    "train_expected_compile_count",
    "train_graph_breaks",
    "train_content_compiles",
)
FLOAT_FIELDS = (
    "seconds",
    "peak_rss_mb",
    "max_logit_diff",
    "max_diff_static_vs_dynamic",
    "max_diff_compiled_vs_dynamic",
    "logit_tolerance",
)
LIST_FIELDS = (
    "recompile_reasons",
    "graph_break_reasons",
    "unsupported_ops",
    "cpu_fallback_ops",
    "device_raising_ops",
    "lowering_unverified_ops",
    "train_graph_break_reasons",
    "train_recompile_reasons",
)
TEXT_FIELDS = (
    "stage",
    "error",
    "cause",
    "generate_verdict",
    "train_verdict",
    "reason",
    "recompile_guard",
    "attn_implementation",
    "dtype",
    "sim_device",
    "measured_at",
    "config_source",
    "checkpoint",
    "avoided_by",
)
FLAG_FIELDS = ("outputs_match", "tokens_match", "compiled_generation", "recompiles_every_step")
FAILURE_KEYS = ("generate_failure", "train_failure")
# The committed reference run and the top-100 list the harness writes next to it.
REPO_ROOT = Path(__file__).resolve().parents[1]
REFERENCE_RESULTS = REPO_ROOT / "fixtures" / "compat" / "results-neuron-sim.jsonl"
TOP100_NAME = "top100.csv"
OPTIMUM_NEURON_NAME = "optimum_neuron_0.4.5.csv"


class ResultsError(Exception):
    """Bad input a user can fix (missing file, corrupt line); the CLI prints it and exits 2."""


def bucket_of(verdict: str, cause: str | None) -> str:
    """The headline bucket of one row."""
    if verdict in OK_BUCKETS:
        return verdict
    if cause == "simulator":
        return "not-measured-simulator"
    if cause == "harness" or verdict == "harness-error":
        return "not-measured-harness"
    if verdict in NOT_MEASURED_VERDICTS:
        return "not-measured"
    if cause == "transformers":
        return "fails-transformers"
    if cause == "device":
        return "fails-device"
    return "fails-unattributed"


@dataclass(frozen=True)
class Replacement:
    """A row that a later row for the same architecture replaced (a rerun), with where each was read."""

    model_type: str
    earlier_verdict: str
    earlier_at: str
    later_verdict: str
    later_at: str


@dataclass
class Run:
    env: dict
    sources: list[Path] = field(default_factory=list)
    rows: dict[str, dict] = field(default_factory=dict)
    label: str = ""
    origins: dict[str, str] = field(default_factory=dict)  # model_type -> "file:line" of the row kept
    replaced: list[Replacement] = field(default_factory=list)

    @property
    def simulated(self) -> bool:
        return bool(self.env.get("simulated"))

    @property
    def backend(self) -> str:
        return str(self.env.get("backend") or "unknown")

    @property
    def device(self) -> str | None:
        """The device the compiled probes ran on (``sim_device``): ``neuron`` is the neuron stand-in's."""
        return next((row["sim_device"] for row in self.rows.values() if row.get("sim_device")), None)

    @property
    def measured_range(self) -> tuple[str, str] | None:
        """Earliest and latest `measured_at` of the rows (UTC ISO-8601 sorts as text), None when no row has one."""
        stamps = sorted(row["measured_at"] for row in self.rows.values() if row.get("measured_at"))
        return (stamps[0], stamps[-1]) if stamps else None

    @property
    def measured_text(self) -> str:
        """When the rows were measured, as the rows say; never the file's time (a clone resets it)."""
        span = self.measured_range
        unstamped = sum(not row.get("measured_at") for row in self.rows.values())
        if span is None:
            recorded = next(
                (self.env[key] for key in ("date", "timestamp", "finished_at") if self.env.get(key)), None
            )
            if recorded:
                return f"{recorded} (run date from the environment; rows carry no measured_at)"
            return "not recorded (rows carry no measured_at)"
        first, last = (_short_time(stamp) for stamp in span)
        text = first if first == last else f"{first} to {last}"
        if unstamped:
            text += f" ({unstamped} row(s) without measured_at)"
        return text

    @property
    def older_schema_rows(self) -> list[str]:
        """Rows of schema 1, which carry no cause and no stage split (rows of schema 2 have both)."""
        return [name for name, row in self.rows.items() if lacks_stage_split(row)]

    @property
    def config(self) -> str | None:
        return self.env.get("config")


def lacks_stage_split(row: dict) -> bool:
    return (row.get("upgraded_from") or SCHEMA_VERSION) < 2


def _short_time(stamp: str) -> str:
    """2026-11-30T20:15:07+00:00 -> 2026-11-30 20:15 UTC; anything else is shown as written."""
    try:
        moment = pd.Timestamp(stamp)
    except ValueError:
        return stamp
    if moment.tzinfo is not None:
        moment = moment.tz_convert("UTC")
    return moment.strftime("%Y-%m-%d %H:%M UTC")


@dataclass(frozen=True)
class Top100Entry:
    rank: int
    model_type: str
    optimum_neuron_inference: bool | None
    optimum_neuron_training: bool | None
    class_name: str | None = None


def _row_env(row: dict) -> dict:
    env = dict(row.get("env") or {})
    # Top-level backend/simulated are authoritative when the env block lacks them.
    for name in ("backend", "simulated"):
        if env.get(name) is None and row.get(name) is not None:
            env[name] = row[name]
    return env


# The type each figure of a row must have when present (None: not measured); anything else is refused, never
# shown as "not measured".
_FIELD_TYPES = (
    (INTEGER_FIELDS + ("rank",), (int,), "an integer"),
    (FLOAT_FIELDS, (int, float), "a number"),
    (LIST_FIELDS, (list,), "a list"),
    (TEXT_FIELDS, (str,), "a string"),
    (FLAG_FIELDS + ("simulated",), (bool,), "true or false"),
    (("env",), (dict,), "an object"),
)


def _parse_line(path: Path, number: int, data: object) -> dict:
    """One results line (its JSON value) read through the harness schema, as a plain dict (enums as their
    strings). ResultsError for anything that is not a row this report can show as written."""
    if not isinstance(data, dict) or not isinstance(data.get("model_type"), str):
        raise ResultsError(f"{path}:{number}: expected a JSON object with a 'model_type' string")
    version = data.get("schema_version", 1)
    if not isinstance(version, int) or isinstance(version, bool) or version > SCHEMA_VERSION:
        raise ResultsError(
            f"{path}:{number}: row schema version {version!r}; this report reads versions up to "
            f"{SCHEMA_VERSION} (upgrade neuron-migrate to read newer rows)"
        )
    for names, types, expected in _FIELD_TYPES:
        for name in names:
            value = data.get(name)
            wrong = value is not None and (
                not isinstance(value, types) or (bool not in types and isinstance(value, bool))
            )
            if wrong:
                raise ResultsError(
                    f"{path}:{number}: {name} of {data['model_type']} is {json.dumps(value)[:60]}, not {expected}"
                )
    for name, choices in (
        ("verdict", Verdict),
        ("generate_verdict", Verdict),
        ("train_verdict", Verdict),
        ("stage", Stage),
        ("cause", Cause),
    ):
        value = data.get(name)
        if (value is not None or name == "verdict") and value not in {choice.value for choice in choices}:
            raise ResultsError(
                f"{path}:{number}: unknown {name} {value!r} for {data['model_type']}; "
                f"expected one of {', '.join(choice.value for choice in choices)}"
            )
    data.setdefault("backend", None)
    data.setdefault("simulated", False)
    data.setdefault("stage", None)
    data.setdefault("error", None)
    data.setdefault("env", {})
    data.setdefault("rank", None)
    try:
        row = Row.from_dict(data)
    except (TypeError, ValueError) as error:
        raise ResultsError(f"{path}:{number}: not a results row ({error})") from None
    record = row.to_dict()
    record["upgraded_from"] = row.upgraded_from
    if record.get("compiled_generation") is False:
        # Harness 0.2.0 wrote 0 there, which was not measured: read as the harness now writes it, null
        # (compile_count 0 is a measurement and stays).
        for name in GENERATION_COMPILE_FIGURES:
            record[name] = None
    return record


def load_runs(paths: list[Path], merge: bool = False) -> list[Run]:
    """Reads results files into runs: one per (file, environment), or per environment with `merge`."""
    if not paths:
        raise ResultsError("no results file given")
    runs: dict[tuple, Run] = {}
    for file_index, path in enumerate(paths):
        if not path.is_file():
            raise ResultsError(f"{path}: no such results file")
        try:
            lines = list(json_lines(path))
        except ResultsFileError as error:
            raise ResultsError(str(error)) from None
        if not lines:
            raise ResultsError(f"{path}: the results file is empty")
        for number, line in lines:
            row = _parse_line(path, number, line)
            env = _row_env(row)
            key = environment_key(env) if merge else (file_index, *environment_key(env))
            run = runs.setdefault(key, Run(env=env))
            if path not in run.sources:
                run.sources.append(path)
            where = f"{path.name}:{number}"
            model_type = row["model_type"]
            # A later row for the same architecture in the same run is a rerun: it wins, and is listed.
            if model_type in run.rows:
                run.replaced.append(
                    Replacement(
                        model_type,
                        run.rows[model_type]["verdict"],
                        run.origins[model_type],
                        row["verdict"],
                        where,
                    )
                )
            run.rows[model_type] = row
            run.origins[model_type] = where
    # Within one file, the run on checkpoint configs comes first (it is what users run); files keep their order.
    order = {key: index for index, key in enumerate(runs)}
    result = [runs[key] for key in sorted(runs, key=lambda key: (key[0] if not merge else 0,
                                                              runs[key].config == "class-defaults", order[key]))]  # fmt: skip
    _label_runs(result)
    return result


def _label_runs(runs: list[Run]) -> None:
    """Labels name the results file(s), the backend and whatever else of the environment tells runs apart."""
    differing = [
        name
        for name in ("torch", "transformers", "settings_id")
        if len({str(run.env.get(name)) for run in runs}) > 1
    ]
    configs = {run.config for run in runs}
    names = [source.name for run in runs for source in run.sources]
    # Runs on two devices differ in settings by that alone: the device names them.
    devices_differ = len({run.device for run in runs}) > 1
    for run in runs:
        files = " + ".join(
            source.name if names.count(source.name) == 1 else display_path(source) for source in run.sources
        )
        parts = [files, run.backend + (" (simulated)" if run.simulated else "")]
        if devices_differ:
            parts.append(
                f"on {run.device or 'the device'}" + (" (stand-in)" if run.device == "neuron" else "")
            )
        if len(configs) > 1:
            parts.append(CONFIG_LABELS.get(run.config or "", "config not recorded"))
        # Runs that differ in device or config differ in settings by that alone: those name them.
        parts += [
            f"{name} {run.env.get(name)}"
            for name in differing
            if not (name == "settings_id" and (devices_differ or len(configs) > 1))
        ]
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
            else dataclasses.replace(
                entry,
                optimum_neuron_inference=support.get(entry.model_type, (None, None))[0],
                optimum_neuron_training=support.get(entry.model_type, (None, None))[1],
            )
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
                    class_name=record.get("causal_lm_class") or None,
                )
            )
    return sorted(entries, key=lambda entry: entry.rank)[:TOP_N]


@cache
def causal_lm_classes() -> dict[str, str]:
    """model_type -> class name from the installed Transformers' causal-LM mapping (empty without it)."""
    try:
        from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES
    except ImportError:
        return {}
    return dict(MODEL_FOR_CAUSAL_LM_MAPPING_NAMES)


def rank_band(rank) -> str:
    if rank is None or pd.isna(rank):
        return UNRANKED_BAND
    for name, low, high in RANK_BANDS:
        if low <= int(rank) <= high:
            return name
    return UNRANKED_BAND


def _number(value):
    """A measured figure, or None when the row does not have one (never 0 in its place)."""
    return value if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def long_frame(runs: list[Run], top100: list[Top100Entry]) -> pd.DataFrame:
    """One row per (run, architecture) with every field the report shows; unmeasured fields stay None."""
    documented = {entry.model_type: entry for entry in top100}
    records = []
    for run_index, run in enumerate(runs):
        for model_type, row in run.rows.items():
            entry = documented.get(model_type)
            rank = row.get("rank") if isinstance(row.get("rank"), int) else (entry.rank if entry else None)
            inference = row.get("optimum_neuron_inference")
            training = row.get("optimum_neuron_training")
            record = {
                "run": run_index,
                "run_label": run.label,
                "backend": run.backend,
                "simulated": run.simulated,
                "torch": run.env.get("torch"),
                "transformers": run.env.get("transformers"),
                "settings_id": run.env.get("settings_id"),
                "settings_config": run.config,
                "model_type": model_type,
                "class_name": (entry.class_name if entry else None) or causal_lm_classes().get(model_type),
                "rank": rank,
                "rank_band": rank_band(rank),
                "verdict": row["verdict"],
                "bucket": bucket_of(row["verdict"], row.get("cause")),
                "older_schema": lacks_stage_split(row),
                "schema_version": row.get("upgraded_from") or SCHEMA_VERSION,
                "failure_by_rule": any((row.get(key) or {}).get("by_rule") for key in FAILURE_KEYS),
                "code_paths": row.get("code_paths") if isinstance(row.get("code_paths"), list) else None,
                "artifact_check": row.get("artifact_check")
                if isinstance(row.get("artifact_check"), dict)
                else None,
                "checkpoint_values": row.get("checkpoint_values")
                if isinstance(row.get("checkpoint_values"), dict)
                else None,
                "origin": run.origins[model_type],
                "optimum_neuron_inference": inference
                if isinstance(inference, bool)
                else (entry.optimum_neuron_inference if entry else None),
                "optimum_neuron_training": training
                if isinstance(training, bool)
                else (entry.optimum_neuron_training if entry else None),
            }
            for name in INTEGER_FIELDS + FLOAT_FIELDS:
                record[name] = _number(row.get(name))
            for name in TEXT_FIELDS:
                value = row.get(name)
                record[name] = str(value) if value is not None else None
            for name in FLAG_FIELDS:
                value = row.get(name)
                record[name] = value if isinstance(value, bool) else None
            for name in LIST_FIELDS:
                value = row.get(name)
                record[name] = [str(item) for item in value] if isinstance(value, list) else None
            records.append(record)
    frame = pd.DataFrame.from_records(records)
    if frame.empty:
        return frame
    for column in ("rank", *INTEGER_FIELDS):
        frame[column] = frame[column].astype("Int64")
    for column in FLOAT_FIELDS:
        frame[column] = frame[column].astype("Float64")
    for column in FLAG_FIELDS:
        frame[column] = frame[column].astype("boolean")
    return frame.sort_values(["run", "rank", "model_type"], na_position="last").reset_index(drop=True)


@dataclass(frozen=True)
class Reading:
    """One reading of a run's top-100 figures: a count of architectures and what it counts."""

    key: str
    label: str
    count: int
    level: int = 0  # 1: a part of the reading above it (a caveat kind, a cause)


@dataclass(frozen=True)
class Headline:
    """Top-100 figures of one run. `documented_*` are optimum-neuron 0.4.5's supported-architecture lists.
    A partial run (the class defaults measured only where a checkpoint run beside it has other values) counts
    only its own rows."""

    total: int
    counts: dict[str, int]
    documented_inference: int | None
    documented_training: int | None
    not_measured_names: list[str]
    readings: tuple[Reading, ...] = ()
    partial: bool = False

    def percent(self, bucket: str) -> float:
        return 100.0 * self.counts[bucket] / self.total if self.total else 0.0

    @property
    def works_percent(self) -> float:
        return sum(self.percent(bucket) for bucket in OK_BUCKETS)


def headline(
    frame: pd.DataFrame, run_index: int, top100: list[Top100Entry], partial: bool = False
) -> Headline:
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
    listed_total = len(top100) or TOP_N
    if partial:
        missing = []
    counts = {bucket: 0 for bucket in BUCKETS}
    if not in_list.empty:
        counts.update(in_list["bucket"].value_counts().to_dict())
    counts["not-measured"] += len(missing)
    return Headline(
        total=len(in_list) if partial else listed_total,
        counts={bucket: int(counts[bucket]) for bucket in BUCKETS},
        documented_inference=inference if has_inference else None,
        documented_training=training if has_training else None,
        not_measured_names=missing,
        readings=readings(in_list, counts),
        partial=partial,
    )


def is_comparison_run(run: Run, runs: list[Run]) -> bool:
    """A class-defaults run beside a checkpoint-configs run of the same results file that covers more
    architectures: the class defaults of the ones whose checkpoint values differ, shown for comparison."""
    return run.config == "class-defaults" and any(
        other.config == "checkpoint"
        and set(other.sources) == set(run.sources)
        and len(other.rows) > len(run.rows)
        for other in runs
    )


def _has(rows: pd.DataFrame, column: str) -> pd.Series:
    """Rows whose list field is not empty."""
    return rows[column].map(lambda value: bool(value) if isinstance(value, list) else False)


def _positive(rows: pd.DataFrame, column: str) -> pd.Series:
    return rows[column].fillna(0) > 0


def readings(rows: pd.DataFrame, counts: dict[str, int]) -> tuple[Reading, ...]:
    """Every reading of the headline, from the strictest to the broadest; caveat kinds and causes as parts
    (a row with several caveats counts under each of its kinds)."""
    if rows.empty:
        return ()
    working = rows[rows["bucket"].isin(OK_BUCKETS)]
    caveated = rows[rows["bucket"] == "works-with-caveats"]
    every_step = working["recompiles_every_step"].fillna(False).astype(bool)
    raising = _has(working, "device_raising_ops")
    other_ops = [
        set(ops or []) - set(raising_ops or [])
        for ops, raising_ops in zip(caveated["unsupported_ops"], caveated["device_raising_ops"], strict=True)
    ]
    failing = rows[rows["bucket"].isin(("fails-device", "fails-transformers", "fails-unattributed"))]
    by_rule = failing["failure_by_rule"].fillna(False).astype(bool)
    device = failing["bucket"] == "fails-device"
    return (
        Reading("any", "work in any form (compiled, eager generation or with caveats)", len(working)),
        Reading(
            "no-step-no-raise",
            "work without a decode step that recompiles at every token and without an "
            "op the device raises on, on the default code path",
            int((~every_step & ~raising).sum()),
        ),  # fmt: skip
        Reading("clean", "work compiled with nothing to report", counts["works"]),
        Reading("eager", "work, generation not compiled by Transformers (eager)", counts["works-eager"]),
        Reading("caveats", "work with caveats; by kind (a row may have several):", len(caveated)),
        Reading(
            "every-step",
            "recompile at every decode step",
            int(caveated["recompiles_every_step"].fillna(False).astype(bool).sum()),
            1,
        ),  # fmt: skip
        Reading(
            "recompiles",
            "other recompiles in generation",
            int(
                (
                    _positive(caveated, "recompile_count")
                    & ~caveated["recompiles_every_step"].fillna(False).astype(bool)
                ).sum()
            ),
            1,
        ),  # fmt: skip
        Reading(
            "graph-breaks",
            "graph breaks (generation or training)",
            int((_positive(caveated, "graph_breaks") | _positive(caveated, "train_graph_breaks")).sum()),
            1,
        ),  # fmt: skip
        Reading(
            "data-recompiles",
            "training recompiles that depend on the data",
            int(_positive(caveated, "train_content_compiles").sum()),
            1,
        ),  # fmt: skip
        Reading(
            "raising-avoided",
            "an op the device raises on, avoided by a measured one-line change",
            int((_has(caveated, "device_raising_ops") & caveated["avoided_by"].notna()).sum()),
            1,
        ),  # fmt: skip
        Reading("ops", "other ops or dtypes the device rules report", sum(bool(ops) for ops in other_ops), 1),
        Reading(
            "cpu-fallbacks",
            "ops TorchNeuron's eager mode runs on the CPU (information; counted over all working rows)",
            int(_has(working, "cpu_fallback_ops").sum()),
            1,
        ),  # fmt: skip
        Reading("fails", "fail; by cause:", len(failing)),
        Reading("fails-device-measured", "on the device path, measured", int((device & ~by_rule).sum()), 1),
        Reading(
            "fails-device-rule",
            "on the device, by its own rule: the compiled graph holds an op the device "
            "raises on and no measured code path avoids it",
            int((device & by_rule).sum()),
            1,
        ),  # fmt: skip
        Reading(
            "fails-transformers",
            "in Transformers itself (already on CPU, uncompiled)",
            counts["fails-transformers"],
            1,
        ),  # fmt: skip
        Reading("fails-unattributed", "cause not recorded (older rows)", counts["fails-unattributed"], 1),
        Reading("not-measured", "not measured; why:", sum(counts[bucket] for bucket in NOT_MEASURED_BUCKETS)),
        Reading(
            "not-measured-simulator", "the simulator's own limitation", counts["not-measured-simulator"], 1
        ),
        Reading(
            "not-measured-harness",
            "the harness (a tiny model it cannot build, a failure it could not confirm)",
            counts["not-measured-harness"],
            1,
        ),  # fmt: skip
        Reading("not-measured-other", "a time limit, or no row", counts["not-measured"], 1),
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
    if before not in OK_VERDICTS and before not in NOT_MEASURED_VERDICTS and after in OK_VERDICTS:
        return "fixed"
    if before in OK_VERDICTS and after not in OK_VERDICTS and after not in NOT_MEASURED_VERDICTS:
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


RECOMPILE_BINS = ((0, 0, "0"), (1, 1, "1"), (2, 2, "2"), (3, 5, "3-5"), (6, 10, "6-10"), (11, None, ">10"))


def recompile_bin(count: int) -> str:
    return next(
        label for low, high, label in RECOMPILE_BINS if count >= low and (high is None or count <= high)
    )


def recompile_histogram(frame: pd.DataFrame, run_index: int) -> list[tuple[str, int]]:
    """Architectures per recompile-count bin, over the rows that measured a count (None is left out)."""
    counts = frame.loc[(frame["run"] == run_index) & frame["recompile_count"].notna(), "recompile_count"]
    binned = pd.Series([recompile_bin(int(count)) for count in counts], dtype=object).value_counts()
    return [(label, int(binned.get(label, 0))) for _, _, label in RECOMPILE_BINS]


def buckets_by_band(frame: pd.DataFrame, run_index: int, top100: list[Top100Entry]) -> pd.DataFrame:
    """Counts of each headline bucket per rank band (rows: bands in rank order; columns: buckets, then
    `no row` for listed architectures without a row in this run)."""
    rows = frame[frame["run"] == run_index]
    bands = [name for name, _, _ in RANK_BANDS] + [UNRANKED_BAND]
    table = pd.crosstab(rows["rank_band"], rows["bucket"]).reindex(index=bands, columns=BUCKETS, fill_value=0)
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
