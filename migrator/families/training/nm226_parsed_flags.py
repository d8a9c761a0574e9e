"""NM226: the command-line flags of optimum-neuron's arguments classes that a script parses with HfArgumentParser
(`HfArgumentParser((ScriptArguments, NeuronTrainingArguments))`) and that Transformers 5's TrainingArguments / TRL
1.16's SFTConfig lack. They may come from a place the migration cannot read (a Metaflow flow's dict, SageMaker
hyperparameters, a launcher elsewhere), and HfArgumentParser raises on a flag no dataclass takes. A flag that does
nothing on TorchNeuron (the table's `drop` fields) is still parsed, into a dataclass of its own, and ignored; a
flag whose meaning the migration can keep is mapped (NM209, NM224: a field of the script's own dataclass); the
others change training, so they stay rejected under a TODO that names what replaces them."""

from __future__ import annotations

import libcst as cst
import libcst.matchers as m

from migrator.cst_helpers import descendants, find_keyword, imports_end, literal_value
from migrator.families.training.arguments_names import (
    PARSES,
    arguments_names,
    is_arguments,
    own_field_reads,
)
from migrator.families.training.state import TrainingFile
from migrator.families.training.targets import RENAMES
from migrator.families.training_args import BOOLEAN_FLAGS, PLAIN_FIELDS, ArgAction
from migrator.rules import Example, Rule, Severity
from migrator.transform import FileContext, Handler

PARSED_FLAGS = Rule(
    "NM226",
    Severity.WARNING,
    "A script that parses optimum-neuron's arguments classes with HfArgumentParser: the flags those classes took "
    "and Transformers 5's `TrainingArguments` / TRL's `SFTConfig` lack (`--skip_cache_push`, `--zero_1`, "
    "`--overwrite_output_dir`...), passed by launchers the migration may not see",
    "The flags with no effect on TorchNeuron still parse, into `IgnoredNeuronFlags` (a dataclass added to the "
    "parser, unpacked to `ignored_neuron_flags`), and are ignored; the finding names them. The parallel degrees "
    "the script's model load reads are mapped (NM209). A flag that changes training (a renamed field, "
    "`--logging_dir`, the pipeline degree...) stays rejected by the parser, under a TODO naming what replaces it.",
    examples=(
        Example(
            before="""\
from dataclasses import dataclass

from optimum.neuron import NeuronHfArgumentParser, NeuronTrainingArguments


@dataclass
class ScriptArguments:
    model_id: str = "gpt2"


parser = NeuronHfArgumentParser((ScriptArguments, NeuronTrainingArguments))
script_args, training_args = parser.parse_args_into_dataclasses()
""",
            after="""\
from dataclasses import make_dataclass, dataclass

from transformers import HfArgumentParser, TrainingArguments

# optimum-neuron's flags that do nothing on TorchNeuron (neuron-migrate NM226): parsed as before, so that a launcher
# passing them still starts, and ignored
IgnoredNeuronFlags = make_dataclass(
    "IgnoredNeuronFlags",
    [(flag, bool, False) for flag in (
        "async_save", "disable_embedding_parallelization", "disable_sequence_parallel", "fuse_qkv",
        "include_tokens_per_second", "jit_mode_eval", "optimizer_save_master_weights_in_ckpt",
        "overwrite_output_dir", "skip_cache_push", "tpu_metrics_debug", "use_autocast", "use_ipex",
        "use_legacy_prediction_loop", "use_mps_device",
    )]
    + [(flag, bool, True) for flag in (
        "enable_efficiency_metrics", "enable_mfu_metrics", "enable_throughput_metrics",
        "optimizer_use_fp32_grad_acc", "optimizer_use_master_weights", "recompute_causal_mask",
        "save_safetensors", "stochastic_rounding_enabled", "use_xser",
    )]
    + [(flag, str, None) for flag in (
        "dataloader_prefetch_size", "fp16_backend", "fp16_opt_level", "half_precision_backend",
        "kv_size_multiplier", "metrics_window_size", "mp_parameters", "neuron_cc_optlevel",
        "num_local_ranks_per_step", "torchdynamo", "tpu_num_cores", "xpu_backend",
    )],
)


@dataclass
class ScriptArguments:
    model_id: str = "gpt2"


# TODO(neuron-migrate): NM226 the flags `--warmup_ratio`, `--logging_dir`, `--tensor_parallel_size`, `--zero_1`, `--pipeline_parallel_size`, `--pipeline_parallel_num_microbatches`, `--mp_plugin`, `--evaluation_strategy`, `--per_gpu_train_batch_size`, `--per_gpu_eval_batch_size`, `--no_cuda`, `--push_to_hub_token`, `--sharded_ddp`, `--group_by_length`, `--include_inputs_for_metrics`, `--past_index`, `--ray_scope`, `--adafactor`, `--fsdp_min_num_params`, `--fsdp_transformer_layer_cls_to_wrap`, `--push_to_hub_model_id`, `--push_to_hub_organization` of optimum-neuron's training arguments change training and Transformers 5's training arguments lack them: a launcher this migration did not read (a Metaflow flow, SageMaker hyperparameters, a script elsewhere) that passes one stops at this parse; pass what replaces each instead (--warmup_ratio -> --warmup_steps; --logging_dir -> the TENSORBOARD_LOGGING_DIR environment variable; --tensor_parallel_size -> DistributedConfig(tp_size=...) at the model load; --zero_1 -> DistributedConfig(fsdp_size=...) at the model load; --evaluation_strategy -> --eval_strategy; --per_gpu_train_batch_size -> --per_device_train_batch_size; --per_gpu_eval_batch_size -> --per_device_eval_batch_size; --no_cuda -> --use_cpu; --push_to_hub_token -> --hub_token; --group_by_length -> --train_sampling_strategy "group_by_length"; --include_inputs_for_metrics -> --include_for_metrics ["inputs"]; --ray_scope -> the RAY_SCOPE environment variable; --adafactor -> --optim "adafactor"; the others: remove them, their rows of docs/reference/rules.md say why)
parser = HfArgumentParser((ScriptArguments, TrainingArguments, IgnoredNeuronFlags))
parser.set_defaults(torch_compile=True)
script_args, training_args, ignored_neuron_flags = parser.parse_args_into_dataclasses()
""",
        ),
    ),
)
RULES = (PARSED_FLAGS,)

IGNORED_CLASS = "IgnoredNeuronFlags"
IGNORED_VARIABLE = "ignored_neuron_flags"
# HfArgumentParser and its subclass in TRL (optimum-neuron's parsers become the first).
_PARSERS = frozenset({"transformers.HfArgumentParser", "trl.TrlParser"})
# What replaces a flag that changes training, by the kind of its table entry (manual ones: their note).
_REPLACEMENT = {
    "rename": "--{target}",
    "switch": "--{target} {value}",
    "environment": "the {target} environment variable",
    "distributed": "DistributedConfig({target}=...) at the model load",
}


class ParsedFlags(Handler):
    HINTS = frozenset({"Parser", "parse_"})
    TRIGGERS = frozenset(
        {"NeuronHfArgumentParser", "TrainiumHfArgumentParser", "HfArgumentParser", "TrlParser"}
    )

    def __init__(self, ctx: FileContext) -> None:
        super().__init__(ctx)
        self.file = ctx.state(TrainingFile)
        self.parsers: dict[cst.Call, _Parser] = {}  # parser construction -> what it parses
        self.unpacks: set[cst.Assign] = set()  # `a, b = parser.parse_...()` that take one more value
        self.ignored: set[str] = set()  # the flags of IgnoredNeuronFlags

    def visit_Call(self, node: cst.Call) -> None:
        """Read each parser construction as the walk reaches it (its imports seen), before its children change."""
        parser = _Parser.read(self.ctx, node)
        if parser is not None:
            self.parsers[node] = parser
            if parser.unpacks is not None:
                self.unpacks |= parser.unpacks

    def leave_Call(self, original: cst.Call, updated: cst.Call):
        parser = self.parsers.get(original)
        if parser is None:
            return updated
        ignored, changing = parser.flags(self.ctx, self.file)
        if changing:
            self.ctx.todo(
                original,
                PARSED_FLAGS,
                *_todo_text(changing, ignored if parser.unpacks is None else [], parser.keeping),
            )
        if parser.unpacks is None or not ignored:
            return updated
        self.ignored.update(ignored)
        self.ctx.report(
            original,
            PARSED_FLAGS,
            f"{', '.join(f'`--{name}`' for name in ignored)}: optimum-neuron's flags with no effect on "
            f"TorchNeuron still parse, into `{IGNORED_CLASS}`, and are ignored.",
            subject=IGNORED_CLASS,
        )
        classes = updated.args[0].value
        element = cst.Element(cst.Name(IGNORED_CLASS))
        if isinstance(classes, (cst.Tuple, cst.List)):
            elements = [*classes.elements[:-1], classes.elements[-1].with_changes(comma=_COMMA), element]
            new = classes.with_changes(elements=elements)
        else:
            new = cst.Tuple([cst.Element(classes, comma=_COMMA), element])
        return updated.with_changes(args=[updated.args[0].with_changes(value=new), *updated.args[1:]])

    def leave_Assign(self, original: cst.Assign, updated: cst.Assign):
        if original not in self.unpacks or not self.ignored:
            return updated
        target = updated.targets[0].target
        elements = [*target.elements[:-1], target.elements[-1].with_changes(comma=_COMMA)]
        elements.append(cst.Element(cst.Name(IGNORED_VARIABLE)))
        return updated.with_changes(
            targets=[updated.targets[0].with_changes(target=target.with_changes(elements=elements))]
        )

    def leave_Module(self, original: cst.Module, updated: cst.Module):
        if not self.ignored:
            return updated
        self.ctx.add_import("dataclasses", "make_dataclass")
        statement = cst.parse_statement(_definition(self.ignored))
        statement = statement.with_changes(leading_lines=[cst.EmptyLine(), *statement.leading_lines])
        index = imports_end(updated)
        return updated.with_changes(body=[*updated.body[:index], statement, *updated.body[index:]])


_COMMA = cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))


class _Parser:
    """An HfArgumentParser construction over optimum-neuron arguments classes, and how its parses are used."""

    def __init__(
        self,
        tables: list[dict[str, ArgAction]],
        own: set[str],
        unpacks: set[cst.Assign] | None,
        keeping: list[bool],
    ):
        self.tables = tables  # the keyword tables of its optimum-neuron classes
        self.own = own  # the fields its other dataclasses declare in the input
        self.unpacks = unpacks  # the assignments to extend, or None where a parse is used otherwise
        # per parse of the parser: whether it hands back a flag it does not know instead of stopping
        self.keeping = keeping

    @classmethod
    def read(cls, ctx: FileContext, call: cst.Call) -> _Parser | None:
        qualified = ctx.qualified(call.func) or ""
        target = RENAMES.get(qualified)
        if qualified not in _PARSERS and (target is None or f"{target.module}.{target.name}" not in _PARSERS):
            return None
        if not call.args or call.args[0].keyword is not None:
            return None
        value = call.args[0].value
        elements = [e.value for e in value.elements] if isinstance(value, (cst.Tuple, cst.List)) else [value]
        names = [ctx.qualified(element) for element in elements]
        tables = [RENAMES[name].arguments for name in names if name in RENAMES and RENAMES[name].arguments]
        if not tables:
            return None
        own = _declared_fields(ctx.module, {e.value for e in elements if isinstance(e, cst.Name)})
        parses = _parses(ctx.module, call)
        return cls(
            tables, own, _unpacks(ctx.module, parses, len(elements)), [_keeps_unknown(p) for p in parses]
        )

    def flags(self, ctx: FileContext, file: TrainingFile) -> tuple[list[str], list[tuple[str, ArgAction]]]:
        """The flags that do nothing on TorchNeuron, and those that change training, that no dataclass of the
        migrated parser takes (the script's own dataclasses take some: NM209's degrees, NM224's fields)."""
        taken = (
            self.own | file.parsed_flag_fields | PLAIN_FIELDS
        )  # PLAIN_FIELDS: the TRL class parses them too
        taken |= {field for _, field in own_field_reads(ctx, arguments_names(ctx, is_arguments))}
        actions = {
            name: action for table in self.tables for name, action in table.items() if name not in taken
        }
        ignored = [name for name, action in actions.items() if action.kind == "drop"]
        changing = [(name, action) for name, action in actions.items() if action.kind not in ("drop", "keep")]
        return ignored, changing


def _declared_fields(module: cst.Module, classes: set[str]) -> set[str]:
    """The fields the module's own classes `classes` declare (`name: type = ...`)."""
    return {
        statement.target.value
        for node in module.body
        if isinstance(node, cst.ClassDef) and node.name.value in classes
        for statement in descendants(node.body, cst.AnnAssign)
        if isinstance(statement.target, cst.Name)
    }


def _parses(module: cst.Module, call: cst.Call) -> list[cst.Call]:
    """The parses (`parser.parse_...()`) of the parser `call` builds into a variable."""
    built = [a for a in descendants(module, cst.Assign) if a.value is call and len(a.targets) == 1]
    if len(built) != 1 or not isinstance(built[0].targets[0].target, cst.Name):
        return []
    variable = built[0].targets[0].target.value
    return [
        node
        for node in descendants(module, cst.Call)
        if m.matches(node.func, m.Attribute(m.Name(variable), m.Name()))
        and node.func.attr.value in PARSES | {"parse_args_and_config"}
    ]


def _keeps_unknown(parse: cst.Call) -> bool:
    """A parse that hands back what it does not know (`return_remaining_strings=True`, `allow_extra_keys=True`)
    instead of stopping."""
    keyword = (
        "return_remaining_strings"
        if parse.func.attr.value == "parse_args_into_dataclasses"
        else "allow_extra_keys"
    )
    arg = find_keyword(parse, keyword)
    return arg is not None and literal_value(arg.value) is True


def _unpacks(module: cst.Module, parses: list[cst.Call], count: int) -> set[cst.Assign] | None:
    """The `a, b = parser.parse_...()` assignments that unpack `parses` (one target per dataclass), which take
    the added dataclass's value too; a parse indexed from the start (`parser.parse_...()[0]`) needs nothing. None
    when a parse is used otherwise (passed on, returned, asked for its remaining strings) or the file has none:
    where its values go is not known here, so nothing is added."""
    indexed = {
        node.value
        for node in descendants(module, cst.Subscript)
        if m.matches(node, m.Subscript(slice=[m.SubscriptElement(m.Index(m.Integer()))]))
    }
    unpacks = set()
    for parse in parses:
        if find_keyword(parse, "return_remaining_strings") is not None:
            return None
        if parse in indexed:
            continue
        assign = next((a for a in descendants(module, cst.Assign) if a.value is parse), None)
        target = assign.targets[0].target if assign is not None and len(assign.targets) == 1 else None
        if (
            not isinstance(target, (cst.Tuple, cst.List))
            or len(target.elements) != count
            or any(isinstance(element, cst.StarredElement) for element in target.elements)
        ):
            return None
        unpacks.add(assign)
    return unpacks if parses else None


def _definition(names: set[str]) -> str:
    """`IgnoredNeuronFlags = make_dataclass(...)`: the flags, by how HfArgumentParser read them."""
    groups = [
        ("bool, False", sorted(n for n in names if BOOLEAN_FLAGS.get(n) is False)),
        ("bool, True", sorted(n for n in names if BOOLEAN_FLAGS.get(n) is True)),
        ("str, None", sorted(n for n in names if n not in BOOLEAN_FLAGS)),
    ]
    parts = []
    for kind, group in groups:
        if group:
            lines = _wrapped([f'"{name}",' for name in group], "        ")
            parts.append(f"[(flag, {kind}) for flag in (\n{lines}\n    )]")
    return (
        "# optimum-neuron's flags that do nothing on TorchNeuron (neuron-migrate NM226): parsed as before, "
        "so that a launcher\n# passing them still starts, and ignored\n"
        f'{IGNORED_CLASS} = make_dataclass(\n    "{IGNORED_CLASS}",\n    ' + "\n    + ".join(parts) + ",\n)\n"
    )


def _wrapped(words: list[str], indent: str, width: int = 110) -> str:
    lines, line = [], indent
    for word in words:
        if line.strip() and len(line) + 1 + len(word) > width:
            lines.append(line)
            line = indent
        line += ("" if not line.strip() else " ") + word
    return "\n".join([*lines, line])


def _todo_text(
    changing: list[tuple[str, ArgAction]], rejected: list[str], keeping: list[bool]
) -> tuple[str, str]:
    """The TODO's why and action: the flags that change training (and, where the parser could not take a
    dataclass of the ignored ones and a parse stops at them, those too), and what replaces each. `keeping`: per
    parse, whether it hands back a flag it does not know (`return_remaining_strings=True`, `allow_extra_keys=True`)
    instead of stopping."""
    named = ", ".join(f"`--{name}`" for name, _ in changing)
    launcher = (
        f"the flags {named} of optimum-neuron's training arguments change training and Transformers 5's "
        "training arguments lack them: a launcher this migration did not read (a Metaflow flow, SageMaker "
        "hyperparameters, a script elsewhere) that passes one "
    )
    if keeping and all(keeping):
        why = launcher + (
            "gets it back unread from this parser (`return_remaining_strings=True` / `allow_extra_keys=True`): "
            "the job runs, without what the flag asked for"
        )
        rejected = []  # they do nothing on TorchNeuron, and no parse stops at them
    elif any(keeping):
        why = launcher + (
            "stops at this parser's parses that refuse what they do not know, and runs without what the flag "
            "asked for where a parse hands it back (`return_remaining_strings=True` / `allow_extra_keys=True`)"
        )
    else:
        why = launcher + "stops at this parse"
    if rejected:
        why += f"; so do {', '.join(f'`--{name}`' for name in rejected)}, which do nothing on TorchNeuron"
    replaced = [
        f"--{name} -> {_REPLACEMENT[action.kind].format(target=action.target, value=action.value)}"
        for name, action in changing
        if action.kind in _REPLACEMENT
    ]
    action = "pass what replaces each instead (" + "; ".join(replaced) + "; the others: remove them, their "
    action += (
        "rows of docs/reference/rules.md say why)" if replaced else "remove them (docs/reference/rules.md)"
    )
    return why, action


HANDLER = ParsedFlags
