"""NM206 (and NM207, NM214, each defined in its own module): keywords the migrated training arguments need
added (`torch_compile=True`, `save_only_model=True` when the model is sharded at load,
`packing_strategy="wrapped"` when packing), on the arguments calls `nm202_arguments.py` rewrote; arguments
parsed from the command line get `torch_compile=True` as their parser's default."""

from __future__ import annotations

from functools import partial

import libcst as cst
import libcst.matchers as m

from migrator.cst_helpers import (
    find_keyword,
    is_literal,
    keyword_arg,
    source_code,
    string_value,
    unpacked_mapping,
    with_appended,
)
from migrator.families.training.arguments_names import arguments_names
from migrator.families.training.state import TrainingFile, unpacked_arguments
from migrator.families.training.targets import HINTS, RENAMES, TRIGGERS
from migrator.families.training_args import SFT_CONFIG_ARGUMENTS
from migrator.rules import Example, Rule, Severity
from migrator.transform import FileContext, Handler

TORCH_COMPILE = Rule(
    "NM206",
    Severity.INFO,
    "Migrated `TrainingArguments`/`SFTConfig` without `torch_compile`",
    "`torch_compile=True` added: Transformers picks the neuron compile backend by itself and compiles the "
    "training step without dynamic shapes (optimum-neuron always compiled it). Set it to False for eager "
    "debugging. Arguments an `HfArgumentParser` / `TrlParser` builds get it as the parser's default "
    "(`parser.set_defaults(torch_compile=True)` after the parser is made): a flag or a `--config` file still "
    "sets it; a JSON/YAML file read with `parse_json_file` / `parse_yaml_file` takes no parser default and "
    "needs `torch_compile: true` itself.",
    examples=(
        Example(
            before="""\
from optimum.neuron import NeuronTrainingArguments

args = NeuronTrainingArguments(output_dir="out", bf16=True)
""",
            after="""\
from transformers import TrainingArguments

args = TrainingArguments(output_dir="out", bf16=True, torch_compile=True)
""",
        ),
        Example(
            before="""\
from optimum.neuron import NeuronHfArgumentParser, NeuronTrainingArguments

parser = NeuronHfArgumentParser((ModelArguments, NeuronTrainingArguments))
model_args, training_args = parser.parse_args_into_dataclasses()
""",
            after="""\
from dataclasses import make_dataclass
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

# TODO(neuron-migrate): NM226 the flags `--warmup_ratio`, `--logging_dir`, `--tensor_parallel_size`, `--zero_1`, `--pipeline_parallel_size`, `--pipeline_parallel_num_microbatches`, `--mp_plugin`, `--evaluation_strategy`, `--per_gpu_train_batch_size`, `--per_gpu_eval_batch_size`, `--no_cuda`, `--push_to_hub_token`, `--sharded_ddp`, `--group_by_length`, `--include_inputs_for_metrics`, `--past_index`, `--ray_scope`, `--adafactor`, `--fsdp_min_num_params`, `--fsdp_transformer_layer_cls_to_wrap`, `--push_to_hub_model_id`, `--push_to_hub_organization` of optimum-neuron's training arguments change training and Transformers 5's training arguments lack them: a launcher this migration did not read (a Metaflow flow, SageMaker hyperparameters, a script elsewhere) that passes one stops at this parse; pass what replaces each instead (--warmup_ratio -> --warmup_steps; --logging_dir -> the TENSORBOARD_LOGGING_DIR environment variable; --tensor_parallel_size -> DistributedConfig(tp_size=...) at the model load; --zero_1 -> DistributedConfig(fsdp_size=...) at the model load; --evaluation_strategy -> --eval_strategy; --per_gpu_train_batch_size -> --per_device_train_batch_size; --per_gpu_eval_batch_size -> --per_device_eval_batch_size; --no_cuda -> --use_cpu; --push_to_hub_token -> --hub_token; --group_by_length -> --train_sampling_strategy "group_by_length"; --include_inputs_for_metrics -> --include_for_metrics ["inputs"]; --ray_scope -> the RAY_SCOPE environment variable; --adafactor -> --optim "adafactor"; the others: remove them, their rows of docs/reference/rules.md say why)
parser = HfArgumentParser((ModelArguments, TrainingArguments, IgnoredNeuronFlags))
parser.set_defaults(torch_compile=True)
model_args, training_args, ignored_neuron_flags = parser.parse_args_into_dataclasses()
""",
        ),
    ),
)
RULES = (TORCH_COMPILE,)


class AddedArguments(Handler):
    HINTS = HINTS
    TRIGGERS = TRIGGERS

    def __init__(self, ctx: FileContext) -> None:
        super().__init__(ctx)
        self.file = ctx.state(TrainingFile)
        self._names: frozenset[str] | None = None

    def leave_Call(self, original: cst.Call, updated: cst.Call):
        call = self.file.arguments_calls.get(original)
        if call is None or not isinstance(updated, cst.Call):
            return updated
        additions = []
        # A keyword the call's `**` arguments may already pass is not added (given twice, TypeError).
        unpacked = (
            unpacked_mapping(original, self.ctx.module, read=partial(unpacked_arguments, self.ctx.module))
            if call.has_star
            else {}
        )
        if (
            call.migrated
            and unpacked is not None
            and not {"torch_compile"} & {*unpacked, *keywords(original)}
        ):
            additions.append(keyword_arg("torch_compile", cst.Name("True")))
            self.ctx.report(original, TORCH_COMPILE)
        if (
            call.sharded
            and "save_only_model" not in keywords(original)
            and not _spreads_literal_key(original, "save_only_model")
        ):
            # True, or the run-time condition the load is sharded on (a ZeRO-1 flag read at run time)
            only_model = cst.Name("True") if call.sharded is True else cst.parse_expression(call.sharded)
            if unpacked is not None and "save_only_model" not in unpacked:
                additions.append(keyword_arg("save_only_model", only_model))
                self.ctx.report(original, "NM207")
            elif unpacked is None or not m.matches(unpacked["save_only_model"], m.Name("True")):
                # What the call unpacks may pass save_only_model (given twice: TypeError): True goes over it,
                # in the last `**`, so that it wins whatever the mapping holds.
                star = max(i for i, arg in enumerate(updated.args) if arg.star == "**")
                given = source_code(updated.args[star].value)
                spread = f'{{**{given}, "save_only_model": {source_code(only_model)}}}'
                updated = _with_spread(updated, star, cst.parse_expression(spread))
                message = (
                    f"`**{given}` -> `**{spread}`: Trainer cannot save the "
                    "optimizer state of a model sharded at load, whatever the unpacked arguments say."
                )
                self.ctx.report(original, "NM207", message)
        packing = find_keyword(original, "packing")
        if (
            call.table is SFT_CONFIG_ARGUMENTS
            and packing is not None
            and not is_literal(packing.value, "False")
            and find_keyword(original, "packing_strategy") is None
            and not _spreads_literal_key(original, "packing_strategy")
        ):
            may_hold = unpacked is None or "packing_strategy" in unpacked
            if call.has_star and may_hold and not self._unpacks_training_arguments_only(original):
                # The unpacked mapping may already hold a packing_strategy (given twice: TypeError): "wrapped"
                # goes under it, as a default its own value overrides.
                star = next(i for i, arg in enumerate(updated.args) if arg.star == "**")
                given = source_code(updated.args[star].value)
                spread = f'{{"packing_strategy": "wrapped", **{given}}}'
                updated = _with_spread(updated, star, cst.parse_expression(spread))
                message = (
                    f'`**{given}` -> `**{spread}`: "wrapped" unless the unpacked arguments set packing_strategy '
                    "themselves."
                )
                self.ctx.report(packing, "NM214", message)
            else:
                additions.append(keyword_arg("packing_strategy", cst.SimpleString('"wrapped"')))
                self.ctx.report(packing, "NM214")
        if not additions:
            return updated
        return updated.with_changes(args=with_appended(list(updated.args), additions))

    def leave_SimpleStatementLine(self, original: cst.SimpleStatementLine, updated: cst.SimpleStatementLine):
        """`parser = HfArgumentParser((..., NeuronTrainingArguments))`: the migrated class would default to
        eager training, so the parser's default turns compilation on (a flag or a config file still sets it)."""
        parser = self._arguments_parser(original)
        if parser is None or not isinstance(updated, cst.SimpleStatementLine):
            return updated
        self.ctx.report(
            original.body[0].value,
            TORCH_COMPILE,
            f"`{parser}.set_defaults(torch_compile=True)` added after the parser: Transformers picks the neuron "
            "compile backend by itself and compiles the training step without dynamic shapes (optimum-neuron "
            "always compiled it); `--torch_compile false` or a `--config` file still sets it, a JSON/YAML file "
            "read with parse_json_file / parse_yaml_file needs `torch_compile: true` itself.",
        )
        default = cst.parse_statement(f"{parser}.set_defaults(torch_compile=True)\n")
        return cst.FlattenSentinel([updated, default])

    def _arguments_parser(self, line: cst.SimpleStatementLine) -> str | None:
        """The variable a parser of optimum-neuron training arguments is assigned to, unless the file already
        decides `torch_compile` itself."""
        if (
            len(line.body) != 1
            or not isinstance(line.body[0], cst.Assign)
            or "torch_compile" in self.ctx.source.identifiers
        ):
            return None
        assign = line.body[0]
        target, value = assign.targets[0].target, assign.value
        if len(assign.targets) != 1 or not isinstance(target, cst.Name) or not isinstance(value, cst.Call):
            return None
        if self.ctx.qualified(value.func) not in _PARSER_CLASSES or not value.args:
            return None
        classes = value.args[0].value
        elements = (
            [e.value for e in classes.elements] if isinstance(classes, (cst.Tuple, cst.List)) else [classes]
        )
        if not any(_is_neuron_arguments(self.ctx.qualified(element)) for element in elements):
            return None
        return target.value

    def _unpacks_training_arguments_only(self, call: cst.Call) -> bool:
        """Every `**` of the call unpacks `args.to_dict()` of a TrainingArguments (which has no packing_strategy)."""
        stars = [arg for arg in call.args if arg.star == "**"]
        if any(arg.star == "*" for arg in call.args) or not stars:
            return False
        names = self._training_arguments_names()
        return all(
            m.matches(arg.value, m.Call(func=m.Attribute(value=m.Name(), attr=m.Name("to_dict")), args=[]))
            and arg.value.func.value.value in names
            for arg in stars
        )

    def _training_arguments_names(self) -> frozenset[str]:
        """Names that only ever hold a TrainingArguments: `args = TrainingArguments(...)`, or its place in
        `model_args, args = HfArgumentParser((ModelArguments, TrainingArguments)).parse_args_into_dataclasses()`."""
        if self._names is None:
            self._names = arguments_names(self.ctx, _ARGUMENTS_CLASSES.__contains__)
        return self._names


# Transformers' training-arguments classes, which have no `packing_strategy` field (TRL's configs do).
_TRAINING_CLASS_NAMES = frozenset({"TrainingArguments", "Seq2SeqTrainingArguments"})
_ARGUMENTS_CLASSES = frozenset(
    {
        *(name for name, target in RENAMES.items() if target.name in _TRAINING_CLASS_NAMES),
        *(f"transformers.{name}" for name in _TRAINING_CLASS_NAMES),
    }
)
# Parsers of dataclasses from the command line (optimum-neuron's own become HfArgumentParser).
_PARSER_CLASSES = frozenset(
    {
        "transformers.HfArgumentParser",
        "transformers.hf_argparser.HfArgumentParser",
        "trl.TrlParser",
        "trl.scripts.utils.TrlParser",
        *(name for name, target in RENAMES.items() if target.name == "HfArgumentParser"),
    }
)


def _is_neuron_arguments(qualified: str | None) -> bool:
    """An optimum-neuron training-arguments class, which the migration renames to Transformers' / TRL's."""
    target = RENAMES.get(qualified or "")
    return target is not None and target.arguments is not None


def _with_spread(call: cst.Call, index: int, value: cst.BaseExpression) -> cst.Call:
    """`call` with the `**` argument at `index` unpacking `value` instead."""
    args = list(call.args)
    args[index] = args[index].with_changes(value=value)
    return call.with_changes(args=args)


def _spreads_literal_key(call: cst.Call, key: str) -> bool:
    """A `**{...}` of the call writes `key` itself (`**{"packing_strategy": "wrapped", **args}`, NM214's)."""
    return any(
        arg.star == "**"
        and isinstance(arg.value, cst.Dict)
        and any(
            isinstance(element, cst.DictElement) and string_value(element.key) == key
            for element in arg.value.elements
        )
        for arg in call.args
    )


def keywords(call: cst.Call) -> set[str]:
    return {arg.keyword.value for arg in call.args if arg.keyword is not None}


HANDLER = AddedArguments
