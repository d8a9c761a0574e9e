"""Inference (NM1xx): optimum-neuron compiled models and pipelines -> Transformers / Diffusers on "neuron".

There is no ahead-of-time export on TorchNeuron: a model is loaded from its original checkpoint, placed on the
device, and compiled just in time. So a load call keeps its checkpoint id and Hub arguments, loses its
compiler arguments, turns `auto_cast_type` into `dtype`, `sequence_length` into a static KV cache, and
`tensor_parallel_size`/`num_cores` > 1 into `DistributedConfig`. Fixed input shapes become padding findings.
A load whose checkpoint cannot be recovered statically (a compiled folder) is left with a TODO.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

import libcst as cst
import libcst.matchers as m

from migrator.families import inference_tables as t
from migrator.rules import Severity, define
from migrator.transform import Family, literal_value, source_code

CAUSAL_LM = define(
    "NM101",
    Severity.INFO,
    "`NeuronModelForCausalLM` export/load (`from_pretrained(export=True, ...)` or `get_neuron_config` + `export`)",
    'Rewritten to `AutoModelForCausalLM.from_pretrained(checkpoint, device_map="neuron")` followed by '
    '`model.generation_config.cache_implementation = "static"`: generate() then compiles the decode step on '
    "neuron once.",
)
SEQUENCE_LENGTH = define(
    "NM102",
    Severity.WARNING,
    "`sequence_length` of a compiled decoder",
    "Moved to `model.generation_config.max_cache_len` (static cache size). optimum-neuron silently capped "
    "generation at this length, Transformers does not: keep prompt length + max_new_tokens within it.",
)
TENSOR_PARALLEL = define(
    "NM103",
    Severity.WARNING,
    "`tensor_parallel_size` / `num_cores` other than the literal 1",
    "Rewritten to `distributed_config=DistributedConfig(tp_size=N)` without device_map; the script must now be "
    "launched with `torchrun --nproc_per_node=N` (all ranks run generate; print on rank 0).",
)
STATIC_SHAPES = define(
    "NM104",
    Severity.WARNING,
    "A static input shape fixed at export (`batch_size`, `sequence_length`, `height`, `num_beams`, ...)",
    "Dropped from the loader. Every new input shape compiles again on neuron: pad inputs to this fixed shape "
    '(tokenizer `padding="max_length", max_length=...`, full batches, constant image size).',
)
EXPORT_ONLY = define(
    "NM105",
    Severity.INFO,
    "A compiler/export-only argument (`export`, `auto_cast`, `instance_type`, `optlevel`, "
    "`disable_neuron_cache`, `compiler_workdir`, ...)",
    "Dropped: TorchNeuron compiles just in time for the host it runs on.",
)
COMPILED_ARTIFACT = define(
    "NM106",
    Severity.ERROR,
    "A load of a model already compiled by optimum-neuron (a folder from `optimum-cli export neuron` / "
    "`save_pretrained`, or an `aws-neuron/*-neuron*` Hub repo)",
    "Left with a TODO: Transformers cannot load compiled artifacts. Re-point the load at the original "
    "checkpoint (0.4.x compiled configs record it as `neuron.checkpoint_id` in config.json), add "
    "`export=True`, and run neuron-migrate again.",
)
DTYPE = define(
    "NM107",
    Severity.INFO,
    "`auto_cast_type` / `torch_dtype` of a compiled model",
    "Rewritten to the load dtype (`dtype=torch.bfloat16` etc.; `torch_dtype=` for Diffusers).",
)
NEURON_CONFIG_PAIR = define(
    "NM108",
    Severity.INFO,
    "`cfg = NeuronModelForCausalLM.get_neuron_config(...)` consumed by `NeuronModelForCausalLM.export(id, cfg)`",
    "The get_neuron_config statement is removed; its values move into the rewritten load (NM101-NM104).",
)
UNPAIRED_NEURON_CONFIG = define(
    "NM109",
    Severity.ERROR,
    "`get_neuron_config` / `export` that cannot be paired in one scope with visible arguments",
    "Left with a TODO: load the checkpoint with AutoModelForCausalLM on neuron and carry sequence_length to "
    "generation_config.max_cache_len and tensor_parallel_size to DistributedConfig by hand.",
)
INPUTS_TO_DEVICE = define(
    "NM110",
    Severity.INFO,
    'Tokenizer outputs (padded to `"max_length"`) for a model that optimum-neuron kept on CPU',
    "`.to(model.device)` appended: the migrated model lives on neuron, its inputs must too.",
)
UNPADDED_PROMPTS = define(
    "NM111",
    Severity.WARNING,
    'Tokenizer outputs for a model that optimum-neuron kept on CPU, not padded to `"max_length"`',
    "`.to(model.device)` appended. Review the padding: shapes follow each prompt. With a static cache sized by "
    "max_cache_len, generate() compiles the decode step once per batch size, but the prefill runs eagerly at "
    "each prompt's length, so every new length runs new eager kernels (an encoder forward recompiles per "
    'shape); pass `padding="max_length", max_length=...` to keep shapes fixed.',
)
TRACED_MODEL = define(
    "NM112",
    Severity.INFO,
    "A traced `NeuronModelFor*` / `Neuron<Arch>For*` encoder, seq2seq, audio or vision model exported at load",
    'Rewritten to the Transformers class, `from_pretrained(checkpoint, device_map="neuron")`.',
)
DIFFUSION_PIPELINE = define(
    "NM113",
    Severity.INFO,
    "A `Neuron*Pipeline` diffusion pipeline exported at load",
    'Rewritten to the Diffusers pipeline, `from_pretrained(checkpoint, torch_dtype=...).to("neuron")`.',
)
PIPELINE = define(
    "NM114",
    Severity.INFO,
    "`optimum.neuron.pipeline(task, model=..., export=True, ...)`",
    'Rewritten to `transformers.pipeline(task, model=..., device="neuron")` (called through `import transformers`); a text-generation pipeline gets a '
    'static cache (`pipe.model.generation_config.cache_implementation = "static"`, `max_cache_len`).',
)
MANUAL_SYMBOL = define(
    "NM115",
    Severity.ERROR,
    "An optimum-neuron inference symbol with no mechanical equivalent (embeddings, sentence-transformers, "
    "ControlNet pipelines, base classes, exporters, compilation configs)",
    "Left with a TODO that names the replacement.",
)
UNMAPPED_ARGUMENTS = define(
    "NM116",
    Severity.ERROR,
    "A compiled-model load whose arguments the codemod cannot map (unknown or runtime-only keywords, "
    "`**kwargs`, export-time adapter fusing, a load that is not assigned to a name)",
    "Left unchanged with a TODO naming the arguments; rewrite the load by hand.",
)
DEFAULT_ALL_CORES = define(
    "NM117",
    Severity.WARNING,
    "`get_neuron_config` without `tensor_parallel_size` (optimum-neuron then sharded over all visible cores)",
    'Rewritten for one NeuronCore (`device_map="neuron"`); for tensor parallelism pass '
    "`distributed_config=DistributedConfig(tp_size=N)` and launch with torchrun.",
)

# Diffusion export shapes that are arguments of the pipeline call in Diffusers (typo included, sic).
_PIPELINE_CALL_SHAPES = {
    "height": "height",
    "width": "width",
    "num_images_per_prompt": "num_images_per_prompt",
    "num_image_per_prompt": "num_images_per_prompt",
}
# What a get_neuron_config/export pair may pass for the pair to be rewritten in one go (never half-way).
_PAIRED_CONFIG_ARGS = frozenset({"batch_size", "sequence_length", "tensor_parallel_size", "instance_type"})
_PAIRED_EXPORT_ARGS = frozenset({"load_weights", "token", "revision"})
_NO_CACHE_LEN = (
    "No sequence_length was given (optimum-neuron then compiled for the model's maximum length): the static "
    "cache is sized per generate() call from prompt + max_new_tokens, so each new size recompiles. Set "
    "`generation_config.max_cache_len` to a fixed length."
)
_LOAD_METHODS = ("from_pretrained", "export", "get_neuron_config")
_COMPILED_HUB_ID = re.compile(t.COMPILED_HUB_ID)
_MODEL_ID_KEYWORDS = ("model_id", "model_name_or_path", "pretrained_model_name_or_path")
_PREPROCESSOR_CLASS = re.compile(r"^transformers\.\w*(Tokenizer|Processor|FeatureExtractor)\w*$")


class Unmapped(Exception):
    """A call the codemod cannot rewrite faithfully; the message is the TODO text."""

    def __init__(self, rule, message: str) -> None:
        super().__init__(message)
        self.rule = rule


@dataclass
class _Args:
    """A call's arguments, split by meaning. Each entry pairs the original node (for findings) with the
    updated one (for output)."""

    model: tuple[cst.Arg, cst.Arg] | None
    keywords: dict[str, tuple[cst.Arg, cst.Arg]]
    order: list[str]  # keyword names in source order
    last_comma: cst.Comma | cst.MaybeSentinel  # layout after the last argument...
    closing: cst.BaseParenthesizableWhitespace  # ...and before `)`
    separator: cst.Comma  # layout between arguments (comment-free)


def _split_args(
    original: cst.Call,
    updated: cst.Call,
    what: str,
    dicts: dict[str, cst.Dict] | None = None,
    positional: tuple[str, ...] = (),
) -> _Args:
    """Split a call's arguments; `**name` is expanded when `name` holds a literal dict (`dicts`); positional
    arguments after the first are filed under the parameter names in `positional` (and stay positional)."""
    if len(original.args) != len(updated.args):
        raise Unmapped(UNMAPPED_ARGUMENTS, f"the arguments of this {what} were changed by another rewrite")
    model = None
    keywords: dict[str, tuple[cst.Arg, cst.Arg]] = {}
    order = []
    for index, (old, new) in enumerate(zip(original.args, updated.args, strict=True)):
        if old.star == "**" and isinstance(old.value, cst.Name) and old.value.value in (dicts or {}):
            for element in dicts[old.value.value].elements:
                key = element.key.evaluated_value
                keywords[key] = (old, _kwarg(key, element.value))
                order.append(key)
            continue
        if old.star:
            raise Unmapped(
                UNMAPPED_ARGUMENTS,
                f"{what} receives `{old.star}{source_code(old.value)}`, whose keys the codemod "
                "cannot see; spell the arguments out and run neuron-migrate again",
            )
        if old.keyword is None and 0 < index <= len(positional):
            keywords[positional[index - 1]] = (old, new)
            order.append(positional[index - 1])
        elif old.keyword is None:
            if index:
                raise Unmapped(
                    UNMAPPED_ARGUMENTS, f"{what} has extra positional arguments; rewrite it by hand"
                )
            model = (old, new)
        else:
            keywords[old.keyword.value] = (old, new)
            order.append(old.keyword.value)
    if model is None:
        for name in _MODEL_ID_KEYWORDS:
            if name in keywords:
                model = keywords.pop(name)
                order.remove(name)
                break
    separator = next(
        (_without_comment(arg.comma) for arg in updated.args[:-1] if isinstance(arg.comma, cst.Comma)),
        cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")),
    )
    last_comma = updated.args[-1].comma if updated.args else cst.MaybeSentinel.DEFAULT
    last_comma = _without_comment(last_comma) if isinstance(last_comma, cst.Comma) else last_comma
    closing = updated.args[-1].whitespace_after_arg if updated.args else cst.SimpleWhitespace("")
    return _Args(model, keywords, order, last_comma, closing, separator)


def _without_comment(comma: cst.Comma) -> cst.Comma:
    """The layout of a comma without the comment that belongs to the argument before it."""
    after = comma.whitespace_after
    if isinstance(after, cst.ParenthesizedWhitespace):
        after = after.with_changes(first_line=cst.TrailingWhitespace(), empty_lines=[])
    return comma.with_changes(whitespace_after=after)


def _kwarg(name: str, value: cst.BaseExpression) -> cst.Arg:
    return cst.Arg(
        keyword=cst.Name(name),
        value=value,
        equal=cst.AssignEqual(
            whitespace_before=cst.SimpleWhitespace(""), whitespace_after=cst.SimpleWhitespace("")
        ),
    )


def _string(value: str) -> cst.SimpleString:
    return cst.SimpleString(f'"{value}"')


def _assemble(args: _Args, kept: list[str], extra: list[cst.Arg]) -> list[cst.Arg]:
    """Model id + kept keywords (with their own formatting and comments) + new keywords."""
    original_last = args.order[-1] if args.order else None
    result: list[tuple[cst.Arg, bool]] = []  # (arg, keeps its own comma)
    if args.model:
        result.append((args.model[1], bool(args.order)))
    for name in kept:
        result.append((args.keywords[name][1], name != original_last))
    result.extend((arg, False) for arg in extra)
    out = []
    for index, (arg, own_comma) in enumerate(result):
        if index == len(result) - 1:
            comma = args.last_comma
        elif own_comma and isinstance(arg.comma, cst.Comma):
            comma = arg.comma
        else:
            comma = args.separator
        last = index == len(result) - 1
        closing = args.closing if last else cst.SimpleWhitespace("")
        out.append(arg.with_changes(comma=comma, whitespace_after_arg=closing))
    return out


def _dtype_expr(value: cst.BaseExpression) -> cst.BaseExpression:
    """`"bf16"` -> `torch.bfloat16`; a runtime string -> a lookup in the same table."""
    literal = literal_value(value)
    if isinstance(literal, str):
        if literal not in t.AUTO_CAST_DTYPES:
            raise Unmapped(
                UNMAPPED_ARGUMENTS,
                f'auto_cast_type="{literal}" has no load dtype equivalent; pick dtype=torch.bfloat16 (or '
                "torch.float32) and use torch.autocast for mixed precision",
            )
        return cst.parse_expression(f"torch.{t.AUTO_CAST_DTYPES[literal]}")
    if literal is not ...:
        raise Unmapped(
            UNMAPPED_ARGUMENTS, f"auto_cast_type={literal!r} is not a dtype name; set dtype= by hand"
        )
    table = ", ".join(f'"{name}": torch.{dtype}' for name, dtype in t.AUTO_CAST_DTYPES.items())
    return cst.parse_expression(f"{{{table}}}[{source_code(value)}]")


def _without_positional_config(call: cst.Call) -> cst.Call:
    """`export(model_id, neuron_config, ...)`: the config (second positional) is consumed by the rewrite."""
    if len(call.args) >= 2 and call.args[1].keyword is None and not call.args[1].star:
        args = [*call.args[:1], *call.args[2:]]
        if len(args) == 1:
            args[0] = args[0].with_changes(comma=call.args[-1].comma)
        return call.with_changes(args=args)
    return call


@dataclass
class _Load:
    """What a rewritten LLM load leaves for its statement: the static cache length (None: unset)."""

    generation_config: str  # code of the generation config to set, e.g. `model.generation_config`
    cache_len: cst.BaseExpression | None


class InferenceFamily(Family):
    name = "inference"
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
    # Every rewrite starts from an optimum-neuron symbol, and naming one (import or dotted name) writes
    # the identifier `optimum`.
    TRIGGERS = frozenset({"optimum"})
    # Statements it acts on or learns from: optimum symbols (and their imported names), model and
    # preprocessor loads, tokenizer calls returning tensors, pipelines, and literal dicts that may be
    # unpacked into a load (their names are watched from then on, to see them reassigned).
    HINTS = frozenset({"optimum", *_LOAD_METHODS, "return_tensors", "pipeline", "{"})

    def __init__(self, ctx) -> None:
        super().__init__(ctx)
        self._assigned_calls: dict[cst.Call, cst.BaseExpression] = {}  # load call -> assignment target
        self._loads: dict[cst.Call, _Load] = {}  # rewritten LLM loads waiting for their statement
        self._config_pairs: dict[cst.Call, cst.Call] = {}  # export call -> its get_neuron_config call
        self._paired_configs: set[cst.Call] = set()
        self._scopes: list[list[str]] = [[]]  # names holding a migrated model, per function scope
        self._dicts: list[dict[str, cst.Dict]] = [{}]  # names holding a literal str-keyed dict, per scope
        self._class_scopes: list[list[str]] = []
        self._preprocessors: dict[str, str] = {}  # name -> "tokenizer" | "processor"
        self._effects: list = []  # findings/imports of the call being rewritten, applied once it succeeds

    # --- imports ----------------------------------------------------------------------------------------------

    def visit_ImportFrom(self, node: cst.ImportFrom) -> None:
        if node.relative or node.module is None or isinstance(node.names, cst.ImportStar):
            return
        module = source_code(node.module)
        for alias in node.names:
            qualified = f"{module}.{alias.name.value}"
            why = t.MANUAL_SYMBOLS.get(qualified)
            if why is None and module.startswith(t.EXPORTERS_MODULE):
                why = t.EXPORTERS_WHY
            if why:
                self.ctx.todo(alias, MANUAL_SYMBOL, f"`{alias.name.value}`: {why}")

    # --- scopes (which names hold a model on neuron) ----------------------------------------------------------

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        self._scopes.append([])
        self._dicts.append({})

    def leave_FunctionDef(self, original, updated):
        self._scopes.pop()
        self._dicts.pop()
        return updated

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        self._class_scopes.append([])

    def leave_ClassDef(self, original, updated):
        self._class_scopes.pop()
        return updated

    def _remember_model(self, target: str) -> None:
        if target.startswith("self.") and self._class_scopes:
            self._class_scopes[-1].append(target)
        else:
            self._scopes[-1].append(target)

    def _visible_dicts(self) -> dict[str, cst.Dict]:
        return {**self._dicts[0], **self._dicts[-1]}

    def _model_scopes(self) -> tuple[list[str], ...]:
        """Migrated models visible here, nearest first: function, class attributes, module."""
        return (self._scopes[-1], self._class_scopes[-1] if self._class_scopes else [], self._scopes[0])

    def _model_in_scope(self) -> str | None:
        """The most recently migrated model visible here."""
        return next((scope[-1] for scope in self._model_scopes() if scope), None)

    def _models_in_scope(self) -> set[str]:
        return {name for scope in self._model_scopes() for name in scope}

    # --- statements -------------------------------------------------------------------------------------------

    def visit_Module(self, node: cst.Module) -> None:
        self._pair_neuron_configs(node.body)

    def visit_IndentedBlock(self, node: cst.IndentedBlock) -> None:
        self._pair_neuron_configs(node.body)

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
            self._assigned_calls[statement.value] = target

    def leave_SimpleStatementLine(self, original: cst.SimpleStatementLine, updated):
        if len(original.body) != 1 or not isinstance(updated, cst.SimpleStatementLine):
            return updated
        value = getattr(original.body[0], "value", None)
        if value in self._paired_configs:
            return cst.RemoveFromParent()
        load = self._loads.pop(value, None)
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
            self._preprocessors[target] = "tokenizer" if "Tokenizer" in qualified else "processor"
        if isinstance(value, cst.Dict) and all(
            isinstance(element, cst.DictElement) and isinstance(literal_value(element.key), str)
            for element in value.elements
        ):
            self._dicts[-1][target] = value
            self.ctx.watch(target)
        else:
            self._dicts[-1].pop(target, None)
        return self._tokenized_inputs(original, updated)

    def _tokenized_inputs(self, original: cst.Assign, updated: cst.Assign):
        """`inputs = tokenizer(..., return_tensors="pt")[.attr]` next to a migrated model: move the inputs to the
        model's device (processors: also cast floating tensors to its dtype); check the prompt padding."""
        call, updated_call = original.value, updated.value
        # `processor(...).input_features`: move the whole batch, then take the attribute
        if isinstance(call, cst.Attribute) and isinstance(updated_call, cst.Attribute):
            call, updated_call = call.value, updated_call.value
        if not (
            isinstance(call, cst.Call)
            and isinstance(updated_call, cst.Call)
            and self._preprocessor_kind(call.func)
            and any(m.matches(arg, m.Arg(keyword=m.Name("return_tensors"))) for arg in call.args)
        ):
            return updated
        model = self._model_in_scope()
        if model is None:
            return updated
        kind = self._preprocessor_kind(call.func)
        target = [f"{model}.device"]
        if kind == "processor":
            target.append(f"{model}.dtype")
            self.ctx.report(
                call,
                INPUTS_TO_DEVICE,
                "`.to(model.device, model.dtype)` appended: the migrated model "
                "lives on neuron, its inputs must too (floating-point features take the model's dtype).",
            )
        else:
            padded = any(
                m.matches(arg, m.Arg(keyword=m.Name("padding"))) and literal_value(arg.value) == "max_length"
                for arg in call.args
            )
            self.ctx.report(call, INPUTS_TO_DEVICE if padded else UNPADDED_PROMPTS)
        template = cst.parse_expression(f"_.to({', '.join(target)})")
        moved_call = template.with_changes(func=template.func.with_changes(value=updated_call))
        if isinstance(updated.value, cst.Attribute):
            return updated.with_changes(value=updated.value.with_changes(value=moved_call))
        return updated.with_changes(value=moved_call)

    def _preprocessor_kind(self, func: cst.BaseExpression) -> str | None:
        """The kind of preprocessor ("tokenizer"/"processor") called as `tok(...)` or
        `tok.apply_chat_template(...)`; None when the callee is not a known preprocessor."""
        if m.matches(func, m.Attribute(attr=m.Name("apply_chat_template"))):
            func = func.value
        return self._preprocessors.get(source_code(func))

    # --- calls ------------------------------------------------------------------------------------------------

    def leave_Call(self, original: cst.Call, updated: cst.Call):
        if m.matches(original.func, m.Attribute(attr=m.OneOf(*(m.Name(n) for n in _LOAD_METHODS)))):
            owner = self.ctx.qualified(original.func.value)
            method = original.func.attr.value
            handler = None
            if owner in t.CAUSAL_LM:
                handler = self._causal_lm
            elif owner in t.TRANSFORMERS_MODELS and method == "from_pretrained":
                handler = self._traced_model
            elif owner in t.DIFFUSERS_PIPELINES and method == "from_pretrained":
                handler = self._diffusion_pipeline
            if handler:
                return self._guarded(handler, original, updated, owner, method)
        elif self.ctx.qualified(original.func) in t.PIPELINE:
            return self._guarded(self._pipeline, original, updated, None, None)
        return updated

    def _guarded(self, handler, original, updated, owner, method):
        """Run a rewrite; its findings and imports take effect only if the whole call could be rewritten."""
        try:
            result = handler(original, updated, owner, method)
        except Unmapped as unmapped:
            self._effects.clear()
            self.ctx.todo(original, unmapped.rule, str(unmapped))
            return updated
        for effect in self._effects:
            effect()
        self._effects.clear()
        return result

    def _report(self, node: cst.CSTNode, rule, message: str | None = None) -> None:
        self._effects.append(lambda: self.ctx.report(node, rule, message))

    def _import(self, module: str, obj: str | None = None) -> None:
        self._effects.append(lambda: self.ctx.add_import(module, obj))

    def _causal_lm(self, original: cst.Call, updated: cst.Call, owner: str, method: str) -> cst.Call:
        if method == "get_neuron_config":
            if original not in self._paired_configs:
                raise Unmapped(
                    UNPAIRED_NEURON_CONFIG,
                    "this neuron config is not consumed by a NeuronModelForCausalLM.export call in the same scope "
                    "(or is used elsewhere); carry sequence_length to generation_config.max_cache_len and "
                    "tensor_parallel_size to DistributedConfig(tp_size=...) by hand",
                )
            self._report(original, NEURON_CONFIG_PAIR)
            return updated
        if original not in self._assigned_calls:
            raise Unmapped(
                UNMAPPED_ARGUMENTS,
                "this load is not assigned to a name, so the static cache cannot be set after it; assign the model "
                "to a variable and run neuron-migrate again",
            )
        trimmed = _without_positional_config if method == "export" else (lambda call: call)
        args = _split_args(
            trimmed(original), trimmed(updated), f"{owner.rsplit('.', 1)[1]}.{method}", self._visible_dicts()
        )
        if method == "export":
            config_call = self._config_pairs.get(original)
            if config_call is None:
                raise Unmapped(
                    UNPAIRED_NEURON_CONFIG,
                    "the neuron config passed to export() is not built by get_neuron_config in the same scope; "
                    'load the checkpoint with AutoModelForCausalLM.from_pretrained(id, device_map="neuron") and '
                    "set the static cache by hand",
                )
            config_args = _split_args(config_call, config_call, "get_neuron_config")
            for name in ("batch_size", "sequence_length", "tensor_parallel_size", "instance_type"):
                if name in config_args.keywords:
                    args.keywords[name] = config_args.keywords[name]
            if "tensor_parallel_size" not in config_args.keywords:
                self._report(config_call, DEFAULT_ALL_CORES)
        else:
            self._check_not_compiled(args, "a decoder")
        self._check_hub_id(args)
        new_args, cache_len = self._decoder_arguments(args, owner)
        self._report(original, CAUSAL_LM)
        if cache_len is None:
            self._report(original, SEQUENCE_LENGTH, _NO_CACHE_LEN)
        target = source_code(self._assigned_calls[original])
        self._loads[original] = _Load(f"{target}.generation_config", cache_len)
        self._remember_model(target)
        return self._retarget(updated, "transformers", "AutoModelForCausalLM", owner, new_args)

    def _decoder_arguments(self, args: _Args, owner: str) -> tuple[list[cst.Arg], cst.BaseExpression | None]:
        kept, extra, cache_len, tp_size = [], [], None, None
        unknown = [
            name
            for name in args.order
            if name not in t.KEPT_LOAD_ARGS | t.EXPORT_ONLY_ARGS | {"batch_size", "sequence_length"}
            and name not in t.TP_ARGS + t.DTYPE_ARGS + ("config",)
        ]
        if unknown:
            raise Unmapped(
                UNMAPPED_ARGUMENTS,
                f"no TorchNeuron equivalent known for {', '.join(unknown)} (continuous batching and speculation "
                "belong to vLLM Neuron); rewrite this load by hand",
            )
        dtype = None
        for name, (old, new) in args.keywords.items():
            if name in t.KEPT_LOAD_ARGS or name == "config":
                kept.append(name)
            elif name in t.EXPORT_ONLY_ARGS:
                self._report(old, EXPORT_ONLY)
            elif name == "batch_size":
                self._report(old, STATIC_SHAPES)
            elif name == "sequence_length":
                cache_len = new.value
                self._report(old, SEQUENCE_LENGTH)
            elif name in t.TP_ARGS:
                if literal_value(new.value) != 1:
                    tp_size = new.value
                    self._report(
                        old,
                        TENSOR_PARALLEL,
                        f"Rewritten to DistributedConfig(tp_size={source_code(new.value)}); launch the script with "
                        f"`torchrun --nproc_per_node=N` where N = {source_code(new.value)} (all ranks run generate; print "
                        "on rank 0).",
                    )
                else:
                    self._report(old, EXPORT_ONLY)
            elif name in t.DTYPE_ARGS:
                dtype = self._dtype(name, old, new)
        if dtype is not None:
            extra.append(_kwarg("dtype", dtype))
        if tp_size is None:
            extra.append(_kwarg("device_map", _string("neuron")))
        else:
            self._import("transformers", "DistributedConfig")
            config = cst.Call(func=cst.Name("DistributedConfig"), args=[_kwarg("tp_size", tp_size)])
            extra.append(_kwarg("distributed_config", config))
        return _assemble(args, [n for n in args.order if n in kept], extra), cache_len

    def _dtype(self, name: str, old: cst.Arg, new: cst.Arg) -> cst.BaseExpression:
        self._report(old, DTYPE)
        if name == "torch_dtype":
            return new.value
        self._import("torch")
        return _dtype_expr(new.value)

    def _check_not_compiled(self, args: _Args, what: str) -> None:
        export = args.keywords.get("export")
        value = literal_value(export[1].value) if export else False
        if value is True:
            return
        model = source_code(args.model[1].value) if args.model else "the model"
        if value is ...:
            raise Unmapped(
                UNMAPPED_ARGUMENTS,
                f"export={source_code(export[1].value)} is decided at run time, so {model} may be a compiled artifact; "
                "make the load always use the original checkpoint and rewrite it by hand",
            )
        raise Unmapped(
            COMPILED_ARTIFACT,
            f"{model} is {what} compiled by optimum-neuron, which Transformers/Diffusers cannot load; load the "
            "original checkpoint instead (0.4.x: `neuron.checkpoint_id` in the compiled config.json) with "
            "export=True, then run neuron-migrate again",
        )

    def _check_hub_id(self, args: _Args) -> None:
        if args.model is None:
            raise Unmapped(UNMAPPED_ARGUMENTS, "no model id is passed; rewrite this load by hand")
        model_id = literal_value(args.model[1].value)
        if isinstance(model_id, str) and _COMPILED_HUB_ID.match(model_id):
            raise Unmapped(
                COMPILED_ARTIFACT,
                f'"{model_id}" is a precompiled Neuron repo, which Transformers cannot load; use the original '
                "checkpoint it was exported from (its model card / config.json `neuron.checkpoint_id`)",
            )

    def _retarget(
        self, updated: cst.Call, module: str, target: str, owner: str, args: list[cst.Arg]
    ) -> cst.Call:
        self._import(module, target)
        self._drop_source_import(updated.func.value, owner)
        func = updated.func.with_changes(value=cst.Name(target), attr=cst.Name("from_pretrained"))
        return updated.with_changes(func=func, args=args)

    def _drop_source_import(self, reference: cst.BaseExpression, qualified: str) -> None:
        """Ask for the optimum import behind `reference` to go (it stays while anything still uses it):
        `from m import X [as Y]` for a bare name, `import m [as alias]` for `alias.X`."""
        module, name = qualified.rsplit(".", 1)
        if isinstance(reference, cst.Name):
            self.ctx.remove_import(module, name, reference.value if reference.value != name else None)
            return
        head = source_code(reference).split(".")[0]
        self.ctx.remove_import(module, None, head if head != module.split(".")[0] else None)

    def _traced_model(self, original: cst.Call, updated: cst.Call, owner: str, method: str) -> cst.Call:
        args = _split_args(original, updated, "this load", self._visible_dicts())
        self._check_not_compiled(args, "a model")
        self._check_hub_id(args)
        self._check_known(args, t.KEPT_LOAD_ARGS | t.EXPORT_ONLY_ARGS | t.TRACED_SHAPE_ARGS, t.DTYPE_ARGS)
        casts = self._auto_cast(args, default=None)
        dtype = None
        for name, (old, new) in args.keywords.items():
            if name in t.EXPORT_ONLY_ARGS:
                self._report(old, EXPORT_ONLY)
            elif name in t.TRACED_SHAPE_ARGS:
                self._report(old, STATIC_SHAPES)
            elif name == "torch_dtype" or (name == "auto_cast_type" and casts):
                # optimum ignores auto_cast_type unless auto_cast is set (modeling_traced.py `_export`)
                dtype = self._dtype(name, old, new)
            elif name in t.DTYPE_ARGS:
                self._report(old, EXPORT_ONLY)
        extra = ([_kwarg("dtype", dtype)] if dtype is not None else []) + [
            _kwarg("device_map", _string("neuron"))
        ]
        kept = [name for name in args.order if name in t.KEPT_LOAD_ARGS]
        self._report(original, TRACED_MODEL)
        if original in self._assigned_calls:
            self._remember_model(source_code(self._assigned_calls[original]))
        return self._retarget(
            updated, "transformers", t.TRANSFORMERS_MODELS[owner], owner, _assemble(args, kept, extra)
        )

    @staticmethod
    def _auto_cast(args: _Args, default: str | None) -> bool:
        """Whether the export cast weights to `auto_cast_type` (`auto_cast` None or "none" means it did not)."""
        auto_cast = (
            literal_value(args.keywords["auto_cast"][1].value) if "auto_cast" in args.keywords else default
        )
        if auto_cast is ...:
            raise Unmapped(
                UNMAPPED_ARGUMENTS,
                "auto_cast is decided at run time, so the load dtype is unknown; set dtype= by hand",
            )
        return auto_cast not in (None, "none")

    def _check_known(self, args: _Args, known: frozenset[str], also: tuple[str, ...]) -> None:
        unknown = [name for name in args.order if name not in known and name not in also]
        if unknown:
            raise Unmapped(
                UNMAPPED_ARGUMENTS,
                f"no TorchNeuron equivalent known for {', '.join(unknown)}; rewrite this load by hand",
            )

    def _diffusion_pipeline(self, original: cst.Call, updated: cst.Call, owner: str, method: str):
        args = _split_args(original, updated, "this pipeline load", self._visible_dicts())
        for name in args.order:
            prefix = name.split("_")[0] + "_" if name.startswith(("lora_", "ip_adapter_")) else None
            key = {"lora_": "lora_model_ids", "ip_adapter_": "ip_adapter_id"}.get(prefix, name)
            if key in t.DIFFUSION_MANUAL_ARGS and not (
                name == "tensor_parallel_size" and literal_value(args.keywords[name][1].value) == 1
            ):
                raise Unmapped(UNMAPPED_ARGUMENTS, f"`{name}`: {t.DIFFUSION_MANUAL_ARGS[key]}")
        self._check_not_compiled(args, "a pipeline")
        self._check_hub_id(args)
        self._check_known(
            args,
            t.KEPT_LOAD_ARGS | t.EXPORT_ONLY_ARGS | t.TRACED_SHAPE_ARGS,
            (*t.DTYPE_ARGS, "tensor_parallel_size"),
        )
        # Diffusion export defaults: auto_cast="matmul", auto_cast_type="bf16" (modeling_diffusion.py `_export`).
        casts = self._auto_cast(args, default="matmul")
        dtype = cst.parse_expression("torch.bfloat16") if casts else None
        for name, (old, new) in args.keywords.items():
            if name in t.EXPORT_ONLY_ARGS or name == "tensor_parallel_size":
                self._report(old, EXPORT_ONLY)
            elif name in _PIPELINE_CALL_SHAPES:
                self._report(
                    old,
                    STATIC_SHAPES,
                    f"Dropped from the loader: pass {_PIPELINE_CALL_SHAPES[name]}= to every pipeline call instead "
                    "and keep it constant (each new shape compiles again on neuron).",
                )
            elif name in t.TRACED_SHAPE_ARGS:
                self._report(old, STATIC_SHAPES)
            elif name == "torch_dtype" or (name == "auto_cast_type" and casts):
                dtype = self._dtype(name, old, new)
            elif name == "auto_cast_type":
                self._report(old, EXPORT_ONLY)
        if dtype is not None:
            self._import("torch")
        extra = [_kwarg("torch_dtype", dtype)] if dtype is not None else []
        kept = [name for name in args.order if name in t.KEPT_LOAD_ARGS]
        self._report(original, DIFFUSION_PIPELINE)
        load = self._retarget(
            updated, "diffusers", t.DIFFUSERS_PIPELINES[owner], owner, _assemble(args, kept, extra)
        )
        return cst.Call(
            func=cst.Attribute(value=load, attr=cst.Name("to")), args=[cst.Arg(_string("neuron"))]
        )

    def _pipeline(self, original: cst.Call, updated: cst.Call, owner, method) -> cst.Call:
        args = _split_args(original, updated, "pipeline()", self._visible_dicts(), positional=("model",))
        task = args.model  # pipeline's first positional argument is the task
        if task is None and "task" in args.keywords:
            task = args.keywords["task"]
        task_name = literal_value(task[1].value) if task else None
        model = args.keywords.get("model")
        if model is None:
            raise Unmapped(
                UNMAPPED_ARGUMENTS, "no model is passed (optimum picks a default); pass model= by hand"
            )
        # A model object migrated above is already on its device(s) with its static cache set.
        model_object = source_code(model[1].value) in self._models_in_scope()
        if not model_object:
            probe = replace(args, model=model)  # the checks look at the model, not the task
            self._check_not_compiled(probe, "a model")
            self._check_hub_id(probe)
        settings: dict[str, tuple[cst.Arg, cst.BaseExpression]] = {}  # setting -> (original node, value)
        for name in args.order:
            old, new = args.keywords[name]
            if name in ("input_shapes", "compiler_args"):
                if not isinstance(new.value, cst.Dict) or any(
                    not isinstance(element, cst.DictElement)
                    or not isinstance(literal_value(element.key), str)
                    for element in new.value.elements
                ):
                    raise Unmapped(
                        UNMAPPED_ARGUMENTS, f"{name} is not a literal dict; spell its keys out by hand"
                    )
                for element in new.value.elements:
                    settings[literal_value(element.key)] = (old, element.value)
            elif name not in ("task", "model"):
                settings[name] = (old, new.value)
        passthrough = {"tokenizer", "feature_extractor", "image_processor", "use_fast", "token", "revision"}
        passthrough |= {"trust_remote_code", "batch_size"}
        unknown = [
            name
            for name in settings
            if name not in passthrough | t.EXPORT_ONLY_ARGS | {"sequence_length"}
            and name not in t.TP_ARGS + t.DTYPE_ARGS
        ]
        if unknown:
            raise Unmapped(
                UNMAPPED_ARGUMENTS, f"no transformers.pipeline equivalent known for {', '.join(unknown)}"
            )
        for name in t.TP_ARGS:
            if name in settings and literal_value(settings[name][1]) != 1:
                raise Unmapped(
                    UNMAPPED_ARGUMENTS,
                    f"{name}={source_code(settings[name][1])} needs a tensor-parallel model: load it with "
                    "AutoModelForCausalLM.from_pretrained(id, distributed_config=DistributedConfig(tp_size=N)), pass "
                    "the model object to transformers.pipeline and launch with torchrun",
                )
        if "sequence_length" in settings and task_name is ...:
            raise Unmapped(
                UNMAPPED_ARGUMENTS, "the task is chosen at run time, so sequence_length cannot be mapped"
            )
        extra = [] if model_object else [_kwarg("device", _string("neuron"))]
        for name, (old, value) in settings.items():
            if name in t.DTYPE_ARGS:
                extra.append(_kwarg("dtype", self._dtype(name, old, cst.Arg(value))))
            elif name == "sequence_length" and task_name == "text-generation":
                self._report(old, SEQUENCE_LENGTH)
            elif name == "sequence_length" or (name == "batch_size" and old.keyword.value == "input_shapes"):
                self._report(old, STATIC_SHAPES)
            elif name == "batch_size":
                self._report(
                    old,
                    STATIC_SHAPES,
                    "Kept as the pipeline's batch size: feed full batches only "
                    "(a smaller last batch compiles again on neuron).",
                )
            elif name not in passthrough:
                self._report(old, EXPORT_ONLY)
        kept = [name for name in args.order if name in passthrough]
        if args.model is None and task is not None:  # task=... keyword: keep it first
            kept.insert(0, "task")
        kept.insert(1 if "task" in kept else 0, "model")
        if task_name == "text-generation" and not model_object:
            if original not in self._assigned_calls:
                raise Unmapped(
                    UNMAPPED_ARGUMENTS,
                    "this text-generation pipeline is not assigned to a name, so its static cache cannot be set; "
                    "assign it to a variable and run neuron-migrate again",
                )
            cache_len = settings["sequence_length"][1] if "sequence_length" in settings else None
            if cache_len is None:
                self._report(original, SEQUENCE_LENGTH, _NO_CACHE_LEN)
            target = source_code(self._assigned_calls[original])
            self._loads[original] = _Load(f"{target}.model.generation_config", cache_len)
        self._report(original, PIPELINE)
        # `transformers.pipeline`, not `pipeline`: the optimum `pipeline` import stays while any call still uses it.
        self._import("transformers")
        self._drop_source_import(original.func, self.ctx.qualified(original.func))
        return updated.with_changes(
            func=cst.parse_expression("transformers.pipeline"), args=_assemble(args, kept, extra)
        )

    # --- get_neuron_config + export pairs ---------------------------------------------------------------------

    def _pair_neuron_configs(self, body) -> None:
        """In one suite, pair `cfg = X.get_neuron_config(...)` with `m = X.export(id, cfg)` when `cfg` is used
        nowhere else and both name the same checkpoint expression."""
        configs: dict[str, cst.Call] = {}
        for statement in body:
            value, target = self._assigned(statement)
            if value is None:
                continue
            if m.matches(value.func, m.Attribute(attr=m.Name("get_neuron_config"))) and isinstance(
                target, cst.Name
            ):
                configs[target.value] = value
            elif m.matches(value.func, m.Attribute(attr=m.Name("export"))) and len(value.args) >= 2:
                passed = value.args[1].value if value.args[1].keyword is None else None
                passed = next(
                    (a.value for a in value.args if m.matches(a.keyword, m.Name("neuron_config"))), passed
                )
                config = configs.get(passed.value) if isinstance(passed, cst.Name) else None
                if config is None or not config.args or config.args[0].keyword is not None:
                    continue
                uses = sum(
                    len(m.findall(s, m.Name(passed.value))) for s in body
                )  # the assignment + the export argument only
                same_model = source_code(config.args[0].value) == source_code(value.args[0].value)
                known = all(
                    arg.keyword is not None and arg.keyword.value in _PAIRED_EXPORT_ARGS
                    for arg in value.args[2:]
                ) and all(
                    arg.keyword is not None and arg.keyword.value in _PAIRED_CONFIG_ARGS
                    for arg in config.args[1:]
                )
                if uses == 2 and same_model and known and isinstance(target, (cst.Name, cst.Attribute)):
                    self._config_pairs[value] = config
                    self._paired_configs.add(config)

    @staticmethod
    def _assigned(statement) -> tuple[cst.Call | None, cst.BaseExpression | None]:
        if not m.matches(statement, m.SimpleStatementLine(body=[m.Assign(targets=[m.AssignTarget()])])):
            return None, None
        assign = statement.body[0]
        return (
            (assign.value, assign.targets[0].target) if isinstance(assign.value, cst.Call) else (None, None)
        )
