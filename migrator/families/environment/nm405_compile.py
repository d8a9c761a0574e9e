"""NM405 (and NM406, NM407, each defined in its own module): `torch.compile` in a migrated file compiles
static shapes (`dynamic=False`) and loses the modes the neuron backend ignores."""

from __future__ import annotations

import libcst as cst
import libcst.matchers as m

from migrator.cst_helpers import keyword_arg, source_code, string_value, tidy_args, unpacked_mapping
from migrator.families.environment.state import HINTS, EnvironmentFile
from migrator.rules import Example, Rule, Severity
from migrator.transform import Handler

COMPILE_DYNAMIC = Rule(
    "NM405",
    Severity.INFO,
    "`torch.compile(...)` without `dynamic=` (automatic dynamic shapes)",
    "Added `dynamic=False`: the neuron backend compiles static shapes only; pad inputs to fixed sizes.",
    examples=(
        Example(
            before="""\
import torch_xla.core.xla_model as xm
import torch

compiled = torch.compile(model)
""",
            after="""\
import torch

compiled = torch.compile(model, dynamic=False)
""",
        ),
    ),
)
RULES = (COMPILE_DYNAMIC,)
IGNORED_COMPILE_MODES = frozenset({"reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs"})
_FALSE = cst.Name("False")


class StaticCompile(Handler):
    CALLS = frozenset({"torch.compile"})
    HINTS = HINTS

    def __init__(self, ctx) -> None:
        super().__init__(ctx)
        self.file = ctx.state(EnvironmentFile)

    def leave_Call(self, original: cst.Call, updated: cst.Call):
        if self.ctx.qualified(original.func) != "torch.compile" or not self.file.legacy():
            return updated
        args = []
        has_dynamic = False
        for arg in updated.args:
            keyword = arg.keyword.value if arg.keyword else None
            if keyword == "mode" and string_value(arg.value) in IGNORED_COMPILE_MODES:
                self.ctx.report(original, "NM407")
                continue
            if keyword == "dynamic":
                has_dynamic = True
                if m.matches(arg.value, m.Name("True")):
                    self.ctx.report(original, "NM406")
                    arg = arg.with_changes(value=_FALSE)
            args.append(arg)
        if not has_dynamic and self._unpacked_lacks_dynamic(original):
            self.ctx.report(original, COMPILE_DYNAMIC)
            if args:
                args[-1] = args[-1].with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
            args.append(keyword_arg("dynamic", _FALSE))
        if args == list(updated.args):
            return updated
        return updated.with_changes(args=tidy_args(args))

    def _unpacked_lacks_dynamic(self, call: cst.Call) -> bool:
        """Whether `dynamic=False` can be added next to the call's `**` arguments (a keyword given twice raises
        TypeError): they provably lack it. Where they set it to anything but False, or cannot be read, a TODO."""
        if not any(arg.star == "**" for arg in call.args):
            return True
        unpacked = unpacked_mapping(call, self.ctx.module)
        if unpacked is not None and "dynamic" not in unpacked:
            return True
        if unpacked is not None and m.matches(unpacked["dynamic"], _FALSE):
            return False
        spread = ", ".join(f"**{source_code(arg.value)}" for arg in call.args if arg.star == "**")
        sets = (
            "sets dynamic to something else than False"
            if unpacked is not None
            else "may already pass dynamic"
        )
        self.ctx.todo(
            call,
            COMPILE_DYNAMIC,
            f"the neuron backend compiles static shapes only, and `{spread}` {sets} (a keyword given twice raises "
            "TypeError)",
            "make what it unpacks hold dynamic=False, or pass dynamic=False here if it has no dynamic",
            subject="dynamic",
        )
        return False

    def leave_Decorator(self, original: cst.Decorator, updated: cst.Decorator):
        if self.ctx.qualified(original.decorator) == "torch.compile" and self.file.legacy():
            self.ctx.report(original.decorator, COMPILE_DYNAMIC)
            call = cst.Call(func=updated.decorator, args=[keyword_arg("dynamic", _FALSE)])
            return updated.with_changes(decorator=call)
        return updated


HANDLER = StaticCompile
