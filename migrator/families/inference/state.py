"""What the inference rules share in one file: which names hold a model on neuron, literal dicts that
may be unpacked into a load, preprocessors, `get_neuron_config`/`export` pairs, the static-cache statements
waiting for their load's statement, and the findings of the load being rewritten (applied only if the
whole load can be rewritten)."""

from __future__ import annotations

import re
from dataclasses import dataclass

import libcst as cst
import libcst.matchers as m

from migrator.cst_helpers import descendants, literal_value, source_code
from migrator.families.inference import tables as t
from migrator.families.inference.loads import DTYPE, Unmapped, dtype_expr
from migrator.rules import Rule
from migrator.transform import FileContext, Handler

SYMBOLS = frozenset(
    {
        *t.CAUSAL_LM,
        *t.TRANSFORMERS_MODELS,
        *t.DIFFUSERS_PIPELINES,
        *t.PIPELINE,
        *t.MANUAL_SYMBOLS,
        t.EXPORTERS_MODULE,
    }
)
# Every rewrite starts from an optimum-neuron symbol, and naming one (import or dotted name) writes the
# identifier `optimum`.
TRIGGERS = frozenset({"optimum"})
LOAD_METHODS = ("from_pretrained", "export", "get_neuron_config")
# Statements the rules act on or learn from: optimum symbols (and their imported names), model and
# preprocessor loads, tokenizer calls returning tensors, pipelines, and literal dicts that may be unpacked
# into a load (their names are watched from then on, to see them reassigned).
HINTS = frozenset({"optimum", *LOAD_METHODS, "return_tensors", "pipeline", "{"})
# What a get_neuron_config/export pair may pass for the pair to be rewritten in one go (never half-way).
_PAIRED_CONFIG_ARGS = frozenset({"batch_size", "sequence_length", "tensor_parallel_size", "instance_type"})
_PAIRED_EXPORT_ARGS = frozenset({"load_weights", "token", "revision"})
_PREPROCESSOR_CLASS = re.compile(r"^transformers\.\w*(Tokenizer|Processor|FeatureExtractor)\w*$")


@dataclass
class PendingLoad:
    """What a rewritten LLM load leaves for its statement: the static cache length (None: unset)."""

    generation_config: str  # code of the generation config to set, e.g. `model.generation_config`
    cache_len: cst.BaseExpression | None


class InferenceFile:
    def __init__(self, ctx: FileContext) -> None:
        self.ctx = ctx
        self.assigned_calls: dict[cst.Call, cst.BaseExpression] = {}  # load call -> assignment target
        self.loads: dict[cst.Call, PendingLoad] = {}  # rewritten LLM loads waiting for their statement
        self.config_pairs: dict[cst.Call, cst.Call] = {}  # export call -> its get_neuron_config call
        self.paired_configs: set[cst.Call] = set()  # ...and the configs their export consumes
        self.scopes: list[list[str]] = [[]]  # names holding a migrated model, per function scope
        self.dicts: list[dict[str, cst.Dict]] = [{}]  # names holding a literal str-keyed dict, per scope
        self.class_scopes: list[list[str]] = []
        self.preprocessors: dict[str, str] = {}  # name -> "tokenizer" | "processor"
        self.effects: list = []  # findings/imports of the call being rewritten, applied once it succeeds

    # --- models on neuron -------------------------------------------------------------------------------------

    def remember_model(self, target: str) -> None:
        if target.startswith("self.") and self.class_scopes:
            self.class_scopes[-1].append(target)
        else:
            self.scopes[-1].append(target)

    def visible_dicts(self) -> dict[str, cst.Dict]:
        return {**self.dicts[0], **self.dicts[-1]}

    def _model_scopes(self) -> tuple[list[str], ...]:
        """Migrated models visible here, nearest first: function, class attributes, module."""
        return (self.scopes[-1], self.class_scopes[-1] if self.class_scopes else [], self.scopes[0])

    def model_in_scope(self) -> str | None:
        """The most recently migrated model visible here."""
        return next((scope[-1] for scope in self._model_scopes() if scope), None)

    def models_in_scope(self) -> set[str]:
        return {name for scope in self._model_scopes() for name in scope}

    def preprocessor_kind(self, func: cst.BaseExpression) -> str | None:
        """The kind of preprocessor ("tokenizer"/"processor") called as `tok(...)` or
        `tok.apply_chat_template(...)`; None when the callee is not a known preprocessor."""
        if m.matches(func, m.Attribute(attr=m.Name("apply_chat_template"))):
            func = func.value
        return self.preprocessors.get(source_code(func))

    # --- a load rewrite: all of it or nothing -----------------------------------------------------------------

    def guarded(self, rewrite, original: cst.Call, updated: cst.Call, *args):
        """Run a rewrite; its findings and imports take effect only if the whole call could be rewritten."""
        try:
            result = rewrite(original, updated, *args)
        except Unmapped as unmapped:
            self.effects.clear()
            self.ctx.todo(original, unmapped.rule, unmapped.why, unmapped.action)
            return updated
        for effect in self.effects:
            effect()
        self.effects.clear()
        return result

    def report(
        self, node: cst.CSTNode, rule: Rule, message: str | None = None, subject: str | None = None
    ) -> None:
        self.effects.append(lambda: self.ctx.report(node, rule, message, subject=subject))

    def add_import(self, module: str, obj: str | None = None) -> None:
        self.effects.append(lambda: self.ctx.add_import(module, obj))

    def dtype(self, name: str, old: cst.Arg, new: cst.Arg) -> cst.BaseExpression:
        self.report(old, DTYPE)
        if name == "torch_dtype":
            return new.value
        self.add_import("torch")
        return dtype_expr(new.value)

    def retarget(
        self, updated: cst.Call, module: str, target: str, owner: str, args: list[cst.Arg]
    ) -> cst.Call:
        """`Owner.method(...)` -> `target.from_pretrained(args)` with `from module import target`."""
        self.add_import(module, target)
        self.drop_source_import(updated.func.value, owner)
        func = updated.func.with_changes(value=cst.Name(target), attr=cst.Name("from_pretrained"))
        return updated.with_changes(func=func, args=args)

    def drop_source_import(self, reference: cst.BaseExpression, qualified: str) -> None:
        """Ask for the optimum import behind `reference` to go (it stays while anything still uses it):
        `from m import X [as Y]` for a bare name, `import m [as alias]` for `alias.X`."""
        module, name = qualified.rsplit(".", 1)
        if isinstance(reference, cst.Name):
            self.ctx.remove_import(module, name, reference.value if reference.value != name else None)
            return
        head = source_code(reference).split(".")[0]
        self.ctx.remove_import(module, None, head if head != module.split(".")[0] else None)

    # --- get_neuron_config + export pairs ---------------------------------------------------------------------

    def pair_neuron_configs(self, scope: cst.CSTNode) -> None:
        """In one function (or the module, or a class body), pair `cfg = X.get_neuron_config(...)` with a
        later `m = X.export(id, cfg)` (or `neuron_config=cfg`, or `X.from_pretrained(id, neuron_config=cfg)`),
        wherever the two statements sit in its blocks, when `cfg` is used nowhere else and both name the
        same checkpoint expression."""
        configs: dict[str, cst.Call] = {}
        for statement in _statements(scope):
            value, target = _assigned(statement)
            if value is None:
                continue
            if m.matches(value.func, m.Attribute(attr=m.Name("get_neuron_config"))) and isinstance(
                target, cst.Name
            ):
                configs[target.value] = value
                continue
            passed = _passed_config(value)
            config = configs.get(passed.value) if isinstance(passed, cst.Name) else None
            if config is None or not config.args or config.args[0].keyword is not None:
                continue
            uses = _references(scope, passed.value)  # the assignment + the argument only
            same_model = source_code(config.args[0].value) == source_code(value.args[0].value)
            known = all(
                arg.keyword is not None
                and arg.keyword.value in _PAIRED_EXPORT_ARGS | {"neuron_config", "export"}
                for arg in value.args[1:]
                if arg.value is not passed
            ) and all(
                arg.keyword is not None and arg.keyword.value in _PAIRED_CONFIG_ARGS
                for arg in config.args[1:]
            )
            if uses == 2 and same_model and known and isinstance(target, (cst.Name, cst.Attribute)):
                self.config_pairs[value] = config
                self.paired_configs.add(config)


def _statements(scope: cst.CSTNode) -> list[cst.SimpleStatementLine]:
    """The simple statements of a module, function or class in source order, those of nested functions
    and classes excluded (they are scopes of their own)."""
    found: list[cst.SimpleStatementLine] = []

    def walk(node: cst.CSTNode) -> None:
        for child in node.children:
            if isinstance(child, cst.SimpleStatementLine):
                found.append(child)
            elif isinstance(child, _BLOCKS) and not isinstance(child, (cst.FunctionDef, cst.ClassDef)):
                walk(child)

    walk(scope.body if isinstance(scope, (cst.FunctionDef, cst.ClassDef)) else scope)
    return found


_BLOCKS = (
    cst.BaseSuite,
    cst.BaseCompoundStatement,
    cst.Else,
    cst.ExceptHandler,
    cst.ExceptStarHandler,
    cst.Finally,
    cst.MatchCase,
)


def _references(scope: cst.CSTNode, name: str) -> int:
    """How many times `name` is read or bound in `scope` (keyword names and attribute names do not count)."""
    nodes = descendants(scope, (cst.Name, cst.Arg, cst.Attribute))
    not_references = {n.keyword for n in nodes if isinstance(n, cst.Arg)}
    not_references |= {n.attr for n in nodes if isinstance(n, cst.Attribute)}
    return sum(isinstance(n, cst.Name) and n.value == name and n not in not_references for n in nodes)


def _passed_config(call: cst.Call) -> cst.BaseExpression | None:
    """The neuron config given to a load: `export(id, cfg)`, `export(id, neuron_config=cfg)`,
    `from_pretrained(id, neuron_config=cfg)`."""
    keyword = next((a.value for a in call.args if m.matches(a.keyword, m.Name("neuron_config"))), None)
    if m.matches(call.func, m.Attribute(attr=m.Name("export"))) and len(call.args) >= 2:
        return keyword or (call.args[1].value if call.args[1].keyword is None else None)
    if m.matches(call.func, m.Attribute(attr=m.Name("from_pretrained"))) and call.args:
        return keyword
    return None


def _assigned(statement) -> tuple[cst.Call | None, cst.BaseExpression | None]:
    if not m.matches(statement, m.SimpleStatementLine(body=[m.Assign(targets=[m.AssignTarget()])])):
        return None, None
    assign = statement.body[0]
    return (assign.value, assign.targets[0].target) if isinstance(assign.value, cst.Call) else (None, None)


class InferenceTracker(Handler):
    """Follows scopes, assignments, literal dicts and preprocessors; adds the static-cache statements after
    a rewritten load's statement."""

    SYMBOLS = SYMBOLS
    TRIGGERS = TRIGGERS
    HINTS = HINTS

    def __init__(self, ctx: FileContext) -> None:
        super().__init__(ctx)
        self.file = ctx.state(InferenceFile)

    def visit_Module(self, node: cst.Module) -> None:
        self.file.pair_neuron_configs(node)

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        self.file.scopes.append([])
        self.file.dicts.append({})
        self.file.pair_neuron_configs(node)

    def leave_FunctionDef(self, original, updated):
        self.file.scopes.pop()
        self.file.dicts.pop()
        return updated

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        self.file.class_scopes.append([])
        self.file.pair_neuron_configs(node)

    def leave_ClassDef(self, original, updated):
        self.file.class_scopes.pop()
        return updated

    def visit_SimpleStatementLine(self, node: cst.SimpleStatementLine) -> None:
        if len(node.body) != 1:
            return
        statement = node.body[0]
        if isinstance(statement, cst.Assign) and len(statement.targets) == 1:
            target = statement.targets[0].target
        elif isinstance(statement, cst.AnnAssign) and statement.value is not None:
            target = statement.target
        else:
            return
        if isinstance(statement.value, cst.Call) and isinstance(target, (cst.Name, cst.Attribute)):
            self.file.assigned_calls[statement.value] = target

    def leave_SimpleStatementLine(self, original: cst.SimpleStatementLine, updated):
        if len(original.body) != 1 or not isinstance(updated, cst.SimpleStatementLine):
            return updated
        value = getattr(original.body[0], "value", None)
        if value in self.file.paired_configs:
            return cst.RemoveFromParent()
        load = self.file.loads.pop(value, None)
        if load is None:
            return updated
        config = load.generation_config
        follow_up = [cst.parse_statement(f'{config}.cache_implementation = "static"\n')]
        if load.cache_len is not None:
            assign = cst.parse_statement(f"{config}.max_cache_len = 0\n")
            follow_up.append(assign.with_deep_changes(assign.body[0], value=load.cache_len))
        return cst.FlattenSentinel([updated, *follow_up])

    def leave_Assign(self, original: cst.Assign, updated: cst.Assign):
        if len(original.targets) != 1:
            return updated
        target = source_code(original.targets[0].target)
        value = original.value
        qualified = (
            self.ctx.qualified(value.func.value) if m.matches(value, m.Call(func=m.Attribute())) else None
        )
        if qualified and _PREPROCESSOR_CLASS.match(qualified):
            self.file.preprocessors[target] = "tokenizer" if "Tokenizer" in qualified else "processor"
        if isinstance(value, cst.Dict) and all(
            isinstance(element, cst.DictElement) and isinstance(literal_value(element.key), str)
            for element in value.elements
        ):
            self.file.dicts[-1][target] = value
            self.ctx.watch(target)
        else:
            self.file.dicts[-1].pop(target, None)
        return updated


RULES = ()  # reports nothing itself
HANDLER = InferenceTracker
