"""The report's tables, from loaded runs: one row per (run, architecture) (``long_frame``), each run's top-100
headline and its readings, the verdict matrix across runs, the recompile histogram and the buckets per rank band.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from compat_matrix.families import TEXT_GENERATION, family_of
from compat_matrix.schema import SCHEMA_VERSION
from reports.results import (
    FAILURE_KEYS,
    FLAG_FIELDS,
    FLOAT_FIELDS,
    INTEGER_FIELDS,
    LIST_FIELDS,
    TEXT_FIELDS,
    TOP_N,
    Run,
    Top100Entry,
    causal_lm_classes,
    lacks_stage_split,
)
from reports.vocabulary import (
    BUCKETS,
    NOT_MEASURED_BUCKETS,
    NOT_RUN,
    OK_BUCKETS,
    RANK_BANDS,
    RECOMPILE_BINS,
    UNRANKED_BAND,
    bucket_of,
    change_between,
    rank_band,
    recompile_bin,
)


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
                "family": family_of(row.get("task") or TEXT_GENERATION),
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
