"""NM324: a torch_xla import in a `try` whose `except ImportError` runs a fallback (GPU, CPU) probed for
Trainium; `import torch_neuronx` takes over the probe, so the fallback still runs where TorchNeuron is absent."""

from __future__ import annotations

import libcst as cst

from migrator.cst_helpers import dotted_name
from migrator.families.xla.state import HINTS
from migrator.rules import Example, Rule, Severity
from migrator.transform import Handler

IMPORT_PROBE = Rule(
    "NM324",
    Severity.INFO,
    "A torch_xla import in a `try` whose `except ImportError` falls back to another device",
    "`import torch_neuronx` added above it: once the torch_xla import goes, it is what raises ImportError "
    "where TorchNeuron is not installed, so the fallback still runs there.",
    examples=(
        Example(
            before="""\
import torch

try:
    import torch_xla.core.xla_model as xm

    device = xm.xla_device()
except ImportError:
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
""",
            after="""\
import torch

try:
    import torch_neuronx

    device = torch.device("neuron")
except ImportError:
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
""",
        ),
    ),
)
RULES = (IMPORT_PROBE,)

# What an `except` clause names when a failed import lands in it (a bare `except:` catches it too).
_CATCHES_IMPORT_ERROR = frozenset({"ImportError", "ModuleNotFoundError", "Exception", "BaseException"})
_PROBE = "torch_neuronx"


class ImportProbe(Handler):
    TRIGGERS = frozenset({"torch_xla"})
    HINTS = HINTS

    def leave_Try(self, original: cst.Try, updated: cst.Try):
        if not any(_falls_back(handler) for handler in original.handlers):
            return updated
        body = list(updated.body.body)
        if any(_imported_module(statement, _PROBE) for statement in body):
            return updated
        index = next(
            (i for i, statement in enumerate(body) if _imported_module(statement, "torch_xla")), None
        )
        if index is None:
            return updated
        statement = body[index]
        self.ctx.report(original.body.body[index], IMPORT_PROBE)
        probe = cst.parse_statement(f"import {_PROBE}").with_changes(leading_lines=statement.leading_lines)
        body[index : index + 1] = [probe, statement.with_changes(leading_lines=[])]
        return updated.with_changes(body=updated.body.with_changes(body=body))


def _falls_back(handler: cst.ExceptHandler) -> bool:
    """An `except` that catches a failed import and then does something (not only `pass` or `...`)."""
    caught = handler.type
    names = [element.value for element in caught.elements] if isinstance(caught, cst.Tuple) else [caught]
    if caught is not None and not any(dotted_name(name) in _CATCHES_IMPORT_ERROR for name in names):
        return False
    body = handler.body
    smalls = (
        list(body.body)
        if isinstance(body, cst.SimpleStatementSuite)
        else [
            small
            for statement in body.body
            for small in (statement.body if isinstance(statement, cst.SimpleStatementLine) else [statement])
        ]
    )
    return not all(
        isinstance(small, cst.Pass) or (isinstance(small, cst.Expr) and isinstance(small.value, cst.Ellipsis))
        for small in smalls
    )


def _imported_module(statement: cst.BaseStatement, top: str) -> bool:
    """Whether the statement is an import from the package `top` (`import top.x as y`, `from top.x import`)."""
    if not isinstance(statement, cst.SimpleStatementLine):
        return False
    for small in statement.body:
        if isinstance(small, cst.Import):
            modules = [dotted_name(alias.name) for alias in small.names]
        elif isinstance(small, cst.ImportFrom) and not small.relative and small.module is not None:
            modules = [dotted_name(small.module)]
        else:
            continue
        if any(module == top or module.startswith(top + ".") for module in modules if module):
            return True
    return False


HANDLER = ImportProbe
