"""NM323: `torch.jit.load` of a traced Neuron model: a file this same file saved a traced model to
(`torch.jit.save(traced, path)` or `traced.save(path)` of a `torch_neuronx.trace` / `torch.neuron.trace` result,
by the same literal path, the same variable, or a variable holding that literal), or, in a legacy script that saves
no TorchScript model itself, any file it reads while it does `import torch_neuronx` (the import registers the
Neuron ops a traced model is made of: a serving script imports it for `torch.jit.load` alone). Other
`torch.jit.load` calls are not matched: nothing in the file proves what they read (a script that saves its models
names them; TorchNeuron code may import torch_neuronx and load plain TorchScript)."""

from __future__ import annotations

import libcst as cst
from libcst.helpers import parse_template_expression

from migrator.cst_helpers import argument, descendants, dotted_name, is_method_call, source_code
from migrator.families.xla.names import (
    INF1_CALLS,
    INF1_NAMESPACE,
    INF1_PACKAGE,
    RUN_ON_NEURON,
    TRACE_CALLS,
    TRACED_SERVING,
)
from migrator.families.xla.state import _NEURON_COMPILED_SOURCE, _TO_DEVICE_SOURCE, XlaFile
from migrator.families.xla.traced import NEURON_COMPILED, NEURONX_TRACE, path_keys
from migrator.rules import Example, Rule, Severity
from migrator.transform import Handler

TRACED_LOAD = Rule(
    "NM323",
    Severity.ERROR,
    "`torch.jit.load` (or `torch.load`) of the file the same script saved a traced Neuron model to (`torch_neuronx.trace`, "
    "`torch.neuron.trace`), or in a script that saves no TorchScript model but imports `torch_neuronx` (or inf1's "
    "`torch.neuron` / `torch_neuron`)",
    "Where NM317 rewrote the trace and the load is in the same function as the trace (or both at module "
    "level), the load becomes the compiled model itself (the file now holds its `state_dict`: NM317's first "
    "example). Where NM317 made the trace `_NeuronCompiled(model)` (its result leaves its function) and only such "
    "compiled models are saved to the file, a load of it in any function, with `torch.jit.load` or `torch.load`, "
    "becomes `_NeuronCompiled.load(path)`: the file holds the model and its flags, which it compiles again (a "
    "TorchScript file an earlier torch_neuronx run saved there stops it with an error saying to delete that file, "
    "so that the program compiles the model again); the path is the same expression, or names bound to the same "
    "expressions (`path = os.path.join(args.dir, NAME)` in both functions). Otherwise left in place with a TODO "
    '(a `torch.load` of such a path too): load the original model on device "neuron" and compile it '
    'with `torch.compile(backend="neuron")` instead of the traced artifact. Other `torch.jit.load` calls of a script '
    "that saves TorchScript models, or that does not import `torch_neuronx`, are left alone, and so are other "
    "`torch.load` calls.",
    examples=(
        Example(
            before="""\
import torch
import torch_neuronx


def export(model, example_inputs):
    torch.jit.save(torch_neuronx.trace(model, example_inputs), "model_neuron.pt")


def serve():
    return torch.jit.load("model_neuron.pt")
""",
            after=f"""\
import torch
import copy
import zipfile


{_TO_DEVICE_SOURCE.strip()}


{_NEURON_COMPILED_SOURCE.strip()}


def export(model, example_inputs):
    torch.jit.save(_NeuronCompiled(model), "model_neuron.pt")


def serve():
    return _NeuronCompiled.load("model_neuron.pt")
""",
        ),
        Example(
            before="""\
import torch
import torch_neuronx

model = torch.jit.load("/opt/ml/model/encoder_neuron.pt")
""",
            after="""\
import torch
import torch_neuronx

# TODO(neuron-migrate): NM323 `"/opt/ml/model/encoder_neuron.pt"` is read in a script that imports torch_neuronx (which registers the ops of a model traced with `torch_neuronx.trace`): a traced Neuron model, compiled ahead of time for the XLA-era flow (fixed shapes), made by a script that is not this file; decide which model class and checkpoint that script traced (the file does not say): load it with `<Class>.from_pretrained(<checkpoint>, device_map="neuron")` (or build the class and `load_state_dict` the weights that script saves once migrated: NM317 makes `torch.jit.save` save `model.state_dict()`), compile it with `torch.compile(model, backend="neuron", fullgraph=True, dynamic=False)` and call it with inputs on the device, padded to the traced shapes
model = torch.jit.load("/opt/ml/model/encoder_neuron.pt")
""",
        ),
    ),
)
RULES = (TRACED_LOAD,)

JIT_LOAD = "torch.jit.load"
TORCH_LOAD = "torch.load"
# The one decision a load of an artifact traced elsewhere leaves: which model and weights it was traced from.
ELSEWHERE = (
    "decide which model class and checkpoint that script traced (the file does not say): load it with "
    '`<Class>.from_pretrained(<checkpoint>, device_map="neuron")` (or build the class and `load_state_dict` the '
    "weights that script saves once migrated: NM317 makes `torch.jit.save` save `model.state_dict()`), compile it "
    'with `torch.compile(model, backend="neuron", fullgraph=True, dynamic=False)` and call it with inputs on '
    "the device, padded to the traced shapes"
)
INF1_WHAT = "compiled for inf1 (Inferentia 1), which TorchNeuron does not run on"
XLA_WHAT = "compiled ahead of time for the XLA-era flow (fixed shapes)"
JIT_SAVE = "torch.jit.save"
NEURONX = "torch_neuronx"
# What the migrated file saves where it saved a traced model (NM317), said after the load's TODO.
WEIGHTS_SAVED = " (as migrated, the file saves the model's weights there instead)"
COMPILED_SAVED = (
    " (as migrated, the file saves there a `_NeuronCompiled`, which `_NeuronCompiled.load(path)` compiles again, "
    "but nothing here proves that this load reads that file: its path is another expression, or names bound "
    "another way, or something else is saved there too)"
)


class TracedLoad(Handler):
    HINTS = frozenset({"jit", "load"})
    TRIGGERS = frozenset({*(name.rsplit(".", 1)[1] for name in TRACE_CALLS), NEURONX, INF1_PACKAGE, "neuron"})
    CALLS = frozenset({JIT_LOAD, TORCH_LOAD})

    def __init__(self, ctx) -> None:
        super().__init__(ctx)
        # key of a path a traced model was saved to -> its trace API, and what the migrated file saves there
        self.saved: dict[str, tuple[str, str]] | None = None
        self.saves = False  # the file saves a TorchScript model itself: it knows what each load reads

    def leave_Call(self, original: cst.Call, updated: cst.Call):
        path = argument(original, 0, "f")
        traced = self.ctx.state(XlaFile).traced()
        if path is None or original in traced.loads:  # NM317 rewrote its flow
            return updated
        if original in traced.compiled_loads:
            self.ctx.report(
                original,
                TRACED_LOAD,
                f"`{traced.compiled_loads[original]}` holds the model this file wraps in `_NeuronCompiled` (NM317) and "
                "saves there: `_NeuronCompiled.load` compiles it again (a file an earlier run traced with "
                "torch_neuronx stops it with an error saying to delete that file)",
            )
            self.ctx.state(XlaFile).helpers.add(NEURON_COMPILED)
            return parse_template_expression("_NeuronCompiled.load({path})", path=argument(updated, 0, "f"))
        if self.saved is None:
            self.saved = self._saved_paths()
        trace, saved = next(
            (
                self.saved[key]
                for key in path_keys(self.ctx.state(XlaFile).traced().literals, path)
                if key in self.saved
            ),
            (None, ""),
        )
        code = source_code(path)
        if trace in INF1_CALLS:
            why = f"`{code}` holds the model this file traced with `{trace}` and saved, {INF1_WHAT}"
        elif trace is not None:
            why = f"`{code}` holds the model this file traced with `{trace}` and saved, {XLA_WHAT}{saved}"
        elif self.ctx.qualified(original.func) == TORCH_LOAD:
            return updated  # a checkpoint, unless the file saved a traced model there
        elif not self.saves and (served := self._served()) is not None:
            why = (
                f"`{code}` is read in a script that imports {served}, made by a script that is not this file"
            )
            self.ctx.todo(original, TRACED_LOAD, why, ELSEWHERE, subject=code)
            return updated
        else:
            return updated
        self.ctx.todo(original, TRACED_LOAD, why, RUN_ON_NEURON, subject=code)
        return updated

    def _serves_traced_models(self) -> bool:
        """`import torch_neuronx` in a script that is not TorchNeuron code already (no `torch.neuron` device
        module, no "neuron" device) and calls none of the serving helpers NM322 already flags."""
        source = self.ctx.source
        return (
            NEURONX in self.ctx.imported.values()
            and "neuron" not in source.identifiers
            and "neuron" not in source.strings
            and not any(name.rsplit(".", 1)[1] in source.identifiers for name in TRACED_SERVING)
        )

    def _served(self) -> str | None:
        """What the `torch.jit.load` of a script that saves no TorchScript model itself reads, by the package it
        imports for the traced model's ops; None where it imports neither."""
        if self._serves_traced_models():
            return (
                "torch_neuronx (which registers the ops of a model traced with `torch_neuronx.trace`): a traced "
                f"Neuron model, {XLA_WHAT}"
            )
        if self._serves_inf1_models():
            return (
                f"torch-neuron (`{INF1_NAMESPACE}`, which registers the ops of a model traced with "
                f"`{INF1_NAMESPACE}.trace`): a traced model {INF1_WHAT}"
            )
        return None

    def _serves_inf1_models(self) -> bool:
        """`import torch.neuron` / `import torch_neuron` (inf1's torch-neuron, imported for `torch.jit.load` of
        its traced models) in a script that uses no "neuron" device, as TorchNeuron code would."""
        return "neuron" not in self.ctx.source.strings and any(
            dotted_name(alias.name) in (INF1_NAMESPACE, INF1_PACKAGE)
            for node in descendants(self.ctx.module, cst.Import)
            for alias in node.names
        )

    def _saved_paths(self) -> dict[str, tuple[str, str]]:
        """Once per file, on its first `torch.jit.load`: the paths traced models are saved to, wherever the
        save is (a function that loads may come before the code that traces)."""
        nodes = descendants(self.ctx.module, (cst.Assign, cst.Call))
        traced: dict[str, str] = {}  # code of a variable / attribute holding a traced model -> its trace API
        for node in nodes:
            if not isinstance(node, cst.Assign):
                continue
            trace = self._trace(node.value)
            for target in node.targets:
                if trace is not None:
                    traced[source_code(target.target)] = trace
        saved: dict[str, tuple[str, str]] = {}
        flows = self.ctx.state(XlaFile).traced()
        for call in nodes:
            if not isinstance(call, cst.Call):
                continue
            if self.ctx.qualified(call.func) == JIT_SAVE:
                self.saves = True
                model, path = argument(call, 0, "m"), argument(call, 1, "f")
            elif is_method_call(call, "save"):
                model, path = call.func.value, argument(call, 0, "f")
            else:
                continue
            if model is None or path is None:
                continue
            trace = self._trace(model) or traced.get(source_code(model))
            if call in flows.compiled_saves:  # `helper_that_traces(...).save(path)` too
                trace, became = trace or NEURONX_TRACE, COMPILED_SAVED
            else:
                became = WEIGHTS_SAVED if call in flows.saves else ""
            if trace is not None:
                self.saves = True
                saved.update(
                    dict.fromkeys(path_keys(self.ctx.state(XlaFile).traced().literals, path), (trace, became))
                )
        return saved

    def _trace(self, node: cst.BaseExpression) -> str | None:
        if isinstance(node, cst.Call):
            name = self.ctx.qualified(node.func)
            if name in TRACE_CALLS:
                return name
        return None


HANDLER = TracedLoad
