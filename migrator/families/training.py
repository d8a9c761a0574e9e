"""Training (NM2xx): optimum-neuron trainers, arguments, training models -> Transformers / TRL / PEFT.

`NeuronTrainer`/`NeuronSFTTrainer`/`NeuronTrainingArguments`/`NeuronSFTConfig`/`NeuronHfArgumentParser`
(and their legacy names) become the plain Transformers/TRL classes; argument keywords follow the table in
`training_args.py`. Model parallelism leaves the arguments: `tensor_parallel_size`/`zero_1` become
`DistributedConfig(tp_size=..., fsdp_size=...)` on the model's `from_pretrained` in the same scope, the
only place Transformers shards a model. Whatever cannot be rewritten faithfully (parallelism that is only
known from parsed command-line flags, pipeline parallelism, ...) is left as it is with a TODO, so that
running the migrator again reports it again and finishes the job once the user has acted.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import libcst as cst
import libcst.matchers as m

from migrator.families.training_args import (
    SFT_CONFIG_ARGUMENTS,
    TRAINING_ARGUMENTS,
    TRAINING_NEURON_CONFIG_FIELDS,
    ArgAction,
)
from migrator.rules import Severity, define
from migrator.transform import Family, descendants, dotted_name, is_method_call, method_calls, source_code

CLASS_RENAMED = define(
    "NM201",
    Severity.INFO,
    "An optimum-neuron training class or function (`NeuronTrainer`, `NeuronSFTTrainer`, "
    "`NeuronTrainingArguments`, `NeuronSFTConfig`, `NeuronHfArgumentParser`, legacy `Trainium*`/`Seq2Seq*` "
    "names, `optimum.neuron.peft`)",
    "Rewritten to the Transformers/TRL/PEFT equivalent (`Trainer`, `trl.SFTTrainer`, `TrainingArguments`, "
    "`trl.SFTConfig`, `HfArgumentParser`, `peft.get_peft_model`, ...).",
)
ARGUMENT_RENAMED = define(
    "NM202",
    Severity.INFO,
    "A training keyword whose name changed (`warmup_ratio`, `max_seq_length`, `evaluation_strategy`, "
    "`tokenizer=` of a trainer, `torch_dtype=` of a training model load, ...)",
    "Renamed (`warmup_steps` takes the ratio as a float in [0, 1), `max_length`, `eval_strategy`, "
    "`processing_class=`, `dtype=`, ...).",
)
ARGUMENT_DROPPED = define(
    "NM203",
    Severity.WARNING,
    "A training argument with no equivalent in Transformers 5 / TRL 1.16 (Neuron runtime, ZeRO-1 optimizer "
    "and metrics options, `overwrite_output_dir`, ...)",
    "Removed; the finding says what changes. Remove the matching `--flag` from launch scripts too, otherwise "
    "`HfArgumentParser` rejects it.",
)
MOVED_TO_DISTRIBUTED_CONFIG = define(
    "NM204",
    Severity.WARNING,
    "`tensor_parallel_size` / `zero_1` in the training arguments (or `lazy_load_for_parallelism`)",
    "Moved to `from_pretrained(..., distributed_config=DistributedConfig(tp_size=TP, fsdp_size=WORLD_SIZE // "
    "TP))` of the model loaded in the same scope (`dp_replicate_size` instead of `fsdp_size` without ZeRO-1). "
    "ZeRO-1 becomes FSDP2, which also shards parameters and gradients. Launch with torchrun.",
)
MANUAL_ARGUMENT = define(
    "NM205",
    Severity.ERROR,
    "A training argument with no faithful rewrite (`pipeline_parallel_size`, `mp_plugin`, ...)",
    "The call is left as it is with a TODO saying what to do; run neuron-migrate again afterwards.",
)
TORCH_COMPILE = define(
    "NM206",
    Severity.INFO,
    "Migrated `TrainingArguments`/`SFTConfig` without `torch_compile`",
    "`torch_compile=True` added: Transformers picks the neuron compile backend by itself and compiles the "
    "training step without dynamic shapes (optimum-neuron always compiled it). Set it to False for eager "
    "debugging.",
)
SAVE_ONLY_MODEL = define(
    "NM207",
    Severity.WARNING,
    "Training arguments of a model sharded with `DistributedConfig`",
    "`save_only_model=True` added: Trainer cannot save or resume optimizer state of a model sharded at load. "
    "Checkpoints hold the model only, so `resume_from_checkpoint` restarts the optimizer.",
)
DISTRIBUTED_CONFIG_BY_HAND = define(
    "NM208",
    Severity.ERROR,
    "Model parallelism the codemod cannot carry to the model load (`trn_config` from parsed arguments, no "
    "single model `from_pretrained` in the scope, ...)",
    "Left as it is with a TODO: read the tensor-parallel size from your own argument dataclass and pass "
    "`distributed_config=DistributedConfig(...)` to `AutoModelForCausalLM.from_pretrained`.",
)
TRAINING_MODEL = define(
    "NM209",
    Severity.INFO,
    "`optimum.neuron.models.training` model load `from_pretrained(model_id, trn_config, ...)`",
    "Rewritten to the Transformers class (`AutoModelForCausalLM`, `LlamaForCausalLM`, ...) without "
    "`trn_config`; the sharding moves to `distributed_config=` (NM204).",
)
FLASH_ATTENTION = define(
    "NM210",
    Severity.WARNING,
    '`attn_implementation="flash_attention_2"` on a training model load',
    'Rewritten to `"sdpa"`: optimum-neuron mapped flash_attention_2 to its own NKI kernel, while Transformers\' '
    "flash_attention_2 needs the CUDA flash_attn package.",
)
LAZY_LOAD = define(
    "NM211",
    Severity.INFO,
    "`with lazy_load_for_parallelism(...)` around a model load",
    "The `with` is removed and its body kept: Transformers loads each shard directly when the load gets "
    "`distributed_config=` (NM204).",
)
CONSOLIDATION = define(
    "NM212",
    Severity.WARNING,
    "Checkpoint consolidation (`consolidate_model_parallel_checkpoints_to_unified_checkpoint`, ...)",
    "Removed: `save_pretrained` already gathers TP/FSDP shards into a standard checkpoint. Checkpoints "
    "written by optimum-neuron before the migration still need one consolidation run with optimum-neuron.",
)
ACCELERATOR = define(
    "NM213",
    Severity.ERROR,
    "`NeuronAccelerator(...)` (custom training loop on NxD)",
    "Left with a TODO: use `accelerate.Accelerator`; load the model with `distributed_config=DistributedConfig"
    '(...)` (or pass `parallelism_config=ParallelismConfig(tp_size=...)`), `mixed_precision="bf16"` instead of '
    "`mixed_precision_config`, `fsdp_plugin=FullyShardedDataParallelPlugin(fsdp_version=2)` instead of "
    "`zero_1`.",
)
PACKING_STRATEGY = define(
    "NM214",
    Severity.WARNING,
    "`NeuronSFTConfig(packing=...)` without `packing_strategy`",
    '`packing_strategy="wrapped"` added: TRL\'s default "bfd" packing turns on padding-free batches '
    "(one flattened row, variable length), which optimum-neuron always disabled and Neuron compiles per shape.",
)
TRN_CONFIG_ASSIGNMENT = define(
    "NM215",
    Severity.INFO,
    "`trn_config = training_args.trn_config`",
    "Removed: TrainingArguments has no `trn_config`; its sharding is now `distributed_config=` on the model "
    "load (NM204).",
)
LOGGING_DIR = define(
    "NM216",
    Severity.INFO,
    "`logging_dir=` in the training arguments (rejected by Transformers 5)",
    'Moved to `os.environ["TENSORBOARD_LOGGING_DIR"]`, set just before the arguments are built; Transformers '
    "5's TensorBoard callback reads its directory from there.",
)

NEURON_CONFIG = define(
    "NM217",
    Severity.WARNING,
    "`TrainingNeuronConfig(...)` given to a training model's `from_pretrained`",
    "Rewritten to `DistributedConfig(tp_size=..., fsdp_size=...)` passed as `distributed_config=` (ZeRO-1 becomes "
    "FSDP2; without it the data-parallel ranks replicate the model). NxD-only fields are dropped; pipeline "
    "parallelism, gradient_checkpointing and checkpoint_dir are left with a TODO.",
)

# --- Symbol tables -------------------------------------------------------------------------------------
_NEURON = "optimum.neuron"
_TRAINERS = "optimum.neuron.trainers"
_TRAINING_MODELS = "optimum.neuron.models.training"


@dataclass(frozen=True)
class Target:
    module: str
    name: str
    arguments: dict[str, ArgAction] | None = None  # the keyword table, for arguments classes
    trainer: bool = False  # a trainer constructor (tokenizer= -> processing_class=)


def _table(entries) -> dict[str, Target]:
    return {f"{module}.{name}": target for modules, name, target in entries for module in modules}


_ARGS_MODULES = (_NEURON, _TRAINERS, f"{_TRAINERS}.training_args", f"{_NEURON}.training_args")
_LEGACY = (_NEURON, _TRAINERS, f"{_NEURON}.training_args", f"{_NEURON}.hf_argparser")
_TRAINING_ARGS = Target("transformers", "TrainingArguments", TRAINING_ARGUMENTS)
_SEQ2SEQ_ARGS = Target("transformers", "Seq2SeqTrainingArguments", TRAINING_ARGUMENTS)
_TRAINER = Target("transformers", "Trainer", trainer=True)
_SEQ2SEQ_TRAINER = Target("transformers", "Seq2SeqTrainer", trainer=True)
_PARSER = Target("transformers", "HfArgumentParser")

# Symbols that are always rewritten (every use can be renamed): qualified optimum name -> target.
RENAMES: dict[str, Target] = _table(
    [
        ((_NEURON, _TRAINERS, f"{_TRAINERS}.transformers"), "NeuronTrainer", _TRAINER),
        (_ARGS_MODULES, "NeuronTrainingArguments", _TRAINING_ARGS),
        (
            (_NEURON, _TRAINERS, f"{_TRAINERS}.sft_trainer"),
            "NeuronSFTTrainer",
            Target("trl", "SFTTrainer", trainer=True),
        ),
        (
            (_NEURON, _TRAINERS, f"{_TRAINERS}.sft_config", f"{_NEURON}.utils", f"{_NEURON}.utils.trl_utils"),
            "NeuronSFTConfig",
            Target("trl", "SFTConfig", SFT_CONFIG_ARGUMENTS),
        ),
        ((_NEURON, f"{_NEURON}.hf_argparser"), "NeuronHfArgumentParser", _PARSER),
        ((_NEURON, _TRAINERS), "Seq2SeqNeuronTrainer", _SEQ2SEQ_TRAINER),
        (_ARGS_MODULES, "Seq2SeqNeuronTrainingArguments", _SEQ2SEQ_ARGS),
        (_LEGACY, "TrainiumTrainer", _TRAINER),
        (_LEGACY, "Seq2SeqTrainiumTrainer", _SEQ2SEQ_TRAINER),
        (_LEGACY, "TrainiumTrainingArguments", _TRAINING_ARGS),
        (_LEGACY, "Seq2SeqTrainiumTrainingArguments", _SEQ2SEQ_ARGS),
        (_LEGACY, "TrainiumHfArgumentParser", _PARSER),
        (
            (_NEURON, _TRAINERS, f"{_NEURON}.utils", f"{_NEURON}.utils.trl_utils"),
            "NeuronORPOTrainer",
            Target("trl.experimental.orpo", "ORPOTrainer", trainer=True),
        ),
        (
            (_NEURON, _TRAINERS, f"{_NEURON}.utils", f"{_NEURON}.utils.trl_utils"),
            "NeuronORPOConfig",
            Target("trl.experimental.orpo", "ORPOConfig", TRAINING_ARGUMENTS),
        ),
        (
            (f"{_NEURON}.peft", f"{_NEURON}.peft.mapping_func", f"{_NEURON}.utils.peft_utils", _NEURON),
            "get_peft_model",
            Target("peft", "get_peft_model"),
        ),
        (
            (
                f"{_NEURON}.peft",
                f"{_NEURON}.peft.peft_model",
                f"{_NEURON}.utils",
                f"{_NEURON}.utils.peft_utils",
            ),
            "NeuronPeftModel",
            Target("peft", "PeftModel"),
        ),
        (
            (f"{_NEURON}.peft", f"{_NEURON}.peft.peft_model"),
            "NeuronPeftModelForCausalLM",
            Target("peft", "PeftModelForCausalLM"),
        ),
    ]
)

# optimum-neuron custom-modeling training classes: rewritten at their `from_pretrained` call only, and only
# when the sharding can be carried to `distributed_config=` (else the load stays, with a TODO).
_AUTO = (_TRAINING_MODELS, f"{_TRAINING_MODELS}.modeling_auto")
TRAINING_MODELS: dict[str, Target] = _table(
    [
        (_AUTO, "NeuronModelForCausalLM", Target("transformers", "AutoModelForCausalLM")),
        (_AUTO, "NeuronModel", Target("transformers", "AutoModel")),
    ]
    + [
        (
            (
                _TRAINING_MODELS,
                f"{_TRAINING_MODELS}.{package}",
                f"{_TRAINING_MODELS}.{package}.modeling_{package}",
            ),
            name,
            Target("transformers", name),
        )
        for package, name in (
            ("llama", "LlamaForCausalLM"),
            ("qwen3", "Qwen3ForCausalLM"),
            ("granite", "GraniteForCausalLM"),
        )
    ]
)

# Calls to the target classes get the same keyword rules (Transformers 5 rejects the old keywords, and a
# second run must find what the first one left).
TARGET_CALLS: dict[str, Target] = {
    f"{t.module}.{t.name}": t for t in RENAMES.values() if t.arguments or t.trainer
}

LAZY_LOAD_FUNCTIONS = frozenset(
    {
        f"{_NEURON}.distributed.lazy_load_for_parallelism",
        f"{_NEURON}.distributed.utils.lazy_load_for_parallelism",
    }
)
CONSOLIDATION_FUNCTIONS = frozenset(
    f"{module}.{name}"
    for module in (
        f"{_NEURON}.distributed",
        f"{_NEURON}.distributed.checkpointing",
        _TRAINING_MODELS,
        f"{_TRAINING_MODELS}.checkpointing",
    )
    for name in (
        "consolidate_model_parallel_checkpoints",
        "consolidate_model_parallel_checkpoints_to_unified_checkpoint",
    )
)
TRAINING_NEURON_CONFIGS = frozenset(
    {f"{_TRAINING_MODELS}.TrainingNeuronConfig", f"{_TRAINING_MODELS}.config.TrainingNeuronConfig"}
)
ACCELERATORS = frozenset({f"{_NEURON}.NeuronAccelerator", f"{_NEURON}.accelerate.NeuronAccelerator"})
TRAINER_KEYWORDS = {"tokenizer": "processing_class"}
MODEL_LOAD_KEYWORDS = {"torch_dtype": "dtype"}
_WORLD_SIZE = 'int(os.environ.get("WORLD_SIZE", "1"))'
_MODEL_CLASS_SUFFIXES = ("Model", "LM", "Classification", "Answering", "Generation", "MultipleChoice")


def _keyword(name: str, value: cst.BaseExpression) -> cst.Arg:
    return cst.Arg(
        value=value,
        keyword=cst.Name(name),
        equal=cst.AssignEqual(
            whitespace_before=cst.SimpleWhitespace(""), whitespace_after=cst.SimpleWhitespace("")
        ),
    )


def _find_keyword(call: cst.Call, name: str) -> cst.Arg | None:
    return next((arg for arg in call.args if arg.keyword is not None and arg.keyword.value == name), None)


def _end_of_line(arg: cst.Arg) -> cst.TrailingWhitespace | None:
    """The end-of-line part (comment) after an argument of a call written one argument per line."""
    whitespace = arg.comma.whitespace_after if isinstance(arg.comma, cst.Comma) else arg.whitespace_after_arg
    return whitespace.first_line if isinstance(whitespace, cst.ParenthesizedWhitespace) else None


def _with_end_of_line(arg: cst.Arg, line: cst.TrailingWhitespace | None) -> cst.Arg:
    line = line or cst.TrailingWhitespace()
    if isinstance(arg.comma, cst.Comma):
        if isinstance(arg.comma.whitespace_after, cst.ParenthesizedWhitespace):
            whitespace = arg.comma.whitespace_after.with_changes(first_line=line)
            return arg.with_changes(comma=arg.comma.with_changes(whitespace_after=whitespace))
    elif isinstance(arg.whitespace_after_arg, cst.ParenthesizedWhitespace):
        return arg.with_changes(whitespace_after_arg=arg.whitespace_after_arg.with_changes(first_line=line))
    return arg


def _without(args: list[cst.Arg], removed: set[int]) -> list[cst.Arg]:
    """`args` minus the ones whose id is in `removed`. Comments stay where they were: a removed argument's
    end-of-line comment goes with it, the comment lines under it (about the next argument) stay, and the
    new last argument takes the old ending (trailing comma or not)."""
    kept: list[cst.Arg] = []
    for arg in args:
        if id(arg) not in removed:
            kept.append(arg)
            continue
        below = arg.comma.whitespace_after if isinstance(arg.comma, cst.Comma) else None
        if isinstance(below, cst.ParenthesizedWhitespace) and below.empty_lines and kept:
            previous = kept[-1]
            if isinstance(previous.comma, cst.Comma) and isinstance(
                previous.comma.whitespace_after, cst.ParenthesizedWhitespace
            ):
                whitespace = previous.comma.whitespace_after
                whitespace = whitespace.with_changes(
                    empty_lines=[*whitespace.empty_lines, *below.empty_lines]
                )
                kept[-1] = previous.with_changes(
                    comma=previous.comma.with_changes(whitespace_after=whitespace)
                )
    if kept and id(args[-1]) in removed:
        last = kept[-1].with_changes(comma=args[-1].comma, whitespace_after_arg=args[-1].whitespace_after_arg)
        kept[-1] = _with_end_of_line(last, _end_of_line(kept[-1]))
    return kept


def _with_appended(args: list[cst.Arg], new: list[cst.Arg]) -> list[cst.Arg]:
    """`args` plus `new` at the end, laid out like the existing arguments (one per line stays one per
    line); end-of-line comments stay on the argument they belong to."""
    if not new:
        return args
    separator = next(
        (arg.comma for arg in reversed(args[:-1]) if isinstance(arg.comma, cst.Comma)),
        cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")),
    )
    if isinstance(separator.whitespace_after, cst.ParenthesizedWhitespace):
        separator = separator.with_changes(
            whitespace_after=separator.whitespace_after.with_changes(
                first_line=cst.TrailingWhitespace(), empty_lines=[]
            )
        )
    if not args:
        return [*(arg.with_changes(comma=separator) for arg in new[:-1]), new[-1]]
    last = args[-1]
    old_last = last.with_changes(comma=separator, whitespace_after_arg=cst.SimpleWhitespace(""))
    final = new[-1].with_changes(comma=last.comma, whitespace_after_arg=last.whitespace_after_arg)
    return [
        *args[:-1],
        _with_end_of_line(old_last, _end_of_line(last)),
        *(arg.with_changes(comma=separator) for arg in new[:-1]),
        _with_end_of_line(final, None),
    ]


def _is_literal(node: cst.BaseExpression, value: str) -> bool:
    return isinstance(node, (cst.Integer, cst.Name)) and node.value == value


def _reads_moved_field(node: cst.BaseExpression) -> bool:
    """`training_args.tensor_parallel_size` and the like: fields that no longer exist on the new classes."""
    return any(
        attr.attr.value in TRAINING_ARGUMENTS
        and TRAINING_ARGUMENTS[attr.attr.value].kind != "keep"
        or attr.attr.value == "trn_config"
        for attr in descendants(node, cst.Attribute)
    )


@dataclass
class Parallelism:
    """Sharding read from arguments in one scope, to be written as `DistributedConfig(...)`."""

    tp: cst.BaseExpression | None = None
    zero_1: bool | None = None  # None: not given (replication, as optimum-neuron's default)

    @property
    def sharded(self) -> bool:
        return self.zero_1 is True or (self.tp is not None and not _is_literal(self.tp, "1"))

    def config(self) -> str:
        fields = []
        tp = None if self.tp is None or _is_literal(self.tp, "1") else source_code(self.tp)
        if tp:
            fields.append(f"tp_size={tp}")
        simple = self.tp is None or isinstance(self.tp, (cst.Name, cst.Attribute, cst.Integer, cst.Call))
        world = _WORLD_SIZE if tp is None else f"{_WORLD_SIZE} // {tp if simple else f'({tp})'}"
        fields.append(f"{'fsdp_size' if self.zero_1 else 'dp_replicate_size'}={world}")
        return f"DistributedConfig({', '.join(fields)})"


@dataclass
class _Scope:
    node: cst.CSTNode  # the original Module or FunctionDef
    parallelism: Parallelism | None = None
    args_variable: str | None = None  # variable holding the literal arguments the parallelism came from
    trn_config_names: set[str] = field(default_factory=set)
    distributed_config_names: set[str] = field(default_factory=set)  # were `TrainingNeuronConfig(...)`
    sharded_at_load: bool = False  # a model of this scope gets a sharding DistributedConfig
    load_targets: set[int] = field(default_factory=set)  # ids of original model loads to shard
    earlier_targets: set[int] = field(default_factory=set)  # ...already left when the sharding was read
    loads_left: dict[int, cst.Call] = field(default_factory=dict)  # id(original load) -> node returned


class TrainingFamily(Family):
    name = "training"
    SYMBOLS = frozenset(
        {
            *RENAMES,
            *TRAINING_MODELS,
            *LAZY_LOAD_FUNCTIONS,
            *CONSOLIDATION_FUNCTIONS,
            *ACCELERATORS,
            *TRAINING_NEURON_CONFIGS,
        }
    )
    # optimum-neuron symbols (named through `optimum`), or the Transformers/TRL classes whose arguments it
    # checks; everything else it does (model loads, scopes) follows from one of those.
    TRIGGERS = frozenset({"optimum", *(name.rsplit(".", 1)[1] for name in TARGET_CALLS)})
    # The same, plus the model loads and `trn_config` reads that the arguments' sharding goes to.
    HINTS = TRIGGERS | {"from_pretrained", "trn_config"}

    def __init__(self, ctx) -> None:
        super().__init__(ctx)
        self._scopes: list[_Scope] = []
        self._in_import = 0
        self._not_references: set[int] = set()  # attribute names, keywords: Names that are not uses
        self._call_funcs: set[int] = set()  # funcs of calls: renamed (or kept) by the call handler
        self._visited_calls: set[int] = set()
        self._kept: set[str] = set()  # symbols left in place with a TODO somewhere: keep their import
        self._aliases: list[tuple[str, str, str]] = []  # (module, name, asname) imports of renamed symbols
        self._renamed_imports: list[tuple[cst.ImportAlias, str]] = []  # reported unless the symbol was kept
        self._lazy_load_todo: dict[int, str] = {}  # id(with statement) -> why it stays
        self._line: cst.SimpleStatementLine | None = None
        self._line_prefix: list[cst.BaseStatement] = []
        self._assigned: dict[int, str] = {}  # id(call) -> variable it is assigned to
        self._inline_configs: set[int] = set()  # ids of TrainingNeuronConfig calls rewritten in place
        self._rewritten_loads: set[str] = set()  # training model classes whose loads were rewritten
        self._unwrap: set[int] = set()  # ids of `with lazy_load_for_parallelism` statements to unwrap

    # --- scopes and bookkeeping --------------------------------------------------------------------------
    def visit_Module(self, node: cst.Module) -> None:
        self._scopes.append(_Scope(node))

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        self._scopes.append(_Scope(node))

    def leave_FunctionDef(self, original: cst.FunctionDef, updated: cst.FunctionDef):
        return self._leave_scope(updated)

    def _leave_scope(self, updated: cst.CSTNode) -> cst.CSTNode:
        """Shard the loads that came before the arguments their sharding was read from."""
        scope = self._scope
        for target in scope.earlier_targets:
            load = scope.loads_left[target]
            updated = updated.deep_replace(load, self._add_distributed_config(load, load))
        self._scopes.pop()
        return updated

    def visit_Import(self, node: cst.Import) -> None:
        self._in_import += 1

    def leave_Import(self, original: cst.Import, updated: cst.Import):
        self._in_import -= 1
        return updated

    def visit_ImportFrom(self, node: cst.ImportFrom) -> None:
        self._in_import += 1

    def visit_Attribute(self, node: cst.Attribute) -> None:
        self._not_references.add(id(node.attr))

    def visit_Arg(self, node: cst.Arg) -> None:
        if node.keyword is not None:
            self._not_references.add(id(node.keyword))

    def visit_Call(self, node: cst.Call) -> None:
        self._call_funcs.add(id(node.func))
        self._visited_calls.add(id(node))

    def visit_Assign(self, node: cst.Assign) -> None:
        if (
            len(node.targets) == 1
            and isinstance(node.targets[0].target, cst.Name)
            and isinstance(node.value, cst.Call)
        ):
            self._assigned[id(node.value)] = node.targets[0].target.value

    def visit_SimpleStatementLine(self, node: cst.SimpleStatementLine) -> None:
        self._line = node

    @property
    def _scope(self) -> _Scope:
        return self._scopes[-1]

    # --- imports -----------------------------------------------------------------------------------------
    def leave_ImportFrom(self, original: cst.ImportFrom, updated: cst.ImportFrom):
        self._in_import -= 1
        if original.relative or original.module is None or isinstance(original.names, cst.ImportStar):
            return updated
        module = dotted_name(original.module)
        for alias in original.names:
            name = alias.name.value
            qualified = f"{module}.{name}"
            asname = alias.asname.name.value if alias.asname else None
            if qualified in RENAMES:
                self._renamed_imports.append((alias, qualified))
                # Uses that keep their spelling (an alias, or the same name) keep the old import alive:
                # swap it at the end unless a use was left in place.
                if asname or name == RENAMES[qualified].name:
                    self._aliases.append((module, name, asname))
                else:
                    self.ctx.remove_import(module, name)
            elif qualified in TRAINING_MODELS and not asname and name == TRAINING_MODELS[qualified].name:
                self._aliases.append((module, name, asname))  # `LlamaForCausalLM` keeps its spelling
            elif qualified in self.SYMBOLS:
                self.ctx.remove_import(module, name, asname)  # only if every use was rewritten
        return updated

    @staticmethod
    def _target_path(target: Target) -> str:
        return f"{target.module}.{target.name}"

    def leave_Module(self, original: cst.Module, updated: cst.Module):
        updated = self._leave_scope(updated)
        for alias, qualified in self._renamed_imports:
            if qualified not in self._kept:
                self.ctx.report(
                    alias, CLASS_RENAMED, f"`{qualified}` -> `{self._target_path(RENAMES[qualified])}`."
                )
        swaps = {
            (module, name, asname)
            for module, name, asname in self._aliases
            if f"{module}.{name}" not in self._kept
            and (f"{module}.{name}" in RENAMES or f"{module}.{name}" in self._rewritten_loads)
        }
        if not swaps:
            return updated
        for module, name, asname in swaps:
            target = RENAMES.get(f"{module}.{name}") or TRAINING_MODELS[f"{module}.{name}"]
            self.ctx.add_import(target.module, target.name, asname if asname != target.name else None)
        return updated.visit(_AliasRemover(swaps))

    # --- names -------------------------------------------------------------------------------------------
    def _rename(self, original: cst.BaseExpression, updated: cst.BaseExpression) -> cst.BaseExpression:
        """A use of an always-renamed symbol: a plain use takes the target's name (and import); an aliased
        one keeps its alias, whose import is swapped at the end."""
        qualified = self.ctx.qualified(original)
        target = RENAMES.get(qualified)
        if target is None:
            return updated
        if isinstance(original, cst.Name) and original.value != qualified.rsplit(".", 1)[1]:
            return updated  # aliased
        if isinstance(original, cst.Attribute):  # `optimum.neuron.NeuronTrainer` through a module import
            self.ctx.report(original, CLASS_RENAMED, f"`{qualified}` -> `{self._target_path(target)}`.")
        self.ctx.add_import(target.module, target.name)
        return cst.Name(target.name)

    def leave_Name(self, original: cst.Name, updated: cst.Name):
        if self._in_import or id(original) in self._not_references or id(original) in self._call_funcs:
            return updated
        return self._rename(original, updated)

    def leave_Attribute(self, original: cst.Attribute, updated: cst.Attribute):
        if self._in_import or id(original) in self._call_funcs:
            return updated
        return self._rename(original, updated)

    # --- statements --------------------------------------------------------------------------------------
    def leave_SimpleStatementLine(self, original: cst.SimpleStatementLine, updated: cst.SimpleStatementLine):
        self._line = None
        prefix, self._line_prefix = self._line_prefix, []
        if len(original.body) == 1 and isinstance(original.body[0], cst.Expr):
            call = original.body[0].value
            if isinstance(call, cst.Call) and self.ctx.qualified(call.func) in CONSOLIDATION_FUNCTIONS:
                self.ctx.report(call, CONSOLIDATION)
                return cst.RemoveFromParent()
        if len(original.body) == 1 and m.matches(
            original.body[0],
            m.Assign(targets=[m.AssignTarget(m.Name())], value=m.Attribute(attr=m.Name("trn_config"))),
        ):
            removed = self._trn_config_assignment(original.body[0])
            if removed:
                return cst.RemoveFromParent()
        if prefix:
            prefix[0] = prefix[0].with_changes(leading_lines=updated.leading_lines)
            return cst.FlattenSentinel([*prefix, updated.with_changes(leading_lines=[])])
        return updated

    def _trn_config_assignment(self, assign: cst.Assign) -> bool:
        """`trn_config = training_args.trn_config`: removable when `training_args` are literal arguments whose
        sharding this scope already carries, and the name is used only as the trn_config of model loads."""
        scope = self._scope
        source = assign.value.value
        name = assign.targets[0].target.value
        if not (isinstance(source, cst.Name) and source.value == scope.args_variable):
            return False
        if not self._only_trn_config_uses(name, scope):
            return False
        scope.trn_config_names.add(name)
        self.ctx.report(assign, TRN_CONFIG_ASSIGNMENT)
        return True

    def visit_With(self, node: cst.With) -> None:
        if (
            len(node.items) != 1
            or not isinstance(node.items[0].item, cst.Call)
            or not isinstance(node.body, cst.IndentedBlock)
        ):
            return
        call = node.items[0].item
        if self.ctx.qualified(call.func) not in LAZY_LOAD_FUNCTIONS:
            return
        tp = _find_keyword(call, "tensor_parallel_size") or next(
            (arg for arg in call.args[:1] if arg.keyword is None and not arg.star), None
        )
        pp = _find_keyword(call, "pipeline_parallel_size")
        loads = self._model_loads(node.body)
        reason = None
        if pp is not None and not _is_literal(pp.value, "1"):
            reason = "pipeline parallelism has no documented TorchNeuron equivalent for HF models"
        elif len(loads) != 1:
            reason = "the block does not hold exactly one model from_pretrained call"
        elif tp is not None and _reads_moved_field(tp.value):
            reason = f"`{source_code(tp.value)}` is no longer a TrainingArguments field"
        if reason:
            self._lazy_load_todo[id(node)] = reason
            self._kept.add(self.ctx.qualified(call.func))
            return
        parallelism = self._scope.parallelism or Parallelism()
        if tp is not None:
            parallelism.tp = tp.value
        self._scope.parallelism = parallelism
        self._scope.load_targets.add(id(loads[0]))
        self._unwrap.add(id(node))
        message = LAZY_LOAD.action
        if parallelism.sharded and parallelism.zero_1 is None:
            message += (
                " No ZeRO-1 setting is visible here, so the data-parallel ranks replicate the model "
                "(dp_replicate_size); if you trained with --zero_1, use fsdp_size instead."
            )
        self.ctx.report(call, LAZY_LOAD, message)

    def leave_With(self, original: cst.With, updated: cst.With):
        reason = self._lazy_load_todo.get(id(original))
        if reason:  # reported here so that the TODO goes above the `with`, not inside it
            self.ctx.todo(
                original.items[0].item,
                DISTRIBUTED_CONFIG_BY_HAND,
                f"lazy_load_for_parallelism: {reason}; remove the with block and pass distributed_config="
                "DistributedConfig(tp_size=..., fsdp_size=WORLD_SIZE // tp_size) to the model's from_pretrained",
            )
        if id(original) not in self._unwrap or not isinstance(updated, cst.With):
            return updated
        body = list(updated.body.body)
        if original.leading_lines:
            body[0] = body[0].with_changes(leading_lines=[*original.leading_lines, *body[0].leading_lines])
        return cst.FlattenSentinel(body)

    # --- calls -------------------------------------------------------------------------------------------
    def leave_Call(self, original: cst.Call, updated: cst.Call):
        if not isinstance(updated, cst.Call) or len(original.args) != len(updated.args):
            # Replaced or restructured by an earlier family: not ours to pair up.
            return updated
        qualified = self.ctx.qualified(original.func)
        if qualified in RENAMES or qualified in TARGET_CALLS:
            target = RENAMES.get(qualified) or TARGET_CALLS[qualified]
            if target.arguments is not None:
                return self._arguments_call(original, updated, target, migrated=qualified in RENAMES)
            if target.trainer:
                updated = self._rename_keywords(original, updated, TRAINER_KEYWORDS)
            return self._renamed_func(original, updated) if qualified in RENAMES else updated
        if qualified in TRAINING_NEURON_CONFIGS:
            return self._training_neuron_config(original, updated)
        if qualified in ACCELERATORS:
            self._kept.add(qualified)
            self.ctx.todo(
                original,
                ACCELERATOR,
                "NeuronAccelerator drives NxD model parallelism and ZeRO-1; replace it with accelerate.Accelerator "
                "and shard the model with from_pretrained(..., distributed_config=DistributedConfig(...))",
            )
            return updated
        if qualified in CONSOLIDATION_FUNCTIONS and not self._is_statement_call(original):
            self._kept.add(qualified)
            self.ctx.todo(
                original,
                CONSOLIDATION,
                "its result is used; save_pretrained now writes a standard checkpoint, so read that instead "
                "(checkpoints written by optimum-neuron still need this call, run with optimum-neuron)",
            )
            return updated
        if is_method_call(original, "from_pretrained"):
            owner = self.ctx.qualified(original.func.value)
            if owner in TRAINING_MODELS:
                return self._training_load(original, updated, TRAINING_MODELS[owner])
            if id(original) in self._scope.load_targets:
                updated = self._add_distributed_config(original, updated)
            self._scope.loads_left[id(original)] = updated
        return updated

    def _is_statement_call(self, call: cst.Call) -> bool:
        return (
            self._line is not None
            and len(self._line.body) == 1
            and isinstance(self._line.body[0], cst.Expr)
            and self._line.body[0].value is call
        )

    def _renamed_func(self, original: cst.Call, updated: cst.Call) -> cst.Call:
        return updated.with_changes(func=self._rename(original.func, updated.func))

    def _rename_keywords(self, original: cst.Call, updated: cst.Call, renames: dict[str, str]) -> cst.Call:
        args = list(updated.args)
        for index, (before, arg) in enumerate(zip(original.args, updated.args, strict=True)):
            new = renames.get(before.keyword.value) if before.keyword else None
            if new and _find_keyword(original, new) is None:
                self.ctx.report(before, ARGUMENT_RENAMED, f"`{before.keyword.value}=` -> `{new}=`.")
                args[index] = arg.with_changes(keyword=cst.Name(new))
        return updated.with_changes(args=args)

    # --- TrainingArguments / SFTConfig -------------------------------------------------------------------
    def _arguments_call(self, original: cst.Call, updated: cst.Call, target: Target, migrated: bool):
        table = target.arguments
        qualified = self.ctx.qualified(original.func)
        manual = []
        for arg in original.args:
            action = table.get(arg.keyword.value) if arg.keyword else None
            if action is not None and action.kind == "manual":
                manual.append((arg, action))
        if any(arg.keyword.value == "logging_dir" for arg, _ in manual) and self._line_holds(original):
            manual = [(arg, action) for arg, action in manual if arg.keyword.value != "logging_dir"]
        for arg, action in manual:
            self.ctx.todo(arg, MANUAL_ARGUMENT, f"`{arg.keyword.value}`: {action.note}")
        parallelism, reason = (None, None) if manual else self._parallelism(original, table)
        if reason:
            self.ctx.todo(original, DISTRIBUTED_CONFIG_BY_HAND, reason)
        if manual or reason:
            self._kept.add(qualified)
            return updated
        has_star = any(arg.star == "**" for arg in original.args)
        if migrated and not has_star and id(original) in self._assigned:
            self._scope.args_variable = self._assigned[id(original)]

        removed: set[int] = set()
        args = list(updated.args)
        for index, (before, arg) in enumerate(zip(original.args, updated.args, strict=True)):
            action = table.get(before.keyword.value) if before.keyword else None
            if action is None or action.kind == "keep":
                continue
            name = before.keyword.value
            if action.kind == "rename":
                if _find_keyword(original, action.target) is not None:
                    removed.add(id(arg))
                    self.ctx.report(
                        before, ARGUMENT_DROPPED, f"`{name}` dropped: `{action.target}` is also given."
                    )
                else:
                    args[index] = arg.with_changes(keyword=cst.Name(action.target))
                    self.ctx.report(
                        before,
                        ARGUMENT_RENAMED,
                        f"`{name}=` -> `{action.target}=`: {action.note}".rstrip(": "),
                    )
            elif action.kind == "drop":
                removed.add(id(arg))
                self.ctx.report(before, ARGUMENT_DROPPED, f"`{name}` removed: {action.note}.")
            elif action.kind == "distributed":
                removed.add(id(arg))
                self.ctx.report(
                    before,
                    MOVED_TO_DISTRIBUTED_CONFIG,
                    f"`{name}` -> DistributedConfig: {action.note}."
                    if parallelism is not None and parallelism.sharded
                    else f"`{name}` removed: it does not shard the model, so there is nothing to move.",
                )
            elif name == "logging_dir":
                removed.add(id(arg))
                self.ctx.report(before, LOGGING_DIR)
                self._set_logging_dir(arg.value)
        new_args = _without(args, removed)
        additions = []
        if migrated and not has_star and _find_keyword(original, "torch_compile") is None:
            additions.append(_keyword("torch_compile", cst.Name("True")))
            self.ctx.report(original, TORCH_COMPILE)
        sharded = (parallelism is not None and parallelism.sharded) or self._scope.sharded_at_load
        if sharded and not has_star and _find_keyword(original, "save_only_model") is None:
            additions.append(_keyword("save_only_model", cst.Name("True")))
            self.ctx.report(original, SAVE_ONLY_MODEL)
        packing = _find_keyword(original, "packing")
        if (
            table is SFT_CONFIG_ARGUMENTS
            and packing is not None
            and not _is_literal(packing.value, "False")
            and _find_keyword(original, "packing_strategy") is None
        ):
            if has_star:  # the unpacked mapping may already hold a packing_strategy
                self.ctx.todo(
                    packing,
                    PACKING_STRATEGY,
                    'TRL\'s default packing ("bfd") turns on padding-free batches, which optimum-neuron disabled; '
                    'add packing_strategy="wrapped" here unless the unpacked arguments already set it',
                )
            else:
                additions.append(_keyword("packing_strategy", cst.SimpleString('"wrapped"')))
                self.ctx.report(packing, PACKING_STRATEGY)
        updated = updated.with_changes(args=_with_appended(new_args, additions))
        return self._renamed_func(original, updated) if migrated else updated

    def _line_holds(self, call: cst.Call) -> bool:
        """The call is the whole value of the current simple statement (so a statement can go before it)."""
        if self._line is None or len(self._line.body) != 1:
            return False
        statement = self._line.body[0]
        return (
            isinstance(statement, (cst.Assign, cst.AnnAssign, cst.Expr, cst.Return))
            and statement.value is call
        )

    def _set_logging_dir(self, value: cst.BaseExpression) -> None:
        self.ctx.add_import("os")
        text = (
            source_code(value)
            if isinstance(value, (cst.SimpleString, cst.FormattedString, cst.ConcatenatedString))
            else f"str({source_code(value)})"
        )
        self._line_prefix.append(cst.parse_statement(f'os.environ["TENSORBOARD_LOGGING_DIR"] = {text}\n'))

    def _parallelism(
        self, call: cst.Call, table: dict[str, ArgAction]
    ) -> tuple[Parallelism | None, str | None]:
        """The sharding given by the distributed keywords of an arguments call, and where it goes.

        Returns (parallelism, None) when it can be written on the model load of this scope (registering
        that load), (None, None) when there is nothing to move, (None, reason) when it must be moved by hand.
        """
        moved = {
            arg.keyword.value: arg.value
            for arg in call.args
            if arg.keyword and table.get(arg.keyword.value, ArgAction("keep")).kind == "distributed"
        }
        if not moved:
            return None, None
        parallelism = Parallelism(tp=moved.get("tensor_parallel_size"))
        zero_1 = moved.get("zero_1")
        flags = ", ".join(f"`{name}`" for name in moved)
        if zero_1 is not None:
            if not (_is_literal(zero_1, "True") or _is_literal(zero_1, "False")):
                return None, (
                    f"`zero_1={source_code(zero_1)}` is only known at run time; choose fsdp_size (ZeRO-1) or "
                    "dp_replicate_size (replication) in DistributedConfig on the model's from_pretrained and "
                    "remove zero_1 here"
                )
            parallelism.zero_1 = _is_literal(zero_1, "True")
        if not parallelism.sharded:
            return parallelism, None
        scope = self._scope
        loads = self._training_loads(scope.node) or self._model_loads(scope.node)
        # A load that came first can only take values that mean the same there: literals.
        earlier = len(loads) == 1 and id(loads[0]) in self._visited_calls
        movable = parallelism.tp is None or (
            isinstance(parallelism.tp, cst.Integer) if earlier else not _reads_moved_field(parallelism.tp)
        )
        traced = (
            len(loads) != 1
            or not self._training_loads(scope.node)
            or (
                self._trn_config_source(self._trn_config_arg(loads[0])[1], scope.node)
                == self._assigned.get(id(call))
            )
        )
        if len(loads) != 1 or not movable or not traced or (earlier and id(loads[0]) not in scope.loads_left):
            return None, (
                f"{flags} are not TrainingArguments fields and this scope has no single model from_pretrained "
                f"that can take them; remove them here and pass distributed_config={parallelism.config()} to "
                "the from_pretrained that loads the model (from transformers import DistributedConfig)"
            )
        scope.parallelism = parallelism
        (scope.earlier_targets if earlier else scope.load_targets).add(id(loads[0]))
        return parallelism, None

    # --- model loads -------------------------------------------------------------------------------------
    def _model_loads(self, node: cst.CSTNode) -> list[cst.Call]:
        """Transformers model `from_pretrained` calls under `node` (tokenizers/configs excluded)."""
        loads = []
        for call in method_calls(node, "from_pretrained"):
            owner = self.ctx.qualified(call.func.value) or ""
            name = owner.rsplit(".", 1)[-1]
            if owner in TRAINING_MODELS or (
                owner.startswith("transformers.") and name.endswith(_MODEL_CLASS_SUFFIXES)
            ):
                loads.append(call)
        return loads

    def _training_loads(self, node: cst.CSTNode) -> list[cst.Call]:
        return [call for call in method_calls(node, "from_pretrained") if self._is_training_load(call)]

    def _is_training_load(self, node: cst.CSTNode) -> bool:
        """`NeuronModelForCausalLM.from_pretrained(...)` and the other optimum-neuron training loads."""
        return (
            is_method_call(node, "from_pretrained") and self.ctx.qualified(node.func.value) in TRAINING_MODELS
        )

    @staticmethod
    def _trn_config_source(value: cst.BaseExpression | None, scope: cst.CSTNode) -> str | None:
        """`args` for `args.trn_config`, or for a name assigned `args.trn_config` in the scope."""
        source = m.Attribute(value=m.Name(), attr=m.Name("trn_config"))
        if m.matches(value, source):
            return value.value.value
        if isinstance(value, cst.Name):
            assigned = m.Assign(targets=[m.AssignTarget(m.Name(value.value))], value=source)
            for assign in m.findall(scope, assigned):
                return assign.value.value.value
        return None

    @staticmethod
    def _trn_config_arg(call: cst.Call) -> tuple[int | None, cst.BaseExpression | None]:
        """Index and value of the `trn_config` argument (second positional or keyword)."""
        for index, arg in enumerate(call.args):
            if arg.keyword is not None and arg.keyword.value == "trn_config":
                return index, arg.value
        positional = [i for i, arg in enumerate(call.args) if arg.keyword is None and not arg.star]
        if len(positional) >= 2:
            return positional[1], call.args[positional[1]].value
        return None, None

    def _training_load(self, original: cst.Call, updated: cst.Call, target: Target) -> cst.Call:
        scope = self._scope
        index, trn_config = self._trn_config_arg(original)
        as_config = id(trn_config) in self._inline_configs or (
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
            not carried or needs_target and (as_config or id(original) not in scope.load_targets)
        ):
            owner = self.ctx.qualified(original.func.value)
            self._kept.add(owner)
            self.ctx.todo(
                original,
                DISTRIBUTED_CONFIG_BY_HAND,
                f"`{source_code(trn_config)}` does not come from training arguments migrated in this scope (parsed "
                "command-line flags, or arguments left with a TODO) and TrainingArguments has no "
                "tensor_parallel_size/zero_1; add a "
                "`tensor_parallel_size: int` field to your script's argument dataclass, load with "
                f'transformers.{target.name}.from_pretrained(model_id, dtype=..., attn_implementation="sdpa", '
                f"distributed_config=DistributedConfig(tp_size=tp, fsdp_size={_WORLD_SIZE} // tp)) and set "
                "save_only_model=True in the training arguments",
            )
            return updated
        self.ctx.report(original, TRAINING_MODEL, f"-> `transformers.{target.name}.from_pretrained`.")
        self._rewritten_loads.add(self.ctx.qualified(original.func.value))
        args = list(updated.args)
        removed = set() if index is None else {id(args[index])}
        for position, (before, arg) in enumerate(zip(original.args, updated.args, strict=True)):
            keyword = before.keyword.value if before.keyword else None
            if keyword in MODEL_LOAD_KEYWORDS:
                self.ctx.report(
                    before, ARGUMENT_RENAMED, f"`{keyword}=` -> `{MODEL_LOAD_KEYWORDS[keyword]}=`."
                )
                args[position] = arg.with_changes(keyword=cst.Name(MODEL_LOAD_KEYWORDS[keyword]))
            elif keyword == "attn_implementation" and m.matches(
                before.value, m.SimpleString('"flash_attention_2"') | m.SimpleString("'flash_attention_2'")
            ):
                self.ctx.report(before.value, FLASH_ATTENTION)
                args[position] = arg.with_changes(value=cst.SimpleString('"sdpa"'))
        self.ctx.add_import(target.module, target.name)
        func = updated.func.with_changes(value=cst.Name(target.name))
        if as_config:  # the variable or inline call now holds a DistributedConfig
            args[index] = _keyword("distributed_config", args[index].value).with_changes(
                comma=args[index].comma, whitespace_after_arg=args[index].whitespace_after_arg
            )
            removed = set()
        updated = updated.with_changes(func=func, args=_without(args, removed))
        return self._add_distributed_config(original, updated)

    def _training_neuron_config(self, original: cst.Call, updated: cst.Call) -> cst.BaseExpression:
        """`TrainingNeuronConfig(...)` -> `DistributedConfig(...)`, when every use of it is the trn_config of
        a training model load in this scope (the loads then take it as `distributed_config=`)."""
        qualified = self.ctx.qualified(original.func)
        scope = self._scope
        variable = self._assigned.get(id(original))
        inline = any(self._trn_config_arg(load)[1] is original for load in self._training_loads(scope.node))
        fields: dict[str, cst.BaseExpression] = {}
        manual = []
        for position, arg in enumerate(original.args):
            name = arg.keyword.value if arg.keyword else ("tensor_parallel_size" if position == 0 else None)
            action = TRAINING_NEURON_CONFIG_FIELDS.get(name) if name and not arg.star else None
            if action is None:
                manual.append(f"argument `{source_code(arg)}` is not a known TrainingNeuronConfig field")
            elif action.kind == "manual" and not _is_literal(arg.value, "1"):
                manual.append(f"`{name}`: {action.note}")
            fields[name] = arg.value
        zero_1 = fields.get("pipeline_parallel_use_zero1_optimizer")
        if zero_1 is not None and not (_is_literal(zero_1, "True") or _is_literal(zero_1, "False")):
            manual.append("`pipeline_parallel_use_zero1_optimizer` is only known at run time")
        if not manual and not inline and not (variable and self._only_trn_config_uses(variable, scope)):
            manual.append("it is not only passed to a training model's from_pretrained in this scope")
        if manual:
            self._kept.add(qualified)
            self.ctx.todo(
                original,
                DISTRIBUTED_CONFIG_BY_HAND,
                f"TrainingNeuronConfig configures NxD ({'; '.join(manual)}); build DistributedConfig(tp_size="
                f"tensor_parallel_size, fsdp_size={_WORLD_SIZE} // tensor_parallel_size) instead and pass it as "
                "distributed_config= to the Transformers model's from_pretrained",
            )
            return updated
        parallelism = Parallelism(
            tp=fields.get("tensor_parallel_size"),
            zero_1=None if zero_1 is None else _is_literal(zero_1, "True"),
        )
        self.ctx.report(original, NEURON_CONFIG)
        self.ctx.add_import("os")
        self.ctx.add_import("transformers", "DistributedConfig")
        if inline:
            self._inline_configs.add(id(original))
        else:
            scope.distributed_config_names.add(variable)
        scope.sharded_at_load = scope.sharded_at_load or parallelism.sharded
        return cst.parse_expression(parallelism.config())

    def _only_trn_config_uses(self, name: str, scope: _Scope) -> bool:
        """Every use of `name` in the scope (but its assignments) is the trn_config of a training load."""
        nodes = descendants(scope.node, (cst.AssignTarget, cst.Attribute, cst.Arg, cst.Name, cst.Call))
        # The name as an assignment target, an attribute or a keyword is not a use of the variable.
        not_uses = {id(n.target) for n in nodes if isinstance(n, cst.AssignTarget)}
        not_uses |= {id(n.attr) for n in nodes if isinstance(n, cst.Attribute)}
        not_uses |= {id(n.keyword) for n in nodes if isinstance(n, cst.Arg)}
        uses = [n for n in nodes if isinstance(n, cst.Name) and n.value == name and id(n) not in not_uses]
        trn_args = {id(self._trn_config_arg(call)[1]) for call in nodes if self._is_training_load(call)}
        return all(id(use) in trn_args for use in uses)

    def _add_distributed_config(self, original: cst.Call, updated: cst.Call) -> cst.Call:
        parallelism = self._scope.parallelism
        if parallelism is None or not parallelism.sharded or _find_keyword(original, "distributed_config"):
            return updated
        self.ctx.add_import("os")
        self.ctx.add_import("transformers", "DistributedConfig")
        config = _keyword("distributed_config", cst.parse_expression(parallelism.config()))
        return updated.with_changes(args=_with_appended(list(updated.args), [config]))


class _AliasRemover(cst.CSTTransformer):
    """Drops `from module import name as asname` aliases whose symbol was swapped for its target."""

    def __init__(self, aliases: set[tuple[str, str, str]]) -> None:
        super().__init__()
        self.aliases = aliases

    def leave_ImportFrom(self, original: cst.ImportFrom, updated: cst.ImportFrom):
        if updated.module is None or isinstance(updated.names, cst.ImportStar):
            return updated
        module = dotted_name(updated.module)
        names = [
            alias
            for alias in updated.names
            if (module, alias.name.value, alias.asname.name.value if alias.asname else None)
            not in self.aliases
        ]
        if len(names) == len(updated.names):
            return updated
        if not names:
            return cst.RemoveFromParent()
        names[-1] = names[-1].with_changes(comma=updated.names[-1].comma)
        return updated.with_changes(names=names)
