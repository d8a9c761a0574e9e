"""Where bf16 goes once `XLA_USE_BF16` / `XLA_DOWNCAST_BF16` leave a script: the file's `Bf16Plan`, which
NM218 (adds bf16 where TorchNeuron reads it) and NM400 (removes the variable, or keeps it with a TODO)
share."""

from __future__ import annotations

from functools import partial

import libcst as cst
import libcst.matchers as m

from migrator.cst_helpers import descendants, find_keyword, string_value, unpacked_mapping, visit_read_only
from migrator.families.training.state import unpacked_arguments, unpacked_arguments_call
from migrator.families.training.targets import ARGUMENTS_CLASSES, MODEL_CLASS_SUFFIXES
from migrator.families.xla.state import XlaFlowBlocks

BF16_VARIABLES = frozenset({"XLA_USE_BF16", "XLA_DOWNCAST_BF16"})
PRECISION_KEYWORDS = frozenset({"bf16", "fp16"})
DTYPE_KEYWORDS = frozenset({"dtype", "torch_dtype"})

_MOVE = m.Call(func=m.Attribute(attr=m.Name("to")), args=[m.Arg(keyword=None)])
_PARAMETERS = m.Call(func=m.Attribute(value=m.Name(), attr=m.Name("parameters") | m.Name("named_parameters")))


def last_name(func: cst.BaseExpression) -> str | None:
    if isinstance(func, cst.Attribute):
        return func.attr.value
    return func.value if isinstance(func, cst.Name) else None


def _model_load(call: cst.Call) -> bool:
    """`<ModelClass>.from_pretrained(...)` (a model, not a tokenizer or config)."""
    func = call.func
    return (
        isinstance(func, cst.Attribute)
        and func.attr.value == "from_pretrained"
        and (last_name(func.value) or "").endswith(MODEL_CLASS_SUFFIXES)
    )


def _targets(module: cst.Module) -> tuple[bool, tuple[str, list[cst.Call]]]:
    """Whether bf16 has a place in this file, and where it goes: ("arguments" | "load" | "move", the calls
    that get it)."""
    calls = descendants(module, cst.Call)
    run = _run_by_the_script(module)

    def run_here(found: list[cst.Call]) -> list[cst.Call]:
        # The variable reached what this process runs; a function only a framework calls (SageMaker's
        # `model_fn` in an inference container) never saw it. None of them run here: the old choice.
        return [call for call in found if call in run] or found

    arguments = run_here([call for call in calls if last_name(call.func) in ARGUMENTS_CLASSES])
    if arguments:
        # `bf16=True` already there is kept; `bf16=False` or `fp16=...` chose otherwise: a person decides.
        chosen = [c for c in arguments if any(find_keyword(c, k) for k in PRECISION_KEYWORDS)]
        if any(not m.matches(find_keyword(c, "bf16"), m.Arg(value=m.Name("True"))) for c in chosen):
            return False, ("", [])
        return True, ("arguments", [c for c in arguments if c not in chosen])
    loads = run_here([call for call in calls if _model_load(call)])
    if loads:
        free = [c for c in loads if not any(find_keyword(c, k) for k in DTYPE_KEYWORDS)]
        return len(free) == len(loads), ("load", free)
    # A plain loop: the model whose parameters an optimizer gets, where it is moved to the device.
    models = {call.func.value.value for call in calls if m.matches(call, _PARAMETERS)}
    moves = []
    for line in descendants(module, cst.SimpleStatementLine):
        statement = line.body[0]
        if m.matches(statement, m.Assign(targets=[m.AssignTarget(m.Name())], value=_MOVE)):
            moved = statement.targets[0].target.value
        elif m.matches(statement, m.Expr(_MOVE)) and m.matches(statement.value.func.value, m.Name()):
            moved = statement.value.func.value.value
        else:
            continue
        if moved in models:
            moves.append(statement.value)
    return len(moves) == 1, ("move", moves)


def _run_by_the_script(module: cst.Module) -> set[cst.Call]:
    """The calls that running the file executes: its top-level code and, transitively, the module-level
    functions and classes that code names (called, or handed over as `xmp.spawn(_mp_fn)` does)."""
    defined = {
        statement.name.value: statement
        for statement in module.body
        if isinstance(statement, (cst.FunctionDef, cst.ClassDef))
    }
    pending = [
        statement for statement in module.body if not isinstance(statement, (cst.FunctionDef, cst.ClassDef))
    ]
    seen: set[str] = set()
    run: set[cst.Call] = set()
    while pending:
        node = pending.pop()
        for found in descendants(node, (cst.Call, cst.Name)):  # one walk for both
            if isinstance(found, cst.Call):
                run.add(found)
            elif found.value in defined and found.value not in seen:
                seen.add(found.value)
                pending.append(defined[found.value])
    return run


def _sets_bf16(node: cst.CSTNode) -> bool:
    """`node` sets a bf16 variable (`os.environ[K] = ...`, `setdefault(K, ...)`, `putenv(K, ...)`, `update({K:
    ...})` / `update(K=...)`)."""
    if isinstance(node, cst.AssignTarget):
        if m.matches(node.target, m.Subscript()) and len(node.target.slice) == 1:
            index = node.target.slice[0].slice
            return isinstance(index, cst.Index) and string_value(index.value) in BF16_VARIABLES
        return False
    if not isinstance(node, cst.Call):
        return False
    method = last_name(node.func)
    if (
        method in ("setdefault", "putenv")
        and node.args
        and string_value(node.args[0].value) in BF16_VARIABLES
    ):
        return True
    if method == "update":
        keys = {arg.keyword.value for arg in node.args if arg.keyword}
        for arg in node.args:
            if isinstance(arg.value, cst.Dict):
                keys.update(string_value(e.key) for e in arg.value.elements if isinstance(e, cst.DictElement))
        return not keys.isdisjoint(BF16_VARIABLES)
    return False


class _Bf16Settings(cst.CSTVisitor):
    """The blocks in which the file sets a bf16 variable itself (one that only reads it leaves the choice to
    its launcher)."""

    def __init__(self) -> None:
        super().__init__()
        self.stack: list[cst.CSTNode] = []
        self.blocks: list[cst.CSTNode] = []

    def on_visit(self, node: cst.CSTNode) -> bool:
        if isinstance(node, (cst.Module, cst.IndentedBlock)):
            self.stack.append(node)
        elif _sets_bf16(node):
            self.blocks.append(self.stack[-1])
        return True

    def on_leave(self, original_node: cst.CSTNode) -> None:
        if isinstance(original_node, (cst.Module, cst.IndentedBlock)):
            self.stack.pop()


class Bf16Plan:
    """Per file (`ctx.state`): whether bf16 has a place in it, and the calls that get bf16 instead. NM400
    reads it to keep the variable, with a TODO, when there is nowhere to put bf16."""

    def __init__(self, ctx) -> None:
        self.placed, (self.kind, calls) = False, ("", [])
        settings = _Bf16Settings()
        if not BF16_VARIABLES.isdisjoint(ctx.source.strings):
            visit_read_only(ctx.module, settings)
        # Set only in blocks left on the XLA / NxD flow (NM400 keeps it there): nowhere else to put bf16.
        if settings.blocks and any(
            not ctx.state(XlaFlowBlocks).runs_xla_flow(block) for block in settings.blocks
        ):
            self.placed, (self.kind, calls) = _targets(ctx.module)
        self.targets = set(calls) if self.placed else set()
        # Targets with `**` arguments that may already pass the keyword: a TODO instead (given twice, TypeError).
        self.unpacking: set[cst.Call] = set()
        for call in [call for call in calls if any(arg.star == "**" for arg in call.args)]:
            self._unpacked(ctx.module, call)

    def _unpacked(self, module: cst.Module, call: cst.Call) -> None:
        keywords = {"bf16"} if self.kind == "arguments" else DTYPE_KEYWORDS
        passed = unpacked_mapping(call, module, read=partial(unpacked_arguments, module))
        if passed is not None and keywords.isdisjoint(passed):
            return
        self.targets.discard(call)
        # `SFTConfig(**training_args.to_dict())` passes on the bf16 of arguments that have bf16=True or get it.
        sources = [unpacked_arguments_call(module, arg.value) for arg in call.args if arg.star == "**"]
        if passed is None or not any(
            source in self.targets or m.matches(find_keyword(source, "bf16"), m.Arg(value=m.Name("True")))
            for source in sources
            if source is not None
        ):
            self.unpacking.add(call)
