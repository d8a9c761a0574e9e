"""The probe of a forward-only task (an encoder's or a vision tower's feature extraction or classification), in
its own process.

As optimum-neuron exports them, the model runs at one static shape: a batch padded to a fixed sequence length,
or images at the checkpoint's image size.
1. eager reference on CPU: two batches of that shape (other tokens, other real lengths, padding masked; or
   other images);
2. forward: the same batches through ``torch.compile`` with the neuron backend on the device (or the
   simulator). A static-shape model compiles one graph: a recompile for the second batch, or a graph break,
   is a caveat (each is another neuronx-cc compile, or a CPU round trip, on a device);
3. compare: the compiled outputs against the reference within the dtype's tolerance: for feature extraction
   the last hidden state of the real tokens and the sentence embedding sentence-transformers' mean pooling
   makes of it, for image features the last hidden state and the pooled output, for classification the logits.

Failures are attributed (``attribution``), re-measured at a second tiny size before anyone is blamed
(``artifacts``) and checked against the device's raising ops (``severity``) as a text-generation row's are;
``verdict.decide_verdict`` turns the row into its verdict fields (the ``forward`` stage).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import torch

from compat_matrix import artifacts, severity
from compat_matrix.checkpoints import config_choice
from compat_matrix.compile_stats import CompileStats, graph_break_reason
from compat_matrix.errors import first_error_line
from compat_matrix.generation_runs import CPU, OutputsDiffer
from compat_matrix.probe_device import compile_backend, resolve_device
from compat_matrix.probes import (
    ProbeFailure,
    _attribute,
    _record_failure,
    configure_dynamo,
    finish,
    initial_measurement,
    timed,
)
from compat_matrix.schema import Cause
from compat_matrix.settings import ProbeSettings
from compat_matrix.static_inputs import PADDED_LENGTH, batches
from compat_matrix.tiny import PRIMARY, SECOND, TinySize, build_tiny_config
from standin import sim_backend

BFLOAT16 = dataclasses.replace(
    severity.BFLOAT16, change="AutoModel.from_pretrained(..., dtype=torch.bfloat16)"
)


def build_model(task: str, model_type: str, seed: int, dtype: str, size: TinySize = PRIMARY,
                overrides: dict | None = None) -> torch.nn.Module:  # fmt: skip
    """A tiny random-weight model with the task's head (eval mode); a dual encoder's image features are its
    vision tower's."""
    from transformers import AutoModel, AutoModelForImageClassification, AutoModelForSequenceClassification

    config = build_tiny_config(model_type, size, overrides)
    heads = {"text-classification": AutoModelForSequenceClassification,
             "image-classification": AutoModelForImageClassification}  # fmt: skip
    auto = heads.get(task, AutoModel)
    if task == "image-feature-extraction":
        config = getattr(config, "vision_config", config)
    # A head with several classes (DeiT, LeViT: with and without a distillation teacher) is chosen by
    # config.architectures, which a config built from its class lacks: the first is the plain head.
    classes = auto._model_mapping[type(config)]
    model_class = classes[0] if isinstance(classes, tuple) else classes
    torch.manual_seed(seed)
    return model_class._from_config(config, dtype=getattr(torch, dtype)).eval()


def outputs_of(task: str, output: Any, batch: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """What the task compares, on CPU in float32: logits; an image's hidden states (and pooled output); or the
    real tokens' hidden states and the mean sentence-transformers pools them to."""
    if task.endswith("-classification"):
        return {"logits": output.logits.float().cpu()}
    if task == "image-feature-extraction":
        pooled = getattr(output, "pooler_output", None)
        return {"last_hidden_state": output.last_hidden_state.float().cpu(),
                **({"pooler_output": pooled.float().cpu()} if pooled is not None else {})}  # fmt: skip
    from sentence_transformers.models import Pooling

    mask = batch["attention_mask"]
    hidden = output.last_hidden_state.float().cpu()
    pooled = Pooling(hidden.shape[-1], pooling_mode="mean")(
        {"token_embeddings": hidden, "attention_mask": mask}
    )["sentence_embedding"]
    return {"last_hidden_state": hidden[mask.bool()], "sentence_embedding": pooled}


def run_forward(task: str, model: torch.nn.Module, inputs: list[dict], device: torch.device,
                backend: str | None) -> list[dict[str, torch.Tensor]]:  # fmt: skip
    """Each batch through the model on ``device``, compiled with ``backend`` (None: uncompiled)."""
    model = model.to(device)
    run = torch.compile(model, backend=backend) if backend else model
    with torch.no_grad():
        return [
            outputs_of(task, run(**{k: v.to(device) for k, v in batch.items()}), batch) for batch in inputs
        ]


def max_diff(references: list[dict], measured: list[dict], strict: bool = True) -> float:
    """The largest difference from the reference; ``strict=False``: over the first outputs, those measured."""
    return max((ref[name] - got[name]).abs().max().item()
               for ref, got in zip(references, measured, strict=strict) for name in ref)  # fmt: skip


def compare(references: list[dict], measured: list[dict], tolerance: float, what: str) -> float:
    """The largest difference from the reference; raises OutputsDiffer past the tolerance."""
    diff = max_diff(references, measured)
    if not diff <= tolerance:
        raise OutputsDiffer(
            f"{what} outputs differ from the eager reference: max diff {diff:.3g} > {tolerance:g}"
        )
    return diff


def measure_forward(task, model, inputs, references, settings, device, tolerance, row) -> None:
    """The compiled forward and its compare, into ``row``; raises ProbeFailure as the stage failed."""
    stats = CompileStats()
    compiled = timed(row["probe_seconds"], "forward", "forward",
                     lambda: run_forward(task, model, inputs, device, compile_backend(settings)))  # fmt: skip
    compilations = stats.compilations()
    breaks = stats.graph_breaks()
    row["compile_count"] = len(compilations)
    row["recompile_reasons"] = stats.recompile_reasons()
    row["recompile_count"] = len(row["recompile_reasons"])
    row["graph_breaks"] = sum(breaks.values())
    row["graph_break_reasons"] = sorted(graph_break_reason(message) for message in breaks)
    row["_graph_break_messages"] = list(breaks)
    row["unique_graphs"] = stats.unique_graphs()
    row["outputs_match"] = False
    try:
        row["max_logit_diff"] = compare(references, compiled, tolerance, "compiled")
    except OutputsDiffer as error:
        raise ProbeFailure("compare", error) from error
    row["outputs_match"] = True


def probe_forward(name: str, settings: ProbeSettings) -> dict[str, Any]:
    """Run the forward probe of ``task/model_type`` in this process and return the measured fields of its row."""
    from compat_matrix.families import split_probe_name

    task, model_type = split_probe_name(name)
    configure_dynamo(settings)
    row = initial_measurement() | {"task": task}
    choice = config_choice(model_type, settings.config)
    row.update(choice.row_fields())

    def fresh_model(size: TinySize = PRIMARY, seed: int = settings.seed, dtype: str = settings.dtype):
        return build_model(task, model_type, seed, dtype, size, choice.overrides)

    try:
        model = timed(row["probe_seconds"], "build", "build", fresh_model)
        row["parameters"] = sum(p.numel() for p in model.parameters())
        row["attn_implementation"] = model.config._attn_implementation
        inputs = timed(row["probe_seconds"], "build", "build", lambda: batches(model, settings.seed))
        references = timed(row["probe_seconds"], "eager", "eager",
                           lambda: run_forward(task, model, inputs, CPU, None))  # fmt: skip
        device = timed(row["probe_seconds"], "build", "build", lambda: resolve_device(settings))
    except ProbeFailure as failure:
        reason = f"the tiny model cannot be built or run eagerly here: {first_error_line(failure.error)}"
        _record_failure(row, "forward_failure", failure, Cause.HARNESS, reason)
        return finish(row, settings)
    row["padded_shape"] = list(next(iter(inputs[0].values())).shape)
    tolerance = settings.tolerance(False)
    row["logit_tolerance"] = tolerance

    def measure(model, inputs, references, measured: dict) -> None:
        def rerun(backend: str | None, on_host: bool = False) -> None:
            where = CPU if on_host else device  # uncompiled: on the device, as the reason says
            compare(
                references,
                run_forward(task, fresh_model(), inputs, where, backend),
                tolerance,
                f"compiled ({backend})",
            )

        try:
            measure_forward(task, model, inputs, references, settings, device, tolerance, measured)
        except ProbeFailure as failure:
            _attribute(measured, "forward_failure", failure, rerun, settings, device)
        measured["forward_unsupported_ops"] = sim_backend.STATE.as_list()

    measure(model, inputs, references, row)
    judge_device_rules(task, fresh_model, inputs, settings, device, row)

    def remeasure(stage: str, size: TinySize, seed: int, exact: dict) -> dict:
        second = fresh_model(size, seed)
        second_inputs = batches(second, seed)
        measured = initial_measurement()
        measure(second, second_inputs, run_forward(task, second, second_inputs, CPU, None), measured)
        return measured

    def second_configs() -> list:
        return [fresh_model(SECOND).config]

    artifacts.guard(row, settings.seed, remeasure, second_configs, PADDED_LENGTH)
    return finish(row, settings)


def judge_device_rules(task, fresh_model, inputs, settings, device, row) -> None:
    """A compiled forward graph holding an op the device raises on: measure bfloat16 (the one-line change that
    applies to an encoder), then record the outcome as ``severity`` judges it."""

    def run_at(dtype: str) -> None:
        run_forward(task, fresh_model(dtype=dtype), inputs, device, compile_backend(settings))

    judge_forward_rules(row, settings, BFLOAT16, run_at)


def judge_forward_rules(row: dict, settings: ProbeSettings, bfloat16: severity.CodePath, run_at) -> None:
    """The forward stage's raising ops judged: ``run_at(dtype)`` runs the compiled stage again in ``bfloat16``'s
    dtype (not measured when the row already runs in it), and ``severity`` says whether that path avoids them."""
    raising = sim_backend.raising_findings(row.get("forward_unsupported_ops") or [])
    if not raising or row.get("forward_failure"):
        return
    row["device_raising_ops"] = sorted(raising)
    paths = [bfloat16] if settings.dtype != "bfloat16" else []

    def run_stage(path: severity.CodePath) -> dict:
        run_at(path.dtype)
        return {}

    results = severity.measure_code_paths(paths, run_stage)
    row["code_paths"] = [dict(result, stage="forward") for result in results]
    judgement = severity.stage_judgement("forward", raising, results, settings.dtype)
    if "failure" in judgement:
        row["forward_failure"] = judgement["failure"]
        if row["stage"] is None:
            row["stage"], row["error"] = "forward", judgement["failure"]["error"]
    else:
        row["avoided_by"] = judgement["avoided_by"]
        row["forward_device_rule_caveat"] = judgement["caveat"]
