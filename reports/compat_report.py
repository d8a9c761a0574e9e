"""`neuron-compat report`: the compatibility report as one self-contained HTML page, Markdown or CSV."""

from __future__ import annotations

import itertools
import json
import os
from datetime import datetime, timezone
from pathlib import Path

import pandas as pd

from compat_matrix.families import FAMILIES
from compat_matrix.results_file import spreadsheet_safe
from compat_matrix.schema import JUDGED_STAGES, Verdict
from reports import charts, device_gaps
from reports.advice import STAGE_MEANINGS, advice
from reports.render import asset, fail, render, write_output
from reports.results import (
    FLAG_FIELDS,
    FLOAT_FIELDS,
    INTEGER_FIELDS,
    LIST_FIELDS,
    TEXT_FIELDS,
    ResultsError,
    Run,
    display_path,
    is_comparison_run,
    load_runs,
    load_top100,
)
from reports.tables import buckets_by_band, headline, long_frame, recompile_histogram, verdict_matrix
from reports.vocabulary import (
    BUCKET_LABELS,
    BUCKETS,
    CAUSE_LABELS,
    CAUSE_MEANINGS,
    OK_BUCKETS,
    OPTIONAL_BUCKETS,
    VERDICT_MEANINGS,
    VERDICTS,
)
from usercode.model_ids import example_hub_ids, hub_id_patterns

FORMATS = ("html", "md", "csv")
# The published figures the report is compared with. They are a claim from the post, not a measurement here.
PUBLISHED_CLAIM = {
    "source": "Hugging Face blog, “TorchNeuron: running HF models on AWS Trainium is easier than ever” "
    "(huggingface.co/blog/hf-torchneuron, 2026-10-19)",
    "torchneuron_percent": 89,
    "optimum_neuron_percent": 46,
    # Which reading of the headline the 89 % sits beside, and what the 46 % can and cannot be.
    "matching_reading": "any",
    "optimum_neuron_reconciled": "optimum-neuron 0.4.5 documents support per architecture in two registries: "
    "Neuron inference model classes and custom tensor/pipeline-parallel training modeling. Every other "
    "architecture can only try its generic NeuronTrainer, which works “if the model compiles and fits” and is "
    "verified for no architecture. So the documented figure counts what optimum-neuron names; the 46 % must "
    "count something else (most likely an empirical pass rate that includes the generic trainer), and the post "
    "publishes neither its list nor its criterion, so it cannot be reproduced from the documentation.",
}
CHANGE_KINDS = ("fixed", "regressed", "changed", "new", "missing")
ENV_FIELDS = (
    "backend",
    "simulated",
    "torch",
    "transformers",
    "python",
    "platform",
    "harness_version",
    "settings_id",
)


def infer_format(output: Path) -> str:
    """The format an output's suffix names (none: HTML); "" for a suffix of another format (`x.pdf`)."""
    suffixes = {"": "html", ".html": "html", ".htm": "html", ".md": "md", ".markdown": "md", ".csv": "csv"}
    return suffixes.get(output.suffix.lower(), "")


def _cell(record: dict) -> dict:
    cell = {
        key: (None if (not isinstance(value, list) and pd.isna(value)) else value)
        for key, value in record.items()
    }
    # Plain Python numbers and flags for the templates (pandas hands back numpy and NA values).
    for key in INTEGER_FIELDS:
        if cell.get(key) is not None:
            cell[key] = int(cell[key])
    for key in FLOAT_FIELDS:
        if cell.get(key) is not None:
            cell[key] = float(cell[key])
    for key in FLAG_FIELDS:
        if cell.get(key) is not None:
            cell[key] = bool(cell[key])
    cell["green"] = cell["verdict"] == Verdict.WORKS
    cell["stage_meaning"] = STAGE_MEANINGS.get(cell.get("stage") or "", "")
    cell["advice"] = advice(cell)
    # The reasons the row states, each shown on its own line; rows of the older schema have only their first
    # error line.
    stated = reason_parts(cell)
    cell["stated_reason"] = "; ".join(stated)
    cell["reason_text"] = cell["stated_reason"] or cell.get("error") or ""
    cell["reason_parts"] = stated or ([cell["error"]] if cell.get("error") else [])
    cell["cause_label"] = CAUSE_LABELS.get(cell.get("cause") or "", "")
    cell["cause_meaning"] = CAUSE_MEANINGS.get(cell.get("cause") or "", "")
    cell["bucket_label"] = BUCKET_LABELS[cell["bucket"]]
    cell["config_text"] = config_text(cell)
    cell["trn2_checks"] = device_gaps.row_checks(cell)
    return cell


def config_text(cell: dict) -> str | None:
    """Which config values the row measured, in words (None for rows that do not say)."""
    if cell.get("config_source") == "checkpoint":
        values = ", ".join(
            f"{name}={json.dumps(value)}" for name, value in (cell.get("checkpoint_values") or {}).items()
        )
        return f"the code-path values of {cell.get('checkpoint')}: {values}"
    if cell.get("config_source") == "class-defaults":
        return "the config class's defaults" + (
            ""
            if cell.get("settings_config") == "class-defaults"
            else " (no checkpoint values recorded for it)"
        )
    return None


def reason_parts(cell: dict) -> list[str]:
    """A row's reasons: one per judged stage ("generate: ..."), so the failing stage's is never hidden behind
    another's, or the row's own reason when its stages were not judged apart."""
    staged = [f"{stage}: {cell[f'{stage}_reason']}" for stage in JUDGED_STAGES if cell.get(f"{stage}_reason")]
    return staged or ([cell["reason"]] if cell.get("reason") else [])


def _search_text(model_type: str, cells: list[dict], hub_ids: list[str]) -> str:
    """Everything a reader may type to find a row: names, Hub ids, errors, reasons, guards and ops."""
    parts = [model_type, *hub_ids]
    for cell in cells:
        parts += [cell.get(name) or "" for name in ("class_name", "error", "stated_reason", "recompile_guard", "checkpoint",
                                                    "avoided_by")]  # fmt: skip
        for name in ("recompile_reasons", "graph_break_reasons", "unsupported_ops", "cpu_fallback_ops",
                     "train_graph_break_reasons", "lowering_unverified_ops"):  # fmt: skip
            parts += cell.get(name) or []
    return " ".join(part for part in parts if part).lower()


def _matrix_rows(frame: pd.DataFrame, runs: list[Run]) -> list[dict]:
    wide = verdict_matrix(frame, runs)
    cells = {(record["run"], record["model_type"]): _cell(record) for record in frame.to_dict("records")}
    hub_ids = example_hub_ids()
    rows = []
    for record in wide.to_dict("records"):
        model_type = record["model_type"]
        per_run = [cells.get((index, model_type)) for index in range(len(runs))]
        present = [cell for cell in per_run if cell]
        first = present[0]
        rank = None if pd.isna(record["rank"]) else int(record["rank"])
        changes = [record.get(f"change_{index}", "") for index in range(1, len(runs))]
        rows.append(
            {
                "model_type": model_type,
                "family": first["family"],
                "anchor": "arch-" + model_type.replace("/", "-"),
                "class_name": next((cell["class_name"] for cell in present if cell["class_name"]), None),
                "hub_ids": hub_ids.get(model_type, []),
                "rank": rank,
                "rank_band": first["rank_band"],
                "cells": per_run,
                "changes": changes,
                "optimum_neuron_inference": first["optimum_neuron_inference"],
                "optimum_neuron_training": first["optimum_neuron_training"],
                "needs_evidence": any(not cell["green"] for cell in present),
                # Filters read these; "" (not measured) matches neither "none" nor "1 or more".
                "recompiles_by_run": [
                    "" if cell is None or cell["recompile_count"] is None else cell["recompile_count"]
                    for cell in per_run
                ],
                "breaks_by_run": [
                    "" if cell is None or cell["graph_breaks"] is None else cell["graph_breaks"]
                    for cell in per_run
                ],
                "every_step": any(cell["recompiles_every_step"] for cell in present),
                "search_text": _search_text(model_type, present, hub_ids.get(model_type, [])),
            }
        )
    # Grouped by family, causal LMs (the headline's) first, each in the matrix's order.
    order = ["causal-lm", *FAMILIES]
    return sorted(rows, key=lambda row: order.index(row["family"]))


def _change_summary(rows: list[dict], runs: list[Run]) -> list[dict]:
    summary = []
    for index in range(1, len(runs)):
        by_kind = {
            kind: [row["model_type"] for row in rows if row["changes"][index - 1] == kind]
            for kind in CHANGE_KINDS
        }
        summary.append({"baseline": runs[0].label, "run": runs[index].label, "by_kind": by_kind})
    return summary


def tp_readiness_view(ranks: dict[str, int]) -> dict:
    """The measured TP readiness table for the report: ranked architectures first, each with its plan, the
    degrees that shard whole and, where a degree does not, the first reason at the smallest such degree."""
    from migrator.tp_readiness import table

    data = table()
    rows = []
    for model_type, row in data["architectures"].items():
        failing = sorted(row["problems"], key=int)
        rows.append({
            "model_type": model_type, "rank": ranks.get(model_type), "plan": row["plan"] or "not built",
            "clean": row["clean_degrees"], "sizes": row["sizes"],
            "why": row["error"] or (f"tp {failing[0]}: {row['problems'][failing[0]][0]}" if failing else ""),
        })  # fmt: skip
    rows.sort(key=lambda row: (row["rank"] is None, row["rank"] or 0, row["model_type"]))
    counts = {
        plan: sum(row["plan"] == plan for row in rows)
        for plan in ("full", "lm_head only", "none", "not built")
    }
    ranked = [row for row in rows if row["rank"] is not None]
    ranked_counts = {plan: sum(row["plan"] == plan for row in ranked) for plan in counts}
    return {"versions": data["versions"], "rows": rows, "counts": counts, "ranked_counts": ranked_counts,
            "ranked": len(ranked)}  # fmt: skip


def _context(paths: list[Path], merge: bool = False) -> dict:
    runs = load_runs(paths, merge=merge)
    top100 = load_top100(paths)
    frame = long_frame(runs, top100)
    rows = _matrix_rows(frame, runs)
    run_views = []
    for index, run in enumerate(runs):
        figures = headline(frame, index, top100, partial=is_comparison_run(run, runs))
        run_views.append(
            {
                "index": index,
                "label": run.label,
                "simulated": run.simulated,
                "env": {name: run.env.get(name) for name in ENV_FIELDS},
                "measured": run.measured_text,
                "sources": [display_path(source) for source in run.sources],
                "architectures": len(run.rows),
                "older_schema": run.older_schema_rows,
                "replaced": run.replaced,
                "headline": figures,
                "config": run.config,
                "gaps": device_gaps.run_gaps(frame, index),
                "band_chart": charts.buckets_by_band_svg(
                    buckets_by_band(frame, index, top100), f"Outcome by rank band: {run.label}"
                ),
                "recompile_chart": charts.histogram_svg(
                    recompile_histogram(frame, index),
                    f"Recompiles after warm-up: {run.label}",
                    "recompiles per architecture (rows with a measured count)",
                ),
            }
        )
    return {
        "runs": run_views,
        "rows": rows,
        "rows_by_family": [
            (family, list(group)) for family, group in itertools.groupby(rows, lambda row: row["family"])
        ],
        "frame": frame,
        "merged": merge,
        "changes": _change_summary(rows, runs),
        "buckets": BUCKETS,
        "shown_buckets": [
            bucket
            for bucket in BUCKETS
            if bucket not in OPTIONAL_BUCKETS or any(view["headline"].counts[bucket] for view in run_views)
        ],
        "bucket_labels": BUCKET_LABELS,
        "ok_buckets": OK_BUCKETS,
        "verdicts": VERDICTS,
        "verdict_meanings": VERDICT_MEANINGS,
        "cause_labels": CAUSE_LABELS,
        "cause_meanings": CAUSE_MEANINGS,
        "bucket_colors": charts.BUCKET_COLORS,
        "claim": PUBLISHED_CLAIM,
        "top100_known": bool(top100),
        "any_simulated": any(run.simulated for run in runs),
        "all_simulated": all(run.simulated for run in runs),
        "hub_table": json.dumps(hub_id_patterns()).replace("</", "<\\/"),
        "tp": tp_readiness_view({entry.model_type: entry.rank for entry in top100}),
        "generated": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
    }


CSV_COLUMNS = (
    "run_label",
    "backend",
    "simulated",
    "torch",
    "transformers",
    "settings_id",
    "rank",
    "model_type",
    "verdict",
    "bucket",
    *TEXT_FIELDS,
    *INTEGER_FIELDS,
    *FLOAT_FIELDS,
    *FLAG_FIELDS,
    *LIST_FIELDS,
    "older_schema",
    "origin",
    "optimum_neuron_inference",
    "optimum_neuron_training",
    "change_vs_first_run",
    "what_to_do",
)


def _csv(context: dict) -> str:
    """One line per (run, architecture); an unmeasured figure is an empty field, never 0."""
    frame = context["frame"].copy()
    changes = {
        (index + 1, row["model_type"]): change
        for row in context["rows"]
        for index, change in enumerate(row["changes"])
    }
    frame["change_vs_first_run"] = [
        changes.get((run, model_type), "")
        for run, model_type in zip(frame["run"], frame["model_type"], strict=True)
    ]
    advice_by_cell = {
        (cell["run"], row["model_type"]): " ".join(cell["advice"])
        for row in context["rows"]
        for cell in row["cells"]
        if cell
    }
    frame["what_to_do"] = [
        advice_by_cell[(run, model_type)]
        for run, model_type in zip(frame["run"], frame["model_type"], strict=True)
    ]
    for column in LIST_FIELDS:
        frame[column] = frame[column].map(lambda value: "" if value is None else json.dumps(value))
    return spreadsheet_safe(frame.loc[:, list(CSV_COLUMNS)]).to_csv(index=False, lineterminator="\n")


def _same_file(path: Path, other: Path) -> bool:
    """The same file by name (symbolic links resolved) or by inode (a hard link)."""
    if os.path.realpath(path) == os.path.realpath(other):
        return True
    try:
        return os.path.samefile(path, other)
    except OSError:
        return False


def build_report(paths: list[Path], fmt: str, merge: bool = False) -> tuple[str, dict]:
    context = _context(paths, merge)
    if fmt == "csv":
        return _csv(context), context
    if fmt == "md":
        return render("compat.md.jinja", **context), context
    return render("compat.html.jinja", css=asset("report.css"), js=asset("compat.js"), **context), context


def write_report(results: list[Path], output: Path, fmt: str, merge: bool = False) -> int:
    """Writes the report for `results` to `output`; returns the exit code (2 for bad input).

    Each file is its own run (column); `merge` folds files measured under the same environment into one
    run, and the report then lists every row that replaced another."""
    if not fmt:
        return fail(
            f"{output}: its suffix names no report format; name it .html, .md or .csv, or pass --format"
        )
    if fmt not in FORMATS:
        return fail(f"unknown format {fmt!r}; choose one of {', '.join(FORMATS)}")
    clash = next((path for path in results if _same_file(Path(path), output)), None)
    if clash is not None:
        return fail(f"{output} is the results file {clash}: the report would replace it; choose another -o")
    try:
        text, context = build_report([Path(path) for path in results], fmt, merge)
    except ResultsError as error:
        return fail(str(error))
    try:
        write_output(output, text)
    except OSError as error:
        return fail(f"cannot write {output}: {error.strerror or error}")
    replaced = sum(len(run["replaced"]) for run in context["runs"])
    print(
        f"Wrote the compatibility report ({fmt}, {len(context['rows'])} architectures, "
        f"{len(context['runs'])} run(s) side by side"
        + (f", {replaced} row(s) replaced by reruns, listed in the report" if replaced else "")
        + f") to {output.resolve()}"
    )
    return 0
