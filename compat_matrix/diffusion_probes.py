"""The probe of a text-to-image pipeline (the diffusion family), in its own process.

The pipeline is the checkpoint's own Diffusers class with its scheduler, built tiny (``pipelines``: the first
checkpoint of the family in ``data/pipelines.json``, at its default image size). As optimum-neuron compiles a
pipeline, each component runs at one static shape: the denoiser (UNet or transformer) at the latent size, with
the batch classifier-free guidance doubles, and the VAE decoder. The probe runs the pipeline's own loop of
``DENOISE_STEPS`` scheduler steps for three requests (``REQUESTS``): a prompt with the pipeline's default
guidance, another prompt, the first without guidance (``guidance_scale=1``); then it decodes the first request's
latents to an image as the pipeline does.

1. eager reference on CPU: the three requests' latents and the image;
2. forward: the same with the denoiser and the VAE decode compiled with the neuron backend on the device (or the
   simulator). Recorded: the graphs compiled (``compile_count``), Dynamo's recompiles across the steps of a
   request or for another prompt (``recompile_count``, a caveat: on a device each is another neuronx-cc compile),
   and the graphs compiled when guidance turns off (``guidance_recompiles``: the denoiser's batch halves, a shape
   of its own; said in the reason, not a caveat). A failure names its part (the denoising loop, the VAE decode),
   and the figures of the parts that ran before it are kept;
3. compare: latents and image against the reference, within the dtype's tolerance times each output's largest
   magnitude (``compare_outputs``).

A failure is attributed, re-measured on the pipeline at the second tiny size with another seed, and checked
against the device's raising ops with bfloat16 as the alternative, as the forward probe's are; the one judged
stage is ``forward``. A failure the uncompiled pipeline already has is the libraries' own (cause
``transformers``: Diffusers or Transformers code, uncompiled on CPU).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import torch

from compat_matrix import artifacts, pipelines, severity
from compat_matrix.compile_stats import CompileStats, graph_break_reason, recompile_reasons
from compat_matrix.errors import first_error_line
from compat_matrix.forward_probes import judge_forward_rules, max_diff
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
from compat_matrix.tiny import PRIMARY, TinySize
from standin import sim_backend

# Enough steps that a guard failing at every step shows as recompiles growing with them; few, as each costs a
# denoiser call on CPU.
DENOISE_STEPS = 3
PROMPTS = ("a photo of an astronaut riding a horse on the moon", "a red house by a lake at dusk")


@dataclasses.dataclass(frozen=True)
class Request:
    prompt: str
    guided: bool  # the pipeline's default guidance; False: guidance_scale=1 (no classifier-free guidance)


# The denoising requests; then the first one's latents are decoded to an image (the last part).
REQUESTS = (
    Request(PROMPTS[0], guided=True),
    Request(PROMPTS[1], guided=True),
    Request(PROMPTS[0], guided=False),
)
UNGUIDED = 2
PIPELINE_BFLOAT16 = dataclasses.replace(
    severity.BFLOAT16, change="DiffusionPipeline.from_pretrained(..., torch_dtype=torch.bfloat16)"
)


class PartFailed(RuntimeError):
    """A failure in one part of the pipeline (its denoising loop, its VAE decode), named in the message."""


def build_pipeline(model_type: str, seed: int, dtype: str, size: TinySize = PRIMARY):
    pipeline = pipelines.build(pipelines.family_spec(model_type), size, seed)  # (float32)
    return pipeline if dtype == "float32" else pipeline.to(dtype=getattr(torch, dtype))


def denoiser(pipeline) -> str:
    return "unet" if "unet" in pipeline.components else "transformer"


def run_request(pipeline, request: Request, seed: int) -> torch.Tensor:
    """One request through the pipeline's own denoising loop: its latents, on CPU in float32."""
    options = {} if request.guided else {"guidance_scale": 1.0}
    with torch.no_grad():
        output = pipeline(
            request.prompt,
            num_inference_steps=DENOISE_STEPS,
            output_type="latent",
            generator=torch.Generator("cpu").manual_seed(seed),
            **options,
        )
    return output.images.float().cpu()


def decode(pipeline, latents: torch.Tensor) -> torch.Tensor:
    """The image the pipeline decodes from its latents, as its own `__call__` does (Flux packs them 2 x 2 into a
    sequence, and shifts them), on CPU in float32."""
    vae = pipeline.vae
    if latents.dim() == 3:
        side = pipeline.default_sample_size * pipeline.vae_scale_factor
        latents = pipeline._unpack_latents(latents, side, side, pipeline.vae_scale_factor)
    latents = latents / vae.config.scaling_factor + (vae.config.shift_factor or 0.0)
    with torch.no_grad():
        return vae.decode(latents.to(vae.device, vae.dtype), return_dict=False)[0].float().cpu()


def compare_outputs(references: list[dict], measured: list[dict], tolerance: float, what: str) -> float:
    """The largest difference from the reference; raises OutputsDiffer where an output is further from its
    reference than the tolerance times that reference's largest magnitude (at least 1): a tiny random pipeline's
    latents reach hundreds (PixArt's about 900, where float32's own step is 6e-5), so a few float32 steps from
    summing in another order must pass there, as they do for logits of magnitude 1."""
    largest = 0.0
    for reference, got in zip(references, measured, strict=True):
        for name, expected in reference.items():
            diff = (expected - got[name]).abs().max().item()
            allowed = tolerance * max(1.0, expected.abs().max().item())
            if not diff <= allowed:
                raise OutputsDiffer(
                    f"{what} outputs differ from the eager reference: {name} max diff {diff:.3g} > {allowed:.3g} "
                    f"({tolerance:g} x its largest magnitude)"
                )
            largest = max(largest, diff)
    return largest


def compiled(pipeline, device: torch.device, backend: str | None):
    """The pipeline on ``device``, its denoiser and VAE decode compiled with ``backend`` (None: uncompiled), as a
    user compiles them (``pipe.unet.compile(...)``)."""
    pipeline.set_progress_bar_config(disable=True)
    pipeline = pipeline.to(device)
    if backend:
        getattr(pipeline, denoiser(pipeline)).compile(backend=backend)
        pipeline.vae.decode = torch.compile(pipeline.vae.decode, backend=backend)
    return pipeline


def run_parts(
    pipeline, seed: int, marks: list[CompileStats] | None = None, outputs: list | None = None
) -> list[dict[str, torch.Tensor]]:
    """Every request's latents, then the first one's image; ``marks``: Dynamo's figures snapshotted as each part
    starts; ``outputs``: where each part's output goes (those before a failing part stay there)."""
    parts = [("the denoising loop", "latents", lambda request=request: run_request(pipeline, request, seed))
             for request in REQUESTS]  # fmt: skip
    parts.append(("the VAE decode", "image", lambda: decode(pipeline, outputs[0]["latents"])))
    outputs = [] if outputs is None else outputs
    for name, output, run in parts:
        if marks is not None:
            marks.append(CompileStats())
        try:
            outputs.append({output: run()})
        except Exception as error:
            raise PartFailed(f"{name}: {first_error_line(error)}") from error
    return outputs


def per_part(marks: list[CompileStats]) -> list[list]:
    """The compilations each part made (a mark counts from its part's start to now)."""
    made = [mark.compilations() for mark in marks]
    counts = [len(each) for each in made] + [0]
    return [each[: counts[index] - counts[index + 1]] for index, each in enumerate(made)]


def measure_forward(pipeline, references, settings, device, tolerance, row) -> None:
    """The compiled parts and their compare, into ``row``; raises ProbeFailure as the stage failed (the figures
    of the parts that ran are kept)."""
    marks: list[CompileStats] = []
    outputs: list[dict[str, torch.Tensor]] = []

    def run() -> list[dict[str, torch.Tensor]]:
        return run_parts(compiled(pipeline, device, compile_backend(settings)), settings.seed, marks, outputs)

    row["outputs_match"] = False
    try:
        timed(row["probe_seconds"], "forward", "forward", run)
    except ProbeFailure:
        if (
            outputs
        ):  # how far the parts that ran are from the reference: a figure, the failure stays the row's
            row["max_logit_diff"] = max_diff(references, outputs, strict=False)
        raise
    finally:
        if marks:
            _compile_figures(marks, row)
    try:
        row["max_logit_diff"] = compare_outputs(references, outputs, tolerance, "compiled")
    except OutputsDiffer as error:
        raise ProbeFailure("compare", error) from error
    row["outputs_match"] = True


def _compile_figures(marks: list[CompileStats], row: dict) -> None:
    """Graphs, recompiles (the unguided request's apart) and graph breaks of the requests that started."""
    parts = per_part(marks)
    row["compile_count"] = sum(len(part) for part in parts)
    row["guidance_recompiles"] = len(parts[UNGUIDED]) if len(parts) > UNGUIDED else None
    row["recompile_reasons"] = [reason for index, made in enumerate(parts) if index != UNGUIDED
                                for reason in recompile_reasons(made)]  # fmt: skip
    row["recompile_count"] = len(row["recompile_reasons"])
    breaks = marks[0].graph_breaks()
    row["graph_breaks"] = sum(breaks.values())
    row["graph_break_reasons"] = sorted(graph_break_reason(message) for message in breaks)
    row["_graph_break_messages"] = list(breaks)
    row["unique_graphs"] = marks[0].unique_graphs()


def probe_diffusion(name: str, settings: ProbeSettings) -> dict[str, Any]:
    """Run the probe of ``text-to-image/FAMILY`` in this process and return the measured fields of its row."""
    from compat_matrix.families import split_probe_name

    task, model_type = split_probe_name(name)
    configure_dynamo(settings)
    spec = pipelines.family_spec(model_type)
    row = initial_measurement() | {
        "task": task,
        "checkpoint": spec.checkpoint,
        "denoise_steps": DENOISE_STEPS,
    }

    def fresh(size: TinySize = PRIMARY, seed: int = settings.seed, dtype: str = settings.dtype):
        return build_pipeline(model_type, seed, dtype, size)

    try:
        pipeline = timed(row["probe_seconds"], "build", "build", fresh)
        row["parameters"] = sum(p.numel() for p in getattr(pipeline, denoiser(pipeline)).parameters())
        references = timed(row["probe_seconds"], "eager", "eager",
                           lambda: run_parts(compiled(pipeline, CPU, None), settings.seed))  # fmt: skip
        device = timed(row["probe_seconds"], "build", "build", lambda: resolve_device(settings))
    except ProbeFailure as failure:
        reason = f"the tiny pipeline cannot be built or run eagerly here: {first_error_line(failure.error)}"
        _record_failure(row, "forward_failure", failure, Cause.HARNESS, reason)
        return finish(row, settings)
    row["padded_shape"] = list(references[0]["latents"].shape)

    def measure(pipeline, references, seed: int, measured: dict, size: TinySize = PRIMARY) -> None:
        tolerance = measured["logit_tolerance"] = settings.tolerance(False)

        def rerun(backend: str | None, on_host: bool = False) -> None:
            where = CPU if on_host else device  # uncompiled: on the device, as the reason says
            again = compiled(fresh(size, seed), where, backend)
            compare_outputs(references, run_parts(again, seed), tolerance, f"compiled ({backend})")

        try:
            measure_forward(pipeline, references, dataclasses.replace(settings, seed=seed), device, tolerance,
                            measured)  # fmt: skip
        except ProbeFailure as failure:
            _attribute(measured, "forward_failure", failure, rerun, settings, device)
        measured["forward_unsupported_ops"] = sim_backend.STATE.as_list()

    measure(pipeline, references, settings.seed, row)

    def run_at(dtype: str) -> None:  # the raising ops' alternative: the pipeline loaded in bfloat16
        run_parts(compiled(fresh(dtype=dtype), device, compile_backend(settings)), settings.seed)

    judge_forward_rules(row, settings, PIPELINE_BFLOAT16, run_at)

    def remeasure(stage: str, size: TinySize, seed: int, exact: dict) -> dict:
        second = fresh(size, seed)
        second_references = run_parts(compiled(second, CPU, None), seed)
        measured = initial_measurement()
        measure(second, second_references, seed, measured, size)
        return measured

    # No position top-k in a pipeline: nothing to break ties in.
    artifacts.guard(row, settings.seed, remeasure, lambda: [], 0)
    return finish(row, settings)
