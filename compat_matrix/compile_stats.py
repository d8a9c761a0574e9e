"""What Dynamo and the device's eager mode did during one probe: the compilations, recompiles and graph
breaks Dynamo counted (`CompileStats`), and the ATen op signatures eager mode runs (`EagerOpSignatures`)."""

from __future__ import annotations

import collections
import re
from contextlib import contextmanager
from typing import Any

import torch
import torch._dynamo
from torch._dynamo.utils import counters, get_compilation_metrics
from torch.utils._python_dispatch import TorchDispatchMode

from standin import sim_backend


class EagerOpSignatures(TorchDispatchMode):
    """Records every ATen op with its input signature (shapes, dtypes, scalars), the unit TorchNeuron's eager
    mode compiles and caches, and applies the device dtype/op rules to it."""

    def __init__(self, seen: set[tuple]):
        super().__init__()
        self.seen = seen

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        flat = torch.utils._pytree.tree_leaves((args, kwargs))
        self.seen.add((str(func), tuple(_signature_part(v) for v in flat)))
        outputs = func(*args, **kwargs)
        sim_backend.check_op_and_dtypes(func, [*flat, *torch.utils._pytree.tree_leaves(outputs)], "eager")
        return outputs


def _signature_part(value: Any) -> Any:
    if isinstance(value, torch.Tensor):
        return ("T", tuple(value.shape), str(value.dtype))
    if isinstance(value, int | float | bool | str | None):
        return value
    return type(value).__name__


@contextmanager
def record_prefill_ops(model: torch.nn.Module, seen: set[tuple]):
    """Transformers runs the prefill uncompiled: on Neuron that is eager mode, so record its op signatures."""
    original = model._prefill

    def recorded_prefill(*args, **kwargs):
        with EagerOpSignatures(seen):
            return original(*args, **kwargs)

    model._prefill = recorded_prefill
    try:
        yield
    finally:
        del model._prefill


class CompileStats:
    """Snapshot of Dynamo's compile metrics and counters, diffed around one probe."""

    def __init__(self):
        self.metrics_start = len(get_compilation_metrics())
        self.graph_breaks_start = dict(counters["graph_break"])
        self.unique_graphs_start = counters["stats"]["unique_graphs"]

    def compilations(self) -> list:
        # A compile that produced no graph (frame skipped) is not a device compilation.
        return [m for m in get_compilation_metrics()[self.metrics_start :] if m.graph_op_count]

    def recompile_reasons(self) -> list[str]:
        return recompile_reasons(self.compilations())

    def graph_breaks(self) -> dict[str, int]:
        diff = {}
        for message, count in counters["graph_break"].items():
            new = count - self.graph_breaks_start.get(message, 0)
            if new > 0:
                diff[message] = new
        return diff

    def unique_graphs(self) -> int:
        return counters["stats"]["unique_graphs"] - self.unique_graphs_start


def recompile_reasons(compilations: list) -> list[str]:
    """Per recompile among ``compilations`` (Dynamo's compilation metrics): its frame and the guard that failed."""
    reasons = []
    for metric in compilations:
        if int(metric.compile_id.split("/")[1]) > 0:
            # The first line is the failing guard; the user stack trace after it is noise in a matrix cell.
            guard = (metric.recompile_reason or "unknown").strip().splitlines()[0]
            reasons.append(f"{metric.co_name}: {guard}")
    return reasons


def graph_break_reason(message: str) -> str:
    """First line (the graph-break type) plus the explanation and the graph-break-site link when present."""
    lines = [line.strip() for line in message.splitlines() if line.strip()]
    explanation = next(
        (line[len("Explanation:") :].strip() for line in lines if line.startswith("Explanation:")), ""
    )
    link = re.search(r"https://\S+/gb\d+\.html", message)
    parts = [lines[0] if lines else message, explanation, link.group(0) if link else ""]
    return " | ".join(part for part in parts if part)


def ops_named_in_graph_breaks(messages: list[str]) -> list[str]:
    """Graph breaks on ops the device cannot run (e.g. data-dependent output shapes) are reported ops too."""
    op_rules = sim_backend._op_rule_index()
    found = set()
    for message in messages:
        for op in re.findall(r"aten\.[A-Za-z0-9_]+(?:\.[A-Za-z0-9_]+)?", message):
            packet = op if op in op_rules else op.rsplit(".", 1)[0]
            if packet in op_rules:
                found.add(f"{op_rules[packet]['id']}: {packet} (graph break)")
    return sorted(found)


def recompile_guard(reasons: list[str]) -> str | None:
    """The guard that fails most often, with its numbers generalised (``== 7`` -> ``== N``)."""
    if not reasons:
        return None
    return collections.Counter(generalised(reason) for reason in reasons).most_common(1)[0][0]


def generalised(reason: str) -> str:
    return re.sub(r"\s+", " ", re.sub(r"\d+", "N", reason))
