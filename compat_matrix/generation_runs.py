"""Generation runs of a probe: the eager reference on CPU, teacher-forced generation with a static cache
(uncompiled, or through Transformers' auto-compile path), and the comparison of their logits. A causal LM
generates from one prompt per prompt length; an encoder-decoder from two batches at its encoder's static shape
(``static_inputs``), its decoder's self-attention cache static (Transformers' EncoderDecoderCache)."""

from __future__ import annotations

import collections
import math
from collections.abc import Callable
from typing import Any

import torch
import torch._dynamo
from torch._dynamo.utils import counters

from compat_matrix.compile_stats import (
    CompileStats,
    generalised,
    graph_break_reason,
    recompile_guard,
    record_prefill_ops,
)
from compat_matrix.probe_device import compile_backend, device_decode_path
from compat_matrix.schema import GENERATION_COMPILE_FIGURES
from compat_matrix.settings import ProbeSettings
from compat_matrix.static_inputs import batches
from compat_matrix.tiny import VOCAB
from standin import sim_backend

CPU = torch.device("cpu")

# Transformers' get_compiled_call returns the uncompiled __call__ for these model types.
NEVER_COMPILED_BY_TRANSFORMERS = ("llama4",)


class OutputsDiffer(ValueError):
    """Teacher-forced logits differ from the reference beyond the tolerance."""


def prompt(length: int, seed: int, device: torch.device) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed + length)
    # Ids start above the special tokens and stay below the ids remapped to the vocab's top.
    return torch.randint(3, VOCAB - 16, (1, length), generator=generator).to(device)


def generation_inputs(model, settings: ProbeSettings) -> list[dict[str, torch.Tensor]]:
    """What each generate call of a probe gets, on CPU: a causal LM's prompts (one per prompt length), or an
    encoder-decoder's two batches of the shape it is exported at."""
    if model.config.is_encoder_decoder:
        return batches(model, settings.seed)
    prompts = [prompt(length, settings.seed, CPU) for length in settings.prompt_lengths]
    return [{"input_ids": ids, "attention_mask": torch.ones_like(ids)} for ids in prompts]


def generate_kwargs(settings: ProbeSettings) -> dict[str, Any]:
    return {
        "max_new_tokens": settings.max_new_tokens,
        "min_new_tokens": settings.max_new_tokens,
        "do_sample": False,
        "output_logits": True,
        "return_dict_in_generate": True,
    }


class TeacherForcing:
    """A logits processor that picks the reference token at every step (per row of the batch), so every run sees
    the same inputs and a near-tie cannot send one run down another sequence; ``output_logits`` still returns the
    raw logits."""

    def __init__(self, reference: torch.Tensor):
        self.reference = reference  # (batch, length): the reference run's sequences

    def __call__(self, input_ids: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
        tokens = self.reference[:, input_ids.shape[1]].to(scores.device)
        forced = torch.full_like(scores, -math.inf)
        forced[torch.arange(len(tokens), device=scores.device), tokens] = 0
        return forced


def run_eager_reference(model, settings: ProbeSettings) -> list:
    """Greedy generation on CPU with the model's default cache: the reference tokens and logits."""
    with torch.no_grad():
        return [
            model.generate(**inputs, disable_compile=True, **generate_kwargs(settings))
            for inputs in generation_inputs(model, settings)
        ]


def forced_generate(model, settings: ProbeSettings, device, references: list, backend: str | None,
                    on_prompt: Callable[[Any], None] | None = None) -> list:  # fmt: skip
    """Teacher-forced generation with a static cache; compiled through Transformers' auto-compile path when
    ``backend`` is given (the CompileConfig Transformers builds for a neuron device), else uncompiled."""
    from transformers import CompileConfig, LogitsProcessorList

    compile_config = None
    # On a neuron device generate compiles by itself, with the CompileConfig Transformers builds for it.
    if backend is not None and not (device.type == "neuron" and backend == "neuron"):
        compile_config = CompileConfig(backend=backend, dynamic=False, mode="default")
        # Elsewhere this flag opts in to the same path.
        compile_config._compile_all_devices = device.type != "neuron"
    outputs = []
    with torch.no_grad():
        for inputs, reference in zip(generation_inputs(model, settings), references, strict=True):
            out = model.generate(
                **{name: value.to(device) for name, value in inputs.items()},
                cache_implementation="static",
                max_cache_len=settings.max_cache_len,
                compile_config=compile_config,
                disable_compile=backend is None,
                logits_processor=LogitsProcessorList([TeacherForcing(reference.sequences)]),
                **generate_kwargs(settings),
            )
            outputs.append(out)
            if on_prompt is not None:
                on_prompt(out)
    return outputs


def max_logit_diff(references: list, outputs: list) -> float:
    diffs = [
        (r_logit.float().cpu() - o_logit.float().cpu()).abs().max().item()
        for r, o in zip(references, outputs, strict=True)
        for r_logit, o_logit in zip(r.logits, o.logits, strict=True)
    ]
    finite = [d for d in diffs if math.isfinite(d)]
    return max(diffs) if diffs and len(finite) == len(diffs) else math.inf


def greedy_tokens_agree(references: list, outputs: list) -> bool:
    """Would the run have picked the reference token at every step by itself (no teacher forcing)?"""
    return all(
        torch.equal(r_logit.argmax(-1).cpu(), o_logit.argmax(-1).cpu())
        for r, o in zip(references, outputs, strict=True)
        for r_logit, o_logit in zip(r.logits, o.logits, strict=True)
    )


def check_match(diff: float, tolerance: float, what: str) -> None:
    if not diff <= tolerance:
        raise OutputsDiffer(f"{what} logits differ from the eager dynamic-cache reference: max diff {diff:.3g} > "
                            f"{tolerance:g}")  # fmt: skip


def run_compiled_generate(model, settings: ProbeSettings, device, references: list, row: dict) -> list:
    stats = CompileStats()
    eager_signatures: list[set] = []
    compiles_after_prompt: list[int] = []
    caches: list[str] = []

    first_prompt_reasons: list[str] = []

    def after_prompt(out) -> None:
        if not compiles_after_prompt:
            first_prompt_reasons.extend(stats.recompile_reasons())
        compiles_after_prompt.append(len(stats.compilations()))
        caches.append(type(getattr(out, "past_key_values", None)).__name__)

    seen: set[tuple] = set()
    with record_prefill_ops(model, seen), device_decode_path(model, device):
        # Each prompt's prefill signatures are recorded apart: the second prompt's new ones are compiles too.
        def on_prompt(out) -> None:
            eager_signatures.append(set(seen))
            seen.clear()
            after_prompt(out)

        outputs = forced_generate(model, settings, device, references, compile_backend(settings), on_prompt)
    compilations = stats.compilations()
    breaks = stats.graph_breaks()
    row["compile_count"] = len(compilations)
    row["compiled_generation"] = bool(compilations)
    row["generation_cache"] = caches[0] if caches else None
    row["recompile_reasons"] = stats.recompile_reasons()
    row["recompile_count"] = len(row["recompile_reasons"])
    # The first prompt alone: a guard failing at every decode step (a cache length, not a layer index)
    # fails once per new token, until the recompile limit stops the compiling.
    decode_steps = settings.max_new_tokens - 1
    guard = recompile_guard(first_prompt_reasons)
    same_guard = sum(1 for reason in first_prompt_reasons if generalised(reason) == guard)
    per_frame = collections.Counter(metric.co_name for metric in compilations)
    row["recompile_limit_hit"] = any(count >= settings.recompile_limit for count in per_frame.values())
    row["recompiles_every_step"] = same_guard >= min(decode_steps // 2, settings.recompile_limit - 1)
    row["recompile_guard"] = guard if row["recompiles_every_step"] else None
    row["graph_breaks"] = sum(breaks.values())
    row["graph_break_reasons"] = sorted({graph_break_reason(m) for m in breaks})
    if not compilations:
        row.update(dict.fromkeys(GENERATION_COMPILE_FIGURES))  # nothing compiled: nothing of these measured
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


def why_not_compiled(model, row: dict) -> str:
    """Why Transformers generated without torch.compile (compile_count 0)."""
    reasons = []
    if any(name in model.config.model_type for name in NEVER_COMPILED_BY_TRANSFORMERS):
        reasons.append("Transformers' get_compiled_call never compiles llama4 models (hybrid cache)")
    cache = row.get("generation_cache")
    if cache == "NoneType":
        reasons.append(
            "generate kept no Transformers cache object, so there is no static cache to compile with"
        )
    elif cache and cache != "StaticCache":
        reasons.append(f"generate used {cache}, not a compileable static cache")
    if not getattr(model, "_can_compile_fullgraph", False):
        reasons.append("the class sets _can_compile_fullgraph = False")
    return "; ".join(reasons) or "Transformers' auto-compile criteria were not met"
