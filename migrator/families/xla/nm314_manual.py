"""NM314 (and NM315-NM318, NM325, each defined in its own module): torch_xla / neuronx_distributed /
torch_neuronx APIs with no faithful rewrite get a TODO naming the replacement; one prefix table decides which
rule applies, so one walk decides them all."""

from __future__ import annotations

import libcst as cst

from migrator.cst_helpers import visit_read_only
from migrator.families.xla.names import XM
from migrator.families.xla.state import HINTS, XlaFile, declared_calls
from migrator.rules import Example, Rule, Severity
from migrator.transform import Handler

COLLECTIVE = Rule(
    "NM314",
    Severity.ERROR,
    "XLA collective with different semantics (`xm.all_gather`, `xm.reduce_scatter`, `xm.all_to_all`; "
    "`xm.all_reduce` over process `groups`, NM331 rewriting the others; `xm.reduce_gradients` NM319 cannot "
    "rewrite)",
    "Left in place with a TODO: rewrite with torch.distributed (`dist.all_reduce` works in place, "
    "`dist.all_gather_into_tensor`, `dist.all_gather_object`) or wrap the model in DistributedDataParallel.",
    examples=(
        Example(
            before="""\
import torch_xla.core.xla_model as xm

gathered = xm.all_gather(loss, dim=0)
""",
            after="""\
# TODO(neuron-migrate): NM501 `torch_xla` stays imported only for line 5 (NM314), under its own TODO: `torch_xla` is PyTorch/XLA, which TorchNeuron does not use (Transformers takes the XLA path when it is importable); remove this import once that statement is rewritten
import torch_xla.core.xla_model as xm

# TODO(neuron-migrate): NM314 `torch_xla.core.xla_model.all_gather` has no direct TorchNeuron equivalent; rewrite with torch.distributed (`dist.all_reduce` works in place, `dist.all_gather_into_tensor`, `dist.all_gather_object`) or wrap the model in DistributedDataParallel.
gathered = xm.all_gather(loss, dim=0)
""",
        ),
    ),
)
RULES = (COLLECTIVE,)

# Qualified-name prefix -> rule for what has no faithful rewrite (longest prefix first).
MANUAL_PREFIXES: tuple[tuple[str, Rule | str], ...] = (
    (f"{XM}.all_reduce", COLLECTIVE),
    (f"{XM}.all_gather", COLLECTIVE),
    (f"{XM}.reduce_scatter", COLLECTIVE),
    (f"{XM}.all_to_all", COLLECTIVE),
    (f"{XM}.reduce_gradients", COLLECTIVE),
    ("torch_xla.distributed.fsdp", "NM315"),
    ("torch_xla.distributed.zero_redundancy_optimizer", "NM315"),
    ("neuronx_distributed.lightning", "NM325"),
    ("neuronx_distributed.plugins.lightning", "NM325"),
    ("neuronx_distributed", "NM316"),
    ("torch_neuronx.xla_impl.trace", "NM317"),
    ("torch_xla", "NM318"),
)


class ManualXla(Handler):
    HINTS = HINTS

    def __init__(self, ctx) -> None:
        super().__init__(ctx)
        self.file = ctx.state(XlaFile)
        # Enclosing functions, with the names each binds once a call needs them (most files never ask).
        self.scopes: list[tuple[cst.FunctionDef, frozenset[str] | None]] = []
        self.first_use: dict[str, object] = {}  # neuronx_distributed API -> its finding

    def leave_Attribute(self, original: cst.Attribute, updated: cst.Attribute):
        name = self.ctx.qualified(original)
        if original not in self.file.called and name in declared_calls(self.ctx.handlers).rewritten:
            self.ctx.todo(
                original,
                "NM318",
                f"`{name}` is used as a value, not called",
                "call its replacement where it is used",
            )
        return updated

    def leave_Call(self, original: cst.Call, updated: cst.Call):
        name = self.ctx.qualified(original.func)
        if name is None:
            return updated
        if name in declared_calls(self.ctx.handlers).statements:
            if original in self.file.inline_statement_calls:
                self.ctx.todo(
                    original,
                    "NM318",
                    f"`{name}` shares its line with other code (a one-line `if`/`for` body, or `;`), where "
                    "its rewrite into statements does not fit",
                    "put the call on its own line and run neuron-migrate again",
                )
            elif original not in self.file.statement_calls:
                self.ctx.todo(
                    original,
                    "NM318",
                    f"`{name}` is used as a value and has no expression equivalent",
                    "call it as a statement or rewrite it by hand",
                )
            return updated
        if name in declared_calls(self.ctx.handlers).decided or original in (
            self.file.synced_by_ddp | self.file.synced_by_helper
        ):
            return updated
        rule = next(
            (rule for prefix, rule in MANUAL_PREFIXES if name == prefix or name.startswith(prefix + ".")),
            None,
        )
        # Whether a local variable shadows the import: asked last, it reads the function's bindings.
        if rule is not None and not self._shadowed(original.func):
            self._manual(original, rule, name)
        return updated

    def _manual(self, call: cst.Call, rule: Rule | str, name: str) -> None:
        """A TODO at each use; a neuronx_distributed API used again anywhere in the file is the same finding,
        which lists the lines of its other uses (model code calls the same parallel layer dozens of times)."""
        rule = self.ctx.rule(rule)
        if rule.code == "NM316" and name in self.first_use:
            self.ctx.todo_again(call, self.first_use[name])
            return
        what = rule.action.removeprefix("Left in place with a TODO: ")
        report = self.ctx.todo(call, rule, f"`{name}` has no direct TorchNeuron equivalent", what)
        if rule.code == "NM316":
            self.first_use[name] = report

    # -- a local variable named like an import is not the import -------------------------------------------

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        self.scopes.append((node, None))

    def leave_FunctionDef(self, original: cst.FunctionDef, updated: cst.FunctionDef):
        self.scopes.pop()
        return updated

    def _shadowed(self, func: cst.BaseExpression) -> bool:
        head = func
        while isinstance(head, cst.Attribute):
            head = head.value
        if not isinstance(head, cst.Name) or not self.scopes:
            return False
        function, bound = self.scopes[-1]
        if bound is None:
            bound = _bound_names(function)
            self.scopes[-1] = (function, bound)
        return head.value in bound


class _Bindings(cst.CSTVisitor):
    def __init__(self, function: cst.FunctionDef) -> None:
        super().__init__()
        self.function = function
        self.names: set[str] = set()

    def on_visit(self, node: cst.CSTNode) -> bool:
        # Names are bound by statements, read at the statement: an expression binds none here (a lambda's
        # parameters are its own).
        return not isinstance(node, cst.BaseExpression) and super().on_visit(node)

    def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
        return node is self.function  # a nested function's names are its own

    def visit_ClassDef(self, node: cst.ClassDef) -> bool:
        return False

    def visit_Import(self, node: cst.Import) -> bool:
        return False  # binds the import itself, which `qualified` reads

    def visit_ImportFrom(self, node: cst.ImportFrom) -> bool:
        return False

    def visit_Param(self, node: cst.Param) -> None:
        self.names.add(node.name.value)

    def visit_AssignTarget(self, node: cst.AssignTarget) -> None:
        self._targets(node.target)

    def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
        self._targets(node.target)

    def visit_For(self, node: cst.For) -> None:
        self._targets(node.target)

    def visit_AsName(self, node: cst.AsName) -> None:
        self._targets(node.name)

    def _targets(self, target: cst.BaseExpression) -> None:
        if isinstance(target, cst.Name):
            self.names.add(target.value)
        elif isinstance(target, (cst.Tuple, cst.List)):
            for element in target.elements:
                self._targets(element.value)


def _bound_names(function: cst.FunctionDef) -> frozenset[str]:
    """Names a function binds itself (parameters, assignments, loop and `as` targets), its imports aside."""
    bindings = _Bindings(function)
    visit_read_only(function, bindings)
    return frozenset(bindings.names)


HANDLER = ManualXla
