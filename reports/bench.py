"""`neuron-migrate bench --baseline CMD`'s side-by-side page: the run and the run it replaces, each figure with
its ratio, and everything that differs between the two runs (device, dtype, batch, sequence length, parallel
layout), so that a comparison of unlike runs says so. Reads the bench's JSON document (plain dicts)."""

from __future__ import annotations

from pathlib import Path

from reports.render import render, write_output

# (label, where in a result, True when more is better)
FIGURES = (
    ("median step seconds", ("steps", "median_seconds"), False),
    ("p90 step seconds", ("steps", "p90_seconds"), False),
    ("samples/s", ("steps", "samples_per_s"), True),
    ("tokens/s (no padding)", ("steps", "tokens_per_s"), True),
    ("first step seconds (compile)", ("compile", "first_step_seconds"), False),
    ("Dynamo compile seconds", ("compile", "dynamo_compile_seconds"), False),
    ("peak memory bytes", ("peak_memory", "bytes"), False),
    ("USD per million tokens", ("cost", "usd_per_million_tokens"), False),
)
LAYOUT = (("processes", "processes"), ("dtype", "dtype"), ("batch", "batch"), ("sequence length", "sequence"))


def _get(result: dict, path: tuple[str, str]):
    return (result.get(path[0]) or {}).get(path[1])


def comparison(run: dict, baseline: dict) -> dict:
    """Figures side by side with `baseline / run` (for times and costs, how many times faster or cheaper the
    run is; for rates, run / baseline), and what differs between the two."""
    rows = []
    for label, path, more_is_better in FIGURES:
        ours, theirs = _get(run, path), _get(baseline, path)
        ratio = None
        if ours and theirs:
            ratio = round(ours / theirs if more_is_better else theirs / ours, 3)
        rows.append({"figure": label, "run": ours, "baseline": theirs, "ratio": ratio})
    for row, baseline_row, prefix in _generation_pairs(run, baseline):
        for label, key in (
            ("first token seconds", "first_token_median_seconds"),
            ("per-token seconds", "per_token_median_seconds"),
        ):
            ours, theirs = row.get(key), baseline_row.get(key)
            ratio = round(theirs / ours, 3) if ours and theirs else None
            rows.append({"figure": f"{prefix} {label}", "run": ours, "baseline": theirs, "ratio": ratio})
    differences = []
    if run.get("device") != baseline.get("device"):
        differences.append(f"device: {run.get('device')} vs {baseline.get('device')}")
    for label, key in LAYOUT:
        ours, theirs = (run.get("layout") or {}).get(key), (baseline.get("layout") or {}).get(key)
        if ours != theirs:
            differences.append(f"{label}: {_shown(ours)} vs {_shown(theirs)}")
    measured = run.get("status") == baseline.get("status") == "measured"
    return {"rows": rows, "differences": differences, "comparable": measured and not differences}


def _generation_pairs(run: dict, baseline: dict):
    theirs = {row["batch"]: row for row in baseline.get("generation", [])}
    for row in run.get("generation", []):
        if row["batch"] in theirs:
            yield row, theirs[row["batch"]], f"batch {row['batch']}"


def _shown(value) -> str:
    if isinstance(value, list):
        return ", ".join(map(str, value)) or "not seen"
    return "not seen" if value is None else str(value)


def write_page(document: dict, output: Path) -> None:
    """The page as Markdown (.md) or HTML (any other suffix)."""
    run, baseline = document["results"]
    template = "bench.md.jinja" if output.suffix.lower() == ".md" else "bench.html.jinja"
    write_output(
        output,
        render(
            template, path=document["path"], run=run, baseline=baseline, comparison=document["comparison"]
        ),
    )
