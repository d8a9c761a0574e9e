"""NM322: torch_neuronx helpers that serve a model traced ahead of time with `torch_neuronx.trace`
(`DataParallel`, `dynamic_batch`, `async_load` / `lazy_load`, core placement, `replace_weights`...): on
TorchNeuron the model itself runs on device "neuron", so each gets a TODO naming what replaces it."""

from __future__ import annotations

import libcst as cst

from migrator.families.xla.names import TRACED_SERVING
from migrator.families.xla.state import HINTS
from migrator.rules import Example, Rule, Severity
from migrator.transform import Handler

TRACED_SERVING_HELPER = Rule(
    "NM322",
    Severity.ERROR,
    "A torch_neuronx helper for models traced with `torch_neuronx.trace` (`DataParallel`, `dynamic_batch`, "
    "`async_load`, `lazy_load`, `experimental.neuron_cores_context`, `replace_weights`, `analyze`...)",
    'Left in place with a TODO: there is no traced model on TorchNeuron (the model runs on device "neuron", '
    '`torch.compile(backend="neuron")`); the TODO says what replaces the helper: one process per NeuronCore '
    "with torchrun instead of DataParallel, fixed (padded) shapes instead of dynamic batching, `model.to(...)` "
    "instead of core placement, nothing instead of async / lazy loading.",
    examples=(
        Example(
            before="""\
import torch
import torch_neuronx

model = torch_neuronx.DataParallel(torch.jit.load("model.pt"))
""",
            after="""\
import torch
import torch_neuronx

# TODO(neuron-migrate): NM322 `torch_neuronx.DataParallel` works on models compiled ahead of time by torch_neuronx.trace; on TorchNeuron the model itself runs on device "neuron"; to use several NeuronCores, run one process per core with torchrun (each on `torch.device("neuron", LOCAL_RANK)`) and split the inputs between them; pad batches to one fixed size (no dynamic shapes)
model = torch_neuronx.DataParallel(torch.jit.load("model.pt"))
""",
        ),
    ),
)
RULES = (TRACED_SERVING_HELPER,)


class TracedServing(Handler):
    HINTS = HINTS
    TRIGGERS = frozenset(name.rsplit(".", 1)[1] for name in TRACED_SERVING)
    CALLS = frozenset(TRACED_SERVING)
    SYMBOLS = frozenset(TRACED_SERVING)  # `from torch_neuronx import DataParallel`: its calls get the TODO

    def leave_Call(self, original: cst.Call, updated: cst.Call):
        name = self.ctx.qualified(original.func)
        self.ctx.todo(
            original,
            TRACED_SERVING_HELPER,
            f"`{name}` works on models compiled ahead of time by torch_neuronx.trace; on TorchNeuron the model "
            'itself runs on device "neuron"',
            TRACED_SERVING[name],
            subject=name,
        )
        return updated


HANDLER = TracedServing
