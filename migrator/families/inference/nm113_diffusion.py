"""NM113: a `Neuron*Pipeline` diffusion pipeline exported at load becomes the Diffusers pipeline, moved to
device "neuron"; the image size and images per prompt it was compiled for become arguments of every call of the
pipeline in the file (so each call keeps the compiled shape), and `device_ids=[0, 1]` (the U-Net on both cores
of one Inferentia device) becomes the one device."""

from __future__ import annotations

import libcst as cst

from migrator.cst_helpers import keyword_arg, literal_value, source_code
from migrator.families.inference import tables as t
from migrator.families.inference.loads import (
    Unmapped,
    assemble,
    auto_cast,
    check_hub_id,
    check_known,
    check_not_compiled,
    shape_dropped,
    split_args,
    string,
)
from migrator.families.inference.state import FromPretrainedRule
from migrator.rules import Example, Rule, Severity

DIFFUSION_PIPELINE = Rule(
    "NM113",
    Severity.INFO,
    "A `Neuron*Pipeline` diffusion pipeline exported at load",
    'Rewritten to the Diffusers pipeline, `from_pretrained(checkpoint, torch_dtype=...).to("neuron")`; the '
    "export's `height`, `width` and `num_images_per_prompt` are passed to every call of the pipeline in the file "
    "(literal values, or names of a module-level load), so each call keeps the compiled shape.",
    examples=(
        Example(
            before="""\
from optimum.neuron import NeuronStableDiffusionXLPipeline

pipe = NeuronStableDiffusionXLPipeline.from_pretrained(
    "stabilityai/stable-diffusion-xl-base-1.0", export=True, batch_size=1, height=1024, width=1024
)
image = pipe("an astronaut riding a horse").images[0]
""",
            after="""\
import os
import torch
from diffusers import StableDiffusionXLPipeline

os.environ.setdefault("HF_DEACTIVATE_ASYNC_LOAD", "1")

pipe = StableDiffusionXLPipeline.from_pretrained(
    "stabilityai/stable-diffusion-xl-base-1.0", torch_dtype=torch.bfloat16
).to("neuron")
image = pipe("an astronaut riding a horse", height=1024, width=1024).images[0]
""",
        ),
    ),
)
RULES = (DIFFUSION_PIPELINE,)
# Diffusion export shapes that are arguments of the pipeline call in Diffusers (typo included, sic).
_PIPELINE_CALL_SHAPES = {
    "height": "height",
    "width": "width",
    "num_images_per_prompt": "num_images_per_prompt",
    "num_image_per_prompt": "num_images_per_prompt",
}


# optimum-neuron 0.4.5 has no `device_ids` (it sets the U-Net on both NeuronCores of one device itself, for
# classifier-free guidance: modeling_diffusion.py `set_parallel_mode`); older versions took `device_ids=[0, 1]`
# for the same placement.
_BOTH_CORES = (
    "`device_ids=[0, 1]` put the U-Net on both NeuronCores of one Inferentia device (classifier-free guidance "
    'split over them): the pipeline moves to one `"neuron"` device instead, whose logical core spans two '
    "physical cores on trn2; the images are the same."
)


class DiffusionPipeline(FromPretrainedRule):
    OWNERS = frozenset(t.DIFFUSERS_PIPELINES)
    CALLS = None  # the loads and the calls of the pipelines they load

    def __init__(self, ctx) -> None:
        super().__init__(ctx)
        self.pipelines: dict[str, dict[str, cst.BaseExpression]] = {}  # name -> the shapes its calls pass

    def _rewrite(self, original: cst.Call, updated: cst.Call, owner: str) -> cst.Call:
        file = self.file
        args = split_args(original, updated, "this pipeline load", file.visible_dicts())
        for name in args.order:
            prefix = name.split("_")[0] + "_" if name.startswith(("lora_", "ip_adapter_")) else None
            key = {"lora_": "lora_model_ids", "ip_adapter_": "ip_adapter_id"}.get(prefix, name)
            if key in t.DIFFUSION_MANUAL_ARGS and not (
                name == "tensor_parallel_size" and literal_value(args.keywords[name][1].value) == 1
            ):
                raise Unmapped("NM116", f"`{name}`: {t.DIFFUSION_MANUAL_ARGS[key]}")
        cores = _core_ids(args.keywords["device_ids"][1].value) if "device_ids" in args.keywords else []
        if "device_ids" in args.keywords and len(cores) != 1 and [literal_value(c) for c in cores] != [0, 1]:
            raise Unmapped(
                "NM116",
                "`device_ids` puts the pipeline on several NeuronCores (or on cores chosen at run time), which "
                "optimum-neuron replicated it over (data parallel)",
                "run one process per core (torchrun) with the pipeline on its device, or use a single device",
            )
        check_not_compiled(args, "a pipeline")
        check_hub_id(args)
        check_known(
            args,
            t.KEPT_LOAD_ARGS | t.EXPORT_ONLY_ARGS | t.TRACED_SHAPE_ARGS,
            (*t.DTYPE_ARGS, "tensor_parallel_size", "device_ids"),
        )
        # Diffusion export defaults: auto_cast="matmul", auto_cast_type="bf16" (modeling_diffusion.py `_export`).
        casts = auto_cast(args, default="matmul")
        dtype = cst.parse_expression("torch.bfloat16") if casts else None
        device: cst.BaseExpression = string("neuron")
        call_args: dict[
            str, cst.BaseExpression
        ] = {}  # the export's shapes that are arguments of a pipeline call
        for name, (old, new) in args.keywords.items():
            if name in t.EXPORT_ONLY_ARGS or name == "tensor_parallel_size":
                file.report(old, "NM105", subject=name)
            elif name == "device_ids" and len(cores) == 2:
                file.report(old, "NM105", _BOTH_CORES, subject=name)
            elif name == "device_ids":  # one core: where the pipeline runs, which `.to(...)` now says
                (core,) = cores
                if literal_value(core) != 0:
                    device = cst.parse_expression('torch.device("neuron", 0)')
                    device = device.with_changes(
                        args=[device.args[0], device.args[1].with_changes(value=core)]
                    )
                    file.add_import("torch")
                file.report(
                    old,
                    "NM105",
                    f"`device_ids` placed the pipeline on NeuronCore {source_code(core)}: it moves to "
                    f"`{source_code(device)}` instead.",
                    subject=name,
                )
            elif name in _PIPELINE_CALL_SHAPES:
                call_args[_PIPELINE_CALL_SHAPES[name]] = new.value
                file.report(
                    old,
                    "NM104",
                    f"Dropped from the loader: passed as {_PIPELINE_CALL_SHAPES[name]}= to every call of the "
                    "pipeline in this file; keep it constant in calls from elsewhere (each new shape compiles "
                    "again on neuron).",
                )
            elif name in t.TRACED_SHAPE_ARGS:
                file.report(old, "NM104", shape_dropped(name, new.value, file.ctx), subject=name)
            elif name == "torch_dtype" or (name == "auto_cast_type" and casts):
                dtype = file.dtype(name, old, new)
            elif name == "auto_cast_type":
                file.report(old, "NM105", subject=name)
        if dtype is not None:
            file.add_import("torch")
        extra = [keyword_arg("torch_dtype", dtype)] if dtype is not None else []
        kept = [name for name in args.order if name in t.KEPT_LOAD_ARGS]
        file.report(original, DIFFUSION_PIPELINE)
        if original in file.assigned_calls:
            target = source_code(file.assigned_calls[original])
            file.effects.append(lambda: file.uploadable.add(target))
        self._fix_call_shapes(original, call_args)
        load = file.retarget(
            updated, "diffusers", t.DIFFUSERS_PIPELINES[owner], owner, assemble(args, kept, extra)
        )
        return cst.Call(func=cst.Attribute(value=load, attr=cst.Name("to")), args=[cst.Arg(device)])

    def _fix_call_shapes(self, load: cst.Call, shapes: dict[str, cst.BaseExpression]) -> None:
        """The calls of the pipeline this load is assigned to get the shapes it was compiled for: the values
        must mean the same at the call, so only literals, or names of a module-level load (module globals)."""
        target = self.file.assigned_calls.get(load)
        if target is None or not shapes:
            return
        if self.ctx.functions and not all(literal_value(value) is not ... for value in shapes.values()):
            return
        name = source_code(target)
        self.file.effects.append(lambda: self.ctx.watch(name))
        self.file.effects.append(lambda: self.pipelines.__setitem__(name, shapes))

    def leave_Call(self, original: cst.Call, updated: cst.Call):
        shapes = self.pipelines.get(source_code(original.func))
        if shapes is None:
            return super().leave_Call(original, updated)
        given = {arg.keyword.value for arg in original.args if arg.keyword is not None}
        if any(arg.star for arg in original.args):
            return updated  # `**kwargs` may hold them: the NM104 finding of the load says what to pass
        added = [keyword_arg(key, value) for key, value in shapes.items() if key not in given]
        if not added:
            return updated
        self.ctx.report(
            original,
            DIFFUSION_PIPELINE,
            f"{', '.join(source_code(arg).strip() for arg in added)} passed: the shapes the pipeline was compiled "
            "for, fixed at every call (each new shape compiles again on neuron).",
        )
        args = list(updated.args)
        args[-1] = args[-1].with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
        return updated.with_changes(args=[*args, *added])


def _core_ids(value: cst.BaseExpression) -> list[cst.BaseExpression]:
    """The NeuronCore ids `device_ids=` names when it is written out (`[0]`, `0`), else none."""
    if isinstance(value, (cst.List, cst.Tuple)):
        return [element.value for element in value.elements]
    return [value] if isinstance(value, cst.Integer) else []


HANDLER = DiffusionPipeline
