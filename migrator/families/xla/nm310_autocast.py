"""NM310: autocast on the "xla" device becomes autocast on "neuron"."""

from __future__ import annotations

import libcst as cst

from migrator.cst_helpers import find_keyword, keyword_arg, string_value
from migrator.families.xla.names import AUTOCASTS, XLA_AUTOCAST
from migrator.families.xla.state import HINTS
from migrator.rules import Example, Rule, Severity
from migrator.transform import Handler

AUTOCAST = Rule(
    "NM310",
    Severity.INFO,
    '`torch.autocast("xla", ...)` / `torch_xla.amp.autocast(device, ...)`',
    'Rewritten to `torch.autocast(device_type="neuron", ...)`. In a PyTorch/XLA file, autocast on "cuda" '
    '(`torch.autocast("cuda")`, `torch.cuda.amp.autocast()`) gets a TODO: it does nothing to tensors on the '
    '"neuron" device, whose forward then runs in float32.',
    examples=(
        Example(
            before="""\
import torch

with torch.autocast("xla", dtype=torch.bfloat16):
    loss = model(**batch).loss
""",
            after="""\
import torch

with torch.autocast(device_type="neuron", dtype=torch.bfloat16):
    loss = model(**batch).loss
""",
        ),
    ),
)
RULES = (AUTOCAST,)


CUDA_AUTOCAST = "torch.cuda.amp.autocast"


class Autocast(Handler):
    CALLS = AUTOCASTS | {XLA_AUTOCAST, CUDA_AUTOCAST}
    HINTS = HINTS | {"autocast"}

    def leave_Call(self, original: cst.Call, updated: cst.Call):
        name = self.ctx.qualified(original.func)
        if name not in AUTOCASTS and name not in (XLA_AUTOCAST, CUDA_AUTOCAST):
            return updated
        device_type = find_keyword(updated, "device_type")
        positional = [arg for arg in updated.args if not arg.keyword]
        first = device_type or (positional[0] if positional else None)
        on_cuda = name == CUDA_AUTOCAST or (
            name in AUTOCASTS and first and string_value(first.value) == "cuda"
        )
        if on_cuda and "torch_xla" in self.ctx.source.identifiers:
            self.ctx.todo(
                original,
                AUTOCAST,
                'autocast on "cuda" does nothing to tensors on the "neuron" device, so this forward now runs in '
                "float32",
                'for mixed precision on Trainium, use torch.autocast(device_type="neuron", dtype=torch.bfloat16) '
                "(a path that also runs on GPUs can pass the model's device.type)",
            )
            return updated
        if name != XLA_AUTOCAST and (first is None or string_value(first.value) != "xla"):
            return updated
        if name == XLA_AUTOCAST and len(positional) > 1:
            self.ctx.todo(
                original,
                AUTOCAST,
                "torch_xla.amp.autocast takes (device, enabled, dtype) positionally",
                'rewrite it as torch.autocast(device_type="neuron", dtype=...) by hand',
            )
            return updated
        self.ctx.report(original, AUTOCAST)
        neuron = keyword_arg("device_type", cst.SimpleString('"neuron"'))
        rest = [arg for arg in updated.args if arg is not first]
        if rest:
            neuron = neuron.with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
        if name == XLA_AUTOCAST:
            self.ctx.add_import("torch")
            return cst.Call(func=cst.parse_expression("torch.autocast"), args=[neuron, *rest])
        return updated.with_changes(args=[neuron, *rest])


HANDLER = Autocast
