"""What the inference rules share in one file: which names hold a model on neuron, literal dicts that
may be unpacked into a load, preprocessors, `get_neuron_config`/`export` pairs, the static-cache statements
waiting for their load's statement, and the findings of the load being rewritten (applied only if the
whole load can be rewritten)."""

from __future__ import annotations

import re
from dataclasses import dataclass

import libcst as cst
import libcst.matchers as m

from migrator.cst_helpers import (
    find_keyword,
    is_method_call,
    literal_value,
    source_code,
    string_value,
    with_definitions,
)
from migrator.families.inference import tables as t
from migrator.families.inference.loads import FROM_NEURON_EXPORT_SOURCE, Unmapped, dtype_expr
from migrator.families.xla.names import TORCHRUN_VARIABLES
from migrator.rules import Rule
from migrator.transform import FileContext, Handler

SYMBOLS = frozenset(
    {
        *t.CAUSAL_LM,
        *t.TRANSFORMERS_MODELS,
        *t.DIFFUSERS_PIPELINES,
        *t.SENTENCE_TRANSFORMERS,
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
HINTS = frozenset({"optimum", *LOAD_METHODS, "return_tensors", "pipeline", "{", "save_pretrained"})
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
        # Why a get_neuron_config and the load of its scope that consumes it are not paired: export call -> "built by
        # ... on line N, but <why>"; get_neuron_config call -> "the load on line N consumes it, but <why>".
        self.unpaired_configs: dict[cst.Call, str] = {}
        self.scopes: list[list[str]] = [[]]  # names holding a migrated model, per function scope
        self.dicts: list[dict[str, cst.Dict]] = [{}]  # names holding a literal str-keyed dict, per scope
        self.class_scopes: list[list[str]] = []
        self.preprocessors: dict[str, str] = {}  # name -> "tokenizer" | "processor"
        # Names holding a migrated model whose own upload (`push_to_hub(repo_id)`) writes what optimum-neuron's
        # upload of its saved folder did: traced models, sentence-transformers models, diffusion pipelines.
        self.uploadable: set[str] = set()
        self.decoders: set[str] = set()  # names holding a migrated causal LM (NM101)
        self.compiled_decoders: set[str] = set()  # ...loaded by `_from_neuron_export` (NM106)
        self.effects: list = []  # findings/imports of the call being rewritten, applied once it succeeds
        # Exports (`from_pretrained(..., export=True)`) by the name they are assigned to in a function, and the
        # folders they are saved to (`model.save_pretrained("llama_neuron/")`): a later load of such a folder
        # loads what the export loaded.
        self.exports: dict[tuple[cst.CSTNode | None, str], cst.Call] = {}
        # sources of the helpers the rewrites call (loads.FROM_NEURON_EXPORT_SOURCE)
        self.helpers: set[str] = set()
        self.folders: dict[str, cst.Call] = {}
        self.constants = {
            small.targets[0].target.value: small.value.evaluated_value
            for statement in ctx.module.body
            if isinstance(statement, cst.SimpleStatementLine)
            for small in statement.body[:1]
            if isinstance(small, cst.Assign)
            and len(small.targets) == 1
            and isinstance(small.targets[0].target, cst.Name)
            and isinstance(small.value, cst.SimpleString)
        }

    def folder(self, path: cst.BaseExpression) -> str | None:
        """The folder a literal path (or a module-level constant holding one) names, as written to and read."""
        value = self.constants.get(path.value) if isinstance(path, cst.Name) else string_value(path)
        return value.removeprefix("./").rstrip("/") if isinstance(value, str) and value else None

    def fixed_model_id(self, model: cst.BaseExpression) -> bool:
        """A model id any function of the file can name: a literal, or a module-level constant."""
        return isinstance(model, cst.SimpleString) or (
            isinstance(model, cst.Name) and model.value in self.constants
        )

    def export_of_folder(self, load: cst.Call) -> cst.Call | None:
        """The export whose saved folder `load` (a `from_pretrained` without `export=`) reads by literal path,
        when its model id can be named here: a compiled folder cannot be loaded on TorchNeuron, so the load
        loads what that export loaded."""
        if not load.args or load.args[0].keyword is not None or find_keyword(load, "export") is not None:
            return None
        folder = self.folder(load.args[0].value)
        export = self.folders.get(folder) if folder is not None else None
        if export is None or not export.args or not self.fixed_model_id(export.args[0].value):
            return None
        cores = [find_keyword(export, name) for name in t.TP_ARGS]
        if any(arg is not None and literal_value(arg.value) != 1 for arg in cores):
            return None  # a tensor-parallel export: its launch and core count are decided where it is
        return export

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

    def quietly(self, rewrite, *args):
        """A rewrite's result without its findings and imports (what another load, or a check, borrows)."""
        effects, self.effects = self.effects, []
        try:
            return rewrite(*args)
        finally:
            self.effects = effects

    def report(
        self, node: cst.CSTNode, rule: Rule | str, message: str | None = None, subject: str | None = None
    ) -> None:
        self.effects.append(lambda: self.ctx.report(node, rule, message, subject=subject))

    def todo(self, node: cst.CSTNode, rule: Rule | str, why: str, action: str) -> None:
        """A manual finding and TODO that take effect with the rewrite, like `report`."""
        self.effects.append(lambda: self.ctx.todo(node, rule, why, action))

    def report_launch(
        self, node: cst.CSTNode, rule: Rule | str, done: str, processes: str, note: str
    ) -> None:
        """`FileContext.report_launch`, taking effect with the rewrite. optimum-neuron ran a sharded model in one
        process; where nothing in the file shows that torchrun starts it (no RANK / LOCAL_RANK / WORLD_SIZE read,
        no process group), the file itself says how it must be launched now: a TODO, not only a finding."""
        ctx = self.ctx
        if (
            ctx.notebook
            or not TORCHRUN_VARIABLES.isdisjoint(ctx.source.strings)
            or ("init_process_group" in ctx.source.identifiers)
        ):
            self.effects.append(
                lambda: ctx.report_launch(node, rule, done, processes, note, script="generate.py")
            )
            return
        why = (
            f"{done}, which shards the model over {processes} processes: optimum-neuron ran it in one, and nothing "
            "here shows torchrun starting this script"
        )
        self.effects.append(lambda: ctx.todo(node, rule, why, ctx.launch(processes) + note))

    def add_import(self, module: str, obj: str | None = None) -> None:
        self.effects.append(lambda: self.ctx.add_import(module, obj))

    def dtype(self, name: str, old: cst.Arg, new: cst.Arg) -> cst.BaseExpression:
        self.report(old, "NM107")
        if name == "torch_dtype":
            return new.value
        self.add_import("torch")
        return dtype_expr(new.value)

    def compiled_decoder_load(
        self, node: cst.CSTNode, args: list[cst.Arg], separator: cst.Comma | None = None
    ) -> cst.Call:
        """`_from_neuron_export(AutoModelForCausalLM, *args)`, the load of a model optimum-neuron compiled (NM106);
        the helper's definition, its import and the finding on `node` take effect with the rewrite."""
        self.add_import("transformers", "AutoModelForCausalLM")
        self.effects.append(lambda: self.helpers.add(FROM_NEURON_EXPORT_SOURCE))
        self.report(node, "NM106", t.COMPILED_DECODER_LOADED)
        comma = separator or cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))
        model_class = cst.Arg(cst.Name("AutoModelForCausalLM"), comma=comma)
        return cst.Call(func=cst.Name(t.FROM_NEURON_EXPORT), args=[model_class, *args])

    def ignored_by_compiled_load(self, node: cst.CSTNode, name: str) -> None:
        """NM105 on an argument optimum-neuron ignores when it loads a compiled model."""
        self.report(
            node,
            "NM105",
            f"`{name}` dropped: optimum-neuron ignores it when it loads a compiled model.",
            name,
        )

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


class InferenceTracker(Handler):
    """Follows scopes, assignments, literal dicts and preprocessors; adds the static-cache statements after
    a rewritten load's statement."""

    SYMBOLS = SYMBOLS
    TRIGGERS = TRIGGERS
    HINTS = HINTS

    def __init__(self, ctx: FileContext) -> None:
        super().__init__(ctx)
        self.file = ctx.state(InferenceFile)

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        self.file.scopes.append([])
        self.file.dicts.append({})

    def leave_FunctionDef(self, original, updated):
        self.file.scopes.pop()
        self.file.dicts.pop()
        return updated

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        self.file.class_scopes.append([])

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
            call = statement.value
            export = find_keyword(call, "export")
            if (
                is_method_call(call, "from_pretrained")
                and export is not None
                and literal_value(export.value) is True
            ):
                self.file.exports[(self._function(), source_code(target))] = call

    def visit_Expr(self, node: cst.Expr) -> None:
        """`model.save_pretrained("llama_neuron/")` of a model an export loaded: that folder holds the export."""
        call = node.value
        if not (is_method_call(call, "save_pretrained") and call.args):
            return
        export = self.file.exports.get((self._function(), source_code(call.func.value)))
        folder = self.file.folder(call.args[0].value)
        if export is not None and folder is not None:
            self.file.folders[folder] = export

    def _function(self) -> cst.CSTNode | None:
        return self.ctx.functions[-1] if self.ctx.functions else None

    def leave_SimpleStatementLine(self, original: cst.SimpleStatementLine, updated):
        if len(original.body) != 1 or not isinstance(updated, cst.SimpleStatementLine):
            return updated
        value = getattr(original.body[0], "value", None)
        # Only NM101's loads (causal LMs) take a paired config's values; an embedding or diffusion export
        # stays (with its TODO) and still reads the config variable.
        if value in self.file.paired_configs and self.ctx.qualified(value.func.value) in t.CAUSAL_LM:
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

    def leave_Module(self, original: cst.Module, updated: cst.Module):
        return with_definitions(updated, sorted(self.file.helpers))


RULES = ()  # reports nothing itself
HANDLER = InferenceTracker


class FromPretrainedRule(Handler):
    """A rule that rewrites `<Owner>.from_pretrained(...)` for the qualified owners in `OWNERS`: subclasses
    set `OWNERS` and define `_rewrite(original, updated, owner)`, run under the family's guard."""

    OWNERS: frozenset[str] = frozenset()
    HINTS = HINTS
    TRIGGERS = TRIGGERS

    def __init_subclass__(cls, **kwargs) -> None:
        super().__init_subclass__(**kwargs)
        if "CALLS" not in cls.__dict__:  # a rule that also decides other calls says so (None: every call)
            cls.CALLS = frozenset(f"{owner}.from_pretrained" for owner in cls.OWNERS)

    def __init__(self, ctx: FileContext) -> None:
        super().__init__(ctx)
        self.file = ctx.state(InferenceFile)

    def leave_Call(self, original: cst.Call, updated: cst.Call):
        if not (isinstance(original.func, cst.Attribute) and original.func.attr.value == "from_pretrained"):
            return updated
        owner = self.ctx.qualified(original.func.value)
        if owner not in self.OWNERS:
            return updated
        return self.file.guarded(self._rewrite, original, updated, owner)

    def _rewrite(self, original: cst.Call, updated: cst.Call, owner: str) -> cst.Call:
        raise NotImplementedError
