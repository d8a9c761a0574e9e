"""The probes run for one architecture, inside its own process.

1. eager reference on CPU: greedy generation with the model's default (dynamic) cache;
2. generate: the same prompts, teacher-forced with the reference tokens, once uncompiled with a static cache on
   CPU (what every device inherits from Transformers) and once through Transformers' own auto-compile path
   with a static cache on the device (or the simulator);
3. compare: each step's logits of both against the reference (three-way), within a per-dtype tolerance;
4. train: one compiled training step per padded length.

An encoder-decoder (the seq2seq family's ``text2text-generation`` and ``automatic-speech-recognition``) runs
the same generation stages on two batches at its encoder's static shape, with an encoder-decoder static cache;
it has no training stage, since optimum-neuron exports those models for inference only.

The runs themselves are ``generation_runs`` and ``training_runs``, on the device ``probe_device`` picks, measured
by ``compile_stats``. A failing stage is attributed by ``attribution.attribute_failure``. ``probe_architecture`` returns the measured
part of a row; ``verdict.decide_verdict`` turns it into the verdict fields.
"""

from __future__ import annotations

import dataclasses
import math
import time
import traceback
from collections.abc import Callable
from typing import Any

import torch
import torch._dynamo
from torch._dynamo.utils import counters
from torch._subclasses.fake_tensor import FakeTensorMode

import standin
from compat_matrix import artifacts, severity
from compat_matrix.attribution import attribute_failure
from compat_matrix.checkpoints import config_choice
from compat_matrix.compile_stats import ops_named_in_graph_breaks
from compat_matrix.errors import first_error_line
from compat_matrix.families import judged_stages, split_probe_name
from compat_matrix.generation_runs import (
    CPU,
    OutputsDiffer,
    check_match,
    forced_generate,
    generation_inputs,
    greedy_tokens_agree,
    max_logit_diff,
    run_compiled_generate,
    run_eager_reference,
    why_not_compiled,
)
from compat_matrix.probe_device import (
    DeviceUnavailable,
    compile_backend,
    device_fallback_ops,
    on_standin,
    resolve_device,
)
from compat_matrix.schema import Cause
from compat_matrix.settings import ProbeSettings
from compat_matrix.tiny import PRIMARY, SECOND, TinySize, build_tiny_model
from compat_matrix.training_runs import run_training_step
from standin import sim_backend

MOE_MARKERS = ("num_experts", "num_local_experts", "n_routed_experts", "moe_num_experts")


class ProbeFailure(Exception):
    """A probe stage failed; carries the stage name and the underlying error."""

    def __init__(self, stage: str, error: BaseException):
        self.stage = stage
        self.error = error
        super().__init__(f"{stage}: {first_error_line(error)}")


def is_moe(model: torch.nn.Module) -> bool:
    config = model.config.get_text_config()
    return any(getattr(config, name, None) for name in MOE_MARKERS)


def timed(probe_seconds: dict[str, float], name: str, stage: str, fn: Callable[[], Any]) -> Any:
    start = time.perf_counter()
    try:
        return fn()
    except Exception as error:
        raise ProbeFailure(stage, error) from error
    finally:
        probe_seconds[name] = round(probe_seconds.get(name, 0.0) + time.perf_counter() - start, 3)


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


def probe_architecture(name: str, settings: ProbeSettings) -> dict[str, Any]:
    """Run every probe of a generation task's row (``families.probe_name``: a causal LM's model type, or
    ``task/model_type`` for an encoder-decoder) in this process and return the measured fields of its row."""
    task, model_type = split_probe_name(name)
    configure_dynamo(settings)
    row = initial_measurement() | {"task": task}
    choice = config_choice(model_type, settings.config)
    row.update(choice.row_fields())
    probe_seconds = row["probe_seconds"]

    def fresh_model(size: TinySize = PRIMARY, seed: int = settings.seed, dtype: str = settings.dtype,
                    exact: dict | None = None):  # fmt: skip
        return build_tiny_model(model_type, seed, getattr(torch, dtype), size, choice.overrides, exact, task)

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
    if model.config.is_encoder_decoder:  # the static shape its encoder input is exported at
        row["padded_shape"] = list(next(iter(generation_inputs(model, settings)[0].values())).shape)
    probe_generation(model, fresh_model, settings, device, references, tolerance, row)
    if "train" in judged_stages(task):
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
