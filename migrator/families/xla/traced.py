"""The traced-model flows of one file that NM317 rewrites whole: `T = torch_neuronx.trace(M, example)`, then
only calls of `T`, `torch.jit.save(T, path)` statements and, in the same function (or both at module level),
`L = torch.jit.load(path)` of a path `T` was saved to, with only calls of `L`. Read once per file, before the
walk reaches the load (NM323 leaves the loads found here to NM317).

Also the traces whose result leaves their function, which NM317 makes `_NeuronCompiled(model)`, and the loads
(`torch.jit.load`, `torch.load`, in any function) of a file that only such compiled models are saved to, which
NM323 makes `_NeuronCompiled.load(path)`."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import libcst as cst

from migrator.cst_helpers import (
    argument,
    descendants,
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
# The helper class a trace whose result leaves its function becomes (state.py's `_NEURON_COMPILED_SOURCE`).
NEURON_COMPILED = "_NeuronCompiled"
JIT_SAVE = "torch.jit.save"
TORCH_SAVE = "torch.save"
JIT_LOAD = "torch.jit.load"
TORCH_LOAD = "torch.load"
# The traces' compiler options, which have no meaning once torch.compile compiles the model (a dynamic batch
# size: each new batch size compiles again), and their graph partitioning between the device and the CPU
# (torch-neuron's `fallback` / `minimum_segment_size` / `subgraph_builder_function`, torch_neuronx's
# `partitioner_config`): the compiled model runs whole on the device.
COMPILER_OPTIONS = frozenset(
    {
        "compiler_args",
        "compiler_workdir",
        "inline_weights_to_neff",
        "dynamic_batch_size",
        "fallback",
        "minimum_segment_size",
        "subgraph_builder_function",
        "partitioner_config",
    }
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
    # torch_neuronx.trace calls whose result leaves their function (returned, saved at once): `_NeuronCompiled`
    wrapped: set[cst.Call] = field(default_factory=set)
    # loads of a file that only `_NeuronCompiled.save` writes -> the path's code: `_NeuronCompiled.load(path)`
    compiled_loads: dict[cst.Call, str] = field(default_factory=dict)
    compiled_saves: set[cst.Call] = field(default_factory=set)  # saves of a `_NeuronCompiled`
    # variable -> the literals assigned to it anywhere in the file (None: a value that is not one): `path_keys`
    literals: dict[str, set[str | None]] = field(default_factory=dict)


class _Reader(cst.CSTVisitor):
    """Every assignment, call and name of the module with the function it is in (None: module level), and
    what binds each name of each function (parameters, other bindings than `name = value`)."""

    def __init__(self) -> None:
        self.functions: list[cst.FunctionDef] = []
        self.assigns: list[tuple[cst.Assign, cst.FunctionDef | None]] = []
        self.calls: list[tuple[cst.Call, cst.FunctionDef | None]] = []
        self.names: dict[str, int] = {}  # name -> how many times it is spelled
        self.statements: set[cst.Call] = set()  # calls that are a whole expression statement
        self.enclosing: dict[cst.FunctionDef, cst.FunctionDef | None] = {}
        self.defined: dict[str, list[cst.FunctionDef]] = {}  # module-level function name -> its definitions
        # (function, name) -> values of its `name = value` statements; None: bound some other way too
        self.bound: dict[tuple[cst.FunctionDef | None, str], list[cst.BaseExpression] | None] = {}
        self.lines: dict[
            cst.Call, cst.SimpleStatementLine
        ] = {}  # call -> the line it is the top expression of

    def scope(self) -> cst.FunctionDef | None:
        return self.functions[-1] if self.functions else None

    def _bind(self, name: str, value: cst.BaseExpression | None) -> None:
        key = (self.scope(), name)
        values = self.bound.get(key, [])
        self.bound[key] = None if value is None or values is None else [*values, value]

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        self._bind(node.name.value, None)
        if not self.functions:
            self.defined.setdefault(node.name.value, []).append(node)
        self.enclosing[node] = self.scope()
        self.functions.append(node)
        params = node.params
        for param in (*params.posonly_params, *params.params, *params.kwonly_params):
            self._bind(param.name.value, None)
        for star in (params.star_arg, params.star_kwarg):
            if isinstance(star, cst.Param):
                self._bind(star.name.value, None)

    def leave_FunctionDef(self, node: cst.FunctionDef) -> None:
        self.functions.pop()

    def visit_ClassDef(self, node: cst.ClassDef) -> bool:
        self._bind(node.name.value, None)
        return True

    def visit_SimpleStatementLine(self, node: cst.SimpleStatementLine) -> None:
        if len(node.body) != 1:
            return
        statement = node.body[0]
        value = statement.value if isinstance(statement, (cst.Expr, cst.Assign, cst.Return)) else None
        if isinstance(value, cst.Call):
            self.lines[value] = node
        if isinstance(statement, cst.Expr) and isinstance(value, cst.Call) and value.args:
            self.lines.setdefault(value.args[0].value, node)  # `torch.jit.save(trace(...), path)`

    def visit_Assign(self, node: cst.Assign) -> None:
        self.assigns.append((node, self.scope()))
        simple = len(node.targets) == 1 and isinstance(node.targets[0].target, cst.Name)
        for target in node.targets:
            for name in descendants(target.target, cst.Name):
                self._bind(name.value, node.value if simple else None)

    def _bound_otherwise(self, target: cst.CSTNode | None) -> None:
        for name in descendants(target, cst.Name) if target is not None else ():
            self._bind(name.value, None)

    def visit_AugAssign(self, node: cst.AugAssign) -> None:
        self._bound_otherwise(node.target)

    def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
        self._bound_otherwise(node.target)

    def visit_For(self, node: cst.For) -> None:
        self._bound_otherwise(node.target)

    def visit_AsName(self, node: cst.AsName) -> None:
        self._bound_otherwise(node.name)

    def visit_NamedExpr(self, node: cst.NamedExpr) -> None:
        self._bound_otherwise(node.target)

    def visit_CompFor(self, node: cst.CompFor) -> None:
        self._bound_otherwise(node.target)

    def visit_Lambda(self, node: cst.Lambda) -> None:
        self._bound_otherwise(node.params)

    def visit_Global(self, node: cst.Global) -> None:
        for item in node.names:
            self._bind(item.name.value, None)
            self.bound[(None, item.name.value)] = None  # the function may rebind the module's name

    def visit_Nonlocal(self, node: cst.Nonlocal) -> None:
        for item in node.names:
            self._bind(item.name.value, None)

    def visit_Call(self, node: cst.Call) -> None:
        self.calls.append((node, self.scope()))

    def visit_Expr(self, node: cst.Expr) -> None:
        if isinstance(node.value, cst.Call):
            self.statements.add(node.value)

    def visit_Name(self, node: cst.Name) -> None:
        self.names[node.value] = self.names.get(node.value, 0) + 1


def traced_flows(ctx: FileContext, whole: bool = True) -> TracedFlows:
    """`whole`: rewrite the flows of one function whole (not in a file of several processes, each of which needs
    its own device)."""
    reader = _Reader()
    visit_read_only(ctx.module, reader)
    found = TracedFlows(literals=_literals(reader))
    for assign, scope in reader.assigns if whole else ():
        flow = _flow(ctx, reader, assign)
        if flow is not None and _resolved(ctx, reader, flow, scope, found.literals):
            found.flows[flow.trace] = flow
            found.saves.update(dict.fromkeys(flow.saves, flow))
            found.loads.update(dict.fromkeys(flow.loads, flow))
    _CompiledArtifacts(ctx, reader, found).read()
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
    if call in found.flows or call in found.loads or call in found.compiled_loads:
        return False
    name = ctx.module_qualified(call.func) or ""
    return name == JIT_LOAD or name.startswith((f"{INF1_PACKAGE}.", f"{INF1_NAMESPACE}."))


def trace_api(ctx: FileContext, func: cst.BaseExpression) -> str | None:
    """Which trace a callee is, else None. A name the module binds to torch-neuron in one branch and to
    torch_neuronx in another (`import torch_neuron as neuron` / `import torch_neuronx as neuron` under a chip
    switch) is a trace either way: both take the same arguments, and both rewrite alike; it reads as torch_neuronx's."""
    api = ctx.module_qualified(func)
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


def _resolved(ctx: FileContext, reader: _Reader, flow: TracedFlow, scope, literals: dict) -> bool:
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
    paths = {key for save in flow.saves for key in path_keys(literals, saved_path(ctx, save, flow.traced))}
    reloaded = 0  # loads assigned to the traced model's own name (`traced = torch.jit.load(path)`)
    for call, call_scope in reader.calls:
        path = argument(call, 0, "f")
        if (
            ctx.module_qualified(call.func) != JIT_LOAD
            or path is None
            or not paths & path_keys(literals, path)
        ):
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
    if ctx.module_qualified(call.func) == JIT_SAVE and _is_name(argument(call, 0, "m"), traced):
        return argument(call, 1, "f")
    if is_method_call(call, "save") and _is_name(call.func.value, traced):
        return argument(call, 0, "f")
    return None


def path_keys(literals: dict[str, set[str | None]], path: cst.BaseExpression) -> set[str]:
    """The ways one file is named: the expression's code, and the literal it is or that its variable only
    ever holds (`literals`: `TracedFlows.literals`)."""
    keys = {f"code:{source_code(path)}"}
    literal = string_value(path)
    if literal is None and isinstance(path, cst.Name):
        values = literals.get(path.value, set())
        literal = next(iter(values)) if len(values) == 1 else None
    if literal is not None:
        keys.add(f"str:{literal}")
    return keys


def _literals(reader: _Reader) -> dict[str, set[str | None]]:
    literals: dict[str, set[str | None]] = {}
    for assign, _ in reader.assigns:
        for target in assign.targets:
            if isinstance(target.target, cst.Name):
                literals.setdefault(target.target.value, set()).add(string_value(assign.value))
    return literals


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


# Whole expressions a path's code may hold without parentheses around it where a name stood for it.
_ATOMS = (
    cst.Name,
    cst.Attribute,
    cst.Call,
    cst.Subscript,
    cst.SimpleString,
    cst.FormattedString,
    cst.Integer,
)
# A name may stand for the expression it is bound to, which may use names bound the same way, this deep.
_DEPTH = 8


class _CompiledArtifacts:
    """The traces NM317 makes `_NeuronCompiled(model)` (their result leaves their function: returned, saved at
    once), the saves that write such a compiled model (`torch.jit.save(C, path)`, `C.save(path)`), and the loads
    (`torch.jit.load(path)`, `torch.load(path)`) of a file that only such saves write: the same path, its names
    read as what they are bound to (`d = os.path.join(args.dir, name)` in each of two functions is one path)."""

    def __init__(self, ctx: FileContext, reader: _Reader, found: TracedFlows) -> None:
        self.ctx, self.reader, self.found = ctx, reader, found
        self.keys: set[str] = set()  # paths only compiled models are saved to (the loads of these are too)

    def read(self) -> None:
        found, reader = self.found, self.reader
        ranks = re.search(r"\b(?:LOCAL_)?RANK\b", self.ctx.code)  # each process needs its own device
        found.wrapped = {
            call for call, scope in reader.calls if not ranks and self._leaves_its_function(call, scope)
        }
        saves = {}  # save call -> (saved value or None, path key, scope)
        for call, scope in reader.calls:
            saved = _saved(self.ctx, call)
            if saved is not None and saved[1] is not None:
                saves[call] = (saved[0], self._key(saved[1], scope), scope)
        self.keys = {key for _, key, _ in saves.values()}
        while True:  # a saved value may be a load of a path in `keys`: narrow them until they hold
            compiled = {
                call
                for call, (value, _, scope) in saves.items()
                if value is not None and self._compiled(value, scope, 0)
            }
            keys = self.keys - {key for call, (_, key, _) in saves.items() if call not in compiled}
            if keys == self.keys:
                break
            self.keys = keys
        found.compiled_saves = compiled
        found.compiled_loads = {
            call: source_code(path)
            for call, scope in reader.calls
            if (path := self._load_path(call)) is not None and self._key(path, scope) in self.keys
        }

    def _leaves_its_function(self, call: cst.Call, scope: cst.FunctionDef | None) -> bool:
        """`return trace(...)`, `traced = trace(...)` then `return traced`, or `torch.jit.save(trace(...), path)`,
        of a trace NM317 does not rewrite as a flow, given its model directly."""
        if self.ctx.module_qualified(call.func) != NEURONX_TRACE or call in self.found.flows:
            return False
        if any(arg.star for arg in call.args) or argument(call, 0, "func") is None:
            return False
        line = self.reader.lines.get(call)
        statement = line.body[0] if line is not None else None
        if isinstance(statement, cst.Return):
            return statement.value is call
        if isinstance(statement, cst.Assign) and statement.value is call and scope is not None:
            target = statement.targets[0].target
            returned = {
                r.value.value for r in descendants(scope, cst.Return) if isinstance(r.value, cst.Name)
            }
            return isinstance(target, cst.Name) and target.value in returned
        return (
            isinstance(statement, cst.Expr)
            and isinstance(statement.value, cst.Call)
            and self.ctx.module_qualified(statement.value.func) == JIT_SAVE
            and bool(statement.value.args)
            and statement.value.args[0].value is call
        )

    def _load_path(self, call: cst.Call) -> cst.BaseExpression | None:
        """The path of `torch.jit.load(path)` / `torch.load(path)` given nothing else, not one NM317's flows
        take (the load of a flow is the compiled model itself)."""
        if self.ctx.module_qualified(call.func) not in (JIT_LOAD, TORCH_LOAD) or call in self.found.loads:
            return None
        if len(call.args) != 1 or call.args[0].star or (call.args[0].keyword or cst.Name("f")).value != "f":
            return None
        return call.args[0].value

    def _compiled(self, value: cst.BaseExpression, scope: cst.FunctionDef | None, depth: int) -> bool:
        """Whether `value` is a `_NeuronCompiled` once migrated, wherever it was bound."""
        if depth > _DEPTH:
            return False
        if isinstance(value, cst.Call):
            if value in self.found.wrapped:
                return True
            path = self._load_path(value)
            if path is not None:
                return self._key(path, scope) in self.keys
            if not isinstance(value.func, cst.Name) or not self._function(value.func.value, scope):
                return False
            definitions = self.reader.defined[value.func.value]
            returns = [r.value for r in descendants(definitions[0], cst.Return)]
            return bool(returns) and all(
                r is not None and self._compiled(r, definitions[0], depth + 1) for r in returns
            )
        if isinstance(value, cst.Name):
            values, where = _lookup(self.reader, scope, value.value)
            return bool(values) and all(self._compiled(bound, where, depth + 1) for bound in values)
        return False

    def _function(self, name: str, scope: cst.FunctionDef | None) -> bool:
        """Whether `name` read in `scope` is the function the module defines once by that name, bound no other way."""
        return (
            len(self.reader.defined.get(name, ())) == 1
            and _lookup(self.reader, scope, name)[1] is None
            and not any(
                where is None and _is_name(target.target, name)
                for assign, where in self.reader.assigns
                for target in assign.targets
            )
        )

    def _key(self, path: cst.BaseExpression, scope: cst.FunctionDef | None, depth: int = 0) -> str:
        expanded = path.visit(_Expanded(self, scope, depth))
        literal = string_value(expanded)
        return f"str:{literal}" if literal is not None else f"code:{source_code(expanded)}"


class _Expanded(cst.CSTTransformer):
    """A path's code with each name bound once (`name = value`, in its function or the ones around it) read as
    that value."""

    def __init__(self, artifacts: _CompiledArtifacts, scope: cst.FunctionDef | None, depth: int) -> None:
        self.artifacts, self.scope, self.depth = artifacts, scope, depth

    def leave_Name(self, original: cst.Name, updated: cst.Name) -> cst.BaseExpression:
        values, where = _lookup(self.artifacts.reader, self.scope, original.value)
        if values is None or len(values) != 1 or self.depth >= _DEPTH:
            return updated
        value = values[0].visit(_Expanded(self.artifacts, where, self.depth + 1))
        if isinstance(value, _ATOMS):
            return value.with_changes(lpar=[], rpar=[])
        return value.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])

    def leave_Attribute(self, original: cst.Attribute, updated: cst.Attribute) -> cst.Attribute:
        return updated.with_changes(attr=original.attr)  # `args.dir`: `dir` is no name of its own

    def leave_Arg(self, original: cst.Arg, updated: cst.Arg) -> cst.Arg:
        return updated.with_changes(keyword=original.keyword)


def _lookup(
    reader: _Reader, scope: cst.FunctionDef | None, name: str
) -> tuple[list[cst.BaseExpression] | None, cst.FunctionDef | None]:
    """The values `name` is bound to where `scope` reads it (None: bound some other way, or not in the file),
    and the function they are bound in."""
    while True:
        if (scope, name) in reader.bound:
            return reader.bound[(scope, name)], scope
        if scope is None:
            return None, None
        scope = reader.enclosing[scope]


def _saved(
    ctx: FileContext, call: cst.Call
) -> tuple[cst.BaseExpression | None, cst.BaseExpression | None] | None:
    """What a save call writes and where (`torch.jit.save(m, f)`, `torch.save(obj, f)`, `<value>.save(f)`),
    else None."""
    name = ctx.module_qualified(call.func)
    if name == JIT_SAVE:
        return argument(call, 0, "m"), argument(call, 1, "f")
    if name == TORCH_SAVE:
        return argument(call, 0, "obj"), argument(call, 1, "f")
    if is_method_call(call, "save"):
        return call.func.value, argument(call, 0, "f")
    return None
