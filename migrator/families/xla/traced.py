"""The traced-model flows of one file that NM317 rewrites whole: `T = torch_neuronx.trace(M, example)`, then
only calls of `T`, `torch.jit.save(T, path)` statements and, in the same function (or both at module level),
`L = torch.jit.load(path)` of a path `T` was saved to, with only calls of `L`. Read once per file, before the
walk reaches the load (NM323 leaves the loads found here to NM317)."""

from __future__ import annotations

from dataclasses import dataclass, field

import libcst as cst

from migrator.cst_helpers import (
    argument,
    dotted_name,
    is_method_call,
    source_code,
    string_value,
    visit_read_only,
)
from migrator.families.xla.names import INF1_NAMESPACE, INF1_PACKAGE
from migrator.transform import FileContext, module_import_choices

NEURONX_TRACE = "torch_neuronx.trace"
# The traces rewritten: torch_neuronx's (inf2/trn1) and torch-neuron's (inf1), which take the same arguments.
TRACES = frozenset({NEURONX_TRACE, f"{INF1_NAMESPACE}.trace", f"{INF1_PACKAGE}.trace"})
JIT_SAVE = "torch.jit.save"
JIT_LOAD = "torch.jit.load"
# The traces' compiler options, which have no meaning once torch.compile compiles the model (a dynamic batch
# size: each new batch size compiles again).
COMPILER_OPTIONS = frozenset(
    {"compiler_args", "compiler_workdir", "inline_weights_to_neff", "dynamic_batch_size"}
)


@dataclass
class TracedFlow:
    trace: cst.Call  # torch_neuronx.trace(M, example, ...)
    api: str  # which trace
    model: str  # M
    example: str  # the example inputs' code: the shapes the model is called at
    traced: str  # T
    options: tuple[str, ...]  # compiler options dropped
    saves: list[cst.Call] = field(default_factory=list)  # torch.jit.save(T, path) / T.save(path) statements
    loads: dict[cst.Call, str] = field(default_factory=dict)  # torch.jit.load(path) -> the path's code


@dataclass
class TracedFlows:
    flows: dict[cst.Call, TracedFlow] = field(default_factory=dict)  # by trace call
    saves: dict[cst.Call, TracedFlow] = field(default_factory=dict)
    loads: dict[cst.Call, TracedFlow] = field(default_factory=dict)
    # calls of a traced or loaded name, with the flow of that name: inputs move
    calls: dict[cst.Call, TracedFlow] = field(default_factory=dict)
    # Whether torch-neuron (inf1) is still used once the flows are rewritten: an inf1 call, or a load of a
    # file that may hold an inf1 model (its import registers the ops such a file is made of).
    inf1_used: bool = True


class _Reader(cst.CSTVisitor):
    """Every assignment, call and name of the module with the function it is in (None: module level)."""

    def __init__(self) -> None:
        self.functions: list[cst.FunctionDef] = []
        self.assigns: list[tuple[cst.Assign, cst.FunctionDef | None]] = []
        self.calls: list[tuple[cst.Call, cst.FunctionDef | None]] = []
        self.names: dict[str, int] = {}  # name -> how many times it is spelled
        self.statements: set[cst.Call] = set()  # calls that are a whole expression statement

    def scope(self) -> cst.FunctionDef | None:
        return self.functions[-1] if self.functions else None

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        self.functions.append(node)

    def leave_FunctionDef(self, node: cst.FunctionDef) -> None:
        self.functions.pop()

    def visit_Assign(self, node: cst.Assign) -> None:
        self.assigns.append((node, self.scope()))

    def visit_Call(self, node: cst.Call) -> None:
        self.calls.append((node, self.scope()))

    def visit_Expr(self, node: cst.Expr) -> None:
        if isinstance(node.value, cst.Call):
            self.statements.add(node.value)

    def visit_Name(self, node: cst.Name) -> None:
        self.names[node.value] = self.names.get(node.value, 0) + 1


def traced_flows(ctx: FileContext) -> TracedFlows:
    reader = _Reader()
    visit_read_only(ctx.module, reader)
    found = TracedFlows()
    for assign, scope in reader.assigns:
        flow = _flow(ctx, reader, assign)
        if flow is not None and _resolved(ctx, reader, flow, scope):
            found.flows[flow.trace] = flow
            found.saves.update(dict.fromkeys(flow.saves, flow))
            found.loads.update(dict.fromkeys(flow.loads, flow))
    names = {flow.traced: flow for flow in found.flows.values()}
    names |= {_target(load, reader): flow for load, flow in found.loads.items()}
    found.calls = {
        call: names[call.func.value]
        for call, _ in reader.calls
        if isinstance(call.func, cst.Name) and call.func.value in names
    }
    found.inf1_used = any(_uses_inf1(ctx, call, found) for call, _ in reader.calls)
    return found


def _uses_inf1(ctx: FileContext, call: cst.Call, found: TracedFlows) -> bool:
    if call in found.flows or call in found.loads:
        return False
    name = qualified(ctx, call.func) or ""
    return name == JIT_LOAD or name.startswith((f"{INF1_PACKAGE}.", f"{INF1_NAMESPACE}."))


def qualified(ctx: FileContext, node: cst.BaseExpression) -> str | None:
    """A callee's qualified name through the module's imports, wherever the walk is."""
    name = dotted_name(node)
    if name is None:
        return None
    head, _, rest = name.partition(".")
    base = ctx.module_imports.get(head)
    return name if base is None else f"{base}.{rest}" if rest else base


def trace_api(ctx: FileContext, func: cst.BaseExpression) -> str | None:
    """Which trace a callee is, else None. A name the module binds to torch-neuron in one branch and to
    torch_neuronx in another (`import torch_neuron as neuron` / `import torch_neuronx as neuron` under a chip
    switch) is a trace either way: both take the same arguments, and both rewrite alike; it reads as torch_neuronx's."""
    api = qualified(ctx, func)
    if api in TRACES:
        return api
    name = dotted_name(func)
    head, _, rest = (name or "").partition(".")
    choices = module_import_choices(ctx.module).get(head, frozenset())
    if rest and len(choices) > 1 and all(f"{choice}.{rest}" in TRACES for choice in choices):
        return NEURONX_TRACE
    return None


def _flow(ctx: FileContext, reader: _Reader, assign: cst.Assign) -> TracedFlow | None:
    call = assign.value
    api = trace_api(ctx, call.func) if isinstance(call, cst.Call) else None
    if api is None:
        return None
    if len(assign.targets) != 1 or not isinstance(assign.targets[0].target, cst.Name):
        return None
    model, example = argument(call, 0, "func"), argument(call, 1, "example_inputs")
    keywords = [arg.keyword.value for arg in call.args if arg.keyword is not None]
    positional = [arg for arg in call.args if arg.keyword is None]
    if not isinstance(model, cst.Name) or example is None or any(arg.star for arg in call.args):
        return None
    if len(positional) > 2 or not set(keywords) - {"func", "example_inputs"} <= COMPILER_OPTIONS:
        return None
    options = tuple(name for name in keywords if name in COMPILER_OPTIONS)
    return TracedFlow(call, api, model.value, source_code(example), assign.targets[0].target.value, options)


def _resolved(ctx: FileContext, reader: _Reader, flow: TracedFlow, scope) -> bool:
    """Whether every use of the traced model is one the rewrite follows, the model itself is not called
    after it is traced (it moves to the device), and each load of a file it was saved to is rewritable."""
    traced_calls = 0
    for call, _ in reader.calls:
        if _is_name(call.func, flow.traced):
            traced_calls += 1
        elif _is_name(call.func, flow.model) and _after(ctx, call, flow.trace):
            return False
        elif saved_path(ctx, call, flow.traced) is not None:
            if call not in reader.statements:
                return False
            flow.saves.append(call)
    paths = {key for save in flow.saves for key in path_keys(reader, saved_path(ctx, save, flow.traced))}
    reloaded = 0  # loads assigned to the traced model's own name (`traced = torch.jit.load(path)`)
    for call, call_scope in reader.calls:
        path = argument(call, 0, "f")
        if qualified(ctx, call.func) != JIT_LOAD or path is None or not paths & path_keys(reader, path):
            continue
        loaded = _target(call, reader)
        if loaded is None or call_scope is not scope:
            return False
        if loaded == flow.traced:
            reloaded += 1
        elif not _only_called(reader, loaded):
            return False
        flow.loads[call] = source_code(path)
    # the assignments, the calls and the saves: every other spelling is a use the rewrite does not follow
    return reader.names.get(flow.traced, 0) == 1 + reloaded + traced_calls + len(flow.saves)


def saved_path(ctx: FileContext, call: cst.Call, traced: str) -> cst.BaseExpression | None:
    """Where `call` saves the traced model named `traced` (`torch.jit.save(traced, path)`, inf1's
    `traced.save(path)`), else None."""
    if qualified(ctx, call.func) == JIT_SAVE and _is_name(argument(call, 0, "m"), traced):
        return argument(call, 1, "f")
    if is_method_call(call, "save") and _is_name(call.func.value, traced):
        return argument(call, 0, "f")
    return None


def path_keys(reader: _Reader, path: cst.BaseExpression) -> set[str]:
    """The ways one file is named: the expression's code, and the literal it is or that its variable only
    ever holds."""
    keys = {f"code:{source_code(path)}"}
    literal = string_value(path)
    if literal is None and isinstance(path, cst.Name):
        values = {
            string_value(assign.value)
            for assign, _ in reader.assigns
            for target in assign.targets
            if _is_name(target.target, path.value)
        }
        literal = next(iter(values)) if len(values) == 1 else None
    if literal is not None:
        keys.add(f"str:{literal}")
    return keys


def _target(call: cst.Call, reader: _Reader) -> str | None:
    """The one name `call`'s value is assigned to."""
    for assign, _ in reader.assigns:
        if (
            assign.value is call
            and len(assign.targets) == 1
            and isinstance(assign.targets[0].target, cst.Name)
        ):
            return assign.targets[0].target.value
    return None


def _only_called(reader: _Reader, name: str) -> bool:
    calls = sum(1 for call, _ in reader.calls if _is_name(call.func, name))
    return reader.names.get(name, 0) == 1 + calls


def _is_name(node: cst.BaseExpression | None, name: str) -> bool:
    return isinstance(node, cst.Name) and node.value == name


def _after(ctx: FileContext, node: cst.CSTNode, than: cst.CSTNode) -> bool:
    here, there = ctx.source_map.position(node), ctx.source_map.position(than)
    return here is None or there is None or here > there
