"""NM228: an SFT trainer's `formatting_func` written for TRL's batched call. TRL up to 0.11 called it on a batch of
rows (`dataset.map(batched=True)`) and required a list of strings, one per row ("The `formatting_func` should
return a list of processed strings", trl 0.11.4 `sft_trainer.py`); TRL 1.x calls it on one row and appends the EOS
token to the string it returns (`AttributeError: 'list' object has no attribute 'endswith'`). Called on a batch of
that one row, the function's one string is the row's text it always produced."""

from __future__ import annotations

import libcst as cst
import libcst.matchers as m

from migrator.cst_helpers import descendants, find_keyword
from migrator.families.training.targets import SFT_TRAINER_NAMES, SFT_TRAINERS
from migrator.rules import Example, Rule, Severity
from migrator.transform import Handler

BATCHED_FORMATTING_FUNC = Rule(
    "NM228",
    Severity.INFO,
    "`SFTTrainer(formatting_func=f)` / `NeuronSFTTrainer(...)` where `f` returns a list: the batched "
    "formatting function of TRL <= 0.11, which TRL 1.x calls on one row and whose string it expects",
    "`formatting_func=f` -> `formatting_func=lambda row: f({key: [value] for key, value in row.items()})[0]`: the "
    "function as it was, called on a batch of the one row, and that row's string. The function itself is kept "
    "(other code may call it with batches).",
    examples=(
        Example(
            before="""\
from trl import SFTTrainer


def format_dolly(batch):
    texts = []
    for i in range(len(batch["instruction"])):
        texts.append(f"### Instruction\\n{batch['instruction'][i]}\\n\\n### Answer\\n{batch['response'][i]}")
    return texts


trainer = SFTTrainer(model="Qwen/Qwen3-0.6B", train_dataset=dataset, formatting_func=format_dolly)
""",
            after="""\
from trl import SFTTrainer


def format_dolly(batch):
    texts = []
    for i in range(len(batch["instruction"])):
        texts.append(f"### Instruction\\n{batch['instruction'][i]}\\n\\n### Answer\\n{batch['response'][i]}")
    return texts


trainer = SFTTrainer(model="Qwen/Qwen3-0.6B", train_dataset=dataset, formatting_func=lambda row: format_dolly({key: [value] for key, value in row.items()})[0])
""",
        ),
    ),
)
RULES = (BATCHED_FORMATTING_FUNC,)

_LISTS = (cst.List, cst.ListComp)


class BatchedFormattingFunc(Handler):
    TRIGGERS = SFT_TRAINER_NAMES
    CALLS = SFT_TRAINERS
    HINTS = frozenset({"formatting_func"})

    def leave_Call(self, original: cst.Call, updated: cst.Call):
        given = find_keyword(original, "formatting_func")
        if given is None or not isinstance(given.value, cst.Name) or not isinstance(updated, cst.Call):
            return updated
        name = given.value.value
        functions = [f for f in descendants(self.ctx.module, cst.FunctionDef) if f.name.value == name]
        if len(functions) != 1 or not _returns_lists(functions[0]):
            return updated
        row = "row" if name != "row" else "example"
        wrapped = cst.parse_expression(
            f"lambda {row}: {name}({{key: [value] for key, value in {row}.items()}})[0]"
        )
        self.ctx.report(
            given,
            BATCHED_FORMATTING_FUNC,
            f"`formatting_func={name}` -> a call of `{name}` on a batch of the one row TRL 1.x passes: `{name}` "
            "returns a list, as TRL <= 0.11's batched call required.",
            subject="formatting_func",
        )
        args = [
            arg.with_changes(value=wrapped)
            if arg.keyword is not None and arg.keyword.value == "formatting_func"
            else arg
            for arg in updated.args
        ]
        return updated.with_changes(args=args)


def _returns_lists(function: cst.FunctionDef) -> bool:
    """Every `return` of `function` (not of functions inside it) gives a list: a list display or comprehension,
    or a local name bound only to those."""
    nested = {
        id(r)
        for inner in descendants(function.body, (cst.FunctionDef, cst.Lambda))
        for r in descendants(inner, cst.Return)
    }
    returns = [r for r in descendants(function.body, cst.Return) if id(r) not in nested]
    if not returns or len(function.params.params) != 1:
        return False
    for returned in returns:
        value = returned.value
        if isinstance(value, _LISTS):
            continue
        if not isinstance(value, cst.Name):
            return False
        bound = m.Assign(targets=[m.AssignTarget(m.Name(value.value))]) | m.AnnAssign(
            target=m.Name(value.value)
        )
        values = [
            a.value for a in descendants(function.body, (cst.Assign, cst.AnnAssign)) if m.matches(a, bound)
        ]
        loops = [loop.target for loop in descendants(function.body, (cst.For, cst.CompFor))]
        rebound = any(value.value in {n.value for n in descendants(target, cst.Name)} for target in loops)
        if not values or rebound or not all(isinstance(v, _LISTS) for v in values):
            return False
    return True


HANDLER = BatchedFormattingFunc
