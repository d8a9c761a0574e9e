"""NM201: optimum-neuron training classes and functions become their Transformers/TRL/PEFT equivalents,
at every use and in the imports."""

from __future__ import annotations

import libcst as cst

from migrator.cst_helpers import dotted_name, may_hold_imports
from migrator.families.training.state import TrainingFile, rename, target_path
from migrator.families.training.targets import HINTS, RENAMES, SYMBOLS, TRAINING_MODELS, TRIGGERS
from migrator.rules import Example, Rule, Severity
from migrator.transform import FileContext, Handler

CLASS_RENAMED = Rule(
    "NM201",
    Severity.INFO,
    "An optimum-neuron training class or function (`NeuronTrainer`, `NeuronSFTTrainer`, "
    "`NeuronTrainingArguments`, `NeuronSFTConfig`, `NeuronHfArgumentParser`, legacy `Trainium*`/`Seq2Seq*` "
    "names, `optimum.neuron.peft`)",
    "Rewritten to the Transformers/TRL/PEFT equivalent (`Trainer`, `trl.SFTTrainer`, `TrainingArguments`, "
    "`trl.SFTConfig`, `HfArgumentParser`, `peft.get_peft_model`, ...).",
    examples=(
        Example(
            before="""\
from optimum.neuron import NeuronTrainer

trainer = NeuronTrainer(model=model, args=training_args, train_dataset=dataset)
trainer.train()
""",
            after="""\
from transformers import Trainer

trainer = Trainer(model=model, args=training_args, train_dataset=dataset)
trainer.train()
""",
        ),
    ),
)
RULES = (CLASS_RENAMED,)


class Renames(Handler):
    """Names and attributes that are not the callee of a call (the call rules rename those); imports."""

    HINTS = HINTS
    TRIGGERS = TRIGGERS

    def __init__(self, ctx: FileContext) -> None:
        super().__init__(ctx)
        self.file = ctx.state(TrainingFile)
        self.aliases: list[tuple[str, str, str]] = []  # (module, name, asname) imports of renamed symbols
        self.renamed_imports: list[tuple[cst.ImportAlias, str]] = []  # reported unless the symbol was kept

    def leave_Name(self, original: cst.Name, updated: cst.Name):
        file = self.file
        if file.in_import or original in file.not_references or original in file.call_funcs:
            return updated
        return rename(self.ctx, original, updated)

    def leave_Attribute(self, original: cst.Attribute, updated: cst.Attribute):
        if self.file.in_import or original in self.file.call_funcs:
            return updated
        return rename(self.ctx, original, updated)

    def leave_ImportFrom(self, original: cst.ImportFrom, updated: cst.ImportFrom):
        if original.relative or original.module is None or isinstance(original.names, cst.ImportStar):
            return updated
        module = dotted_name(original.module)
        for alias in original.names:
            name = alias.name.value
            qualified = f"{module}.{name}"
            asname = alias.asname.name.value if alias.asname else None
            if qualified in RENAMES:
                self.renamed_imports.append((alias, qualified))
                # Uses that keep their spelling (an alias, or the same name) keep the old import alive:
                # swap it at the end unless a use was left in place.
                if asname or name == RENAMES[qualified].name:
                    self.aliases.append((module, name, asname))
                else:
                    self.ctx.remove_import(module, name)
            elif qualified in TRAINING_MODELS and not asname and name == TRAINING_MODELS[qualified].name:
                self.aliases.append((module, name, asname))  # `LlamaForCausalLM` keeps its spelling
            elif qualified in SYMBOLS:
                self.ctx.remove_import(module, name, asname)  # only if every use was rewritten
        return updated

    def leave_Module(self, original: cst.Module, updated: cst.Module):
        kept = self.file.kept
        for alias, qualified in self.renamed_imports:
            if qualified not in kept:
                message = f"`{qualified}` -> `{target_path(RENAMES[qualified])}`."
                self.ctx.report(alias, CLASS_RENAMED, message, subject=qualified)
        swaps = {
            (module, name, asname)
            for module, name, asname in self.aliases
            if f"{module}.{name}" not in kept
            and (f"{module}.{name}" in RENAMES or f"{module}.{name}" in self.file.rewritten_loads)
        }
        if not swaps:
            return updated
        for module, name, asname in swaps:
            target = RENAMES.get(f"{module}.{name}") or TRAINING_MODELS[f"{module}.{name}"]
            self.ctx.add_import(target.module, target.name, asname if asname != target.name else None)
        return updated.visit(_AliasRemover(swaps))


class _AliasRemover(cst.CSTTransformer):
    """Drops `from module import name as asname` aliases whose symbol was swapped for its target."""

    def __init__(self, aliases: set[tuple[str, str, str]]) -> None:
        super().__init__()
        self.aliases = aliases

    def on_visit(self, node: cst.CSTNode) -> bool:
        return may_hold_imports(node) and super().on_visit(node)

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


HANDLER = Renames
