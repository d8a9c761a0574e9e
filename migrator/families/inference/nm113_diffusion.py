"""NM113: a `Neuron*Pipeline` diffusion pipeline exported at load becomes the Diffusers pipeline, moved to
device "neuron"; its export shapes become arguments of every pipeline call."""

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
    'Rewritten to the Diffusers pipeline, `from_pretrained(checkpoint, torch_dtype=...).to("neuron")`.',
    examples=(
        Example(
            before="""\
from optimum.neuron import NeuronStableDiffusionXLPipeline

pipe = NeuronStableDiffusionXLPipeline.from_pretrained(
    "stabilityai/stable-diffusion-xl-base-1.0", export=True, batch_size=1, height=1024, width=1024
)
""",
            after="""\
import os
import torch
from diffusers import StableDiffusionXLPipeline

os.environ.setdefault("HF_DEACTIVATE_ASYNC_LOAD", "1")

pipe = StableDiffusionXLPipeline.from_pretrained(
    "stabilityai/stable-diffusion-xl-base-1.0", torch_dtype=torch.bfloat16
).to("neuron")
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


class DiffusionPipeline(FromPretrainedRule):
    OWNERS = frozenset(t.DIFFUSERS_PIPELINES)

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
        if "device_ids" in args.keywords and len(_core_ids(args.keywords["device_ids"][1].value)) != 1:
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
        for name, (old, new) in args.keywords.items():
            if name in t.EXPORT_ONLY_ARGS or name == "tensor_parallel_size":
                file.report(old, "NM105", subject=name)
            elif name == "device_ids":  # one core: where the pipeline runs, which `.to(...)` now says
                (core,) = _core_ids(new.value)
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
                file.report(
                    old,
                    "NM104",
                    f"Dropped from the loader: pass {_PIPELINE_CALL_SHAPES[name]}= to every pipeline call instead "
                    "and keep it constant (each new shape compiles again on neuron).",
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
        load = file.retarget(
            updated, "diffusers", t.DIFFUSERS_PIPELINES[owner], owner, assemble(args, kept, extra)
        )
        return cst.Call(func=cst.Attribute(value=load, attr=cst.Name("to")), args=[cst.Arg(device)])


def _core_ids(value: cst.BaseExpression) -> list[cst.BaseExpression]:
    """The NeuronCore ids `device_ids=` names when it is written out (`[0]`, `0`), else none."""
    if isinstance(value, (cst.List, cst.Tuple)):
        return [element.value for element in value.elements]
    return [value] if isinstance(value, cst.Integer) else []


HANDLER = DiffusionPipeline
