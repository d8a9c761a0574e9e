"""The probes run for one architecture, inside its own process.

1. eager reference on CPU: greedy generation with the model's default (dynamic) cache;
2. generate: the same prompts, teacher-forced with the reference tokens, once uncompiled with a static cache on
   CPU (what every device inherits from Transformers) and once through Transformers' own auto-compile path
   with a static cache on the device (or the simulator);
3. compare: each step's logits of both against the reference (three-way), within a per-dtype tolerance;
4. train: one compiled training step per padded length.

A failing stage is attributed by ``attribution.attribute_failure``. ``probe_architecture`` returns the measured
part of a row; ``verdict.decide_verdict`` turns it into the verdict fields.
"""

from __future__ import annotations

import collections
import dataclasses
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
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.utils._python_dispatch import TorchDispatchMode

import standin
from compat_matrix import artifacts, severity
from compat_matrix.attribution import attribute_failure
from compat_matrix.checkpoints import config_choice
from compat_matrix.errors import first_error_line
from compat_matrix.schema import GENERATION_COMPILE_FIGURES, Cause
from compat_matrix.settings import ProbeSettings
from compat_matrix.tiny import PRIMARY, SECOND, VOCAB, TinySize, build_tiny_model
from standin import sim_backend

CPU = torch.device("cpu")
MOE_MARKERS = ("num_experts", "num_local_experts", "n_routed_experts", "moe_num_experts")
# Transformers' get_compiled_call returns the uncompiled __call__ for these model types.
NEVER_COMPILED_BY_TRANSFORMERS = ("llama4",)


class ProbeFailure(Exception):
    """A probe stage failed; carries the stage name and the underlying error."""

    def __init__(self, stage: str, error: BaseException):
        self.stage = stage
        self.error = error
        super().__init__(f"{stage}: {first_error_line(error)}")


class DeviceUnavailable(RuntimeError):
    """The worker cannot use the device the settings name."""


class OutputsDiffer(ValueError):
    """Teacher-forced logits differ from the reference beyond the tolerance."""


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


@contextmanager
def device_decode_path(model: torch.nn.Module, device: torch.device):
    """On a non-CPU device Transformers decodes MoE layers with ``batched_mm`` instead of ``grouped_mm``
    (``_optimize_model_for_decode``); the simulator on CPU takes the device's path too."""
    if device.type != "cpu" or not hasattr(model, "get_experts_implementation"):
        yield
        return
    original = model.get_experts_implementation()
    switched = {key: "batched_mm" if value == "grouped_mm" else value for key, value in original.items()}

    @contextmanager
    def as_on_a_device():
        model.set_experts_implementation(switched)
        try:
            yield
        finally:
            model.set_experts_implementation(original)

    if switched != original:
        model._optimize_model_for_decode = as_on_a_device
    try:
        yield
    finally:
        model.__dict__.pop("_optimize_model_for_decode", None)


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
                found.add(f"{op_rules[packet]['id']}: {packet} (graph break)")
    return sorted(found)


def recompile_guard(reasons: list[str]) -> str | None:
    """The guard that fails most often, with its numbers generalised (``== 7`` -> ``== N``)."""
    if not reasons:
        return None
    return collections.Counter(_generalised(reason) for reason in reasons).most_common(1)[0][0]


def _generalised(reason: str) -> str:
    return re.sub(r"\s+", " ", re.sub(r"\d+", "N", reason))


def on_standin(settings: ProbeSettings) -> bool:
    """The simulator on the neuron stand-in device (``--sim-device neuron``)."""
    return settings.backend == "neuron-sim" and settings.sim_device.split(":")[0] == "neuron"


def compile_backend(settings: ProbeSettings) -> str:
    """``neuron`` on a neuron device (the real one, or the stand-in's, which applies the neuron-sim rules)."""
    return "neuron" if settings.backend == "neuron" or on_standin(settings) else sim_backend.BACKEND_NAME


def resolve_device(settings: ProbeSettings) -> torch.device:
    """The device the compiled probes run on; raises DeviceUnavailable (inside the probe's error handling)."""
    if settings.backend == "neuron":
        try:
            import torch_neuronx  # noqa: F401  (registers the neuron device and the "neuron" dynamo backend)
        except Exception as error:
            raise DeviceUnavailable(f"cannot import torch_neuronx in the worker: {error}") from error
        count = getattr(getattr(torch, "neuron", None), "device_count", lambda: 0)()
        if not count:
            raise DeviceUnavailable("torch_neuronx is imported but the worker sees no Neuron device")
        return torch.device("neuron")
    if on_standin(settings):
        # Switched on here, after the fork: a worker server that ran a backward with it on would leave its
        # forked workers unable to run autograd (its device threads).
        import standin

        try:
            standin.activate()
        except standin.StandinUnavailable as error:
            raise DeviceUnavailable(f"--sim-device {settings.sim_device}: {error}") from error
    device = torch.device(settings.sim_device)
    if device.type != "cpu":
        module = getattr(torch, device.type, None)
        if module is None or not module.is_available():
            raise DeviceUnavailable(f"--sim-device {settings.sim_device}: no such device in this worker")
    return device


def device_fallback_ops(settings: ProbeSettings) -> list[str]:
    """Ops the device ran through TorchNeuron's CPU fallback: on the neuron backend what torch_neuronx tracked
    (``get_fallback_ops()``, op names), else what the simulator recorded."""
    if settings.backend != "neuron":
        return sorted(sim_backend.STATE.cpu_fallbacks)
    import torch_neuronx

    tracked = getattr(torch_neuronx, "get_fallback_ops", None)
    if not callable(tracked):
        return sorted(sim_backend.STATE.cpu_fallbacks)
    return sorted({str(op) for op in tracked()})


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


class TeacherForcing:
    """A logits processor that picks the reference token at every step, so every run sees the same inputs and
    a near-tie cannot send one run down another sequence; ``output_logits`` still returns the raw logits."""

    def __init__(self, reference: torch.Tensor, prompt_length: int):
        self.reference = reference.reshape(-1)
        self.prompt_length = prompt_length

    def __call__(self, input_ids: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
        token = self.reference[input_ids.shape[1]].to(scores.device)
        forced = torch.full_like(scores, -math.inf)
        forced[:, token] = 0
        return forced


def timed(probe_seconds: dict[str, float], name: str, stage: str, fn: Callable[[], Any]) -> Any:
    start = time.perf_counter()
    try:
        return fn()
    except Exception as error:
        raise ProbeFailure(stage, error) from error
    finally:
        probe_seconds[name] = round(probe_seconds.get(name, 0.0) + time.perf_counter() - start, 3)


def run_eager_reference(model, settings: ProbeSettings) -> list:
    """Greedy generation on CPU with the model's default cache: the reference tokens and logits."""
    references = []
    with torch.no_grad():
        for length in settings.prompt_lengths:
            ids = prompt(length, settings.seed, CPU)
            out = model.generate(
                ids, attention_mask=torch.ones_like(ids), disable_compile=True, **generate_kwargs(settings)
            )
            references.append(out)
    return references


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
        for length, reference in zip(settings.prompt_lengths, references, strict=True):
            ids = prompt(length, settings.seed, device)
            out = model.generate(
                ids,
                attention_mask=torch.ones_like(ids),
                cache_implementation="static",
                max_cache_len=settings.max_cache_len,
                compile_config=compile_config,
                disable_compile=backend is None,
                logits_processor=LogitsProcessorList([TeacherForcing(reference.sequences, length)]),
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
    same_guard = sum(1 for reason in first_prompt_reasons if _generalised(reason) == guard)
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


def padded_training_batch(model, raw_length: int, settings: ProbeSettings, device,
                          content: int = 0) -> dict[str, torch.Tensor]:  # fmt: skip
    """A right-padded batch whose length is rounded up to a multiple of ``pad_multiple`` (TRL >= 1.16);
    ``content`` > 0 draws other tokens for the same lengths."""
    padded = math.ceil(raw_length / settings.pad_multiple) * settings.pad_multiple
    generator = torch.Generator().manual_seed(settings.seed + raw_length + 7919 * content)
    ids = torch.randint(3, VOCAB - 16, (settings.train_batch_size, padded), generator=generator)
    mask = torch.zeros_like(ids)
    mask[:, :raw_length] = 1
    pad_id = getattr(model.config.get_text_config(), "pad_token_id", None)
    ids = ids.masked_fill(mask == 0, pad_id if isinstance(pad_id, int) else 0)
    labels = ids.masked_fill(mask == 0, -100)
    return {"input_ids": ids.to(device), "attention_mask": mask.to(device), "labels": labels.to(device)}


def run_training_step(model, settings: ProbeSettings, device, row: dict, backend: str | None,
                      content_step: bool = False) -> None:  # fmt: skip
    """One training step per padded length, compiled with ``backend`` (uncompiled when None). With
    ``content_step``, one more step at the first padded length with other tokens: compiles there depend on the
    data (expert token counts, a data-dependent branch), not on the padded length."""
    model.train()
    # What Trainer does with --torch_compile on neuron: accelerate compiles the model with dynamic=False.
    step = model if backend is None else torch.compile(model, backend=backend, dynamic=False)
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-3)
    stats = CompileStats()
    per_length = []
    lengths = []
    losses = []

    def one_step(batch: dict[str, torch.Tensor], recorded: bool = True) -> None:
        loss = step(**batch).loss
        if not torch.isfinite(loss):
            raise ValueError(f"training loss is not finite ({loss.item()}) at padded length {lengths[-1]}")
        if recorded:
            losses.append(loss.item())
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    for raw_length in settings.train_lengths:
        batch = padded_training_batch(model, raw_length, settings, device)
        lengths.append(batch["input_ids"].shape[1])
        row["train_lengths_started"] = len(lengths)
        before = len(stats.compilations())
        one_step(batch)
        per_length.append(len(stats.compilations()) - before)
    row["train_losses"] = losses
    per_frame = collections.Counter(metric.compile_id.split("/")[0] for metric in stats.compilations())
    row["train_recompile_limit_hit"] = any(count >= settings.recompile_limit for count in per_frame.values())
    measured_compiles = len(stats.compilations())
    if content_step:
        # The first batch again, then other tokens: what compiles on coming back to the first padded length
        # (module state a step changed, such as RWKV's layer rescaling after generation in eval mode) is not
        # the data's; only the second step's compiles are.
        before = measured_compiles
        try:
            one_step(
                padded_training_batch(model, settings.train_lengths[0], settings, device), recorded=False
            )
            before = len(stats.compilations())
            one_step(padded_training_batch(model, settings.train_lengths[0], settings, device, content=1))
        except Exception as error:  # noqa: BLE001  (the measured steps passed; this one is evidence only)
            row["train_content_error"] = first_error_line(error)
        row["train_content_compiles"] = len(stats.compilations()) - before
    row["train_recompile_reasons"] = stats.recompile_reasons()
    distinct = sorted(set(lengths))
    row["train_padded_lengths"] = lengths
    row["train_compile_count"] = measured_compiles
    row["train_compiles_per_length"] = dict(zip((str(n) for n in lengths), per_length, strict=True))
    # Each distinct padded length compiles the graphs of the first step once; anything more is a recompile.
    row["train_expected_compile_count"] = per_length[0] * len(distinct)
    breaks = stats.graph_breaks()
    row["train_graph_breaks"] = sum(breaks.values())
    row["train_graph_break_reasons"] = sorted({graph_break_reason(message) for message in breaks})
    row["_graph_break_messages"] = row.get("_graph_break_messages", []) + list(breaks)


def configure_dynamo(settings: ProbeSettings) -> None:
    torch._dynamo.reset()
    counters.clear()
    torch._dynamo.utils.clear_compilation_metrics()
    torch._dynamo.utils.set_compilation_metrics_limit(100_000)
    # Past the limit a frame runs eagerly, as on the device; the row records when that happened.
    torch._dynamo.config.recompile_limit = settings.recompile_limit
    torch._dynamo.config.fail_on_recompile_limit_hit = False
    if on_standin(settings):
        # FakeTensor's op cache, which the worker's warm-up filled on CPU tensors, can change which path AOT
        # autograd takes over the device's tensors: every row starts from an empty cache, as in a fresh process,
        # so a row does not depend on what ran before it.
        FakeTensorMode.cache_clear()
    sim_backend.reset()


def initial_measurement() -> dict[str, Any]:
    return {
        "stage": None, "error": None, "compile_count": None, "recompile_count": None, "recompile_reasons": [],
        "graph_breaks": None, "graph_break_reasons": [], "unsupported_ops": [], "cpu_fallback_ops": [],
        "outputs_match": None, "tokens_match": None, "max_logit_diff": None, "max_diff_static_vs_dynamic": None,
        "max_diff_compiled_vs_dynamic": None, "logit_tolerance": None, "compiled_generation": None,
        "recompiles_every_step": None, "recompile_guard": None, "attn_implementation": None,
        "train_compile_count": None, "train_padded_lengths": [], "unique_graphs": None,
        "eager_new_op_signatures": None, "generate_failure": None, "train_failure": None, "probe_seconds": {},
    }  # fmt: skip


def _record_failure(row: dict, key: str, failure: ProbeFailure, cause: Cause, reason: str) -> None:
    row[key] = {"stage": failure.stage, "error": first_error_line(failure.error), "cause": cause.value,
                "reason": reason}  # fmt: skip
    if row["stage"] is None:
        row["stage"] = failure.stage
        row["error"] = first_error_line(failure.error)
        row["traceback_tail"] = "".join(traceback.format_exception(failure.error)[-3:])[-2000:]


def probe_architecture(model_type: str, settings: ProbeSettings) -> dict[str, Any]:
    """Run every probe for one architecture in this process and return the measured fields of its row."""
    configure_dynamo(settings)
    row = initial_measurement()
    choice = config_choice(model_type, settings.config)
    row.update(choice.row_fields())
    probe_seconds = row["probe_seconds"]

    def fresh_model(size: TinySize = PRIMARY, seed: int = settings.seed, dtype: str = settings.dtype,
                    exact: dict | None = None):  # fmt: skip
        return build_tiny_model(model_type, seed, getattr(torch, dtype), size, choice.overrides, exact)

    try:
        model = timed(probe_seconds, "build", "build", fresh_model)
        row["parameters"] = sum(p.numel() for p in model.parameters())
        row["can_compile_fullgraph"] = bool(getattr(model, "_can_compile_fullgraph", False))
        row["attn_implementation"] = model.config._attn_implementation
        if is_moe(model):
            row["experts_implementation"] = model.config.get_text_config()._experts_implementation
        references = timed(probe_seconds, "eager", "eager", lambda: run_eager_reference(model, settings))
        device = timed(probe_seconds, "build", "build", lambda: resolve_device(settings))
    except ProbeFailure as failure:
        reason = (
            f"the worker cannot use the device: {first_error_line(failure.error)}"
            if isinstance(failure.error, DeviceUnavailable)
            else f"the tiny model cannot be built or run eagerly here: {first_error_line(failure.error)}"
        )
        _record_failure(row, "generate_failure", failure, Cause.HARNESS, reason)
        return finish(row, settings)
    tolerance = settings.tolerance(is_moe(model))
    row["logit_tolerance"] = tolerance
    probe_generation(model, fresh_model, settings, device, references, tolerance, row)
    probe_training(model, fresh_model, settings, device, row)
    start = time.perf_counter()
    judge_device_rules(model, fresh_model, settings, device, references, row)
    probe_seconds["code_paths"] = round(time.perf_counter() - start, 3)

    def remeasure(stage: str, size: TinySize, seed: int, exact: dict) -> dict:
        measured = initial_measurement()

        def again():
            return fresh_model(size, seed, exact=exact)

        second = again()
        if stage == "generate":
            second_references = run_eager_reference(second, settings)
            probe_generation(second, again, settings, device, second_references, tolerance, measured)
        else:
            probe_training(second, again, settings, device, measured)
        return measured

    start = time.perf_counter()
    artifacts.guard(
        row, settings.seed, remeasure, lambda: _configs_of(fresh_model(SECOND)), settings.max_cache_len
    )
    probe_seconds["artifact_guard"] = round(time.perf_counter() - start, 3)
    return finish(row, settings)


def _configs_of(model) -> list:
    config = model.config
    return [
        config,
        *(
            getattr(config, name)
            for name in getattr(config, "sub_configs", {})
            if getattr(config, name, None)
        ),
    ]


def judge_device_rules(model, fresh_model, settings, device, references, row) -> None:
    """A stage whose compiled graphs hold an op a device rule says raises: measure the code paths that may
    avoid it, then record the outcome (``severity``)."""
    for stage, key, findings in (("generate", "generate_failure", row.get("generate_unsupported_ops")),
                                 ("train", "train_failure", row.get("train_unsupported_ops"))):  # fmt: skip
        raising = sim_backend.raising_findings(findings or [])
        if not raising or row.get(key):
            continue
        row["device_raising_ops"] = sorted(set(row.get("device_raising_ops") or []) | set(raising))

        def run_stage(path: severity.CodePath, stage: str = stage) -> dict:
            alternative = fresh_model(dtype=path.dtype or settings.dtype)
            if path.experts_implementation:
                alternative.set_experts_implementation(path.experts_implementation)
            alternative.to(device)
            if stage == "generate":
                forced_generate(alternative, settings, device, references, compile_backend(settings))
                return {}
            measured: dict = {}
            one_length = dataclasses.replace(settings, train_lengths=settings.train_lengths[:1])
            run_training_step(alternative, one_length, device, measured, compile_backend(settings))
            same_dtype = (path.dtype or settings.dtype) == settings.dtype
            difference = abs(measured["train_losses"][0] - row["train_losses"][0])
            return {"first_loss": measured["train_losses"][0],
                    "loss_difference": difference if same_dtype else None}  # fmt: skip

        results = severity.measure_code_paths(
            severity.applicable_code_paths(model, settings.dtype), run_stage
        )
        row["code_paths"] = (row.get("code_paths") or []) + [dict(result, stage=stage) for result in results]
        judgement = severity.stage_judgement(stage, raising, results, settings.dtype)
        if "failure" in judgement:
            row[key] = judgement["failure"]
            if row["stage"] is None:
                row["stage"], row["error"] = stage, judgement["failure"]["error"]
        else:
            row["avoided_by"] = row.get("avoided_by") or judgement["avoided_by"]
            row[f"{stage}_device_rule_caveat"] = judgement["caveat"]


def _attribute(row: dict, key: str, failure: ProbeFailure, rerun: Callable[[str | None], None],
               settings: ProbeSettings, uncompiled_on: torch.device = CPU) -> None:  # fmt: skip
    start = time.perf_counter()
    where = "CPU" if uncompiled_on.type == "cpu" else uncompiled_on.type
    if uncompiled_on.type != "cpu" and standin.is_active():
        where += " (stand-in)"
    cause, reason = attribute_failure(failure.error, rerun, simulated=settings.backend == "neuron-sim",
                                      uncompiled_on=where, standin=on_standin(settings))  # fmt: skip
    seconds = row["probe_seconds"]
    seconds["attribution"] = round(seconds.get("attribution", 0.0) + time.perf_counter() - start, 3)
    _record_failure(row, key, failure, cause, reason)


def probe_generation(model, fresh_model, settings, device, references, tolerance, row) -> None:
    """Eager static cache on CPU, then compiled static cache on the device, both against the reference."""
    probe_seconds = row["probe_seconds"]
    try:
        static = timed(probe_seconds, "eager_static", "generate",
                       lambda: forced_generate(model, settings, CPU, references, None))  # fmt: skip
    except ProbeFailure as failure:
        reason = f"uncompiled static-cache generation on CPU already fails: {first_error_line(failure.error)}"
        _record_failure(row, "generate_failure", failure, Cause.TRANSFORMERS, reason)
        return
    static_diff = max_logit_diff(references, static)
    row["max_diff_static_vs_dynamic"] = _finite(static_diff)

    def rerun(backend: str | None, on_host: bool = False) -> None:
        where = CPU if on_host else device
        outputs = forced_generate(fresh_model().to(where), settings, where, references, backend)
        check_match(max_logit_diff(references, outputs), tolerance, f"compiled ({backend})")

    try:
        compiled = timed(probe_seconds, "generate", "generate",
                         lambda: run_compiled_generate(model.to(device), settings, device, references, row))  # fmt: skip
    except ProbeFailure as failure:
        row["generate_unsupported_ops"] = sim_backend.STATE.as_list()
        _attribute(row, "generate_failure", failure, rerun, settings, device)
        return
    row["generate_unsupported_ops"] = sim_backend.STATE.as_list()
    diff = max_logit_diff(references, compiled)
    row["max_diff_compiled_vs_dynamic"] = row["max_logit_diff"] = _finite(diff)
    row["tokens_match"] = greedy_tokens_agree(references, compiled)
    row["outputs_match"] = diff <= tolerance
    if not static_diff <= tolerance:
        error = OutputsDiffer(f"eager static-cache logits differ from the eager dynamic-cache reference: max "
                              f"diff {static_diff:.3g} > {tolerance:g}")  # fmt: skip
        reason = f"uncompiled static-cache generation on CPU already differs ({first_error_line(error)})"
        _record_failure(row, "generate_failure", ProbeFailure("compare", error), Cause.TRANSFORMERS, reason)
    elif not row["outputs_match"]:
        error = OutputsDiffer(f"compiled static-cache logits differ from the eager dynamic-cache reference: "
                              f"max diff {diff:.3g} > {tolerance:g}")  # fmt: skip
        _attribute(row, "generate_failure", ProbeFailure("compare", error), rerun, settings, device)
    elif not row["compiled_generation"]:
        row["not_compiled_because"] = why_not_compiled(model, row)


# A frame at Dynamo's recompile limit runs eagerly, so it cannot show whether other data would compile again.
CONTENT_CHECK_RECOMPILE_LIMIT = 64


def content_compiles_past_the_limit(fresh_model, settings, device) -> int:
    """Graphs compiled for a second batch of the first padded length with other tokens, on a fresh model with
    the recompile limit raised: the measured steps hit the default limit, which hides data-dependent ones."""
    one_length = dataclasses.replace(settings, train_lengths=settings.train_lengths[:1])
    measured: dict = {}
    with (
        sim_backend.findings_apart(),
        torch._dynamo.config.patch(recompile_limit=CONTENT_CHECK_RECOMPILE_LIMIT),
    ):
        run_training_step(fresh_model().to(device), one_length, device, measured, compile_backend(settings),
                          content_step=True)  # fmt: skip
    return measured["train_content_compiles"]


def probe_training(model, fresh_model, settings, device, row) -> None:
    def rerun(backend: str | None, on_host: bool = False) -> None:
        # Up to the length that failed: the confirmation repeats what failed, not more.
        failed_at = row.get("train_lengths_started") or len(settings.train_lengths)
        up_to = dataclasses.replace(settings, train_lengths=settings.train_lengths[:failed_at])
        where = CPU if backend is None or on_host else device
        run_training_step(fresh_model().to(where), up_to, where, {}, backend)

    torch._dynamo.reset()  # the decode graphs are done; training compiles its own
    generation_findings = sim_backend.STATE
    sim_backend.reset()  # the training step's findings apart, then folded into the row's
    start = time.perf_counter()
    try:
        run_training_step(
            model.to(device), settings, device, row, compile_backend(settings), content_step=True
        )
    except Exception as error:  # noqa: BLE001  (attributed below)
        row["probe_seconds"]["train"] = round(time.perf_counter() - start, 3)
        _attribute(row, "train_failure", ProbeFailure("train", error), rerun, settings)
    else:
        if row.get("train_recompile_limit_hit") and not row.get("train_content_compiles"):
            row["train_content_compiles"] = content_compiles_past_the_limit(fresh_model, settings, device)
            row["train_content_check"] = f"recompile_limit raised to {CONTENT_CHECK_RECOMPILE_LIMIT}"
        row["probe_seconds"]["train"] = round(time.perf_counter() - start, 3)
    row["train_unsupported_ops"] = sim_backend.STATE.as_list()
    generation_findings.merge(sim_backend.STATE)
    sim_backend.STATE = generation_findings


def _finite(value: float) -> float | None:
    return value if math.isfinite(value) else None


def finish(row: dict, settings: ProbeSettings) -> dict:
    messages = row.pop("_graph_break_messages", [])
    row["unsupported_ops"] = sorted(
        set(sim_backend.STATE.as_list()) | set(ops_named_in_graph_breaks(messages))
    )
    row["lowering_unverified_ops"] = sim_backend.lowering_unverified(sim_backend.STATE.compiled_ops)
    row["cpu_fallback_ops"] = device_fallback_ops(settings)
    row["decomposed_ops"] = sorted(sim_backend.STATE.decomposed)
    return row
