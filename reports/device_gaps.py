"""What only a trn2 can show: the questions a CPU simulation of TorchNeuron's rules cannot answer, for the run as
a whole and per row (from the ops in its compiled graphs), so a team knows what to try first on real hardware."""

from __future__ import annotations

from collections import Counter

import pandas as pd

COMPILER_AUTOCAST = (
    "https://awsdocs-neuron.readthedocs-hosted.com/en/latest/general/appnotes/neuronx-cc/"
    "neuronx-cc-training-mixed-precision.html"
)
RECOMPILE_LIMIT = 8  # Dynamo's default, as on the device


def _rows_where(rows: pd.DataFrame, test) -> list[str]:
    return sorted(
        model for model, row in zip(rows["model_type"], rows.to_dict("records"), strict=True) if test(row)
    )


def _lists(row: dict, name: str) -> list[str]:
    value = row.get(name)
    return value if isinstance(value, list) else []


def run_gaps(frame: pd.DataFrame, run_index: int) -> list[dict]:
    """The gaps, each with the rows of this run it concerns (None: it concerns every row)."""
    rows = frame[frame["run"] == run_index] if not frame.empty else frame
    if rows.empty:
        return []
    ops = Counter(op for value in rows["lowering_unverified_ops"] for op in (value or []))
    lowering = _rows_where(rows, lambda row: bool(_lists(row, "lowering_unverified_ops")))
    every_step = _rows_where(rows, lambda row: row.get("recompiles_every_step") is True)
    many_graphs = _rows_where(
        rows, lambda row: (row.get("compile_count") or 0) + (row.get("train_compile_count") or 0) > 8
    )
    unknown = _rows_where(
        rows, lambda row: any(op.startswith("float64:") for op in _lists(row, "unsupported_ops"))
    )
    common = ", ".join(f"{op} ({count})" for op, count in ops.most_common(8))
    return [
        {
            "title": "Whether neuronx-cc lowers the ordinary ATen ops these graphs hold",
            "text": "The simulator runs every compiled graph with CPU kernels; the Neuron compiler lowers it through "
            "StableHLO, and which ATen ops it lowers (and how fast) is not documented per op for compiled "
            "graphs: grouped matmul (aten._grouped_mm, the bf16 MoE path), roll / index_put in sliding-window "
            "caches, topk / sort / scatter / gather in routers and sparse-attention indexers, histc and cumsum "
            f"in expert counting. In this run, with the rows that hold one: {common or 'none'}",
            "rows": lowering,
        },
        {
            "title": "Compile time",
            "text": "Every compiled graph is one neuronx-cc compilation on the device (minutes each on a cold cache); "
            f"a decode step that recompiles at every token compiles up to {RECOMPILE_LIMIT} times per "
            "generate() before Dynamo runs it eagerly, and graph breaks multiply the graphs. The simulator "
            "counts them; only a device times them. Rows with more than 8 graphs (generation plus training):",
            "rows": many_graphs,
        },
        {
            "title": "Decode speed after the recompile limit",
            "text": f"Rows that recompile at every decode step run eagerly after {RECOMPILE_LIMIT} compilations: how "
            "slow eager decode is on a NeuronCore is a device measurement",
            "rows": every_step,
        },
        {
            "title": "bf16 and the compiler's automatic casting",
            "text": "The reference runs float32 on CPU. On the device neuronx-cc casts float32 matrix multiplications to "
            f"bf16 by default ({COMPILER_AUTOCAST}), and bf16 takes other Transformers kernels (grouped_mm "
            "for MoE experts): outputs within tolerance here say nothing about bf16 accuracy there. Rows "
            "with float64 in compiled graphs (whether the compiler raises or casts is not documented)",
            "rows": unknown,
        },
        {
            "title": "Device memory",
            "text": "Tiny models with random weights say nothing about whether a real checkpoint, its KV cache and "
            "its optimizer state fit a NeuronCore's HBM, or how the runtime and compiler use it.",
            "rows": [],
        },
    ]


def row_checks(cell: dict) -> list[str]:
    """What to try first on a trn2 for one row: the ops whose lowering only a device shows, per code path, and
    the graphs the device would compile."""
    checks = []
    ops = cell.get("lowering_unverified_ops") or []
    if ops:
        checks.append(f"lowering of {', '.join(ops)} (in the measured compiled graphs)")
    for path in cell.get("code_paths") or []:
        extra = sorted(set(path.get("lowering_unverified_ops") or []) - set(ops))
        if path.get("runs") and extra:
            checks.append(f"lowering of {', '.join(extra)} on the {path['path']} path")
    graphs = [(cell.get("compile_count"), "generation"), (cell.get("train_compile_count"), "training")]
    counted = [f"{count} for {what}" for count, what in graphs if count]
    if counted:
        checks.append(f"compile time: {' and '.join(counted)} graph(s) through neuronx-cc")
    if cell.get("recompiles_every_step"):
        checks.append(f"eager decode speed after {RECOMPILE_LIMIT} compilations of the decode step")
    if any(op.startswith("float64:") for op in cell.get("unsupported_ops") or []):
        checks.append("what the compiler does with float64 in the compiled graphs")
    return checks
