"""`neuron-compat report`: the compatibility report as one self-contained HTML page, Markdown or CSV."""

from __future__ import annotations

import json
from datetime import datetime, timezone
from pathlib import Path

import pandas as pd

from reports import charts
from reports.advice import STAGE_MEANINGS, advice
from reports.render import asset, fail, render, write_output
from reports.results import (
    BUCKET_LABELS,
    BUCKETS,
    INTEGER_FIELDS,
    VERDICT_MEANINGS,
    VERDICTS,
    ResultsError,
    Run,
    display_path,
    headline,
    load_runs,
    load_top100,
    long_frame,
    recompile_histogram,
    verdict_matrix,
    verdicts_by_band,
)

FORMATS = ("html", "md", "csv")
# The published figures the report is compared with. They are a claim from the post, not a measurement here.
PUBLISHED_CLAIM = {
    "source": "Hugging Face blog, “TorchNeuron: running HF models on AWS Trainium is easier than ever” "
    "(huggingface.co/blog/hf-torchneuron, 2026-10-19)",
    "torchneuron_percent": 89,
    "optimum_neuron_percent": 46,
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
    suffixes = {".html": "html", ".htm": "html", ".md": "md", ".markdown": "md", ".csv": "csv"}
    return suffixes.get(output.suffix.lower(), "html")


def _cell(record: dict) -> dict:
    cell = {
        key: (None if (not isinstance(value, list) and pd.isna(value)) else value)
        for key, value in record.items()
    }
    # Plain ints for the templates (pandas hands back numpy integers).
    for key in INTEGER_FIELDS:
        if cell.get(key) is not None:
            cell[key] = int(cell[key])
    cell["green"] = cell["verdict"] == "works"
    cell["stage_meaning"] = STAGE_MEANINGS.get(cell.get("stage") or "", "")
    cell["advice"] = advice(cell)
    return cell


def _matrix_rows(frame: pd.DataFrame, runs: list[Run]) -> list[dict]:
    wide = verdict_matrix(frame, runs)
    cells = {(record["run"], record["model_type"]): _cell(record) for record in frame.to_dict("records")}
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
                "rank": rank,
                "rank_band": first["rank_band"],
                "cells": per_run,
                "changes": changes,
                "optimum_neuron_inference": first["optimum_neuron_inference"],
                "optimum_neuron_training": first["optimum_neuron_training"],
                "needs_evidence": any(not cell["green"] for cell in present),
                "max_recompiles": max(cell["recompile_count"] for cell in present),
                "max_graph_breaks": max(cell["graph_breaks"] for cell in present),
                "search_text": " ".join(
                    [model_type]
                    + [cell["error"] or "" for cell in present]
                    + [op for cell in present for op in cell["unsupported_ops"]]
                ).lower(),
            }
        )
    return rows


def _change_summary(rows: list[dict], runs: list[Run]) -> list[dict]:
    summary = []
    for index in range(1, len(runs)):
        by_kind = {
            kind: [row["model_type"] for row in rows if row["changes"][index - 1] == kind]
            for kind in CHANGE_KINDS
        }
        summary.append({"baseline": runs[0].label, "run": runs[index].label, "by_kind": by_kind})
    return summary


def _context(paths: list[Path]) -> dict:
    runs = load_runs(paths)
    top100 = load_top100(paths)
    frame = long_frame(runs, top100)
    rows = _matrix_rows(frame, runs)
    run_views = []
    for index, run in enumerate(runs):
        figures = headline(frame, index, top100)
        run_views.append(
            {
                "index": index,
                "label": run.label,
                "simulated": run.simulated,
                "env": {name: run.env.get(name) for name in ENV_FIELDS},
                "date": run.date,
                "sources": [display_path(source) for source in run.sources],
                "architectures": len(run.rows),
                "headline": figures,
                "band_chart": charts.verdicts_by_band_svg(
                    verdicts_by_band(frame, index, top100), f"Verdict by rank band: {run.label}"
                ),
                "recompile_chart": charts.histogram_svg(
                    recompile_histogram(frame, index),
                    f"Recompiles after warm-up: {run.label}",
                    "recompiles per architecture (architectures that compiled)",
                ),
            }
        )
    return {
        "runs": run_views,
        "rows": rows,
        "frame": frame,
        "changes": _change_summary(rows, runs),
        "buckets": BUCKETS,
        "bucket_labels": BUCKET_LABELS,
        "verdicts": VERDICTS,
        "verdict_meanings": VERDICT_MEANINGS,
        "verdict_colors": charts.VERDICT_COLORS,
        "claim": PUBLISHED_CLAIM,
        "top100_known": bool(top100),
        "any_simulated": any(run.simulated for run in runs),
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
    "stage",
    "error",
    *INTEGER_FIELDS,
    "seconds",
    "peak_rss_mb",
    "outputs_match",
    "tokens_match",
    "max_logit_diff",
    "recompile_reasons",
    "graph_break_reasons",
    "unsupported_ops",
    "optimum_neuron_inference",
    "optimum_neuron_training",
    "change_vs_first_run",
    "what_to_do",
)


def _csv(context: dict) -> str:
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
    for column in ("recompile_reasons", "graph_break_reasons", "unsupported_ops"):
        frame[column] = frame[column].map(json.dumps)
    return frame.loc[:, list(CSV_COLUMNS)].to_csv(index=False, lineterminator="\n")


def build_report(paths: list[Path], fmt: str) -> tuple[str, dict]:
    context = _context(paths)
    if fmt == "csv":
        return _csv(context), context
    if fmt == "md":
        return render("compat.md.jinja", **context), context
    return render("compat.html.jinja", css=asset("report.css"), js=asset("compat.js"), **context), context


def write_report(results: list[Path], output: Path, fmt: str) -> int:
    """Writes the report for `results` to `output`; returns the exit code (2 for bad input)."""
    if fmt not in FORMATS:
        return fail(f"unknown format {fmt!r}; choose one of {', '.join(FORMATS)}")
    try:
        text, context = build_report([Path(path) for path in results], fmt)
    except ResultsError as error:
        return fail(str(error))
    try:
        write_output(output, text)
    except OSError as error:
        return fail(f"cannot write {output}: {error.strerror or error}")
    print(
        f"Wrote the compatibility report ({fmt}, {len(context['rows'])} architectures, "
        f"{len(context['runs'])} run(s)) to {output.resolve()}"
    )
    return 0
