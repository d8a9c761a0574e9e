"""The probes run for one architecture, inside its own process: eager reference, compiled generation with a
static cache (Transformers' own auto-compile path), comparison, and one compiled training step.

``probe_architecture`` returns the measured part of a result row; ``decide_verdict`` turns it into a verdict.
"""

from __future__ import annotations

import math
import re
import time
import traceback
from collections.abc import Callable
from contextlib import contextmanager
from typing import Any

import torch
import torch._dynamo
from torch._dynamo.utils import counters, get_compilation_metrics
from torch.utils._python_dispatch import TorchDispatchMode

from compat_matrix import sim_backend
from compat_matrix.settings import ProbeSettings
from compat_matrix.tiny import VOCAB, build_tiny_model

CPU = torch.device("cpu")
MOE_MARKERS = ("num_experts", "num_local_experts", "n_routed_experts", "moe_num_experts")


class ProbeFailure(Exception):
    """A probe stage failed; carries the stage name and the first line of the underlying error."""

    def __init__(self, stage: str, error: BaseException):
        self.stage = stage
        self.error = error
        super().__init__(f"{stage}: {first_error_line(error)}")


def first_error_line(error: BaseException) -> str:
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    # Dynamo wraps backend errors as "backend='x' raised:\nRealError: ..."; the useful line is the real one.
    if len(lines) > 1 and lines[0].endswith("raised:"):
        lines = lines[1:]
    return f"{type(error).__name__}: {lines[0] if lines else ''}"[:500]


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
        reasons = []
        for metric in self.compilations():
            if int(metric.compile_id.split("/")[1]) > 0:
                # The first line is the failing guard; the user stack trace after it is noise in a matrix cell.
                guard = (metric.recompile_reason or "unknown").strip().splitlines()[0]
                reasons.append(f"{metric.co_name}: {guard}")
        return reasons

    def graph_breaks(self) -> dict[str, int]:
        diff = {}
        for message, count in counters["graph_break"].items():
            new = count - self.graph_breaks_start.get(message, 0)
            if new > 0:
                diff[message] = new
        return diff

    def unique_graphs(self) -> int:
        return counters["stats"]["unique_graphs"] - self.unique_graphs_start


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
                found.add(f"{op_rules[packet]}: {packet} (graph break)")
    return sorted(found)


def compile_backend(settings: ProbeSettings) -> str:
    return "neuron" if settings.backend == "neuron" else sim_backend.BACKEND_NAME


def model_device(settings: ProbeSettings) -> torch.device:
    return torch.device("neuron" if settings.backend == "neuron" else "cpu")


def prompt(length: int, seed: int, device: torch.device) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed + length)
    # Ids start above the special tokens and stay below the ids remapped to the vocab's top.
    return torch.randint(3, VOCAB - 16, (1, length), generator=generator).to(device)


def is_moe(model: torch.nn.Module) -> bool:
    config = model.config.get_text_config()
    return any(getattr(config, name, None) for name in MOE_MARKERS)


def generate_kwargs(settings: ProbeSettings) -> dict[str, Any]:
    return {
        "max_new_tokens": settings.max_new_tokens,
        "min_new_tokens": settings.max_new_tokens,
        "do_sample": False,
        "output_logits": True,
        "return_dict_in_generate": True,
    }


def timed(probe_seconds: dict[str, float], name: str, stage: str, fn: Callable[[], Any]) -> Any:
    start = time.perf_counter()
    try:
        return fn()
    except Exception as error:
        raise ProbeFailure(stage, error) from error
    finally:
        probe_seconds[name] = round(probe_seconds.get(name, 0.0) + time.perf_counter() - start, 3)


def run_eager_reference(model, settings: ProbeSettings, device) -> list:
    references = []
    with torch.no_grad():
        for length in settings.prompt_lengths:
            ids = prompt(length, settings.seed, device)
            out = model.generate(
                ids, attention_mask=torch.ones_like(ids), disable_compile=True, **generate_kwargs(settings)
            )
            references.append(out)
    return references


def run_compiled_generate(model, settings: ProbeSettings, device, row: dict) -> list:
    from transformers import CompileConfig

    # The same CompileConfig Transformers builds for a neuron device (modeling_utils._default_compile_config).
    compile_config = CompileConfig(backend=compile_backend(settings), dynamic=False, mode="default")
    # On a neuron device generate compiles by itself; on CPU this flag opts in to the same path.
    compile_config._compile_all_devices = settings.backend != "neuron"
    stats = CompileStats()
    eager_signatures: list[set] = []
    outputs = []
    with torch.no_grad():
        for length in settings.prompt_lengths:
            ids = prompt(length, settings.seed, device)
            seen: set[tuple] = set()
            with record_prefill_ops(model, seen):
                out = model.generate(
                    ids,
                    attention_mask=torch.ones_like(ids),
                    cache_implementation="static",
                    max_cache_len=settings.max_cache_len,
                    compile_config=compile_config,
                    **generate_kwargs(settings),
                )
            eager_signatures.append(seen)
            outputs.append(out)
    compilations = stats.compilations()
    breaks = stats.graph_breaks()
    row["compile_count"] = len(compilations)
    row["recompile_reasons"] = stats.recompile_reasons()
    row["recompile_count"] = len(row["recompile_reasons"])
    row["graph_breaks"] = sum(breaks.values())
    row["graph_break_reasons"] = sorted({graph_break_reason(m) for m in breaks})
    row["unique_graphs"] = stats.unique_graphs()
    row["eager_new_op_signatures"] = len(eager_signatures[-1] - set().union(*eager_signatures[:-1]))
    row["eager_op_signatures"] = len(eager_signatures[0])
    # Backend graphs after AOT autograd: TorchNeuron counts its own in counters["neuron"]["compiled_graphs"].
    row["graphs_compiled_by_backend"] = (
        counters["neuron"]["compiled_graphs"]
        if settings.backend == "neuron"
        else sim_backend.STATE.aten_graphs
    )
    row["_graph_break_messages"] = list(breaks)
    return outputs


def compare_outputs(references: list, outputs: list, moe: bool, settings: ProbeSettings, row: dict) -> None:
    tokens_match = all(
        torch.equal(r.sequences.cpu(), o.sequences.cpu()) for r, o in zip(references, outputs, strict=True)
    )
    diffs = [
        (r_logit.cpu() - o_logit.cpu()).abs().max().item()
        for r, o in zip(references, outputs, strict=True)
        for r_logit, o_logit in zip(r.logits, o.logits, strict=True)
    ]
    max_diff = max(diffs) if diffs else math.inf
    tolerance = settings.moe_logit_tolerance if moe else settings.logit_tolerance
    row["tokens_match"] = tokens_match
    row["max_logit_diff"] = max_diff if math.isfinite(max_diff) else None
    row["logit_tolerance"] = tolerance
    row["outputs_match"] = bool(tokens_match and math.isfinite(max_diff) and max_diff <= tolerance)
    if not row["outputs_match"]:
        detail = (
            "greedy tokens differ" if not tokens_match else f"max logit diff {max_diff:.3g} > {tolerance:g}"
        )
        raise ValueError(f"compiled generation does not match eager: {detail}")


def padded_training_batch(model, raw_length: int, settings: ProbeSettings, device) -> dict[str, torch.Tensor]:
    """A right-padded batch whose length is rounded up to a multiple of ``pad_multiple`` (TRL >= 1.16)."""
    padded = math.ceil(raw_length / settings.pad_multiple) * settings.pad_multiple
    generator = torch.Generator().manual_seed(settings.seed + raw_length)
    ids = torch.randint(3, VOCAB - 16, (settings.train_batch_size, padded), generator=generator)
    mask = torch.zeros_like(ids)
    mask[:, :raw_length] = 1
    pad_id = getattr(model.config.get_text_config(), "pad_token_id", None)
    ids = ids.masked_fill(mask == 0, pad_id if isinstance(pad_id, int) else 0)
    labels = ids.masked_fill(mask == 0, -100)
    return {"input_ids": ids.to(device), "attention_mask": mask.to(device), "labels": labels.to(device)}


def run_training_step(model, settings: ProbeSettings, device, row: dict) -> None:
    model.train()
    # What Trainer does with --torch_compile on neuron: accelerate compiles the model with dynamic=False.
    compiled = torch.compile(model, backend=compile_backend(settings), dynamic=False)
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-3)
    stats = CompileStats()
    per_length = []
    lengths = []
    for raw_length in settings.train_lengths:
        batch = padded_training_batch(model, raw_length, settings, device)
        lengths.append(batch["input_ids"].shape[1])
        before = len(stats.compilations())
        loss = compiled(**batch).loss
        if not torch.isfinite(loss):
            raise ValueError(f"training loss is not finite ({loss.item()}) at padded length {lengths[-1]}")
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        per_length.append(len(stats.compilations()) - before)
    distinct = sorted(set(lengths))
    row["train_padded_lengths"] = lengths
    row["train_compile_count"] = len(stats.compilations())
    row["train_compiles_per_length"] = dict(zip((str(n) for n in lengths), per_length, strict=True))
    # Each distinct padded length compiles the graphs of the first step once; anything more is a recompile.
    row["train_expected_compile_count"] = per_length[0] * len(distinct)
    row["train_graph_breaks"] = sum(stats.graph_breaks().values())
    row["_graph_break_messages"] += list(stats.graph_breaks())


def configure_dynamo(settings: ProbeSettings) -> None:
    torch._dynamo.reset()
    counters.clear()
    torch._dynamo.utils.clear_compilation_metrics()
    torch._dynamo.utils.set_compilation_metrics_limit(100_000)
    # Fail loudly instead of silently falling back to eager after too many recompiles.
    torch._dynamo.config.recompile_limit = settings.recompile_limit
    torch._dynamo.config.fail_on_recompile_limit_hit = True
    sim_backend.reset()


def probe_architecture(model_type: str, settings: ProbeSettings) -> dict[str, Any]:
    """Run every probe for one architecture in this process and return the measured fields of its row."""
    configure_dynamo(settings)
    device = model_device(settings)
    probe_seconds: dict[str, float] = {}
    row: dict[str, Any] = {
        "stage": None,
        "error": None,
        "compile_count": None,
        "recompile_count": None,
        "recompile_reasons": [],
        "graph_breaks": None,
        "graph_break_reasons": [],
        "unsupported_ops": [],
        "outputs_match": None,
        "tokens_match": None,
        "max_logit_diff": None,
        "train_compile_count": None,
        "train_padded_lengths": [],
        "unique_graphs": None,
        "eager_new_op_signatures": None,
        "probe_seconds": probe_seconds,
        "_graph_break_messages": [],
    }
    try:
        model = timed(probe_seconds, "build", "build", lambda: build_tiny_model(model_type, settings.seed))
        row["parameters"] = sum(p.numel() for p in model.parameters())
        row["can_compile_fullgraph"] = bool(getattr(model, "_can_compile_fullgraph", False))
        # The reference always runs eagerly on CPU; only the compiled probes move to the device.
        references = timed(probe_seconds, "eager", "eager", lambda: run_eager_reference(model, settings, CPU))
        outputs = timed(
            probe_seconds,
            "generate",
            "generate",
            lambda: run_compiled_generate(model.to(device), settings, device, row),
        )
        timed(
            probe_seconds,
            "compare",
            "compare",
            lambda: compare_outputs(references, outputs, is_moe(model), settings, row),
        )
        timed(probe_seconds, "train", "train", lambda: run_training_step(model, settings, device, row))
    except ProbeFailure as failure:
        row["stage"] = failure.stage
        row["error"] = first_error_line(failure.error)
        row["traceback_tail"] = "".join(traceback.format_exception(failure.error)[-3:])[-2000:]
    messages = row.pop("_graph_break_messages")
    row["unsupported_ops"] = sorted(
        set(sim_backend.STATE.as_list()) | set(ops_named_in_graph_breaks(messages))
    )
    return row


def caveats(row: dict[str, Any]) -> list[str]:
    """Why a row that ran to the end is not a clean ``works``."""
    found = []
    if row.get("recompile_count"):
        found.append(f"{row['recompile_count']} recompile(s) in generation")
    if row.get("graph_breaks"):
        found.append(f"{row['graph_breaks']} graph break(s)")
    if row.get("unsupported_ops"):
        found.append(f"{len(row['unsupported_ops'])} reported op/dtype finding(s)")
    expected = row.get("train_expected_compile_count")
    if expected is not None and (row.get("train_compile_count") or 0) > expected:
        found.append(f"training compiled {row['train_compile_count']} graphs, expected {expected}")
    return found


def decide_verdict(row: dict[str, Any]) -> str:
    """``harness-error`` when the harness could not build or run the tiny model eagerly on CPU (never an
    architecture failure), ``fails`` for a failing device stage, else ``works`` or ``works-with-caveats``."""
    if row.get("stage") in ("build", "eager"):
        return "harness-error"
    if row.get("stage") is not None:
        return "fails"
    return "works-with-caveats" if caveats(row) else "works"
