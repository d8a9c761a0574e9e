"""NM219: names imported from transformers / trl / peft / huggingface_hub / datasets that the pinned target stack no
longer has are rewritten to their replacement, or keep a TODO (tables in `stack_names.py`)."""

from __future__ import annotations

import ast
import re
from collections import Counter, defaultdict

import libcst as cst

from migrator.cst_helpers import dotted_name, find_keyword, keyword_arg, with_appended
from migrator.families.training.stack_names import (
    DROPPED,
    NAMES,
    RENAMED,
    STACK_MODULES,
    Replacement,
    removed_reason,
)
from migrator.rules import Example, Rule, Severity
from migrator.transform import FileContext, Handler
from usercode.python import ast_nodes

STACK_NAME = Rule(
    "NM219",
    Severity.WARNING,
    "A name imported from transformers / trl / peft / huggingface_hub / datasets that the migrated stack "
    "(Transformers 5, TRL 1.x, huggingface_hub 1.x, datasets 3+) no longer has (`transformers.AdamW`, `ViTFeatureExtractor`, "
    "`transformers.generation_utils`, `send_example_telemetry`, `trl.DataCollatorForCompletionOnlyLM`, `TFAutoModel...`, `HfFolder`, "
    "`datasets.load_metric`)",
    "Rewritten to its replacement where it takes the same arguments (`transformers.AdamW` -> "
    "`torch.optim.AdamW`, a vision `*FeatureExtractor` -> its `*ImageProcessor`, TRL's ORPO/CPO/online-DPO/GKD "
    "trainers -> `trl.experimental`, `HfFolder.get_token()` -> `huggingface_hub.get_token()`, "
    "`is_torch_tpu_available` -> `is_torch_xla_available`, `datasets.load_metric` -> `evaluate.load`; imported "
    "under the old name where the file binds the new one to something else); `send_example_telemetry` (usage statistics for "
    "Hugging Face) is deleted with the statements that only call it; an import of a removed name the file never "
    "uses (a commented-out `HfFolder.get_token()`) is deleted; otherwise the "
    "import stays with a TODO saying what replaces it. Where the old defaults differ (AdamW's eps=1e-6, "
    "weight_decay=0.0 against torch's 1e-8, 0.01), each call passes them; a use that is not a call (a class "
    "handed to a helper) gets a TODO.",
    examples=(
        Example(
            before="""\
import torch_xla.core.xla_model as xm
from transformers import AdamW, get_linear_schedule_with_warmup

optimizer = AdamW(model.parameters(), lr=5e-5)
scheduler = get_linear_schedule_with_warmup(optimizer, 100, 1000)
""",
            after="""\
from transformers import get_linear_schedule_with_warmup
from torch.optim import AdamW

optimizer = AdamW(model.parameters(), lr=5e-5, eps=1e-6, weight_decay=0.0)
scheduler = get_linear_schedule_with_warmup(optimizer, 100, 1000)
""",
        ),
        Example(
            before="""\
import torch_xla.core.xla_model as xm
from trl import DataCollatorForCompletionOnlyLM

collator = DataCollatorForCompletionOnlyLM("### Answer:", tokenizer=tokenizer)
""",
            after="""\
# TODO(neuron-migrate): NM219 `trl.DataCollatorForCompletionOnlyLM` is not in the migrated stack; removed in TRL 1.x; train on prompt-completion data with SFTConfig(completion_only_loss=True), or on conversations with assistant_only_loss=True
from trl import DataCollatorForCompletionOnlyLM

collator = DataCollatorForCompletionOnlyLM("### Answer:", tokenizer=tokenizer)
""",
        ),
        Example(
            before="""\
import argparse

import torch_xla.core.xla_model as xm
from huggingface_hub import HfFolder

parser = argparse.ArgumentParser()
parser.add_argument("--hub_token", default=HfFolder.get_token())
""",
            after="""\
import argparse

from huggingface_hub import get_token

parser = argparse.ArgumentParser()
parser.add_argument("--hub_token", default=get_token())
""",
        ),
    ),
)
RULES = (STACK_NAME,)


class StackNames(Handler):
    HINTS = NAMES | {"TF", "Flax"}
    TRIGGERS = frozenset(STACK_MODULES)
    CALLS = frozenset(name for name, target in RENAMED.items() if target.old_defaults)

    def __init__(self, ctx: FileContext) -> None:
        super().__init__(ctx)
        # Renamed uses whose replacement has other defaults, until a call of theirs is seen in the statement.
        self.uncalled: dict[cst.BaseExpression, tuple[str, Replacement]] = {}
        # Per name the file reads: how often, and the attribute of each `name.attribute` read (Python's parse
        # of the file, walked once an import needs its uses counted).
        self.reads: Counter[str] | None = None
        self.attributes: dict[str, list[str]] = defaultdict(list)

    def _replacement(self, qualified: str | None) -> Replacement | None:
        target = RENAMED.get(qualified or "")
        if target is None or not target.unsupported_keywords.isdisjoint(self.ctx.source.identifiers):
            return None
        return target

    def leave_ImportFrom(self, original: cst.ImportFrom, updated: cst.ImportFrom):
        if original.relative or original.module is None or isinstance(original.names, cst.ImportStar):
            return updated
        module = dotted_name(original.module)
        if module is None or module.split(".")[0] not in STACK_MODULES:
            return updated
        kept = []
        for alias, new_alias in zip(original.names, updated.names, strict=True):
            qualified = f"{module}.{alias.name.value}"
            target = self._replacement(qualified)
            if target is not None:
                asname = alias.asname.name.value if alias.asname else self._alias(target, alias.name.value)
                self.ctx.add_import(target.module, target.name, asname)
                self.ctx.report(alias, STACK_NAME, f"`{qualified}` -> `{target.module}.{target.name}`.")
                continue
            if qualified in DROPPED and self._only_called(alias):
                asname = alias.asname.name.value if alias.asname else None
                self.ctx.remove_import(module, alias.name.value, asname)
                self.ctx.report(
                    alias, STACK_NAME, f"`{qualified}` and its calls deleted: it {DROPPED[qualified]}."
                )
            elif qualified in DROPPED:
                self.ctx.todo(
                    alias,
                    STACK_NAME,
                    f"`{qualified}` is not in the migrated stack (it {DROPPED[qualified]})",
                    "delete its uses and this import",
                    subject=qualified,
                )
            elif self._not_in_stack(qualified) and not self._used(alias):
                self.ctx.report(alias, STACK_NAME, f"`{qualified}` import deleted: the file never uses it.")
                continue
            elif not self._each_use_rewritten(alias, qualified):
                self._check_removed(alias, qualified)
            kept.append(new_alias)
        if len(kept) == len(updated.names):
            return updated
        if not kept:
            return cst.RemoveFromParent()
        kept[-1] = kept[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)
        return updated.with_changes(names=kept)

    def _alias(self, target: Replacement, old: str) -> str | None:
        """The name the replacement is imported as: its own, or the old one where the file already uses its own
        for something else (`evaluate.load` in a file that reads `json.load` / binds `load`): the uses then
        stay as they are."""
        if target.name == old or self.ctx.imported.get(target.name) == f"{target.module}.{target.name}":
            return None
        return old if target.name in self.ctx.source.identifiers else None

    def _not_in_stack(self, qualified: str) -> bool:
        """Whether importing `qualified` raises ImportError on the stack (a removed name, or a renamed one whose
        replacement this file cannot take)."""
        return removed_reason(qualified) is not None or (
            qualified in RENAMED and self._replacement(qualified) is None
        )

    def _uses(self, alias: cst.ImportAlias) -> tuple[int, list[str]]:
        """How often the imported name is read (comments and strings are not code), and the attribute each
        `Name.attribute` read takes."""
        if self.reads is None:
            self.reads = Counter()
            for node in ast_nodes(self.ctx.tree or ast.parse(self.ctx.code)):
                if isinstance(node, ast.Name):
                    self.reads[node.id] += 1
                elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
                    self.attributes[node.value.id].append(node.attr)
        bound = (alias.asname.name if alias.asname else alias.name).value
        return self.reads[bound], self.attributes.get(bound, [])

    def _used(self, alias: cst.ImportAlias) -> bool:
        return self._uses(alias)[0] > 0

    def _each_use_rewritten(self, alias: cst.ImportAlias, qualified: str) -> bool:
        """Whether every use reads a member the tables rewrite (`HfFolder.get_token`): the import then goes with
        the rewrite. A member only flagged (`HfFolder.save_token`) leaves the import raising, far from that
        use's TODO, so the import gets its own."""
        reads, attributes = self._uses(alias)
        members = [f"{qualified}.{attribute}" for attribute in attributes]
        return (
            reads > 0 and len(attributes) == reads and all(self._replacement(m) is not None for m in members)
        )

    def _only_called(self, alias: cst.ImportAlias) -> bool:
        """Whether every use of the imported name in the file is a statement that only calls it."""
        bound = (alias.asname.name if alias.asname else alias.name).value
        uses = len(re.findall(rf"\b{bound}\b", self.ctx.code)) - 1
        return uses == len(re.findall(rf"^[ \t]*{bound}\(", self.ctx.code, re.MULTILINE))

    def _check_removed(self, node: cst.CSTNode, qualified: str) -> None:
        reason = removed_reason(qualified)
        if reason is None and qualified in RENAMED:  # a replacement that does not take the script's keywords
            target = RENAMED[qualified]
            keywords = ", ".join(sorted(target.unsupported_keywords))
            reason = f"`{target.module}.{target.name}` replaces it but takes none of {keywords}"
        if reason is not None:
            self.ctx.todo(
                node, STACK_NAME, f"`{qualified}` is not in the migrated stack", reason, subject=qualified
            )

    def leave_Name(self, original: cst.Name, updated: cst.Name):
        """Uses of a renamed import bound without an alias take the new name (in a statement line or in the
        header of an `if` / `while` / `for` / `with`, where there is no statement line)."""
        if self.ctx.line is not None and isinstance(self.ctx.line.body[0], (cst.Import, cst.ImportFrom)):
            return updated
        if original.value not in self.ctx.imported:
            return updated
        qualified = self.ctx.imported[original.value]
        target = self._replacement(qualified)
        if target is None:
            return updated
        if original.value != qualified.rpartition(".")[2]:  # `import ... as Alias`: the alias stays
            return updated
        if target.old_defaults:
            self.uncalled[original] = (qualified, target)
        return updated.with_changes(value=self._alias(target, original.value) or target.name)

    def leave_Attribute(self, original: cst.Attribute, updated: cst.Attribute):
        """`transformers.AdamW` through a module import."""
        if not isinstance(original.value, (cst.Name, cst.Attribute)):
            return updated
        if self.ctx.line is not None and isinstance(self.ctx.line.body[0], cst.ImportFrom):
            return updated  # the module an import names: its names are checked one by one
        qualified = self.ctx.qualified(original)
        if qualified is None or qualified.split(".")[0] not in STACK_MODULES:
            return updated
        target = self._replacement(qualified)
        self.uncalled.pop(original.attr, None)  # its name alone, when the file also imports it
        if target is not None:
            self.ctx.report(original, STACK_NAME, f"`{qualified}` -> `{target.module}.{target.name}`.")
            alias = self._alias(target, original.attr.value)
            self.ctx.add_import(target.module, target.name, alias)
            owner = self.ctx.qualified(original.value) or ""
            module, _, name = owner.rpartition(".")
            if isinstance(original.value, cst.Name) and module and module.split(".")[0] in STACK_MODULES:
                # `from huggingface_hub import HfFolder`: dropped once nothing else uses the class
                bound = original.value.value
                self.ctx.remove_import(module, name, None if bound == name else bound)
            if target.old_defaults:
                self.uncalled[original] = (qualified, target)
            return cst.Name(alias or target.name)
        self._check_removed(original, qualified)
        return updated

    def leave_Call(self, original: cst.Call, updated: cst.Call):
        """A call of a replacement whose defaults differ passes the old defaults it relied on."""
        found = self.uncalled.pop(original.func, None)
        if found is None:
            return updated
        qualified, target = found
        positional = sum(1 for arg in original.args if arg.keyword is None and not arg.star)
        if any(arg.star for arg in original.args) or (
            target.same_positions is not None and positional > target.same_positions
        ):
            self.ctx.todo(
                original,
                STACK_NAME,
                f"`{target.module}.{target.name}` replaces `{qualified}`, and this call's arguments (unpacked, or "
                "positional past the ones both take alike) cannot be checked against its other defaults",
                f"pass {_defaults_text(target)} by keyword unless the call already sets them",
            )
            return updated
        missing = [
            keyword_arg(keyword, cst.parse_expression(value))
            for keyword, position, value in target.old_defaults
            if positional <= position and find_keyword(original, keyword) is None
        ]
        return updated.with_changes(args=with_appended(list(updated.args), missing)) if missing else updated

    def leave_SimpleStatementLine(self, original: cst.SimpleStatementLine, updated: cst.SimpleStatementLine):
        """A statement that only calls a dropped function goes (its import goes where every use is such a
        statement); a renamed class used but not called here (handed to a helper) is built with the new defaults."""
        if (
            len(original.body) == 1
            and isinstance(original.body[0], cst.Expr)
            and isinstance(original.body[0].value, cst.Call)
            and self.ctx.qualified(original.body[0].value.func) in DROPPED
            and isinstance(original.body[0].value.func, cst.Name)
        ):
            return cst.RemoveFromParent()
        for node, (qualified, target) in self.uncalled.items():
            self.ctx.todo(
                node,
                STACK_NAME,
                f"`{target.module}.{target.name}` replaces `{qualified}`, and this statement hands the class on "
                f"instead of calling it: where it is built, the defaults differ",
                f"pass {_defaults_text(target)} where the optimizer is built (the old defaults)",
            )
        self.uncalled.clear()
        return updated


def _defaults_text(target: Replacement) -> str:
    return ", ".join(f"{keyword}={value}" for keyword, _, value in target.old_defaults)


HANDLER = StackNames
