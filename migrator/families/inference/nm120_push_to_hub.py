"""NM120: optimum-neuron's upload of a saved folder, `model.push_to_hub(save_directory, repository_id=...)`, becomes
the target class's own upload, `model.push_to_hub(repository_id)`, where the model is a migrated traced model,
sentence-transformers model or diffusion pipeline that this file saved to that folder (the folder then holds
exactly what the model's own upload writes). A migrated decoder's upload gets a TODO naming its owner's decision:
optimum-neuron's decoder upload left the weights out (its repository pointed at the original checkpoint), and
there is nothing compiled to share any more, so publishing the weights is a new choice."""

from __future__ import annotations

import libcst as cst

from migrator.cst_helpers import is_method_call, source_code
from migrator.families.inference.loads import split_args
from migrator.families.inference.state import HINTS, TRIGGERS, InferenceFile
from migrator.rules import Example, Rule, Severity
from migrator.transform import FileContext, Handler

PUSH_TO_HUB = Rule(
    "NM120",
    Severity.INFO,
    "`push_to_hub(save_directory, repository_id=...)` (optimum-neuron's upload of a saved folder) of a migrated "
    "model or pipeline saved to that folder earlier in the file",
    "Rewritten to `push_to_hub(repository_id, ...)`, the Transformers / Diffusers / sentence-transformers upload "
    "of the model itself (what its `save_pretrained` wrote to the folder); `private` and `token` are kept. The "
    "upload of a migrated decoder (NM101) is left with a TODO: optimum-neuron uploaded it without its weights, "
    "so whether to publish them is the owner's decision.",
    examples=(
        Example(
            before="""\
from optimum.neuron import NeuronStableDiffusionPipeline

pipe = NeuronStableDiffusionPipeline.from_pretrained("stabilityai/stable-diffusion-2-1", export=True)
pipe.save_pretrained("sd_neuron/")
pipe.push_to_hub("sd_neuron/", repository_id="my-org/sd-2-1", token=True)
""",
            after="""\
import os
import torch
from diffusers import StableDiffusionPipeline

os.environ.setdefault("HF_DEACTIVATE_ASYNC_LOAD", "1")

pipe = StableDiffusionPipeline.from_pretrained("stabilityai/stable-diffusion-2-1", torch_dtype=torch.bfloat16).to("neuron")
pipe.save_pretrained("sd_neuron/")
pipe.push_to_hub("my-org/sd-2-1", token=True)
""",
        ),
    ),
)
RULES = (PUSH_TO_HUB,)
# optimum-neuron's `push_to_hub(save_directory, repository_id, private, revision, token, endpoint)`
# (modeling_traced.py); the targets take the repository first and have `private` and `token`, and no
# `revision` (Diffusers) or `endpoint`.
_PARAMETERS = ("repository_id", "private", "revision", "token", "endpoint")
_KEPT = (
    "private",
    "token",
    "use_auth_token",
)  # use_auth_token: `token` before huggingface_hub 1.x (NM221 renames it)


class PushToHub(Handler):
    HINTS = HINTS | {"push_to_hub"}
    TRIGGERS = TRIGGERS

    def __init__(self, ctx: FileContext) -> None:
        super().__init__(ctx)
        self.file = ctx.state(InferenceFile)
        self.saved: dict[str, str] = {}  # migrated model -> the folder (its code) it was saved to

    def visit_Expr(self, node: cst.Expr) -> None:
        call = node.value
        if is_method_call(call, "save_pretrained") and call.args and call.args[0].keyword is None:
            model = source_code(call.func.value)
            if model in self.file.uploadable | self.file.decoders:
                self.saved[model] = source_code(call.args[0].value)

    def leave_Call(self, original: cst.Call, updated: cst.Call):
        if not is_method_call(original, "push_to_hub") or not original.args:
            return updated
        model = source_code(original.func.value)
        folder = original.args[0]
        if folder.keyword is not None or self.saved.get(model) != source_code(folder.value):
            return updated
        if model in self.file.decoders:
            self.ctx.todo(
                original,
                PUSH_TO_HUB,
                "`push_to_hub(save_dir, repository_id=...)` uploaded what optimum-neuron compiled for this decoder "
                "without its weights (the repository pointed at the original checkpoint); nothing is compiled ahead "
                "of time on TorchNeuron (each host compiles on first use), and the folder now holds the full weights",
                "your decision: publish a copy of the weights with `model.push_to_hub(repo_id)` (its first "
                "argument is the repository), or delete this upload",
            )
            return updated
        return self.file.guarded(self._rewrite, original, updated)

    def _rewrite(self, original: cst.Call, updated: cst.Call) -> cst.Call:
        args = split_args(original, updated, "this upload", positional=_PARAMETERS)
        if "repository_id" not in args.keywords or not set(args.order) <= {"repository_id", *_KEPT}:
            return updated  # `revision` / `endpoint`: NM501's TODO says what to decide
        repository = args.keywords["repository_id"][1].with_changes(
            keyword=None, equal=cst.MaybeSentinel.DEFAULT
        )
        self.file.report(original, PUSH_TO_HUB)
        new_args = [repository, *(args.keywords[name][1] for name in args.order if name in _KEPT)]
        separator = cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))
        return updated.with_changes(
            args=[arg.with_changes(comma=separator) for arg in new_args[:-1]]
            + [new_args[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)]
        )


HANDLER = PushToHub
