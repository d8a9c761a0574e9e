"""NM229: `SFTTrainer(..., dataset_text_field=..., max_seq_length=..., packing=...)`, TRL 0.11's keywords, which
TRL 0.12+ moved to SFTConfig and TRL 1.16 rejects on the trainer (TypeError). trl 0.11.4 copied each into the
trainer's config (a TrainingArguments given to it first became an SFTConfig with every value it held), so they
move into the call that builds the trainer's `args`, where its value there is the trainer's; a TrainingArguments
call becomes SFTConfig, keeping TrainingArguments' defaults where SFTConfig's differ; no `args`: an SFTConfig of
TRL 0.11's default output folder."""

from __future__ import annotations

import libcst as cst

from migrator.cst_helpers import (
    descendants,
    dotted_name,
    find_keyword,
    keyword_arg,
    source_code,
    with_appended,
    without_args,
)
from migrator.families.training.state import bound_before
from migrator.families.training.targets import SFT_TRAINER_NAMES, SFT_TRAINERS
from migrator.families.training_args import (
    SFT_TRAINER_KEYWORDS,
    SFT_TRAINER_PACKING_KEYWORDS,
    TRAINING_ARGUMENTS_DEFAULTS_SFT_CHANGES,
)
from migrator.rules import Example, Rule, Severity
from migrator.transform import FileContext, Handler

SFT_TRAINER_KEYWORDS_MOVED = Rule(
    "NM229",
    Severity.INFO,
    "`SFTTrainer(..., dataset_text_field=..., max_seq_length=..., packing=...)`: TRL 0.11's trainer keywords, which "
    "TRL 1.16 rejects (TypeError: unexpected keyword argument)",
    "Moved into the call that builds the trainer's `args` (`max_seq_length` as `max_length`, "
    '`packing_strategy="wrapped"` beside a packing that may be on: TRL 0.11 packed by concatenating and cutting, as '
    "wrapped does), their values replacing that call's own, as trl 0.11.4 set them on its config; a "
    "`TrainingArguments(...)` there becomes `SFTConfig(...)` with the TrainingArguments defaults that SFTConfig "
    "changes given (learning_rate=5e-05, logging_steps=500, bf16=False, gradient_checkpointing=False), as TRL's "
    'conversion of a TrainingArguments kept them; no `args`: `args=SFTConfig(output_dir="tmp_trainer", ...)`, '
    "TRL 0.11's. `dataset_batch_size` (its tokenizing map's batch) is dropped. A TODO instead where the arguments "
    "are not one call of this file (parsed, built elsewhere, unpacked), a value may change between that call and "
    "the trainer, or ConstantLengthDataset's `infinite` / `num_of_sequences` / `chars_per_token` are passed (TRL "
    "1.x's packing has no equivalent).",
    examples=(
        Example(
            before="""\
from transformers import TrainingArguments
from trl import SFTTrainer

args = TrainingArguments(output_dir="out", max_steps=100)
trainer = SFTTrainer(model="Qwen/Qwen3-0.6B", args=args, train_dataset=dataset, dataset_text_field="text", max_seq_length=512)
""",
            after="""\
from trl import SFTConfig, SFTTrainer

args = SFTConfig(output_dir="out", max_steps=100, learning_rate=5e-05, logging_steps=500, bf16=False, gradient_checkpointing=False, dataset_text_field="text", max_length=512)
trainer = SFTTrainer(model="Qwen/Qwen3-0.6B", args=args, train_dataset=dataset)
""",
        ),
    ),
)
RULES = (SFT_TRAINER_KEYWORDS_MOVED,)

_CONFIGS = {"SFTConfig", "NeuronSFTConfig"}
_TRAINING_ARGUMENTS = {"TrainingArguments", "NeuronTrainingArguments"}


class SftTrainerKeywords(Handler):
    TRIGGERS = SFT_TRAINER_NAMES
    HINTS = frozenset({"SFTTrainer", "Arguments", "Config"})

    def __init__(self, ctx: FileContext) -> None:
        super().__init__(ctx)
        self.configs: dict[cst.Call, list[cst.Arg]] = {}  # the config call -> the trainer keywords it takes
        # trainer call -> ("config", None): moved to its args' call; ("new", None): to new args; ("todo", why)
        self.trainers: dict[cst.Call, tuple[str, str | None]] = {}

    def visit_Module(self, node: cst.Module) -> None:
        for call in descendants(node, cst.Call):
            moved = [arg for arg in call.args if arg.keyword and arg.keyword.value in SFT_TRAINER_KEYWORDS]
            packing_only = [
                arg.keyword.value
                for arg in call.args
                if arg.keyword and arg.keyword.value in SFT_TRAINER_PACKING_KEYWORDS
            ]
            if not (moved or packing_only) or not self._sft_trainer(node, call.func):
                continue
            if packing_only:
                why = (
                    f"{', '.join(f'`{k}`' for k in packing_only)} configured TRL 0.11's ConstantLengthDataset, which "
                    "TRL 1.x's packing has no equivalent of"
                )
                self.trainers[call] = ("todo", why)
                continue
            self.trainers[call] = self._plan(node, call, moved)

    def _sft_trainer(self, module: cst.Module, func: cst.BaseExpression) -> bool:
        """TRL's or optimum-neuron's SFT trainer: through the module's imports; a name the file neither imports
        nor defines (a star import, a notebook's earlier cell) by the name itself."""
        qualified = self.ctx.module_qualified(func) or ""
        if qualified in SFT_TRAINERS:
            return True
        defined = {
            statement.name.value
            for statement in module.body
            if isinstance(statement, (cst.ClassDef, cst.FunctionDef))
        }
        return qualified == dotted_name(func) and qualified in SFT_TRAINER_NAMES and qualified not in defined

    def _plan(self, module: cst.Module, trainer: cst.Call, moved: list[cst.Arg]) -> tuple[str, str | None]:
        why = self._why_not(module, trainer, moved)
        if why is not None:
            return ("todo", why)
        return ("new", None) if self._config_of(trainer) is None else ("config", None)

    @staticmethod
    def _config_of(trainer: cst.Call) -> cst.BaseExpression | None:
        given = find_keyword(trainer, "args")
        positional = [arg for arg in trainer.args if arg.keyword is None and not arg.star]
        return given.value if given else positional[1].value if len(positional) > 1 else None

    def _why_not(self, module: cst.Module, trainer: cst.Call, moved: list[cst.Arg]) -> str | None:
        value = self._config_of(trainer)
        if value is None:
            if any(arg.star for arg in trainer.args):
                return "the trainer's arguments may come from what its call unpacks"
            return None
        if not isinstance(value, cst.Name):
            return f"its arguments, `{source_code(value)}`, are not built by one call of this file"
        bindings = [
            assign.value
            for assign in descendants(module, cst.Assign)
            if any(isinstance(t.target, cst.Name) and t.target.value == value.value for t in assign.targets)
        ]
        config = bindings[0] if len(bindings) == 1 else None
        kind = (dotted_name(config.func) or "").rpartition(".")[2] if isinstance(config, cst.Call) else ""
        if kind not in _CONFIGS | _TRAINING_ARGUMENTS or any(arg.star for arg in config.args):
            return f"its arguments, `{value.value}`, are not built by one TrainingArguments / SFTConfig call of this file"
        if config in self.configs:
            return f"`{value.value}` is given to another trainer that moves its keywords too"
        for arg in moved:
            if not _settled(arg.value, config, module):
                return f"`{source_code(arg.value)}` may hold another value where `{value.value}` is built"
        self.configs[config] = moved
        return None

    def leave_Call(self, original: cst.Call, updated: cst.Call):
        if not isinstance(updated, cst.Call):
            return updated
        if original in self.configs:
            return self._config(original, updated, self.configs[original])
        if original not in self.trainers:
            return updated
        plan, why = self.trainers[original]
        names = [
            arg.keyword.value
            for arg in original.args
            if arg.keyword and arg.keyword.value in SFT_TRAINER_KEYWORDS
        ]
        if plan == "todo":
            self.ctx.todo(
                original,
                SFT_TRAINER_KEYWORDS_MOVED,
                f"TRL 1.16's SFTTrainer rejects {', '.join(f'`{n}`' for n in names) or 'these keywords'} (moved to "
                f"SFTConfig in TRL 0.12); {why}",
                "pass them to the SFTConfig the trainer gets as `args` (max_seq_length as max_length)",
                subject="SFTTrainer keywords",
            )
            return updated
        moved = [arg for arg in updated.args if arg.keyword and arg.keyword.value in SFT_TRAINER_KEYWORDS]
        args = without_args(list(updated.args), set(moved))
        if plan == "new":
            fields = ", ".join(
                ['output_dir="tmp_trainer"', *(f"{name}={value}" for name, value in _field_values(moved))]
            )
            self.ctx.add_import("trl", "SFTConfig")
            args = with_appended(args, [keyword_arg("args", cst.parse_expression(f"SFTConfig({fields})"))])
            where = 'a new `args=SFTConfig(output_dir="tmp_trainer", ...)` (TRL 0.11\'s default)'
        else:
            where = "the call that builds the trainer's `args`"
        self.ctx.report(
            original,
            SFT_TRAINER_KEYWORDS_MOVED,
            f"{', '.join(f'`{n}`' for n in names)} moved to {where}: TRL 1.16's SFTTrainer rejects them.",
            subject="SFTTrainer keywords",
        )
        return updated.with_changes(args=args)

    def _config(self, original: cst.Call, updated: cst.Call, moved: list[cst.Arg]) -> cst.Call:
        fields = dict(_field_values(moved))
        args = [
            arg for arg in updated.args if not (arg.keyword and arg.keyword.value in fields)
        ]  # the trainer's value replaces the config's, as trl 0.11.4 set it
        if (dotted_name(updated.func) or "").rpartition(".")[2] in _TRAINING_ARGUMENTS:
            given = {arg.keyword.value for arg in original.args if arg.keyword}
            kept = {
                name: value
                for name, value in TRAINING_ARGUMENTS_DEFAULTS_SFT_CHANGES.items()
                if name not in given
                and not (name == "gradient_checkpointing" and "activation_checkpointing" in given)
            }
            fields = {**kept, **fields}
            self.ctx.add_import("trl", "SFTConfig")
            self.ctx.remove_import("transformers", "TrainingArguments")  # if nothing else uses it
            updated = updated.with_changes(func=cst.Name("SFTConfig"))
            self.ctx.report(
                original,
                SFT_TRAINER_KEYWORDS_MOVED,
                "`TrainingArguments(...)` -> `SFTConfig(...)`, with the trainer's SFT keywords"
                + (
                    f" and TrainingArguments' own {', '.join(f'{k}={v}' for k, v in kept.items())}"
                    if kept
                    else ""
                )
                + ": TRL turned the TrainingArguments it was given into an SFTConfig holding its values.",
                subject="SFTConfig",
            )
        additions = [keyword_arg(name, cst.parse_expression(value)) for name, value in fields.items()]
        return updated.with_changes(args=with_appended(args, additions))


def _settled(value: cst.BaseExpression, config: cst.Call, module: cst.Module) -> bool:
    """`value` means at `config` what it means at the trainer: a literal, or names bound only before `config`."""
    if isinstance(value, (cst.SimpleString, cst.ConcatenatedString, cst.Integer, cst.Float)):
        return True
    if isinstance(value, cst.Name) and value.value in ("True", "False", "None"):
        return True
    return bound_before(value, config, module)


def _field_values(moved: list[cst.Arg]) -> list[tuple[str, str]]:
    """(SFTConfig field, value source) for the trainer keywords moved; `packing_strategy="wrapped"` beside a
    packing that may be on."""
    fields = [
        (SFT_TRAINER_KEYWORDS[arg.keyword.value], source_code(arg.value))
        for arg in moved
        if SFT_TRAINER_KEYWORDS[arg.keyword.value] is not None
    ]
    if any(name == "packing" and value != "False" for name, value in fields):
        fields.append(("packing_strategy", '"wrapped"'))
    return fields


HANDLER = SftTrainerKeywords
