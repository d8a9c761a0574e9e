"""What the training rules share in one file: function scopes (where the arguments' sharding goes), which
names are references, which calls are assigned to a variable, and the symbols kept with a TODO."""

from __future__ import annotations

from dataclasses import dataclass, field

import libcst as cst
import libcst.matchers as m

from migrator.cst_helpers import (
    descendants,
    find_keyword,
    is_literal,
    is_method_call,
    keyword_arg,
    method_calls,
    source_code,
    with_appended,
)
from migrator.families.training.targets import (
    ADDED_FIELDS,
    ARGUMENTS_CLASSES,
    HINTS,
    MODEL_CLASS_SUFFIXES,
    RENAMES,
    SYMBOLS,
    TRAINING_MODELS,
    TRIGGERS,
    WORLD_SIZE,
    Target,
)
from migrator.families.training_args import TRAINING_ARGUMENTS
from migrator.transform import FileContext, Handler

RULES = ()


@dataclass
class Parallelism:
    """Sharding read from arguments in one scope, to be written as `DistributedConfig(...)`."""

    tp: cst.BaseExpression | None = None
    # None: not given (a TrainingNeuronConfig's default: replication); an expression: known at run time only
    zero_1: bool | cst.BaseExpression | None = None

    @property
    def sharded(self) -> bool:
        """Whether the load may be sharded (at run time, where `when_sharded` says)."""
        return (
            self.zero_1 is True
            or isinstance(self.zero_1, cst.BaseExpression)
            or (self.tp is not None and not is_literal(self.tp, "1"))
        )

    def when_sharded(self) -> str | None:
        """The condition the load is sharded on, where a run-time ZeRO-1 setting decides it; None where it is
        known here."""
        if (
            not isinstance(self.zero_1, cst.BaseExpression)
            or self._tp_source()
            and isinstance(self.tp, cst.Integer)
        ):
            return None
        zero_1 = source_code(self.zero_1)
        return f"{self._tp_source()} > 1 or {zero_1}" if self._tp_source() else zero_1

    def _tp_source(self) -> str | None:
        return None if self.tp is None or is_literal(self.tp, "1") else source_code(self.tp)

    def config(self) -> str:
        if not isinstance(self.zero_1, cst.BaseExpression):
            return self._config(bool(self.zero_1))
        # ZeRO-1 chosen at run time: fsdp_size when it is on; else the tensor-parallel degree's replication, and no
        # DistributedConfig at a degree of 1 (the Trainer's own data parallelism, as without ZeRO-1 here).
        tp = self._tp_source()
        otherwise = "None" if tp is None else self._config(False)
        if tp is not None and not isinstance(self.tp, cst.Integer):
            otherwise += f" if {tp} > 1 else None"
        return f"{self._config(True)} if {source_code(self.zero_1)} else {otherwise}"

    def _config(self, zero_1: bool) -> str:
        fields = []
        tp = self._tp_source()
        if tp:
            fields.append(f"tp_size={tp}")
        simple = self.tp is None or isinstance(self.tp, (cst.Name, cst.Attribute, cst.Integer, cst.Call))
        world = WORLD_SIZE if tp is None else f"{WORLD_SIZE} // {tp if simple else f'({tp})'}"
        fields.append(f"{'fsdp_size' if zero_1 else 'dp_replicate_size'}={world}")
        return f"DistributedConfig({', '.join(fields)})"


@dataclass
class Scope:
    node: cst.CSTNode  # the original Module or FunctionDef
    parallelism: Parallelism | None = None
    args_variable: str | None = None  # variable holding the literal arguments the parallelism came from
    trn_config_names: set[str] = field(default_factory=set)
    distributed_config_names: set[str] = field(default_factory=set)  # were `TrainingNeuronConfig(...)`
    sharded_at_load: bool = False  # a model of this scope gets a sharding DistributedConfig
    load_targets: set[cst.Call] = field(default_factory=set)  # original model loads to shard
    earlier_targets: set[cst.Call] = field(default_factory=set)  # ...already left when the sharding was read
    loads_left: dict[cst.Call, cst.Call] = field(default_factory=dict)  # original load -> node returned


@dataclass(frozen=True)
class ArgumentsCall:
    """A training arguments call the keyword rules rewrote, for the rules that add keywords to it."""

    table: dict  # its keyword table (training_args.py)
    migrated: bool  # an optimum-neuron class (not a Transformers/TRL one already)
    has_star: bool  # `**kwargs` among its arguments
    sharded: bool | str  # the model of its scope is sharded at load (a str: on that run-time condition)
    tensor_parallel: bool = False  # ...with a tensor-parallel degree read from its arguments


class TrainingFile:
    def __init__(self, ctx: FileContext) -> None:
        self.ctx = ctx
        self.scopes: list[Scope] = []
        self.in_import = 0
        self.not_references: set[cst.Name] = set()  # attribute names, keywords: Names that are not uses
        self._auto_model_names: frozenset[str] | None = None
        self.call_funcs: set[cst.BaseExpression] = (
            set()
        )  # funcs of calls: renamed (or kept) by the call rules
        self.visited_calls: set[cst.Call] = set()
        self.kept: set[str] = set()  # symbols left in place with a TODO somewhere: keep their import
        self.assigned: dict[cst.Call, str] = {}  # call -> variable it is assigned to
        self.inline_configs: set[cst.Call] = set()  # TrainingNeuronConfig calls rewritten in place
        self.rewritten_loads: set[str] = set()  # training model classes whose loads were rewritten
        # loads whose trn_config is parsed NeuronTrainingArguments' -> (its dataclass, its arguments variable)
        self.parsed_loads: dict[cst.Call, tuple[str, str]] = {}
        # `with lazy_load_for_parallelism(<parsed degrees>)` unwrapped behind a run-time check (NM211): the with
        # statement -> the check's condition and what it says
        self.lazy_load_guards: dict[cst.With, tuple[str, str]] = {}
        self.arguments_calls: dict[cst.Call, ArgumentsCall] = {}  # original call -> what nm202 made of it
        # the flags of parsed NeuronTrainingArguments that rules add to the script's own dataclass (NM209)
        self.parsed_flag_fields: set[str] = set()
        self.tensor_parallel_load = False  # a model load was given a DistributedConfig with a tp_size

    @property
    def scope(self) -> Scope:
        return self.scopes[-1]

    def model_loads(self, node: cst.CSTNode) -> list[cst.Call]:
        """Transformers model `from_pretrained` calls under `node` (tokenizers/configs excluded)."""
        loads = []
        for call in method_calls(node, "from_pretrained"):
            owner = self.ctx.qualified(call.func.value) or ""
            name = owner.rsplit(".", 1)[-1]
            if owner in TRAINING_MODELS or (
                owner.startswith("transformers.")
                and name.endswith(MODEL_CLASS_SUFFIXES)
                or owner in self.auto_model_names
            ):
                loads.append(call)
        return loads

    @property
    def auto_model_names(self) -> frozenset[str]:
        """Module names bound (once) to a Transformers Auto model class chosen at run time:
        `AutoModel = eval(f"transformers.AutoModel{'For' + args.task if args.task else ''}")`."""
        if self._auto_model_names is None:
            chosen = m.Assign(
                targets=[m.AssignTarget(m.Name())],
                value=m.Call(func=m.Name("eval"), args=[m.Arg(m.FormattedString() | m.SimpleString())]),
            )
            bindings: dict[str, list[bool]] = {}
            for assign in descendants(self.ctx.module, cst.Assign):
                for target in assign.targets:
                    for bound in descendants(target.target, cst.Name):
                        bindings.setdefault(bound.value, []).append(
                            m.matches(assign, chosen) and _auto_model_text(assign.value.args[0].value)
                        )
            self._auto_model_names = frozenset(name for name, kinds in bindings.items() if kinds == [True])
        return self._auto_model_names

    def training_loads(self, node: cst.CSTNode) -> list[cst.Call]:
        return [call for call in method_calls(node, "from_pretrained") if self.is_training_load(call)]

    def is_training_load(self, node: cst.CSTNode) -> bool:
        """`NeuronModelForCausalLM.from_pretrained(...)` and the other optimum-neuron training loads."""
        return (
            is_method_call(node, "from_pretrained") and self.ctx.qualified(node.func.value) in TRAINING_MODELS
        )

    def only_trn_config_uses(self, name: str, scope: Scope) -> bool:
        """Every use of `name` in the scope (but its assignments) is the trn_config of a training load."""
        nodes = descendants(scope.node, (cst.AssignTarget, cst.Attribute, cst.Arg, cst.Name, cst.Call))
        # The name as an assignment target, an attribute or a keyword is not a use of the variable.
        not_uses = {n.target for n in nodes if isinstance(n, cst.AssignTarget)}
        not_uses |= {n.attr for n in nodes if isinstance(n, cst.Attribute)}
        not_uses |= {n.keyword for n in nodes if isinstance(n, cst.Arg)}
        uses = [n for n in nodes if isinstance(n, cst.Name) and n.value == name and n not in not_uses]
        trn_args = {trn_config_arg(call)[1] for call in nodes if self.is_training_load(call)}
        return all(use in trn_args for use in uses)

    def add_distributed_config(self, original: cst.Call, updated: cst.Call) -> cst.Call:
        """`distributed_config=` with the scope's sharding on a model load (unless it has one already)."""
        parallelism = self.scope.parallelism
        if parallelism is None or not parallelism.sharded or find_keyword(original, "distributed_config"):
            return updated
        self.ctx.add_import("os")
        self.ctx.add_import("transformers", "DistributedConfig")
        self.tensor_parallel_load |= parallelism.tp is not None and not is_literal(parallelism.tp, "1")
        config = keyword_arg("distributed_config", cst.parse_expression(parallelism.config()))
        return updated.with_changes(args=with_appended(list(updated.args), [config]))


def trn_config_arg(call: cst.Call) -> tuple[int | None, cst.BaseExpression | None]:
    """Index and value of the `trn_config` argument of a training load (second positional or keyword)."""
    for index, arg in enumerate(call.args):
        if arg.keyword is not None and arg.keyword.value == "trn_config":
            return index, arg.value
    positional = [i for i, arg in enumerate(call.args) if arg.keyword is None and not arg.star]
    if len(positional) >= 2:
        return positional[1], call.args[positional[1]].value
    return None, None


def trn_config_source(value: cst.BaseExpression | None, scope: cst.CSTNode) -> str | None:
    """`args` for `args.trn_config`, or for a name assigned `args.trn_config` in the scope."""
    source = m.Attribute(value=m.Name(), attr=m.Name("trn_config"))
    if m.matches(value, source):
        return value.value.value
    if isinstance(value, cst.Name):
        assigned = m.Assign(targets=[m.AssignTarget(m.Name(value.value))], value=source)
        for assign in descendants(scope, cst.Assign):
            if m.matches(assign, assigned):
                return assign.value.value.value
    return None


# `args.to_dict()`, `vars(args)`, `asdict(args)`, `dataclasses.asdict(args)`: an instance's fields as a mapping.
_FIELDS_OF = m.Call(func=m.Attribute(value=m.Name(), attr=m.Name("to_dict")), args=[]) | m.Call(
    func=m.Name("vars") | m.Name("asdict") | m.Attribute(value=m.Name("dataclasses"), attr=m.Name("asdict")),
    args=[m.Arg(value=m.Name(), keyword=None)],
)


def unpacked_arguments_call(module: cst.Module, expression: cst.BaseExpression) -> cst.Call | None:
    """The arguments call (`TrainingArguments(...)`, `NeuronSFTConfig(...)`...) whose instance `expression` turns
    into a mapping (`args.to_dict()`, `vars(args)`, `asdict(args)`), when the module assigns `args` once, from it."""
    if not m.matches(expression, _FIELDS_OF):
        return None
    name = expression.func.value.value if expression.args == () else expression.args[0].value.value
    assigned = m.Assign(targets=[m.AssignTarget(m.Name(name))], value=m.Call())
    assigns = [
        node
        for node in descendants(module, (cst.Assign, cst.Param))
        if isinstance(node, cst.Param) and node.name.value == name or m.matches(node, assigned)
    ]
    if len(assigns) != 1 or not isinstance(assigns[0], cst.Assign):
        return None
    call = assigns[0].value
    func = call.func
    class_name = func.attr.value if isinstance(func, cst.Attribute) else getattr(func, "value", None)
    return call if class_name in ARGUMENTS_CLASSES else None


def unpacked_arguments(module: cst.Module, expression: cst.BaseExpression) -> dict | None:
    """For `unpacked_mapping`: the keywords the training rules add that an unpacked arguments instance holds as
    fields (`**training_args.to_dict()` passes `bf16` on, not `packing_strategy`), with their values in its call
    (None: the default, or set through its own `**`)."""
    call = unpacked_arguments_call(module, expression)
    if call is None:
        return None
    func = call.func
    class_name = func.attr.value if isinstance(func, cst.Attribute) else func.value
    fields = {}
    for field_name, classes in ADDED_FIELDS.items():
        if class_name in classes:
            given = find_keyword(call, field_name)
            fields[field_name] = given.value if given is not None else None
    return fields


def zero_1_setting(given: cst.BaseExpression | None) -> bool | cst.BaseExpression:
    """ZeRO-1 as an optimum-neuron arguments call sets it with `zero_1=given`: on where it gives none (the default of
    NeuronTrainingArguments and its subclasses in optimum-neuron 0.4.5), the literal it gives, else the expression
    (known at run time only)."""
    if given is None:
        return True
    if is_literal(given, "True") or is_literal(given, "False"):
        return is_literal(given, "True")
    return given


def bound_before(value: cst.BaseExpression, call: cst.Call, scope: cst.CSTNode) -> bool:
    """`value` is a name, or attributes of one (`args.tp_size`), that `scope` binds only before `call` (in source
    order; a parameter counts as bound before) and never assigns an attribute of: it holds at `call` what it
    holds later."""
    name = base_name(value)
    if name is None:
        return False
    order = descendants(scope, (cst.Assign, cst.AugAssign, cst.AnnAssign, cst.For, cst.WithItem, cst.Call))
    position = next((index for index, node in enumerate(order) if node is call), None)
    if position is None:
        return False
    for index, node in enumerate(order):
        targets = (
            [t.target for t in node.targets]
            if isinstance(node, cst.Assign)
            else [node.asname.name]
            if isinstance(node, cst.WithItem) and node.asname
            else [node.target]
            if isinstance(node, (cst.AugAssign, cst.AnnAssign, cst.For))
            else []
        )
        bound = {bound.value for target in targets for bound in descendants(target, cst.Name)}
        if name in bound and (
            index > position or any(not isinstance(t, (cst.Name, cst.Tuple, cst.List)) for t in targets)
        ):
            return False
    return True


def base_name(value: cst.BaseExpression) -> str | None:
    """The name `value` reads when it is a name or attributes of one (`args.tp_size`, `tp`); else None."""
    if isinstance(value, cst.Name):
        return value.value
    if isinstance(value, cst.Attribute):
        return base_name(value.value)
    return None


def _auto_model_text(text: cst.BaseExpression) -> bool:
    """The literal start of an `eval`'s string names `transformers.AutoModel...` (the class a task picks)."""
    start = text.value if isinstance(text, cst.SimpleString) else ""
    if (
        isinstance(text, cst.FormattedString)
        and text.parts
        and isinstance(text.parts[0], cst.FormattedStringText)
    ):
        start = text.start + text.parts[0].value
    return start.lstrip("rRuUbBfF")[1:].startswith("transformers.AutoModel")


def reads_moved_field(node: cst.BaseExpression) -> bool:
    """`training_args.tensor_parallel_size` and the like: fields that no longer exist on the new classes."""
    return any(
        attr.attr.value in TRAINING_ARGUMENTS
        and TRAINING_ARGUMENTS[attr.attr.value].kind != "keep"
        or attr.attr.value == "trn_config"
        for attr in descendants(node, cst.Attribute)
    )


class TrainingTracker(Handler):
    """Follows the scopes and notes, before the rules leave them, which names are references, which calls
    are assigned, and which calls the walk has seen; shards, on leaving a scope, the loads that came
    before the arguments their sharding was read from."""

    SYMBOLS = SYMBOLS
    TRIGGERS = TRIGGERS
    HINTS = HINTS

    def __init__(self, ctx: FileContext) -> None:
        super().__init__(ctx)
        self.file = ctx.state(TrainingFile)

    def visit_Module(self, node: cst.Module) -> None:
        self.file.scopes.append(Scope(node))

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        self.file.scopes.append(Scope(node))

    def leave_FunctionDef(self, original: cst.FunctionDef, updated: cst.FunctionDef):
        return self._leave_scope(updated)

    def leave_Module(self, original: cst.Module, updated: cst.Module):
        return self._leave_scope(updated)

    def _leave_scope(self, updated: cst.CSTNode) -> cst.CSTNode:
        scope = self.file.scope
        for target in scope.earlier_targets:
            load = scope.loads_left[target]
            updated = updated.deep_replace(load, self.file.add_distributed_config(load, load))
        self.file.scopes.pop()
        return updated

    def visit_Import(self, node: cst.Import) -> None:
        self.file.in_import += 1

    def leave_Import(self, original: cst.Import, updated: cst.Import):
        self.file.in_import -= 1
        return updated

    def visit_ImportFrom(self, node: cst.ImportFrom) -> None:
        self.file.in_import += 1

    def leave_ImportFrom(self, original: cst.ImportFrom, updated: cst.ImportFrom):
        self.file.in_import -= 1
        return updated

    def visit_Attribute(self, node: cst.Attribute) -> None:
        self.file.not_references.add(node.attr)

    def visit_Arg(self, node: cst.Arg) -> None:
        if node.keyword is not None:
            self.file.not_references.add(node.keyword)

    def visit_Call(self, node: cst.Call) -> None:
        self.file.call_funcs.add(node.func)
        self.file.visited_calls.add(node)

    def visit_Assign(self, node: cst.Assign) -> None:
        if (
            len(node.targets) == 1
            and isinstance(node.targets[0].target, cst.Name)
            and isinstance(node.value, cst.Call)
        ):
            self.file.assigned[node.value] = node.targets[0].target.value


HANDLER = TrainingTracker


def target_path(target: Target) -> str:
    return f"{target.module}.{target.name}"


def rename(ctx: FileContext, original: cst.BaseExpression, updated: cst.BaseExpression) -> cst.BaseExpression:
    """A use of an always-renamed symbol (NM201; the call rules rename their callees with `renamed_func`): a plain use takes the target's name (and import); an aliased
    one keeps its alias, whose import is swapped at the end."""
    qualified = ctx.qualified(original)
    target = RENAMES.get(qualified)
    if target is None:
        return updated
    if isinstance(original, cst.Name) and original.value != qualified.rsplit(".", 1)[1]:
        return updated  # aliased
    if isinstance(original, cst.Attribute):  # `optimum.neuron.NeuronTrainer` through a module import
        ctx.report(original, "NM201", f"`{qualified}` -> `{target_path(target)}`.", subject=qualified)
    ctx.add_import(target.module, target.name)
    return cst.Name(target.name)


def renamed_func(ctx: FileContext, original: cst.Call, updated: cst.Call) -> cst.Call:
    return updated.with_changes(func=rename(ctx, original.func, updated.func))
