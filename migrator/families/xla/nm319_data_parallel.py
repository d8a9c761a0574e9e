"""NM319: in a script that runs several processes, the gradient all-reduce that `xm.optimizer_step` /
`xm.reduce_gradients` did is kept by wrapping the model in DistributedDataParallel."""

from __future__ import annotations

import libcst as cst
import libcst.matchers as m

from migrator.cst_helpers import descendants, dotted_name, visit_read_only
from migrator.families.xla.names import GRADIENT_SYNC_CALLS, LOCAL_RANK, OPTIMIZER_STEP, REDUCE_GRADIENTS
from migrator.families.xla.state import HINTS, XlaFile, whole_statement_call
from migrator.rules import Example, Rule, Severity
from migrator.transform import Handler

DATA_PARALLEL = Rule(
    "NM319",
    Severity.WARNING,
    "`xm.optimizer_step` / `xm.reduce_gradients` all-reduced the gradients of a multi-process script",
    "The model is wrapped in `torch.nn.parallel.DistributedDataParallel` right after it is moved to the "
    "device (DDP now all-reduces the gradients; `xm.reduce_gradients` is removed), with `device_ids` from "
    "LOCAL_RANK when the device is this process's; where the model cannot be located, the call stays with a "
    "TODO. "
    "In that function the model's other attributes (`state_dict()`, whose keys would gain a `module.` "
    "prefix, `save_pretrained()`, `config`...) are then read through `model.module`.",
    examples=(
        Example(
            before="""\
import torch
import torch.distributed as dist
import torch_xla.core.xla_model as xm

dist.init_process_group("xla")
device = xm.xla_device()
model = Net().to(device)
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
for x, y in loader:
    loss_fn(model(x), y).backward()
    xm.optimizer_step(optimizer)
""",
            after="""\
import torch
import torch.distributed as dist
import os

dist.init_process_group("neuron")
device = torch.device("neuron", int(os.environ.get("LOCAL_RANK", 0)))
model = Net().to(device)
model = torch.nn.parallel.DistributedDataParallel(model, device_ids=[int(os.environ.get("LOCAL_RANK", 0))])
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
for x, y in loader:
    loss_fn(model(x), y).backward()
    optimizer.step()
""",
        ),
    ),
)
RULES = (DATA_PARALLEL,)

# What DistributedDataParallel serves like the model it wraps (nn.Module's own API); every other attribute
# (`state_dict`, whose keys would gain a `module.` prefix, `save_pretrained`, `config`, `tie_weights`...) is
# read through `model.module`.
DDP_SERVED = frozenset(
    {
        "parameters",
        "named_parameters",
        "buffers",
        "named_buffers",
        "modules",
        "named_modules",
        "children",
        "named_children",
        "train",
        "eval",
        "training",
        "zero_grad",
        "requires_grad_",
        "to",
        "no_sync",
        "forward",
        "module",  # the wrapper's own: the script already unwraps it
    }
)
# `.to(device)`: a positional target that is not a dtype (`model.to(torch.bfloat16)` casts, it does not move).
_DEVICE_MOVE = m.Call(
    func=m.Attribute(attr=m.Name("to")),
    args=[m.Arg(keyword=None, value=~m.Attribute(value=m.Name("torch"))), m.ZeroOrMore()],
)
# `a.to(device) if cond else b.to(device)`: the model is moved whichever branch builds it.
_CHOSEN_MOVE = m.IfExp(body=_DEVICE_MOVE, orelse=_DEVICE_MOVE)
_PARAMETERS = m.Call(func=m.Attribute(value=m.Name(), attr=m.Name("parameters") | m.Name("named_parameters")))


class _Plan(cst.CSTVisitor):
    """One look at the input: which model each gradient-sync call steps, and where that model is moved to
    the device (in the function that builds its optimizer)."""

    def __init__(self) -> None:
        super().__init__()
        self.imported: dict[str, str] = {}  # local name -> qualified name, as the walk records them
        self.scopes: list[cst.CSTNode] = []
        self.optimizers: dict[str, set[tuple[str, cst.CSTNode]]] = {}  # optimizer -> {(model, scope)}
        self.moves: dict[tuple[str, cst.CSTNode], cst.SimpleStatementLine] = {}  # first move per scope
        self.unwrapped: dict[
            tuple[str, cst.CSTNode], list[cst.Attribute]
        ] = {}  # model.state_dict... after it
        self.sync_calls: list[cst.Call] = []
        self.holders: dict[
            tuple[str, cst.CSTNode], set[tuple[str, cst.CSTNode]]
        ] = {}  # var -> its params' models

    def visit_Module(self, node: cst.Module) -> None:
        self.scopes.append(node)

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        self.scopes.append(node)

    def leave_FunctionDef(self, node: cst.FunctionDef) -> None:
        self.scopes.pop()

    def visit_SimpleStatementLine(self, node: cst.SimpleStatementLine) -> None:
        statement = node.body[0]
        model = None
        if m.matches(
            statement, m.Assign(targets=[m.AssignTarget(m.Name())], value=_DEVICE_MOVE | _CHOSEN_MOVE)
        ):
            model = statement.targets[0].target.value
        elif m.matches(statement, m.Expr(_DEVICE_MOVE)) and m.matches(statement.value.func.value, m.Name()):
            model = statement.value.func.value.value
        if model is not None:
            self.moves.setdefault((model, self.scopes[-1]), node)
        if m.matches(statement, m.Assign(targets=[m.AssignTarget(m.Name())])):
            # Whose parameters the value holds: `model.parameters()` in it, or a variable that holds them
            # (`groups = [... model.named_parameters() ...]; optimizer = AdamW(groups)`).
            scope = self.scopes[-1]
            owners = set()
            for node_ in descendants(statement.value, (cst.Call, cst.Name)):
                if isinstance(node_, cst.Call) and m.matches(node_, _PARAMETERS):
                    owners.add((node_.func.value.value, scope))
                elif isinstance(node_, cst.Name):
                    owners.update(self.holders.get((node_.value, scope), ()))
            if owners:
                target = statement.targets[0].target.value
                self.holders[(target, scope)] = owners
                if isinstance(statement.value, cst.Call):
                    self.optimizers.setdefault(target, set()).update(owners)

    def visit_Import(self, node: cst.Import) -> None:
        for alias in node.names:
            if alias.asname is not None:
                self.imported[alias.asname.name.value] = dotted_name(alias.name)

    def visit_ImportFrom(self, node: cst.ImportFrom) -> None:
        if node.relative or node.module is None or isinstance(node.names, cst.ImportStar):
            return
        for alias in node.names:
            local = alias.asname.name.value if alias.asname else alias.name.value
            self.imported[local] = f"{dotted_name(node.module)}.{alias.name.value}"

    def visit_Call(self, node: cst.Call) -> None:
        # Resolved through the imports like the walk does (`trainer.optimizer_step` is not torch_xla's).
        name = dotted_name(node.func)
        head, _, rest = (name or "").partition(".")
        qualified = self.imported.get(head, head) + (f".{rest}" if rest else "")
        if qualified in GRADIENT_SYNC_CALLS:
            self.sync_calls.append(node)

    def visit_Attribute(self, node: cst.Attribute) -> None:
        if m.matches(node, m.Attribute(value=m.Name(), attr=m.Name())) and node.attr.value not in DDP_SERVED:
            key = (node.value.value, self.scopes[-1])
            if key in self.moves:
                self.unwrapped.setdefault(key, []).append(node)


class DataParallel(Handler):
    HINTS = HINTS
    TRIGGERS = frozenset(name.rpartition(".")[2] for name in GRADIENT_SYNC_CALLS)

    def __init__(self, ctx) -> None:
        super().__init__(ctx)
        self.file = ctx.state(XlaFile)
        self.wraps: dict[cst.SimpleStatementLine, str] = {}  # move statement -> model it wraps
        self.unwrapped: set[cst.Attribute] = set()
        self.model_parallel = False  # a neuronx_distributed script: its data-parallel group is not everyone
        identifiers = ctx.source.identifiers
        if self.file.distributed and "DistributedDataParallel" not in identifiers:
            self._plan(ctx.module)

    def _plan(self, module: cst.Module) -> None:
        plan = _Plan()
        visit_read_only(module, plan)
        if "neuronx_distributed" in self.ctx.source.identifiers:
            # Tensor/pipeline parallel: the all-reduce ran over the data-parallel group only, and DDP over
            # every process would average different shards.
            self.model_parallel = True
            self.file.sync_unlocated.update(plan.sync_calls)
            return
        for call in plan.sync_calls:
            optimizer = call.args[0].value if call.args and not call.args[0].keyword else None
            owners = plan.optimizers.get(optimizer.value, set()) if isinstance(optimizer, cst.Name) else set()
            moves = {owner: plan.moves.get(owner) for owner in owners}
            if len(owners) != 1 or None in moves.values():
                self.file.sync_unlocated.add(call)
                continue
            (owner, line), *_ = moves.items()
            self.wraps[line] = owner[0]
            self.unwrapped.update(plan.unwrapped.get(owner, ()))
            self.file.synced_by_ddp.add(call)

    def visit_Module(self, node: cst.Module) -> None:
        # The walk's hints are set once the handlers exist: from here on, it enters the model's statements.
        for model in set(self.wraps.values()):
            self.ctx.watch(model)

    def leave_Attribute(self, original: cst.Attribute, updated: cst.Attribute):
        if original not in self.unwrapped:
            return updated
        return updated.with_changes(value=cst.Attribute(value=updated.value, attr=cst.Name("module")))

    def leave_Call(self, original: cst.Call, updated: cst.Call):
        # An unlocated `xm.reduce_gradients` keeps NM314's TODO (rewrite the collective or wrap the model).
        if original not in self.file.sync_unlocated or self.ctx.qualified(original.func) != OPTIMIZER_STEP:
            return updated
        if self.model_parallel:
            why = (
                "xm.optimizer_step all-reduces the gradients over the data-parallel group of this "
                "neuronx_distributed (model-parallel) script"
            )
            action = (
                "build a DeviceMesh (dp, tp), shard the model over tp and wrap it with FSDP2 fully_shard or "
                "DistributedDataParallel over the dp mesh, then call optimizer.step()"
            )
        else:
            why = (
                "xm.optimizer_step all-reduces the gradients of this multi-process script, and the model "
                "its optimizer steps could not be located to wrap it in DistributedDataParallel"
            )
            action = (
                "wrap the model in torch.nn.parallel.DistributedDataParallel after it is moved to the device, "
                "then call optimizer.step()"
            )
        self.ctx.todo(original, DATA_PARALLEL, why, action)
        return updated

    def leave_SimpleStatementLine(self, original: cst.SimpleStatementLine, updated: cst.SimpleStatementLine):
        call = whole_statement_call(original)
        if call in self.file.synced_by_ddp and self.ctx.qualified(call.func) == REDUCE_GRADIENTS:
            self.ctx.report(
                call,
                DATA_PARALLEL,
                "`xm.reduce_gradients` removed: DistributedDataParallel all-reduces the gradients.",
            )
            return cst.RemoveFromParent()
        model = self.wraps.get(original)
        if model is None:
            return updated
        self.ctx.report_launch(
            original,
            DATA_PARALLEL,
            f"`{model}` wrapped in DistributedDataParallel: `xm.optimizer_step` / `xm.reduce_gradients` no "
            "longer all-reduce its gradients",
            note=f" (`{model}.module` is the bare model)",
            subject=model,
        )
        self.ctx.add_import("torch")
        device_ids = ""
        target = self._device_of(original)
        if target in self.file.local_devices:
            self.ctx.add_import("os")
            device_ids = f", device_ids=[{LOCAL_RANK}]"
        statements = []
        if "init_process_group" not in self.ctx.source.identifiers:
            statements.append(self._line(f'{self.file.dist()}.init_process_group("neuron")'))
        wrap = f"{model} = torch.nn.parallel.DistributedDataParallel({model}{device_ids})"
        statements.append(self._line(wrap))
        return cst.FlattenSentinel([updated, *statements])

    @staticmethod
    def _device_of(line: cst.SimpleStatementLine) -> str | None:
        """The variable a move statement's `.to(...)` targets, when it is one."""
        statement = line.body[0]
        calls = (
            [statement.value.body, statement.value.orelse]
            if isinstance(statement.value, cst.IfExp)
            else [statement.value]
        )
        targets = {
            call.args[0].value.value if isinstance(call.args[0].value, cst.Name) else None for call in calls
        }
        return targets.pop() if len(targets) == 1 else None

    def _line(self, source: str) -> cst.SimpleStatementLine:
        return cst.parse_statement(source + "\n")


HANDLER = DataParallel
