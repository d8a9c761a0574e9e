"""NM313: torch_xla's activation checkpointing becomes torch's (non-reentrant)."""

from __future__ import annotations

import libcst as cst

from migrator.cst_helpers import find_keyword, keyword_arg, source_code, unpacked_mapping
from migrator.families.xla.names import XLA_CHECKPOINT
from migrator.families.xla.state import HINTS
from migrator.rules import Example, Rule, Severity
from migrator.transform import Handler

CHECKPOINT = Rule(
    "NM313",
    Severity.INFO,
    "`torch_xla.utils.checkpoint.checkpoint`",
    "Rewritten to `torch.utils.checkpoint.checkpoint(..., use_reentrant=False)`.",
    examples=(
        Example(
            before="""\
from torch_xla.utils.checkpoint import checkpoint

hidden = checkpoint(block, hidden)
""",
            after="""\
import torch.utils.checkpoint

hidden = torch.utils.checkpoint.checkpoint(block, hidden, use_reentrant=False)
""",
        ),
    ),
)
RULES = (CHECKPOINT,)


class Checkpoint(Handler):
    CALLS = frozenset({XLA_CHECKPOINT})
    HINTS = HINTS

    def leave_Call(self, original: cst.Call, updated: cst.Call):
        if self.ctx.qualified(original.func) != XLA_CHECKPOINT:
            return updated
        self.ctx.report(original, CHECKPOINT)
        self.ctx.add_import("torch.utils.checkpoint")
        args = list(updated.args)
        unpacked = unpacked_mapping(original, self.ctx.module) if any(a.star == "**" for a in args) else {}
        if unpacked is None:  # its `**` may pass use_reentrant already (given twice, TypeError)
            spread = ", ".join(f"**{source_code(arg.value)}" for arg in original.args if arg.star == "**")
            self.ctx.todo(
                original,
                CHECKPOINT,
                f"torch's checkpoint is asked for use_reentrant=False, and `{spread}` may already pass "
                "use_reentrant (a keyword given twice raises TypeError)",
                "make what it unpacks hold use_reentrant=False, or pass use_reentrant=False here if it has none",
            )
        elif find_keyword(updated, "use_reentrant") is None and "use_reentrant" not in unpacked:
            last = args[-1].with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
            args = [*args[:-1], last, keyword_arg("use_reentrant", cst.Name("False"))]
        return updated.with_changes(func=cst.parse_expression("torch.utils.checkpoint.checkpoint"), args=args)


HANDLER = Checkpoint
