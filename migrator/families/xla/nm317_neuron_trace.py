"""NM317: `torch_neuronx.trace(model, example_inputs)` becomes the model on device "neuron" compiled with
`torch.compile(backend="neuron")`, where the file's whole flow is followed (`traced.py`: the traced model only
called and saved with `torch.jit.save`, its saved file loaded in the same function); its calls keep the traced
model's contract (CPU tensors in and out, at the example's shapes), its save writes the model's own weights,
and a load of that file in the same function is the compiled model itself (NM323). A traced model that leaves
its function is `_NeuronCompiled(model)`, which keeps that contract wherever it goes."""

from __future__ import annotations

import libcst as cst
from libcst.helpers import parse_template_expression

from migrator.cst_helpers import argument, dotted_name, source_code
from migrator.families.torchscript_loads import TorchscriptLoads
from migrator.families.xla.state import _NEURON_COMPILED_SOURCE, _TO_DEVICE_SOURCE, HINTS, XlaFile
from migrator.families.xla.traced import NEURON_COMPILED, NEURONX_TRACE, TracedFlow, saved_path
from migrator.rules import Example, Rule, Severity
from migrator.transform import Handler

_BY_HAND = (
    'run the model on device "neuron" and compile it with `torch.compile(model, backend="neuron", '
    "fullgraph=True, dynamic=False)`; nothing is traced or saved ahead of time"
)

NEURON_TRACE = Rule(
    "NM317",
    Severity.WARNING,
    "`torch_neuronx.trace(model, example_inputs)` ahead-of-time compilation (and inf1's `torch.neuron.trace`, "
    "whose other APIs are NM321's)",
    "Rewritten, where the traced model is only called, saved with `torch.jit.save` and loaded in the same "
    'function: the model moves to device "neuron", its parameters frozen as a traced model\'s are '
    '(`requires_grad_(False)`), and is compiled with `torch.compile(model, backend="neuron", fullgraph=True, '
    "dynamic=False)`; its calls move their inputs to the device and their outputs back to the CPU as the traced "
    "model did (a model loaded with `torchscript=True`, which NM221 drops: its ModelOutput's `.to_tuple()`, the "
    "tuple its trace returned) (keep the inputs padded to the example's shapes: another shape compiles again); "
    "`torch.jit.save(traced, path)` saves the model's weights (`state_dict`) instead. There is no ahead-of-time "
    "artifact: the first call compiles, and the neuron compile cache takes the artifact's place; "
    "for inf1 the `torch_neuron` import goes too once nothing else uses it; the traced model's `.save(path)` is a save; "
    "`compiler_args` (and `dynamic_batch_size`: each new batch size compiles again) are dropped (neuronx-cc's default `--auto-cast matmult` no longer applies: the model runs "
    "in its own dtype), and so are the options that split the graph between the device and the CPU (`fallback`, "
    "`minimum_segment_size`, `subgraph_builder_function`, `partitioner_config`: the compiled model runs whole on "
    "the device). A traced model that leaves its function (returned, handed on) becomes "
    "`_NeuronCompiled(model)`, a helper added to the file that keeps the traced model's contract wherever it "
    "goes: the model on the device compiled the same way, called with CPU tensors in and out, and written by "
    "`torch.jit.save` / `.save(path)` as the model and its flags, which `_NeuronCompiled.load(path)` (NM323) compiles "
    "again.",
    examples=(
        Example(
            before="""\
import torch
import torch_neuronx

traced = torch_neuronx.trace(model, example_inputs, compiler_args=["--model-type", "transformer"])
torch.jit.save(traced, "model_neuron.pt")
logits = traced(*example_inputs)[0]
""",
            after=f"""\
import torch


{_TO_DEVICE_SOURCE.strip()}


traced = torch.compile(model.to("neuron").requires_grad_(False), backend="neuron", fullgraph=True, dynamic=False)
torch.save(_to_device(model.state_dict(), "cpu"), "model_neuron.pt")
logits = _to_device(traced(*_to_device(example_inputs, "neuron")), "cpu")[0]
""",
        ),
        Example(
            before="""\
import torch
import torch_neuron

model_neuron = torch.neuron.trace(model, example_inputs=example)
model_neuron.save("model_inf1.pt")
model_neuron = torch.jit.load("model_inf1.pt")
scores = model_neuron(*example)[0]
""",
            after=f"""\
import torch


{_TO_DEVICE_SOURCE.strip()}


model_neuron = torch.compile(model.to("neuron").requires_grad_(False), backend="neuron", fullgraph=True, dynamic=False)
torch.save(_to_device(model.state_dict(), "cpu"), "model_inf1.pt")
scores = _to_device(model_neuron(*_to_device(example, "neuron")), "cpu")[0]
""",
        ),
        Example(
            before="""\
import torch
import torch_neuronx


def compile_model(model, example_inputs):
    return torch_neuronx.trace(model, example_inputs)


torch.jit.save(compile_model(model, example_inputs), "model_neuron.pt")
""",
            after=f"""\
import torch
import copy
import zipfile


{_TO_DEVICE_SOURCE.strip()}


{_NEURON_COMPILED_SOURCE.strip()}


def compile_model(model, example_inputs):
    return _NeuronCompiled(model)


torch.jit.save(compile_model(model, example_inputs), "model_neuron.pt")
""",
        ),
    ),
)
RULES = (NEURON_TRACE,)


class NeuronTrace(Handler):
    HINTS = HINTS
    TRIGGERS = frozenset({"trace"})
    DECIDES = frozenset({NEURONX_TRACE})

    def __init__(self, ctx) -> None:
        super().__init__(ctx)
        self.file = ctx.state(XlaFile)

    def visit_Module(self, node: cst.Module) -> None:
        flows = self.file.traced()
        for flow in flows.flows.values():
            self.ctx.watch(flow.traced)
        for call in flows.calls:
            self.ctx.watch(call.func.value)

    def leave_Call(self, original: cst.Call, updated: cst.Call):
        flows = self.file.traced()
        if original in flows.flows:
            return self._compiled(original, flows.flows[original])
        if original in flows.saves:
            return self._saved(original, updated, flows.saves[original])
        if original in flows.loads:
            self.ctx.report(
                original,
                "NM323",
                f"`{flows.loads[original].traced}` is the compiled model whose weights this file saved there: "
                "the load is that model (the file holds its `state_dict` now)",
            )
            return cst.Name(flows.loads[original].traced)
        if original in flows.calls:
            return self._called(
                updated, flows.calls[original].trace in self.ctx.state(TorchscriptLoads).traces
            )
        if original in flows.wrapped:
            return self._wrapped(original, updated)
        if self.ctx.qualified(original.func) == NEURONX_TRACE:
            self.ctx.todo(
                original,
                NEURON_TRACE,
                f"`{NEURONX_TRACE}` is rewritten only where its result is only called, saved with torch.jit.save "
                "and loaded in the same function, or returned from it",
                _BY_HAND,
            )
        return updated

    def _wrapped(self, original: cst.Call, updated: cst.Call) -> cst.BaseExpression:
        """A traced model used beyond one function (returned, handed on): `_NeuronCompiled(model)`, which keeps
        its contract wherever it goes (CPU tensors in and out; `torch.jit.save` writes the weights)."""
        model = argument(updated, 0, "func")  # given (`TracedFlows.wrapped`)
        options = [arg.keyword.value for arg in updated.args if arg.keyword and arg.keyword.value != "func"]
        dropped = f"; `{'`, `'.join(options)}` dropped" if options else ""
        self.ctx.report(
            original,
            NEURON_TRACE,
            f'`{source_code(model)}` on device "neuron" in `_NeuronCompiled`, which the traced model\'s users '
            "call and save as before (CPU tensors in and out; torch.jit.save writes it for `_NeuronCompiled.load`), compiled with "
            f'torch.compile(backend="neuron") when first called (keep inputs padded to the example\'s shapes){dropped}',
        )
        self.file.helpers.add(NEURON_COMPILED)
        self.ctx.remove_import("torch_neuronx")
        head = (dotted_name(original.func) or "").partition(".")[0]
        if head != "torch_neuronx":
            self.ctx.remove_import("torch_neuronx", None, head)
        if original in self.ctx.state(TorchscriptLoads).traces:  # its trace returned tuples
            return parse_template_expression("_NeuronCompiled({model}, tuples=True)", model=model)
        return parse_template_expression("_NeuronCompiled({model})", model=model)

    def leave_SimpleStatementLine(self, original: cst.SimpleStatementLine, updated: cst.SimpleStatementLine):
        """`traced = torch.jit.load(path)` of the compiled model's own file: it already is that model."""
        statement = original.body[0] if len(original.body) == 1 else None
        if isinstance(statement, cst.Assign) and statement.value in self.file.traced().loads:
            flow = self.file.traced().loads[statement.value]
            if source_code(statement.targets[0].target) == flow.traced:
                return cst.RemoveFromParent()
        return updated

    def _compiled(self, original: cst.Call, flow: TracedFlow) -> cst.BaseExpression:
        dropped = f"; `{'`, `'.join(flow.options)}` dropped" if flow.options else ""
        self.ctx.report(
            original,
            NEURON_TRACE,
            f'`{flow.traced}` is `{flow.model}` on device "neuron", compiled with torch.compile(backend="neuron") '
            f"when first called, at the shapes of `{flow.example}` (keep inputs padded to them); there is no "
            f"ahead-of-time artifact: the neuron compile cache takes its place{dropped}",
            subject=flow.traced,
        )
        self.ctx.add_import("torch")
        if flow.api == NEURONX_TRACE:  # inf1's import is NM321's
            self.ctx.remove_import("torch_neuronx")
            head = (dotted_name(original.func) or "").partition(".")[0]
            if head != "torch_neuronx":  # `import torch_neuronx as <head>`
                self.ctx.remove_import("torch_neuronx", None, head)
        return parse_template_expression(
            'torch.compile({model}.to("neuron").requires_grad_(False), backend="neuron", fullgraph=True, dynamic=False)',
            model=cst.Name(flow.model),
        )

    def _saved(self, original: cst.Call, updated: cst.Call, flow: TracedFlow) -> cst.BaseExpression:
        self.ctx.report(
            original,
            NEURON_TRACE,
            f"the traced artifact is replaced by `{flow.model}`'s weights (`state_dict`): load them into the same "
            f'model class, move it to device "neuron" and compile it',
            subject=flow.traced,
        )
        self.file.helpers.add("_to_device")
        path = saved_path(self.ctx, updated, flow.traced)
        return parse_template_expression(
            'torch.save(_to_device({model}.state_dict(), "cpu"), {path})',
            model=cst.Name(flow.model),
            path=path,
        )

    def _called(self, updated: cst.Call, tuples: bool) -> cst.BaseExpression:
        """The traced model took and returned CPU tensors: the compiled one runs on the device. `tuples`: the
        traced model was loaded with `torchscript=True`, which NM221 dropped; its trace returned the tuple of the
        ModelOutput the model now returns."""
        self.file.helpers.add("_to_device")
        args = [
            arg.with_changes(
                value=parse_template_expression('_to_device({value}, "neuron")', value=arg.value)
            )
            for arg in updated.args
        ]
        call = updated.with_changes(args=args)
        if tuples:
            call = parse_template_expression("{call}.to_tuple()", call=call)
        return parse_template_expression('_to_device({call}, "cpu")', call=call)


HANDLER = NeuronTrace
