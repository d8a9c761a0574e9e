"""Loading harness results (`neuron-compat run` JSONL) into runs, and the top-100 list they were measured against.

A *run* is the set of rows of one results file measured under one environment (torch, transformers,
backend, settings). Runs are never blended: several files are always several runs, side by side, and one
file with two environments is two runs. Only an explicit merge folds files of the same environment into
one run, and then every row that replaced another is listed. Rows are read through the harness's own
schema (`compat_matrix.schema.Row`), so rows of the older schema load with the newer fields unset (None),
and an unset figure stays None here: unmeasured is not zero; a line that is not such a row is refused
(``ResultsError``). The report's vocabulary is in `reports.vocabulary`, its tables in `reports.tables`.
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

from compat_matrix.families import row_probe_name
from compat_matrix.results_file import ResultsFileError, json_lines
from compat_matrix.schema import (
    ENUM_FIELDS,
    GENERATION_COMPILE_FIGURES,
    JSON_TYPES,
    JUDGED_STAGES,
    SCHEMA_VERSION,
    Row,
    environment_key,
)
from reports.vocabulary import CONFIG_LABELS

TOP_N = 100
# Fields the report's frame takes apart from their type's list (`tables.long_frame`): the architecture and run
# columns, the enums it buckets, the evidence it keeps whole, and figures it completes from the top-100 list.
_TAKEN_APART = ("model_type", "rank", "backend", "simulated", "verdict", "schema_version", "env", "code_paths",
                "optimum_neuron_inference", "optimum_neuron_training")  # fmt: skip


def _fields(kind: type) -> tuple[str, ...]:
    return tuple(
        name for name, json_type in JSON_TYPES.items() if json_type is kind and name not in _TAKEN_APART
    )


# The report's columns by type, each as the schema declares its fields (None where a row has no value).
INTEGER_FIELDS = _fields(int)
FLOAT_FIELDS = _fields(float)
LIST_FIELDS = _fields(list)
TEXT_FIELDS = _fields(str)
FLAG_FIELDS = _fields(bool)
FAILURE_KEYS = tuple(f"{stage}_failure" for stage in JUDGED_STAGES)
# The committed reference run and the top-100 list the harness writes next to it.
REPO_ROOT = Path(__file__).resolve().parents[1]
REFERENCE_RESULTS = REPO_ROOT / "fixtures" / "compat" / "results-neuron-sim.jsonl"
TOP100_NAME = "top100.csv"
OPTIMUM_NEURON_NAME = "optimum_neuron_0.4.5.csv"


class ResultsError(Exception):
    """Bad input a user can fix (missing file, corrupt line); the CLI prints it and exits 2."""


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


# What each JSON type of a row's fields must be when present (None: not measured); anything else is refused,
# never shown as "not measured".
_EXPECTED = {int: "an integer", float: "a number", list: "a list", str: "a string", bool: "true or false",
             dict: "an object"}  # fmt: skip


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
    for name, kind in JSON_TYPES.items():
        value = data.get(name)
        types = (int, float) if kind is float else (kind,)
        wrong = value is not None and (
            not isinstance(value, types) or (kind is not bool and isinstance(value, bool))
        )
        if wrong:
            raise ResultsError(
                f"{path}:{number}: {name} of {data['model_type']} is {json.dumps(value)[:60]}, not {_EXPECTED[kind]}"
            )
    for name, choices in ENUM_FIELDS.items():
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
            # A family's rows are keyed by their probe name (task/model_type): one architecture, several tasks.
            model_type = row_probe_name(row)
            # A later row for the same probe in the same run is a rerun: it wins, and is listed.
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


def is_comparison_run(run: Run, runs: list[Run]) -> bool:
    """A class-defaults run beside a checkpoint-configs run of the same results file that covers more
    architectures: the class defaults of the ones whose checkpoint values differ, shown for comparison."""
    return run.config == "class-defaults" and any(
        other.config == "checkpoint"
        and set(other.sources) == set(run.sources)
        and len(other.rows) > len(run.rows)
        for other in runs
    )


def display_path(path: Path) -> str:
    """Relative to the working directory when the file is under it, else absolute."""
    absolute = Path(os.path.abspath(path))
    try:
        return absolute.relative_to(Path.cwd()).as_posix()
    except ValueError:
        return str(absolute)
