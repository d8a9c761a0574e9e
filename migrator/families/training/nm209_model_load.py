"""NM209 (and NM210, defined in `nm210_flash_attention.py`): a training model load
(`optimum.neuron.models.training`) becomes the Transformers class, its `trn_config` becoming
`distributed_config=`; flash_attention_2 becomes sdpa. Other model loads of the scope get the
`DistributedConfig` of the arguments' sharding."""

from __future__ import annotations

import libcst as cst
import libcst.matchers as m

from migrator.cst_helpers import (
    descendants,
    dotted_name,
    find_keyword,
    is_literal,
    is_method_call,
    keyword_arg,
    method_calls,
    source_code,
    with_appended,
    without_args,
)
from migrator.families.training.arguments_names import with_fields
from migrator.families.training.state import TrainingFile, trn_config_arg, trn_config_source
from migrator.families.training.targets import (
    HINTS,
    LAZY_LOAD_FUNCTIONS,
    MODEL_CLASS_SUFFIXES,
    MODEL_LOAD_KEYWORDS,
    NEURON_ARGUMENTS,
    PARSED_PARALLEL_FIELDS,
    PARSED_PIPELINE_FIELD,
    TRAINING_MODELS,
    TRIGGERS,
    WORLD_SIZE,
    Target,
)
from migrator.families.training.tp_compile import MEMORY, WHY
from migrator.families.training_args import SFT_CONFIG_ARGUMENTS
from migrator.rules import Example, Rule, Severity
from migrator.transform import FileContext, Handler

TRAINING_MODEL = Rule(
    "NM209",
    Severity.INFO,
    "`optimum.neuron.models.training` model load `from_pretrained(model_id, trn_config, ...)`",
    "Rewritten to the Transformers class (`AutoModelForCausalLM`, `LlamaForCausalLM`, ...) without "
    "`trn_config`; the sharding moves to `distributed_config=` (NM204).",
    examples=(
        Example(
            before="""\
from optimum.neuron import NeuronTrainingArguments
from optimum.neuron.models.training import NeuronModelForCausalLM

args = NeuronTrainingArguments(output_dir="out", tensor_parallel_size=2)
model = NeuronModelForCausalLM.from_pretrained("Qwen/Qwen3-0.6B", args.trn_config)
""",
            after="""\
import os
from transformers import AutoModelForCausalLM, DistributedConfig, TrainingArguments

os.environ.setdefault("HF_DEACTIVATE_ASYNC_LOAD", "1")

args = TrainingArguments(output_dir="out", torch_compile=True, save_only_model=True)
model = AutoModelForCausalLM.from_pretrained("Qwen/Qwen3-0.6B", distributed_config=DistributedConfig(tp_size=2, fsdp_size=int(os.environ.get("WORLD_SIZE", "1")) // 2))
""",
        ),
    ),
)
RULES = (TRAINING_MODEL,)
_FLASH_ATTENTION = m.OneOf(
    *(m.SimpleString(f"{quote}flash_attention_{version}{quote}") for quote in "\"'" for version in (2, 3))
)


class ModelLoads(Handler):
    HINTS = HINTS
    TRIGGERS = TRIGGERS

    def __init__(self, ctx: FileContext) -> None:
        super().__init__(ctx)
        self.file = ctx.state(TrainingFile)
        self.parsed, self.dataclasses, self.pipelined, self.file.lazy_load_guards = _parsed_trn_configs(ctx)
        self.file.parsed_loads = self.parsed
        # load -> (its arguments variable, the condition under which the load shards)
        self.save_only_model: dict[cst.Call, tuple[str, str, str]] = {}
        for name in self.dataclasses:
            ctx.watch(name)
        if self.dataclasses:
            self.file.parsed_flag_fields.update(PARSED_PARALLEL_FIELDS)
        if self.pipelined:
            self.file.parsed_flag_fields.add(PARSED_PIPELINE_FIELD[0])

    def leave_Call(self, original: cst.Call, updated: cst.Call):
        if not isinstance(updated, cst.Call) or len(original.args) != len(updated.args):
            return updated  # replaced or restructured by an earlier rule: not ours to pair up
        if not is_method_call(original, "from_pretrained"):
            return updated
        owner = self.ctx.qualified(original.func.value)
        if owner in TRAINING_MODELS:
            return self._training_load(original, updated, TRAINING_MODELS[owner])
        if original in self.parsed:  # under `with lazy_load_for_parallelism(<parsed arguments>)` (NM211)
            return self._parsed_load(original, updated, None, None, self.parsed[original])
        scope = self.file.scope
        updated = updated.with_changes(args=_sdpa(self.ctx, original, list(updated.args)))
        if original in scope.load_targets:
            updated = self.file.add_distributed_config(original, updated)
        scope.loads_left[original] = updated
        return updated

    def _training_load(self, original: cst.Call, updated: cst.Call, target: Target) -> cst.Call:
        file, scope = self.file, self.file.scope
        index, trn_config = trn_config_arg(original)
        parsed = self.parsed.get(original)
        if parsed is not None:
            return self._parsed_load(original, updated, target, index, parsed)
        as_config = trn_config in file.inline_configs or (
            isinstance(trn_config, cst.Name) and trn_config.value in scope.distributed_config_names
        )
        carried = trn_config is not None and (
            as_config
            or (isinstance(trn_config, cst.Name) and trn_config.value in scope.trn_config_names)
            or m.matches(
                trn_config,
                m.Attribute(value=m.Name(scope.args_variable or ""), attr=m.Name("trn_config")),
            )
        )
        needs_target = scope.parallelism is not None and scope.parallelism.sharded
        if trn_config is not None and (
            not carried or needs_target and (as_config or original not in scope.load_targets)
        ):
            file.kept.add(self.ctx.qualified(original.func.value))
            self.ctx.todo(
                original,
                "NM208",
                f"`{source_code(trn_config)}` does not come from training arguments migrated in this scope (parsed "
                "command-line flags, or arguments left with a TODO) and TrainingArguments has no "
                "tensor_parallel_size/zero_1",
                "add a `tensor_parallel_size: int` field to your script's argument dataclass, load with "
                f'transformers.{target.name}.from_pretrained(model_id, dtype=..., attn_implementation="sdpa", '
                f"distributed_config=DistributedConfig(tp_size=tp, fsdp_size={WORLD_SIZE} // tp)) and set "
                "save_only_model=True in the training arguments",
            )
            return updated
        self.ctx.report(original, TRAINING_MODEL, f"-> `transformers.{target.name}.from_pretrained`.")
        file.rewritten_loads.add(self.ctx.qualified(original.func.value))
        args = self._renamed_keywords(original, updated)
        removed = set() if index is None else {args[index]}
        self.ctx.add_import(target.module, target.name)
        func = updated.func.with_changes(value=cst.Name(target.name))
        if as_config:  # the variable or inline call now holds a DistributedConfig
            args[index] = keyword_arg("distributed_config", args[index].value).with_changes(
                comma=args[index].comma, whitespace_after_arg=args[index].whitespace_after_arg
            )
            removed = set()
        updated = updated.with_changes(func=func, args=without_args(args, removed))
        return file.add_distributed_config(original, updated)

    def _renamed_keywords(self, original: cst.Call, updated: cst.Call) -> list[cst.Arg]:
        """The load's arguments with Transformers 5's keyword names (`dtype=`) and sdpa for flash attention."""
        args = list(updated.args)
        for position, (before, arg) in enumerate(zip(original.args, updated.args, strict=True)):
            keyword = before.keyword.value if before.keyword else None
            if keyword in MODEL_LOAD_KEYWORDS:
                message = f"`{keyword}=` -> `{MODEL_LOAD_KEYWORDS[keyword]}=`."
                self.ctx.report(before, "NM202", message, subject=keyword)
                args[position] = arg.with_changes(keyword=cst.Name(MODEL_LOAD_KEYWORDS[keyword]))
        return _sdpa(self.ctx, original, args)

    # -- `trn_config` of command-line arguments: the flag moves to the script's own dataclass --------------

    def leave_ClassDef(self, original: cst.ClassDef, updated: cst.ClassDef):
        """The script's own argument dataclass takes the parallel flags (`PARSED_PARALLEL_FIELDS`), which
        NeuronTrainingArguments parsed from the command line and TrainingArguments does not have: the launcher's
        `--tensor_parallel_size 8 --zero_1` still parse, and now reach the model load."""
        if original.name.value not in self.dataclasses:
            return updated
        fields = dict(PARSED_PARALLEL_FIELDS)
        if original.name.value in self.pipelined:
            fields.update([PARSED_PIPELINE_FIELD])
        updated, names = with_fields(original, updated, fields)
        if not names:
            return updated
        added = ", ".join(f"`{name}`" for name in names)
        self.ctx.report(
            original,
            TRAINING_MODEL,
            f"{added} added to `{original.name.value}`: the flags that filled the parsed NeuronTrainingArguments' "
            "trn_config still parse and now reach the model load.",
            subject=original.name.value,
        )
        return updated

    def _parsed_load(
        self, original, updated, target: Target | None, index: int | None, parsed: tuple[str, str]
    ) -> cst.Call:
        """A load whose parallel degrees are parsed from the command line: a training load (`target`, its
        `trn_config` at `index`), or a Transformers load that `lazy_load_for_parallelism` wrapped (None, None)."""
        holder, arguments = parsed
        tp, zero_1 = f"{holder}.tensor_parallel_size", f"{holder}.zero_1"
        # ZeRO-1 shards the optimizer state over the data-parallel processes: fsdp_size, as the announcement runs
        # it. Without it, a degree of 1 is plain data parallelism, which the Trainer does itself (DDP); a
        # DistributedConfig would shard at load and make the Trainer refuse checkpoints with optimizer state.
        sharded = f"{tp} > 1 or {zero_1}"
        config = (
            f"DistributedConfig(tp_size={tp}, fsdp_size={WORLD_SIZE} // {tp}) if {zero_1} else "
            f"DistributedConfig(tp_size={tp}, dp_replicate_size={WORLD_SIZE} // {tp}) if {tp} > 1 else None"
        )
        self.ctx.add_import("os")
        self.ctx.add_import("transformers", "DistributedConfig")
        self.file.tensor_parallel_load = True
        self.ctx.report(
            original,
            TRAINING_MODEL,
            f"-> `{'' if target is None else f'transformers.{target.name}.'}from_pretrained` with "
            f"distributed_config={config}: the parsed tensor parallel degree, ZeRO-1 (`--zero_1`) as fsdp_size "
            "over the other processes, else data parallel over them (a degree of 1 without ZeRO-1: no "
            "DistributedConfig, the Trainer's own data parallelism).",
        )
        args = self._renamed_keywords(original, updated)
        new = keyword_arg("distributed_config", cst.parse_expression(config))
        args = with_appended(without_args(args, set() if index is None else {args[index]}), [new])
        self.save_only_model[original] = (arguments, sharded, tp)
        if target is None:
            return updated.with_changes(args=args)
        self.ctx.add_import(target.module, target.name)
        self.file.rewritten_loads.add(self.ctx.qualified(original.func.value))
        return updated.with_changes(func=updated.func.with_changes(value=cst.Name(target.name)), args=args)

    def leave_SimpleStatementLine(self, original: cst.SimpleStatementLine, updated):
        """After a load sharded by parsed arguments: Trainer cannot save the optimizer state of a sharded model
        (NM207), so its checkpoints hold the model only when the parsed degree shards it; and a parsed
        `--gradient_checkpointing true` is turned off where the parsed degree is tensor parallel and the model is
        compiled (NM222, as on a launcher the migration reads: the flag may come from one it cannot)."""
        if not self.save_only_model or not isinstance(updated, cst.SimpleStatementLine):
            return updated
        load = next((call for call in self.save_only_model if call in descendants(original, cst.Call)), None)
        if load is None:
            return updated
        arguments, sharded, tp = self.save_only_model.pop(load)
        self.ctx.report(load, "NM207", subject="save_only_model")
        self.ctx.report(
            load,
            "NM222",
            f"activation checkpointing off (`{arguments}.activation_checkpointing`, which Transformers 5's Trainer reads "
            f"once the arguments are built, and its old name `gradient_checkpointing`) when `{tp} > 1` and the model "
            f"is compiled: {WHY}; the memory cost: {MEMORY}.",
            subject="gradient_checkpointing",
        )
        guards = [
            cst.parse_statement(f"if {sharded}:\n    {arguments}.save_only_model = True\n"),
            cst.parse_statement(
                f"if {tp} > 1 and {arguments}.torch_compile:\n"
                f"    {arguments}.activation_checkpointing = {arguments}.gradient_checkpointing = False\n"
            ),
        ]
        return cst.FlattenSentinel([updated, *guards])


# HfArgumentParser's parses, and TrlParser's (`parse_args_and_config`: the flags, then a `--config` file).
_PARSES = frozenset(
    {
        "parse_args_into_dataclasses",
        "parse_json_file",
        "parse_yaml_file",
        "parse_dict",
        "parse_args_and_config",
    }
)


def _parsed_trn_configs(
    ctx: FileContext,
) -> tuple[dict[cst.Call, tuple[str, str]], set[str], set[str], dict[cst.With, tuple[str, str]]]:
    """Model loads sharded by NeuronTrainingArguments parsed from the command line next to a dataclass of the
    script (`script_args, training_args = parser.parse_args_into_dataclasses()`), read there or in a function
    the parsed arguments are passed to: training loads given their `trn_config`, and the one Transformers load
    under `with lazy_load_for_parallelism(tensor_parallel_size=training_args.tensor_parallel_size)`. Each load
    -> (the variable of that dataclass, the arguments' variable where the load reads them); the dataclasses
    that take the flags, those that also take `pipeline_parallel_size`; and the run-time checks of the parsed
    degrees that such a `with` needs (a pipeline degree; a model built by from_config, which no degree shards)."""
    module = ctx.module
    dataclasses = {
        node.name.value
        for node in module.body
        if isinstance(node, cst.ClassDef)
        and any("dataclass" in source_code(decorator.decorator) for decorator in node.decorators)
    }
    if not dataclasses or {"trn_config", "lazy_load_for_parallelism"}.isdisjoint(ctx.source.identifiers):
        return {}, set(), set(), {}
    parsers: dict[str, list[str]] = {}
    holders: dict[str, tuple[str, str]] = {}  # arguments variable -> (dataclass variable, dataclass)
    loads: dict[cst.Call, tuple[str, str]] = {}
    chosen: set[str] = set()
    pipelined: set[str] = set()
    guards: dict[cst.With, tuple[str, str]] = {}
    for assign in descendants(module, cst.Assign):
        target, value = assign.targets[0].target, assign.value
        if isinstance(target, cst.Name) and m.matches(value, m.Call(args=[m.Arg(m.Tuple() | m.List())])):
            parsers[target.value] = [source_code(element.value) for element in value.args[0].value.elements]
        elif isinstance(target, (cst.Tuple, cst.List)) and m.matches(
            value, m.Call(func=m.Attribute(value=m.Name(), attr=m.Name()))
        ):
            classes = parsers.get(value.func.value.value, []) if value.func.attr.value in _PARSES else []
            names = [element.value for element in target.elements]
            own = [
                (n.value, c)
                for n, c in zip(names, classes, strict=False)
                if c in dataclasses and isinstance(n, cst.Name)
            ]
            for variable, cls in zip(names, classes, strict=False):
                if own and isinstance(variable, cst.Name) and ctx.module_qualified(cls) in NEURON_ARGUMENTS:
                    holders[variable.value] = own[0]
    functions = [node for node in module.body if isinstance(node, cst.FunctionDef)]
    in_functions = {call for function in functions for call in descendants(function, cst.Call)}
    for scope in (module, *functions):
        for call in descendants(scope, cst.Call):
            if not is_method_call(call, "from_pretrained") or (scope is module and call in in_functions):
                continue
            arguments = trn_config_source(trn_config_arg(call)[1], scope)
            source = arguments if scope is module else _passed(module, scope, arguments)
            holder = holders.get(source or "")
            if holder is not None:
                loads[call] = (holder[0], arguments)
                chosen.add(holder[1])
        for with_node in descendants(scope, cst.With):
            if scope is module and any(with_node in descendants(f, cst.With) for f in functions):
                continue
            parsed = _lazy_load(ctx, with_node)
            if parsed is None:
                continue
            load, arguments, pipeline = parsed
            source = arguments if scope is module else _passed(module, scope, arguments)
            holder = holders.get(source or "")
            if holder is None:
                continue
            chosen.add(holder[1])
            if load is not None:
                loads[load] = (holder[0], arguments)
            checks = [] if load is not None else [f"{holder[0]}.tensor_parallel_size > 1"]
            if pipeline:
                pipelined.add(holder[1])
                checks.append(f"{holder[0]}.pipeline_parallel_size != 1")
            if checks:
                guards[with_node] = (" or ".join(checks), _guard_message(load is None, pipeline))
    return loads, chosen, pipelined, guards


def _guard_message(built: bool, pipeline: bool) -> str:
    """What the run-time check of a parsed degree TorchNeuron cannot honour says (the owner's decision)."""
    reasons = []
    if built:
        reasons.append(
            "a model built by from_config is not sharded by a tensor parallel degree (DistributedConfig shards "
            "at from_pretrained): save it and load it with from_pretrained, or pass --tensor_parallel_size 1"
        )
    if pipeline:
        reasons.append(f"pipeline_parallel_size: {SFT_CONFIG_ARGUMENTS['pipeline_parallel_size'].note}")
    return "; ".join(reasons) + " (neuron-migrate NM211)"


def _lazy_load(ctx: FileContext, node: cst.With) -> tuple[cst.Call | None, str, bool] | None:
    """For `with lazy_load_for_parallelism(tensor_parallel_size=args.tensor_parallel_size)` (and perhaps
    `pipeline_parallel_size=args.pipeline_parallel_size`) around one Transformers model load, or one model
    built by `from_config`: (that load or None, `args`, whether the pipeline degree is passed); else None (NM211
    decides)."""
    call = node.items[0].item if len(node.items) == 1 else None
    if (
        not isinstance(call, cst.Call)
        or ctx.module_qualified(dotted_name(call.func) or "") not in LAZY_LOAD_FUNCTIONS
    ):
        return None
    tp = find_keyword(call, "tensor_parallel_size") or next(
        (arg for arg in call.args[:1] if arg.keyword is None and not arg.star), None
    )
    if tp is None or not m.matches(tp.value, m.Attribute(m.Name(), m.Name("tensor_parallel_size"))):
        return None
    arguments = tp.value.value.value
    pp = find_keyword(call, "pipeline_parallel_size")
    pipeline = pp is not None and not is_literal(pp.value, "1")
    if pipeline and not m.matches(pp.value, m.Attribute(m.Name(arguments), m.Name("pipeline_parallel_size"))):
        return None

    def models(method: str) -> list[cst.Call]:
        return [
            load
            for load in method_calls(node.body, method)
            if ctx.module_qualified(dotted_name(load.func.value) or "").startswith("transformers.")
            and (dotted_name(load.func.value) or "").endswith(MODEL_CLASS_SUFFIXES)
        ]

    loads, built = models("from_pretrained"), models("from_config")
    if len(loads) == 1 and not built:
        return loads[0], arguments, pipeline
    return (None, arguments, pipeline) if len(built) == 1 and not loads else None


def _passed(module: cst.Module, function: cst.FunctionDef, name: str | None) -> str | None:
    """For a parameter `name` of a module-level function: the module-level variable every call of the function
    passes to it (`train(training_args=training_args)`), by keyword or position; else None (a local or a
    global read keeps its own name, which the function sees)."""
    parameters = [param.name.value for param in function.params.params]
    if name is None or name not in parameters:
        return name
    position = parameters.index(name)
    passed = set()
    for call in descendants(module, cst.Call):
        if not m.matches(call.func, m.Name(function.name.value)):
            continue
        given = find_keyword(call, name)
        positional = [arg for arg in call.args if arg.keyword is None]
        if given is None and any(arg.star for arg in call.args):
            return None
        arg = given if given is not None else positional[position] if position < len(positional) else None
        passed.add(arg.value.value if arg is not None and isinstance(arg.value, cst.Name) else None)
    return passed.pop() if len(passed) == 1 else None


def _sdpa(ctx: FileContext, original: cst.Call, args: list[cst.Arg]) -> list[cst.Arg]:
    """A load's arguments (`args`, in the order of `original`'s) with sdpa where they ask for the CUDA flash
    attention kernels, which a neuron device does not have (NM210): `attn_implementation="flash_attention_2"`
    or `"_3"`, and `use_flash_attention_2=...`, which Transformers 5 rejects (either value: sdpa is also what
    False chose there)."""
    given = find_keyword(original, "attn_implementation") is not None
    removed = set()
    for position, before in enumerate(original.args):
        keyword = before.keyword.value if before.keyword else None
        if keyword == "attn_implementation" and m.matches(before.value, _FLASH_ATTENTION):
            message = f'`attn_implementation={source_code(before.value)}` -> `"sdpa"`.'
            ctx.report(before.value, "NM210", message)
            args[position] = args[position].with_changes(value=cst.SimpleString('"sdpa"'))
        elif keyword == "use_flash_attention_2" and given:
            ctx.report(before, "NM210", "`use_flash_attention_2=` removed: Transformers 5 rejects it, and "
                       "`attn_implementation=` is given.")  # fmt: skip
            removed.add(args[position])
        elif keyword == "use_flash_attention_2":
            message = f'`use_flash_attention_2={source_code(before.value)}` -> `attn_implementation="sdpa"`.'
            ctx.report(before, "NM210", message)
            args[position] = args[position].with_changes(
                keyword=cst.Name("attn_implementation"), value=cst.SimpleString('"sdpa"')
            )
    return without_args(args, removed)


HANDLER = ModelLoads
