"""Models a file loads with `from_pretrained(..., torchscript=True)`, which Transformers 5 rejects (TypeError), and
where each goes. `torchscript=True` made the model return tuples (for torch.jit.trace); in a file that trains
nothing, NM221 keeps them at the load (`return_dict=False`, for the architectures whose forward takes it from the
config, `RETURN_DICT_FALSE_WORKS`) or call by call: each call of the model's forward the file makes passes
`return_dict=False`, the model followed through the names it is bound to, the file's own functions and wrapper
classes it is handed to (`self.model = model`, then `self.model(...)`), and its traces, whose replacement returns
the ModelOutput's tuple (NM317). Read once per file, before the walk, by both rules."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import libcst as cst
import libcst.matchers as m
from libcst.metadata import Access, Assignment, MetadataWrapper, Scope, ScopeProvider

from migrator.cst_helpers import (
    descendants,
    dotted_name,
    find_keyword,
    literal_value,
    method_calls,
    parents,
    shows,
    source_code,
)
from migrator.families.xla.traced import NEURON_COMPILED, TRACES
from migrator.transform import FileContext, module_imports
from usercode.model_ids import table_entry

# Model types whose models return tuples with `return_dict=False` given at the load (the config's), model type ->
# its classes' prefix; measured on the pinned Transformers, where many others raise AttributeError inside their
# forward with it (ViT, GPT-2, Llama, Swin, ConvNeXt, DeiT, BEiT, CLIP): tests/migrator/test_stack_calls.py
# builds each again.
RETURN_DICT_FALSE_WORKS = {
    "bert": "Bert",
    "distilbert": "DistilBert",
    "roberta": "Roberta",
    "xlm-roberta": "XLMRoberta",
    "albert": "Albert",
    "electra": "Electra",
    "deberta-v2": "DebertaV2",
    "resnet": "ResNet",
}
# A file that trains a model (where `torchscript=True`'s untied embeddings would train apart from each other).
TRAINS = re.compile(r"\.backward\(|\w*Trainer\(|\.train\(\)|\boptim\.|\boptimizer\b|\.fit\(")

# Module methods that return the module itself: their result is the model still.
RETURNS_ITSELF = frozenset(
    {
        "eval",
        "train",
        "to",
        "cpu",
        "cuda",
        "half",
        "float",
        "double",
        "bfloat16",
        "requires_grad_",
        "share_memory",
    }
)


@dataclass
class ModelUses:
    calls: list[cst.Call] = field(default_factory=list)  # calls of the model's forward, in the order found
    names: set[str] = field(
        default_factory=set
    )  # the names and attributes that hold it (the walk watches them)
    traces: list[cst.Call] = field(
        default_factory=list
    )  # the traces (torch_neuronx.trace, ...) it is handed to
    unfollowed: str | None = None  # the code of the first use that is not followed


class _Follower:
    def __init__(self, module: cst.Module, scopes, parents) -> None:
        self.module = module
        self.scopes = scopes
        self.parents = parents
        self.imports = module_imports(module)
        self.definitions: dict[str, list[cst.FunctionDef | cst.ClassDef]] = {}
        for statement in module.body:
            if isinstance(statement, (cst.FunctionDef, cst.ClassDef)):
                self.definitions.setdefault(statement.name.value, []).append(statement)
        self.uses = ModelUses()
        self.order = {node: index for index, node in enumerate(descendants(module, cst.CSTNode))}
        self.bound: set[cst.CSTNode] = set()  # the Name / Param nodes bound to the model
        self.accesses: list[Access] = []
        self.attributes: set[tuple[cst.ClassDef, str]] = set()

    def unfollowed(self, node: cst.CSTNode) -> None:
        """Where the model goes unfollowed: shown by the statement there (its first line), or by the
        expression where that statement is a compound one's (an `if`, a `for`)."""
        if self.uses.unfollowed is not None:
            return
        shown = next(
            (
                parent
                for parent in (node, *self.enclosing(node))
                if isinstance(parent, (cst.BaseSmallStatement, cst.BaseCompoundStatement))
            ),
            node,
        )
        if isinstance(shown, cst.BaseCompoundStatement):
            shown = node
        self.uses.unfollowed = source_code(shown).strip().splitlines()[0]

    def follow(self, node: cst.BaseExpression) -> None:
        """`node` evaluates to the model: what is done with it."""
        parent = self.parents.get(node)
        if isinstance(parent, cst.Call) and parent.func is node:
            self.uses.calls.append(parent)
        elif isinstance(parent, cst.Attribute) and parent.value is node:
            call = self.parents.get(parent)
            called = isinstance(call, cst.Call) and call.func is parent
            if called and parent.attr.value == "forward":
                self.uses.calls.append(call)
            elif called and parent.attr.value in RETURNS_ITSELF:
                self.follow(call)
            # else an attribute read (`model.config`) or another method (`generate`, `save_pretrained`): their
            # results are not the forward's outputs
        elif isinstance(parent, cst.Expr):
            pass
        elif isinstance(parent, cst.Assign) and parent.value is node:
            for target in parent.targets:
                self.bind(target.target)
        elif isinstance(parent, cst.Arg) and parent.value is node and not parent.star:
            self.handed(self.parents[parent], parent)
        else:
            self.unfollowed(node)

    def bind(self, target: cst.BaseExpression) -> None:
        if isinstance(target, cst.Name):
            self.bind_name(target, target)
        elif isinstance(target, cst.Attribute) and dotted_name(target.value) == "self":
            self.bind_attribute(target)
        else:
            self.unfollowed(target)

    def bind_name(self, node: cst.Name | cst.Param, name: cst.Name) -> None:
        if node in self.bound:
            return
        self.bound.add(node)
        self.uses.names.add(name.value)
        scope: Scope = self.scopes[name]
        for assignment in scope.assignments[name.value]:
            if isinstance(assignment, Assignment) and assignment.node is node:
                # In source order: libcst keeps references in a set, whose order changes from run to run, and
                # the first use not followed names the TODO.
                for access in sorted(assignment.references, key=lambda access: self.order[access.node]):
                    self.accesses.append(access)
                    self.follow(access.node)

    def bind_attribute(self, target: cst.Attribute) -> None:
        """`self.X = model` in a method of a class of the file: every `self.X` of that class is the model, when
        nothing else is stored there and nothing outside the class reads `.X`."""
        owner = next((node for node in self.enclosing(target) if isinstance(node, cst.ClassDef)), None)
        attribute = target.attr.value
        if owner is None or (owner, attribute) in self.attributes:
            return
        self.attributes.add((owner, attribute))
        self.uses.names.add(attribute)
        inside = set(descendants(owner, cst.Attribute))
        for node in descendants(self.module, cst.Attribute):
            if node.attr.value != attribute or node is target:
                continue
            if node not in inside or dotted_name(node.value) != "self":
                self.unfollowed(node)  # `.X` read elsewhere: may be another object's, or the model's
            elif self.assigned(node):
                self.unfollowed(node)  # something else stored there too
            else:
                self.follow(node)

    def assigned(self, node: cst.Attribute) -> bool:
        target = self.parents.get(node)
        return isinstance(target, (cst.AssignTarget, cst.AnnAssign, cst.AugAssign))

    def enclosing(self, node: cst.CSTNode):
        while node in self.parents:
            node = self.parents[node]
            yield node

    def handed(self, call: cst.Call, arg: cst.Arg) -> None:
        """The model is an argument of `call`."""
        callee = dotted_name(call.func)
        head, _, rest = (callee or "").partition(".")
        qualified = f"{self.imports[head]}.{rest}".rstrip(".") if head in self.imports else callee
        first = next((a for a in call.args if a.keyword is None), None)
        # A trace, or the helper a migration made of one (this file migrated before): the same hand-off.
        traced = qualified in TRACES or callee == NEURON_COMPILED
        if traced and (arg is first or (arg.keyword and arg.keyword.value == "func")):
            self.uses.traces.append(call)
            return
        if shows(callee):
            return
        definitions = self.definitions.get(callee or "", [])
        calls = [c for c in descendants(self.module, cst.Call) if dotted_name(c.func) == callee]
        if len(definitions) != 1 or len(calls) != 1:  # another caller may hand it something else
            self.unfollowed(call)
            return
        definition = definitions[0]
        function = definition
        skipped = 0
        if isinstance(definition, cst.ClassDef):
            function = next(
                (
                    statement
                    for statement in definition.body.body
                    if isinstance(statement, cst.FunctionDef) and statement.name.value == "__init__"
                ),
                None,
            )
            skipped = 1  # self
        if function is None:
            self.unfollowed(call)
            return
        param = self.parameter(function, call, arg, skipped)
        if param is None:
            self.unfollowed(call)
            return
        self.bind_name(param, param.name)

    @staticmethod
    def parameter(function: cst.FunctionDef, call: cst.Call, arg: cst.Arg, skipped: int) -> cst.Param | None:
        params = list(function.params.posonly_params) + list(function.params.params)
        if arg.keyword is not None:
            named = [*params, *function.params.kwonly_params]
            return next((p for p in named if p.name.value == arg.keyword.value), None)
        if any(a.star for a in call.args):
            return None
        position = [a for a in call.args if a.keyword is None].index(arg) + skipped
        return params[position] if position < len(params) else None


def model_uses(module: cst.Module, load: cst.Call, resolved: tuple) -> ModelUses:
    """Where the model `load` (a call in `module`, unmodified) makes goes; `resolved`: the module's
    `scopes_and_parents`, which every load of it shares."""
    follower = _Follower(module, *resolved)
    follower.follow(load)
    # A name is not flow-sensitive: where one of its reads may see another value, that value goes there too.
    for access in follower.accesses:
        if any(
            not isinstance(referent, Assignment) or referent.node not in follower.bound
            for referent in access.referents
        ):
            follower.unfollowed(access.node)
    return follower.uses


def scopes_and_parents(module: cst.Module) -> tuple:
    """libcst's scope analysis and the parents of `module` (each a walk of it)."""
    return MetadataWrapper(module, unsafe_skip_copy=True).resolve(ScopeProvider), parents(module)


def model_type(module: cst.Module, load: cst.Call) -> str | None:
    """The model type of a load whose outputs `return_dict=False` at the load keeps as tuples in the pinned
    Transformers (`RETURN_DICT_FALSE_WORKS`): by its class, or an Auto class's literal checkpoint id."""
    owner = dotted_name(load.func.value) if isinstance(load.func, cst.Attribute) else None
    name = (owner or "").rpartition(".")[2]
    for model_type, prefix in RETURN_DICT_FALSE_WORKS.items():
        if re.fullmatch(rf"{prefix}(?:For\w+|Model)", name):
            return model_type
    given = load.args[0].value if load.args and load.args[0].keyword is None else None
    if isinstance(given, cst.Name):  # a module-level constant: MODEL_ID = "..."
        given = next(
            (
                line.body[0].value
                for line in module.body
                if m.matches(
                    line,
                    m.SimpleStatementLine(body=[m.Assign(targets=[m.AssignTarget(m.Name(given.value))])]),
                )
            ),
            given,
        )
    checkpoint = literal_value(given) if given is not None else None
    entry = table_entry(checkpoint) if name.startswith("AutoModel") and isinstance(checkpoint, str) else None
    return entry.model_type if entry is not None and entry.model_type in RETURN_DICT_FALSE_WORKS else None


class TorchscriptLoads:
    """The `torchscript=True` loads of a file that trains nothing whose tuples are kept call by call: literal
    True, no `return_dict=` beside it, an architecture not known to take the config's `return_dict=False`."""

    def __init__(self, ctx: FileContext) -> None:
        self.loads: dict[cst.Call, ModelUses] = {}  # each such load -> where its model goes
        self.calls: set[cst.Call] = set()  # the calls that pass return_dict=False (of fully followed models)
        self.traces: set[cst.Call] = set()  # their traces: the replacement returns the ModelOutput's tuple
        self.names: set[str] = set()  # the names and attributes that hold those models
        if "torchscript" not in ctx.code or TRAINS.search(ctx.code):
            return
        resolved = None  # resolved once, at the first load followed
        for load in method_calls(ctx.module, "from_pretrained"):
            keyword = find_keyword(load, "torchscript")
            if (
                keyword is None
                or literal_value(keyword.value) is not True
                or find_keyword(load, "return_dict") is not None
                or model_type(ctx.module, load) is not None
            ):
                continue
            resolved = resolved or scopes_and_parents(ctx.module)
            uses = self.loads[load] = model_uses(ctx.module, load, resolved)
            if uses.unfollowed is None:
                self.calls.update(uses.calls)
                self.traces.update(uses.traces)
                self.names |= uses.names
