"""NM321: the inf1 package `torch_neuron` (torch-neuron) and the `torch.neuron.trace` / `DataParallel` /
`analyze_model` / core-placement APIs its import registers: a toolchain for a chip TorchNeuron does not run
on. TorchNeuron's own `torch.neuron` device module (`is_available`, `device_count`) is not matched."""

from __future__ import annotations

from functools import cached_property

import libcst as cst

from migrator.cst_helpers import descendants, dotted_name
from migrator.families.xla.names import INF1_APIS, INF1_CALLS, INF1_NAMESPACE, INF1_PACKAGE
from migrator.families.xla.state import HINTS, XlaFile
from migrator.rules import Example, Rule, Severity
from migrator.transform import Handler

INF1 = Rule(
    "NM321",
    Severity.ERROR,
    "The inf1 (Inferentia 1) toolchain: `import torch_neuron` / `import torch.neuron`, `torch.neuron.trace` / "
    "`trace_module`, `torch.neuron.DataParallel`, "
    "`torch.neuron.analyze_model`, `torch_neuron.experimental` core placement",
    "Left in place with a TODO: TorchNeuron does not run on inf1 (trn2 and trn3 only), and models traced with "
    'torch-neuron load only there. Load the original checkpoint with Transformers on device "neuron" on a trn2 / '
    'trn3 instance and compile it with `torch.compile(model, backend="neuron")`; the TODO of each API says what '
    "replaces it. Once NM317 rewrote every trace of the file and nothing else uses torch-neuron, its import goes: "
    "`import torch_neuron`, and `import torch.neuron` where a module-level `import torch` keeps `torch` bound.",
    examples=(
        Example(
            before="""\
import torch
import torch_neuron

model_neuron = torch.neuron.trace(model, example_inputs=[input_ids, attention_mask])
model_parallel = torch.neuron.DataParallel(model_neuron)
""",
            after="""\
import torch
# TODO(neuron-migrate): NM321 `torch_neuron` is torch-neuron, the inf1 (Inferentia 1) toolchain, which TorchNeuron does not run on (trn2 and trn3 only); the models it traces (which torch.jit.load reads once it is imported) run only on inf1; remove it once the code that uses it is migrated, and load the original checkpoint on device "neuron" instead of a traced model
import torch_neuron

# TODO(neuron-migrate): NM321 `torch.neuron.trace` is an API of torch-neuron, the inf1 (Inferentia 1) toolchain, which TorchNeuron does not run on (trn2 and trn3 only); load the original checkpoint (`from_pretrained(..., device_map="neuron")`) or move the model to device "neuron" on trn2 / trn3, and compile it with `torch.compile(model, backend="neuron", fullgraph=True, dynamic=False)`; nothing is traced or saved ahead of time
model_neuron = torch.neuron.trace(model, example_inputs=[input_ids, attention_mask])
# TODO(neuron-migrate): NM321 `torch.neuron.DataParallel` is an API of torch-neuron, the inf1 (Inferentia 1) toolchain, which TorchNeuron does not run on (trn2 and trn3 only); to use several NeuronCores, run one process per core with torchrun (each on `torch.device("neuron", LOCAL_RANK)`) and split the inputs between them; pad batches to one fixed size (no dynamic shapes)
model_parallel = torch.neuron.DataParallel(model_neuron)
""",
        ),
    ),
)
RULES = (INF1,)

_NOT_ON_TRN = "which TorchNeuron does not run on (trn2 and trn3 only)"


class Inf1Toolchain(Handler):
    HINTS = HINTS
    TRIGGERS = frozenset({INF1_PACKAGE, "neuron"})
    CALLS = INF1_CALLS

    def visit_Import(self, node: cst.Import) -> None:
        for alias in node.names:
            module = dotted_name(alias.name)
            if module == INF1_NAMESPACE and self._namespace_import_goes(node):
                self.ctx.report(
                    alias,
                    INF1,
                    f"`import {INF1_NAMESPACE}` (torch-neuron, inf1) is no longer used once its traces are "
                    "rewritten (NM317); `import torch` binds `torch`",
                    subject=INF1_PACKAGE,
                )
            elif module == INF1_NAMESPACE:
                # inf1 code's usual spelling (`import torch.neuron`): TorchNeuron code needs no import.
                self._package(
                    alias, f"`import {INF1_NAMESPACE}` loads torch-neuron", " (PyTorch loads TorchNeuron)"
                )
            elif module == INF1_PACKAGE and not self.file.traced().inf1_used:
                self.ctx.remove_import(INF1_PACKAGE, None, alias.evaluated_alias)
                self.ctx.report(
                    alias,
                    INF1,
                    f"`{INF1_PACKAGE}` (torch-neuron, inf1) is no longer used once its traces are rewritten (NM317)",
                    subject=INF1_PACKAGE,
                )
            elif _is_inf1(module):
                self._package(alias, f"`{INF1_PACKAGE}` is torch-neuron")

    def leave_Import(self, original: cst.Import, updated: cst.Import):
        if not self._namespace_import_goes(original):
            return updated
        names = [alias for alias in updated.names if dotted_name(alias.name) != INF1_NAMESPACE]
        if not names:
            return cst.RemoveFromParent()
        return updated.with_changes(
            names=[*names[:-1], names[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)]
        )

    def _namespace_import_goes(self, node: cst.Import) -> bool:
        """`import torch.neuron` goes when nothing uses torch-neuron once NM317 rewrote the traces and a
        module-level `import torch` keeps binding `torch` (`_torch_neuron_left_unused`)."""
        return (
            any(dotted_name(a.name) == INF1_NAMESPACE and a.asname is None for a in node.names)
            and self._torch_neuron_left_unused
        )

    @cached_property
    def _torch_neuron_left_unused(self) -> bool:
        """The file's part of `_namespace_import_goes`, read once: no inf1 call and no other `torch.neuron.` name
        is left once NM317 rewrote the traces, and a module-level `import torch` binds `torch`."""
        traced = self.file.traced()
        if traced.inf1_used:
            return False
        rewritten = {call.func for call in traced.flows}
        in_imports = {
            id(name)
            for found in descendants(self.ctx.module, cst.Import)
            for alias in found.names
            for name in descendants(alias, cst.Attribute)
        }
        if any(
            (dotted_name(attribute) or "").startswith(f"{INF1_NAMESPACE}.")
            and attribute not in rewritten
            and id(attribute) not in in_imports
            for attribute in descendants(self.ctx.module, cst.Attribute)
        ):
            return False
        return any(
            isinstance(line, cst.SimpleStatementLine)
            and isinstance(line.body[0], cst.Import)
            and any(dotted_name(a.name) == "torch" and a.asname is None for a in line.body[0].names)
            for line in self.ctx.module.body
        )

    def visit_ImportFrom(self, node: cst.ImportFrom) -> None:
        if not node.relative and node.module is not None and _is_inf1(dotted_name(node.module)):
            self._package(node, f"`{INF1_PACKAGE}` is torch-neuron")

    def _package(self, node: cst.CSTNode, what: str, no_import: str = "") -> None:
        self.ctx.todo(
            node,
            INF1,
            f"{what}, the inf1 (Inferentia 1) toolchain, {_NOT_ON_TRN}; the models it traces (which "
            "torch.jit.load reads once it is imported) run only on inf1",
            f"remove it{no_import} once the code that uses it is migrated, and load the original checkpoint on "
            'device "neuron" instead of a traced model',
            subject=INF1_PACKAGE,
        )

    def __init__(self, ctx) -> None:
        super().__init__(ctx)
        self.file = ctx.state(XlaFile)

    def leave_Call(self, original: cst.Call, updated: cst.Call):
        if original in self.file.traced().flows:  # NM317 rewrote it
            return updated
        name = self.ctx.qualified(original.func)
        api = name.removeprefix(f"{INF1_NAMESPACE}.").removeprefix(f"{INF1_PACKAGE}.")
        self.ctx.todo(
            original,
            INF1,
            f"`{name}` is an API of torch-neuron, the inf1 (Inferentia 1) toolchain, {_NOT_ON_TRN}",
            INF1_APIS[api],
            subject=name,
        )
        return updated


def _is_inf1(module: str | None) -> bool:
    return module is not None and (module == INF1_PACKAGE or module.startswith(INF1_PACKAGE + "."))


HANDLER = Inf1Toolchain
