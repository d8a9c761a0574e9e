"""NM326: a torch_xla import that nothing in the file uses is removed, and says so (every change to a file
has a finding: the imports the other rules' rewrites leave unused are theirs to report)."""

from __future__ import annotations

import libcst as cst

from migrator.cst_helpers import dotted_name
from migrator.families.xla.state import HINTS
from migrator.imports import used_names
from migrator.rules import Example, Rule, Severity
from migrator.transform import Handler

UNUSED_IMPORT = Rule(
    "NM326",
    Severity.INFO,
    "A torch_xla import that nothing in the file uses",
    "Removed: torch_xla is not installed with TorchNeuron and nothing in the file uses the import (one made for "
    'its side effect, as `torch_xla.distributed.xla_backend` registering the "xla" process-group backend, has '
    "no effect to keep there).",
    examples=(
        Example(
            before="""\
import torch
import torch_xla

print(torch.ones(2))
""",
            after="""\
import torch

print(torch.ones(2))
""",
        ),
    ),
)
RULES = (UNUSED_IMPORT,)


class UnusedImport(Handler):
    TRIGGERS = frozenset({"torch_xla"})
    HINTS = HINTS

    def __init__(self, ctx) -> None:
        super().__init__(ctx)
        self._used: set[str] | None = None

    def visit_Import(self, node: cst.Import) -> None:
        for alias in node.names:
            module = dotted_name(alias.name)
            bound = alias.asname.name.value if alias.asname else module.split(".")[0]
            self._report_if_unused(alias, module, bound)

    def visit_ImportFrom(self, node: cst.ImportFrom) -> None:
        if node.relative or node.module is None or isinstance(node.names, cst.ImportStar):
            return
        module = dotted_name(node.module)
        for alias in node.names:
            bound = alias.asname.name.value if alias.asname else dotted_name(alias.name)
            self._report_if_unused(alias, module, bound)

    def _report_if_unused(self, alias: cst.ImportAlias, module: str, bound: str) -> None:
        if not (module == "torch_xla" or module.startswith("torch_xla.")):
            return
        if self._used is None:
            self._used = used_names(self.ctx.code, self.ctx.tree)
        if bound not in self._used:
            self.ctx.report(alias, UNUSED_IMPORT, subject=module)


HANDLER = UnusedImport
