"""NM224: a field Transformers 5 / TRL 1.x removed from the training arguments, read or written on an object that
holds them (`training_args.overwrite_output_dir`, `args.evaluation_strategy = "steps"`), in any file of a
migrated tree. The fields are the training-arguments table's (`training_args.py`, `REMOVED_UPSTREAM`, each
checked to be gone from the pinned classes by `tests/migrator/test_stack_calls.py`); a read of one raises
AttributeError, a write sets an attribute nothing reads."""

from __future__ import annotations

import libcst as cst

from migrator.families.training.arguments_names import (
    OWN_FIELDS,
    arguments_names,
    is_arguments,
    own_field_reads,
    with_fields,
)
from migrator.families.training_args import REMOVED_UPSTREAM, SFT_CONFIG_ARGUMENTS
from migrator.rules import Example, Rule, Severity
from migrator.transform import FileContext, Handler

# A renamed field holds the same value under its new name, so its reads and writes are renamed too, except
# `warmup_ratio`: `warmup_steps` holds a ratio only when the script passed one (a step count otherwise).
VALUE_CHANGES = frozenset({"warmup_ratio"})
READ_RENAMES = {
    name: action.target
    for name, action in SFT_CONFIG_ARGUMENTS.items()
    if name in REMOVED_UPSTREAM and action.kind == "rename" and name not in VALUE_CHANGES
}

REMOVED_FIELD = Rule(
    "NM224",
    Severity.WARNING,
    "A training-arguments field Transformers 5 / TRL 1.x removed, read or written on the arguments object "
    "(`training_args.overwrite_output_dir`, `args.logging_dir`, `args.evaluation_strategy`...), in any file "
    "of the tree",
    "A renamed field is renamed here too (`evaluation_strategy` -> `eval_strategy`, `no_cuda` -> `use_cpu`, "
    "`per_gpu_*` -> `per_device_*`, `push_to_hub_token` -> `hub_token`, `max_seq_length` -> `max_length`); "
    "`overwrite_output_dir`, read on arguments an HfArgumentParser parsed next to a dataclass of the script "
    "(Transformers 4's example scripts), moves to that dataclass with its old default (False), so the "
    "launcher's `--overwrite_output_dir` still parses and the read gets what it got; "
    "any other removed field keeps a TODO on its statement: a read raises AttributeError, a write sets an "
    "attribute the Trainer no longer reads. Only names that hold nothing but training arguments in the file "
    "(built by the class, or unpacked from an HfArgumentParser) are read.",
    examples=(
        Example(
            before="""\
from transformers import HfArgumentParser, TrainingArguments

parser = HfArgumentParser((ModelArguments, TrainingArguments))
model_args, training_args = parser.parse_args_into_dataclasses()
if training_args.evaluation_strategy != "no":
    print("evaluating every", training_args.eval_steps)
if os.path.isdir(training_args.output_dir) and not training_args.overwrite_output_dir:
    last_checkpoint = get_last_checkpoint(training_args.output_dir)
""",
            after="""\
from transformers import HfArgumentParser, TrainingArguments

parser = HfArgumentParser((ModelArguments, TrainingArguments))
model_args, training_args = parser.parse_args_into_dataclasses()
if training_args.eval_strategy != "no":
    print("evaluating every", training_args.eval_steps)
# TODO(neuron-migrate): NM224 `training_args.overwrite_output_dir` reads a field the migrated training arguments do not have (AttributeError): removed in Transformers 5 (TrainingArguments raises on it); output_dir is always written to; replace it with the value this code means (the old default was False) or a field of the script's own argument dataclass
if os.path.isdir(training_args.output_dir) and not training_args.overwrite_output_dir:
    last_checkpoint = get_last_checkpoint(training_args.output_dir)
""",
        ),
    ),
)
RULES = (REMOVED_FIELD,)

# The old defaults a read got when nothing set the field (Transformers 4.57.3 / TRL 0.x), for the TODO.
OLD_DEFAULTS = {"overwrite_output_dir": "False", "logging_dir": "output_dir/runs/<date>_<host>"}


class RemovedFields(Handler):
    TRIGGERS = frozenset(REMOVED_UPSTREAM)
    HINTS = frozenset(REMOVED_UPSTREAM)

    def __init__(self, ctx: FileContext) -> None:
        super().__init__(ctx)
        self._names: frozenset[str] | None = None
        self._written: set[cst.CSTNode] = set()  # attributes assigned to (`args.logging_dir = ...`)
        self._moved: dict[tuple[str, str], tuple[str, str]] | None = (
            None  # (holder, field) -> (variable, class)
        )

    def moved(self) -> dict[tuple[str, str], tuple[str, str]]:
        """The `OWN_FIELDS` reads whose field moves to the script's own dataclass (`arguments_names.own_field_reads`)."""
        if self._moved is None:
            if self._names is None:
                self._names = arguments_names(self.ctx, is_arguments)
            self._moved = own_field_reads(self.ctx, self._names)
        return self._moved

    def leave_ClassDef(self, original: cst.ClassDef, updated: cst.ClassDef):
        """The script's own dataclass takes the removed flags its parse fed to the training arguments."""
        fields = sorted(
            {field for (_, field), (_, cls) in self.moved().items() if cls == original.name.value}
        )
        updated, fields = with_fields(original, updated, {field: OWN_FIELDS[field] for field in fields})
        if not fields:
            return updated
        self.ctx.report(
            original,
            REMOVED_FIELD,
            f"{', '.join(f'`{field}`' for field in fields)} added to `{original.name.value}`: Transformers 5's "
            "training arguments no longer have it, and the script reads it; its flag still parses.",
            subject=original.name.value,
        )
        return updated

    def visit_AssignTarget(self, node: cst.AssignTarget) -> None:
        self._written.add(node.target)

    def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
        self._written.add(node.target)

    def leave_Attribute(self, original: cst.Attribute, updated: cst.Attribute):
        name = original.attr.value
        if name not in REMOVED_UPSTREAM or not isinstance(original.value, cst.Name):
            return updated
        if self._names is None:
            self._names = arguments_names(self.ctx, is_arguments)
        holder = original.value.value
        if holder not in self._names:
            return updated
        written = f"{holder}.{name}"
        if name in READ_RENAMES:
            new = READ_RENAMES[name]
            self.ctx.report(original, REMOVED_FIELD, f"`{written}` -> `{holder}.{new}`.", subject=name)
            return updated.with_changes(attr=cst.Name(new))
        own = self.moved().get((holder, name))
        if own is not None and original not in self._written:
            self.ctx.report(
                original,
                REMOVED_FIELD,
                f"`{written}` -> `{own[0]}.{name}` (a field of `{own[1]}`).",
                subject=name,
            )
            return updated.with_changes(value=cst.Name(own[0]))
        note = SFT_CONFIG_ARGUMENTS[name].note
        if original in self._written:
            why = f"`{written}` sets a field the migrated training arguments do not have (nothing reads it): {note}"
            action = "delete it, or set what replaces it"
        else:
            default = OLD_DEFAULTS.get(name)
            why = f"`{written}` reads a field the migrated training arguments do not have (AttributeError): {note}"
            action = "replace it with the value this code means" + (
                f" (the old default was {default})" if default else ""
            )
            action += " or a field of the script's own argument dataclass"
        self.ctx.todo(original, REMOVED_FIELD, why, action, subject=name)
        return updated


HANDLER = RemovedFields
