"""NM319: in a script that runs several processes, the gradient all-reduce that `xm.optimizer_step` /
`xm.reduce_gradients` did is kept by wrapping the model in DistributedDataParallel."""

from __future__ import annotations

import libcst as cst
import libcst.matchers as m

from migrator.cst_helpers import descendants, dotted_name, source_code, visit_read_only
from migrator.families.xla.names import GRADIENT_SYNC_CALLS, LOCAL_RANK, OPTIMIZER_STEP, REDUCE_GRADIENTS
from migrator.families.xla.state import HINTS, XlaFile, whole_statement_call
from migrator.rules import Example, Rule, Severity
from migrator.transform import Handler

DATA_PARALLEL = Rule(
    "NM319",
    Severity.WARNING,
    "`xm.optimizer_step` / `xm.reduce_gradients` all-reduced the gradients of a multi-process script",
    "The model is wrapped in `torch.nn.parallel.DistributedDataParallel` after it is moved to the device and "
    "after what then changes its parameters (re-tied weights, frozen layers; DDP now all-reduces the "
    "gradients; `xm.reduce_gradients` is removed), with `device_ids` from LOCAL_RANK when the device is this "
    "process's, and, unless one runs on every path there, the process group initialised before it by "
    "`_init_process_group()`, a helper added to the file that initialises it once and destroys it at exit (a group "
    "left to the interpreter's exit can abort the process: gloo's \"terminate called without an active "
    'exception"). '
    "In that function the model's other attributes (`state_dict()`, whose keys would gain a `module.` "
    "prefix, `save_pretrained()`, `config`...) are then read through `model.module`. Where the sync call ran "
    'on one device\'s path only (`if device == "xla": xm.optimizer_step(optimizer)` beside `else: '
    "optimizer.step()`), the process group and the wrap go under the same test and the bare model is read "
    'through `getattr(model, "module", model)`: the other paths stay single-process. Where the model cannot be '
    "located, is changed after the call, or sits behind a test the wrap cannot repeat exactly (the call in an "
    "`else`, names that change in between), the call becomes `_optimizer_step(optimizer)` / "
    "`_reduce_gradients(optimizer)`, helpers added to the file that average the gradients of the optimizer's "
    "parameters over the processes with torch.distributed as torch_xla did (the process group initialised "
    "under torchrun; one process: nothing to reduce); a call over process `groups`, or in a neuronx_distributed "
    "(model-parallel) script, whose all-reduce ran over the data-parallel group only, stays with a TODO.",
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
        self.ifs: list[cst.If] = []  # the `if` statements around the node being visited
        # each sync call's enclosing `if` statements (outermost first) and function (or module)
        self.sync_context: dict[cst.Call, tuple[list[cst.If], cst.CSTNode]] = {}
        self.holders: dict[
            tuple[str, cst.CSTNode], set[tuple[str, cst.CSTNode]]
        ] = {}  # var -> its params' models

        self.blocks: list[cst.Module | cst.IndentedBlock] = []
        self.block_of: dict[cst.SimpleStatementLine, cst.Module | cst.IndentedBlock] = {}  # of each move
        self.functions: dict[str, cst.FunctionDef] = {}  # module-level functions by name
        self.wrapped: set[str] = set()  # models the script wraps in DistributedDataParallel itself

    def visit_Module(self, node: cst.Module) -> None:
        self.scopes.append(node)
        self.blocks.append(node)
        self.functions = {
            statement.name.value: statement
            for statement in node.body
            if isinstance(statement, cst.FunctionDef)
        }

    def visit_IndentedBlock(self, node: cst.IndentedBlock) -> None:
        self.blocks.append(node)

    def leave_IndentedBlock(self, node: cst.IndentedBlock) -> None:
        self.blocks.pop()

    def visit_If(self, node: cst.If) -> None:
        self.ifs.append(node)

    def leave_If(self, node: cst.If) -> None:
        self.ifs.pop()

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        self.scopes.append(node)

    def leave_FunctionDef(self, node: cst.FunctionDef) -> None:
        self.scopes.pop()

    def visit_SimpleStatementLine(self, node: cst.SimpleStatementLine) -> None:
        statement = node.body[0]
        if type(statement) is not cst.Assign and type(statement) is not cst.Expr:
            return  # a move or a holder of parameters is one of these: spare the matchers the rest
        model = None
        if m.matches(
            statement, m.Assign(targets=[m.AssignTarget(m.Name())], value=_DEVICE_MOVE | _CHOSEN_MOVE)
        ):
            model = statement.targets[0].target.value
        elif m.matches(statement, m.Expr(_DEVICE_MOVE)) and m.matches(statement.value.func.value, m.Name()):
            model = statement.value.func.value.value
        if model is not None and (model, self.scopes[-1]) not in self.moves:
            self.moves[(model, self.scopes[-1])] = node
            self.block_of[node] = self.blocks[-1]
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
            self.sync_context[node] = (list(self.ifs), self.scopes[-1])
        elif qualified.rpartition(".")[2] == "DistributedDataParallel" and m.matches(
            node, m.Call(args=[m.Arg(value=m.Name(), keyword=None), m.ZeroOrMore()])
        ):
            self.wrapped.add(node.args[0].value.value)

    def visit_Attribute(self, node: cst.Attribute) -> None:
        if m.matches(node, m.Attribute(value=m.Name(), attr=m.Name())) and node.attr.value not in DDP_SERVED:
            key = (node.value.value, self.scopes[-1])
            if key in self.moves:
                self.unwrapped.setdefault(key, []).append(node)


# Methods of the model that only read it or run it (DDP serves or forwards them); any other use after the move
# may change its parameters (`model.tie_weights()`, `model.lm_head.weight = ...`), which DDP must see first.
_RUNS = frozenset({"forward", "generate", "__call__"})
# Methods DDP does not serve that only read the model (after the wrap they go through `.module`).
_READS = frozenset(
    {
        "state_dict",
        "num_parameters",
        "get_memory_footprint",
        "print_trainable_parameters",
        "get_input_embeddings",
        "get_output_embeddings",
        "save_pretrained",
        "push_to_hub",
        "extra_repr",
    }
)
# Methods that change parameters for sure (in-place tensor methods, `..._`, too): once DDP wraps the model, they
# would change what it no longer tracks.
_SURGERY = frozenset(
    {
        "tie_weights",
        "resize_token_embeddings",
        "load_state_dict",
        "apply",
        "add_module",
        "register_module",
        "register_parameter",
        "register_buffer",
        "set_input_embeddings",
        "set_output_embeddings",
        "init_weights",
        "post_init",
    }
)


def _changes_or_runs(statement: cst.CSTNode, model: str) -> tuple[bool, bool, bool]:
    """Whether a statement that follows the model's move may change the model (a method call, an attribute
    written), surely changes its parameters (re-tying weights, freezing, replacing a layer, rebinding the name),
    and whether it runs it or hands it on (a forward call, `train(model)`, `return model`): DDP must wrap the
    model after the first and before the third; the second after that cannot be placed."""
    nodes = descendants(statement, (cst.Name, cst.Attribute, cst.Call, cst.Arg, cst.AssignTarget, cst.For))
    targets = set()  # nodes written to: assignment targets and loop variables
    calls, args, attributes = {}, set(), {}
    loops_over_model = False
    for node in nodes:
        if isinstance(node, cst.AssignTarget):
            targets.update(descendants(node.target, (cst.Name, cst.Attribute)))
        elif isinstance(node, cst.For):
            targets.update(descendants(node.target, (cst.Name, cst.Attribute)))
            loops_over_model |= any(
                isinstance(name, cst.Name) and name.value == model
                for name in descendants(node.iter, cst.Name)
            )
        elif isinstance(node, cst.Call):
            calls[node.func] = node
        elif isinstance(node, cst.Arg):
            args.add(node.value)
        elif isinstance(node, cst.Attribute):
            attributes[node.value] = node
    changes = surgery = runs = False
    for node in nodes:
        if not (isinstance(node, cst.Name) and node.value == model) or node in attributes.values():
            continue
        if node in targets:
            changes = surgery = (
                True  # `model = get_peft_model(model, config)`: the new model is the one to wrap
            )
            continue
        if node in calls or node in args:
            runs = True
            continue
        chain, outer = node, attributes.get(node)
        first = outer.attr.value if outer is not None else None
        while outer is not None:
            chain, outer = outer, attributes.get(outer)
        if chain is node:
            runs = True  # the model itself handed on (`return model`, `[model]`)
        elif chain in targets:
            changes = surgery = True
        elif chain in calls:
            method = chain.attr.value
            if method in _RUNS:
                runs = True
            elif first not in DDP_SERVED and method not in _READS:
                changes = True
                surgery |= method in _SURGERY or method.endswith("_") and not method.startswith("_")
    if loops_over_model and not runs:  # `for p in model.parameters(): p.requires_grad = False`
        changes = surgery = True
    return changes, surgery, runs


def _wrap_after(block: cst.Module | cst.IndentedBlock, move: cst.SimpleStatementLine, model: str):
    """The statement of the move's block after which DDP wraps the model: the last one that changes the model
    before any runs it (the move itself when none does); None when one changes it after it runs."""
    body = list(block.body)
    anchor, running = move, False
    for statement in body[body.index(move) + 1 :]:
        changes, surgery, runs = _changes_or_runs(statement, model)
        if surgery and running:
            return None
        if changes and not runs and not running:
            anchor = statement
        running |= runs
    return anchor


def _initializes(statement: cst.CSTNode, functions: dict[str, cst.FunctionDef], depth: int = 1) -> bool:
    """A simple statement that calls init_process_group, or a module function whose body does at its top."""
    if not isinstance(statement, cst.SimpleStatementLine):
        return False
    for call in descendants(statement, cst.Call):
        name = dotted_name(call.func) or ""
        if name.rpartition(".")[2] == "init_process_group":
            return True
        if (
            depth
            and name in functions
            and any(_initializes(line, functions, depth - 1) for line in functions[name].body.body)
        ):
            return True
    return False


class _Before(cst.CSTVisitor):
    """The simple statements that run before `target` wherever it runs: the earlier ones of each block that
    holds it."""

    def __init__(self, target: cst.CSTNode) -> None:
        super().__init__()
        self.target = target
        self.blocks: list[list[cst.SimpleStatementLine]] = [[]]
        self.found: list[cst.SimpleStatementLine] | None = None

    def on_visit(self, node: cst.CSTNode) -> bool:
        if self.found is not None:
            return False
        if node is self.target:
            self.found = [line for block in self.blocks for line in block]
            return False
        if isinstance(node, (cst.Module, cst.IndentedBlock)):
            self.blocks.append([])
        elif isinstance(node, cst.SimpleStatementLine):
            self.blocks[-1].append(node)
        return True

    def on_leave(self, original_node: cst.CSTNode) -> None:
        if isinstance(original_node, (cst.Module, cst.IndentedBlock)) and self.found is None:
            self.blocks.pop()


def _initialized_before(module: cst.Module, target: cst.CSTNode, functions, depth: int = 2) -> bool:
    """Whether a process group exists whenever `target` runs: an init_process_group ran before it in its
    function (or in a module function called there first), or before every call of that function."""
    before = _Before(target)
    visit_read_only(module, before)
    earlier = [line for line in before.found or [] if target not in descendants(line, type(target))]
    if any(_initializes(line, functions) for line in earlier):
        return True
    holder = next((f for f in functions.values() if target in descendants(f.body, type(target))), None)
    if holder is None or depth == 0:
        return False
    name = holder.name.value
    uses = [node for node in descendants(module, cst.Name) if node.value == name and node is not holder.name]
    calls = [call for call in descendants(module, cst.Call) if call.func in uses]
    if not calls or len(calls) != len(uses):  # handed on (`xmp.spawn(train)` runs it in new processes)
        return False
    return all(_initialized_before(module, call, functions, depth - 1) for call in calls)


# Strings whose comparison makes a branch one device's path (`if device == "xla":`, `if args.device != "cpu":`).
_DEVICE_WORDS = frozenset({"xla", "tpu", "neuron", "cuda", "gpu", "cpu", "mps"})


def _device_test(test: cst.BaseExpression) -> bool:
    return any(
        isinstance(string, cst.SimpleString) and str(string.evaluated_value).lower() in _DEVICE_WORDS
        for string in descendants(test, cst.SimpleString)
    )


def _bound_before(scope: cst.CSTNode, anchor: cst.CSTNode, test: cst.BaseExpression) -> bool:
    """Whether every name `test` reads holds, at `anchor`, the value it holds where the test is: a parameter or a
    name of the enclosing module the function never binds, or a name bound once by a statement of the
    function's (or the module's) own block before the one that holds `anchor`."""
    if isinstance(scope, cst.FunctionDef):
        body, parameters = (
            list(scope.body.body),
            {param.name.value for param in descendants(scope.params, cst.Param)},
        )
    elif isinstance(scope, cst.Module):
        body, parameters = list(scope.body), set()
    else:
        return False
    at = next((i for i, statement in enumerate(body) if anchor in descendants(statement, type(anchor))), None)
    if at is None:
        return False
    for name in {node.value for node in descendants(test, cst.Name)}:
        bindings = [
            index
            for index, statement in enumerate(body)
            for target in descendants(statement, (cst.AssignTarget, cst.For, cst.WithItem, cst.AugAssign))
            if any(n.value == name for n in descendants(getattr(target, "target", None) or target, cst.Name))
        ]
        if bindings and (name in parameters or len(bindings) > 1 or bindings[0] >= at):
            return False
    return True


class DataParallel(Handler):
    HINTS = HINTS
    TRIGGERS = frozenset(name.rpartition(".")[2] for name in GRADIENT_SYNC_CALLS)

    def __init__(self, ctx) -> None:
        super().__init__(ctx)
        self.file = ctx.state(XlaFile)
        # statement after which DDP wraps a model -> (the model, its move to the device, a process group is
        # initialised before it, the `if` whose test the sync call ran under, when the move did not)
        self.wraps: dict[cst.CSTNode, tuple[str, cst.SimpleStatementLine, bool, cst.If | None]] = {}
        self.unwrapped: set[cst.Attribute] = set()
        # ...read where the model is wrapped on one device's path only (`getattr(model, "module", model)`)
        self.unwrapped_if_wrapped: set[cst.Attribute] = set()
        self.model_parallel = False  # a neuronx_distributed script: its data-parallel group is not everyone
        self.in_library = False  # a module whose importers decide how many processes run it
        if self.file.distributed:
            self._plan(ctx.module)
        elif self.file.library:
            plan = _Plan()
            visit_read_only(ctx.module, plan)
            self.in_library = True
            self.file.sync_unlocated.update(
                call for call in plan.sync_calls if not self._wrapped_by_script(plan, call)
            )
        if not self.model_parallel:
            self.file.synced_by_helper.update(
                call for call in self.file.sync_unlocated if _helper_arguments(call) is not None
            )

    @staticmethod
    def _wrapped_by_script(plan: _Plan, call: cst.Call) -> bool:
        """The model the call's optimizer steps is one the script wraps in DDP itself."""
        optimizer = call.args[0].value if call.args and not call.args[0].keyword else None
        owners = plan.optimizers.get(optimizer.value, set()) if isinstance(optimizer, cst.Name) else set()
        return bool(owners) and all(owner[0] in plan.wrapped for owner in owners)

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
            if self._wrapped_by_script(plan, call):
                continue  # the script wraps that model in DDP itself (on a GPU path, say): nothing to add
            moves = {owner: plan.moves.get(owner) for owner in owners}
            if len(owners) != 1 or None in moves.values():
                self.file.sync_unlocated.add(call)
                continue
            (owner, line), *_ = moves.items()
            anchor = _wrap_after(plan.block_of[line], line, owner[0])
            if anchor is None:
                self.file.sync_unlocated.add(call)
                continue
            guard = self._guard(plan, call, line, anchor)
            if guard is False:
                self.file.sync_unlocated.add(call)
                continue
            if anchor not in self.wraps:
                initialized = _initialized_before(module, line, plan.functions)
                self.wraps[anchor] = (owner[0], line, initialized, guard)
            elif self.wraps[anchor][3] is not guard:
                self.file.sync_unlocated.add(call)
                continue
            # What follows the wrap reads the bare model's other attributes through `.module`.
            before: set[cst.Attribute] = set()
            body = list(plan.block_of[line].body)
            for statement in body[body.index(line) : body.index(anchor) + 1]:
                before.update(descendants(statement, cst.Attribute))
            read = [a for a in plan.unwrapped.get(owner, ()) if a not in before]
            (self.unwrapped_if_wrapped if guard is not None else self.unwrapped).update(read)
            self.file.synced_by_ddp.add(call)

    @staticmethod
    def _guard(plan: _Plan, call: cst.Call, move: cst.SimpleStatementLine, anchor: cst.CSTNode):
        """The device test under which the sync call runs and the model's move does not (`if device == "xla":
        xm.optimizer_step(optimizer)` beside `else: optimizer.step()`): DDP and its process group belong to
        that path only. None: no such test; False: one the wrap cannot repeat exactly (the call in an
        `else`, a test reading names that change between the wrap and the call, or several)."""
        ifs, scope = plan.sync_context[call]
        tests = [
            node for node in ifs if _device_test(node.test) and move not in descendants(node, type(move))
        ]
        if not tests:
            return None
        if len(tests) > 1 or call not in descendants(tests[0].body, cst.Call):
            return False
        return tests[0] if _bound_before(scope, anchor, tests[0].test) else False

    def visit_Module(self, node: cst.Module) -> None:
        # The walk's hints are set once the handlers exist: from here on, it enters the model's statements.
        for model, *_ in self.wraps.values():
            self.ctx.watch(model)

    def leave_Attribute(self, original: cst.Attribute, updated: cst.Attribute):
        if original in self.unwrapped:
            return updated.with_changes(value=cst.Attribute(value=updated.value, attr=cst.Name("module")))
        if original in self.unwrapped_if_wrapped:
            model = source_code(updated.value)
            return updated.with_changes(value=cst.parse_expression(f'getattr({model}, "module", {model})'))
        return updated

    def leave_Call(self, original: cst.Call, updated: cst.Call):
        if original in self.file.synced_by_helper:
            return self._helper_call(original, updated)
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
        elif self.in_library:
            why = (
                "xm.optimizer_step all-reduces the gradients over every process that runs this code, and this "
                "module (no entry point of its own) does not show how many processes its program runs"
            )
            action = (
                "with several (torchrun), wrap the model in torch.nn.parallel.DistributedDataParallel after it is "
                "moved to the device; then, or with one process, call optimizer.step()"
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

    def _helper_call(self, original: cst.Call, updated: cst.Call) -> cst.Call:
        """The sync call of a model that could not be wrapped in DDP becomes a helper that all-reduces its
        optimizer's gradients as torch_xla did, over every process (one process: nothing to reduce)."""
        helper = (
            "_optimizer_step" if self.ctx.qualified(original.func) == OPTIMIZER_STEP else "_reduce_gradients"
        )
        self.file.helpers.add(helper)
        self.ctx.report(
            original,
            DATA_PARALLEL,
            f"Rewritten to `{helper}(...)`, a helper added to the file that averages the gradients of the "
            "optimizer's parameters over the processes with torch.distributed, as torch_xla did (no "
            "DistributedDataParallel wrap, which would overlap that all-reduce with backward, could be placed for "
            "the model it steps).",
            subject=helper,
        )
        kept = _helper_arguments(updated)
        args = [arg.with_changes(comma=cst.MaybeSentinel.DEFAULT) for arg in kept]
        separator = cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))
        args = [arg.with_changes(comma=separator) for arg in args[:-1]] + args[-1:]
        return cst.Call(func=cst.Name(helper), args=args)

    def leave_SimpleStatementLine(self, original: cst.SimpleStatementLine, updated: cst.SimpleStatementLine):
        call = whole_statement_call(original)
        if call in self.file.synced_by_ddp and self.ctx.qualified(call.func) == REDUCE_GRADIENTS:
            self.ctx.report(
                call,
                DATA_PARALLEL,
                "`xm.reduce_gradients` removed: DistributedDataParallel all-reduces the gradients.",
            )
            return cst.RemoveFromParent()
        return self._wrap(original, updated)

    def _wrap(self, original: cst.CSTNode, updated: cst.CSTNode):
        """DDP around the model after the statement `original` (its move, or the last change made to it)."""
        if original not in self.wraps:
            return updated
        model, move, initialized, guard = self.wraps[original]
        self.ctx.report_launch(
            move,
            DATA_PARALLEL,
            f"`{model}` wrapped in DistributedDataParallel: `xm.optimizer_step` / `xm.reduce_gradients` no "
            "longer all-reduce its gradients",
            note=f" (`{model}.module` is the bare model)",
            subject=model,
        )
        self.ctx.add_import("torch")
        device_ids = ""
        target = self._device_of(move)
        if target in self.file.local_devices:
            self.ctx.add_import("os")
            device_ids = f", device_ids=[{LOCAL_RANK}]"
        statements = []
        if (
            not initialized
        ):  # (once, and destroyed at exit: the helper; the file may initialise one elsewhere)
            self.file.helpers.add("_init_process_group")
            statements.append(self._line("_init_process_group()"))
        wrap = f"{model} = torch.nn.parallel.DistributedDataParallel({model}{device_ids})"
        statements.append(self._line(wrap))
        if guard is not None:  # the device's path only, as the sync call ran
            test = cst.parse_expression(source_code(guard.test))
            statements = [cst.If(test=test, body=cst.IndentedBlock(body=statements))]
        return cst.FlattenSentinel([updated, *statements])

    def leave_If(self, original: cst.If, updated: cst.If):
        return self._wrap(original, updated)

    def leave_For(self, original: cst.For, updated: cst.For):
        return self._wrap(original, updated)

    def leave_While(self, original: cst.While, updated: cst.While):
        return self._wrap(original, updated)

    def leave_With(self, original: cst.With, updated: cst.With):
        return self._wrap(original, updated)

    def leave_Try(self, original: cst.Try, updated: cst.Try):
        return self._wrap(original, updated)

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


def _helper_arguments(call: cst.Call) -> list[cst.Arg] | None:
    """The arguments a sync call passes on to its helper: the optimizer, and `optimizer_args` of
    `xm.optimizer_step`; `barrier` (an XLA graph cut) and `pin_layout` go. None where it unpacks arguments or
    names process groups (the all-reduce then ran over those only)."""
    positional = [arg for arg in call.args if not arg.keyword]
    keywords = {arg.keyword.value: arg for arg in call.args if arg.keyword}
    if any(arg.star for arg in call.args) or len(positional) != 1 or not set(keywords) <= _HELPER_KEYWORDS:
        return None
    if "groups" in keywords and not m.matches(keywords["groups"].value, m.Name("None")):
        return None
    return [positional[0], *(arg for name, arg in keywords.items() if name == "optimizer_args")]


_HELPER_KEYWORDS = frozenset({"barrier", "optimizer_args", "groups", "pin_layout"})
