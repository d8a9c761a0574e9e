"""NM901: an imported optimum-neuron / XLA symbol that no rule handles gets a TODO, so that a file is never
reported clean while legacy code remains."""

from __future__ import annotations

import libcst as cst

from migrator.cst_helpers import dotted_name
from migrator.rules import Example, Rule, Severity
from migrator.transform import SOURCE_MODULES, Handler

UNKNOWN_OPTIMUM_SYMBOL = Rule(
    "NM901",
    Severity.ERROR,
    "An optimum-neuron symbol that has no TorchNeuron equivalent the codemod can write",
    "Left in place with a TODO on each import (one finding for a block of imports from one package, naming the "
    'other lines); replace it by hand with the plain Transformers/TRL/PEFT/Diffusers API on device "neuron" (see the '
    "migration guide).",
    examples=(
        Example(
            before="""\
from optimum.neuron import NeuronModelForSpeechToText
from optimum.neuron.utils import some_private_helper

some_private_helper()
""",
            after="""\
# TODO(neuron-migrate): NM901 the `optimum.neuron` names `NeuronModelForSpeechToText`, `some_private_helper` have no rewrite rule; replace them with the plain Transformers/TRL/PEFT/Diffusers API on device "neuron" by hand.
from optimum.neuron import NeuronModelForSpeechToText
# TODO(neuron-migrate): NM901 the `optimum.neuron` names `NeuronModelForSpeechToText`, `some_private_helper` have no rewrite rule; replace them with the plain Transformers/TRL/PEFT/Diffusers API on device "neuron" by hand.
from optimum.neuron.utils import some_private_helper

# TODO(neuron-migrate): NM501 `some_private_helper` (`optimum.neuron.utils.some_private_helper`) comes from an import that carries the NM901 TODO; the same decision: rewrite this statement with it
some_private_helper()
""",
        ),
    ),
)
RULES = (UNKNOWN_OPTIMUM_SYMBOL,)


class UnknownSymbol(Handler):
    HINTS = frozenset()  # imports only, which the walk always visits

    def __init__(self, ctx) -> None:
        super().__init__(ctx)
        # Imports of a block an earlier import opened -> the block's TODO (why, action, subject), theirs too.
        self.grouped: dict[cst.SimpleStatementLine, tuple[str, str, str]] = {}

    def visit_ImportFrom(self, node: cst.ImportFrom) -> None:
        """The unknown names of a run of imports from one package (an import block) are one decision: the same
        TODO above each import of the block, one finding (on the first) that names the other lines."""
        line = self.ctx.line
        if line is None:
            return
        if line in self.grouped:
            self.ctx.todo(
                node, UNKNOWN_OPTIMUM_SYMBOL, *self.grouped[line][:2], subject=self.grouped[line][2]
            )
            return
        unknown = self._unknown(node)
        if not unknown:
            return
        package = _package(unknown[0][1])
        block = [line]
        following = self.ctx.next_statement.get(line)
        while isinstance(following, cst.SimpleStatementLine) and len(following.body) == 1:
            names = self._unknown(following.body[0])
            if not names or _package(names[0][1]) != package:
                break
            unknown += names
            block.append(following)
            following = self.ctx.next_statement.get(following)
        qualified = [name for _, name in unknown]
        if len(qualified) == 1:
            why = f"`{qualified[0]}` has no rewrite rule"
        else:
            names = ", ".join(f"`{name.rpartition('.')[2]}`" for name in qualified)
            why = f"the `{package}` names {names} have no rewrite rule"
        action = (
            f"replace {'it' if len(qualified) == 1 else 'them'} with the plain Transformers/TRL/PEFT/Diffusers API "
            'on device "neuron" by hand.'
        )
        subject = qualified[0] if len(qualified) == 1 else package
        self.ctx.todo(unknown[0][0], UNKNOWN_OPTIMUM_SYMBOL, why, action, subject=subject)
        self.grouped.update(dict.fromkeys(block[1:], (why, action, subject)))

    def _unknown(self, node: cst.BaseSmallStatement) -> list[tuple[cst.ImportAlias, str]]:
        """The names an import takes from a source module that no rule handles (alias, qualified name)."""
        if not isinstance(node, cst.ImportFrom) or node.relative or node.module is None:
            return []
        if isinstance(node.names, cst.ImportStar):
            return []
        module = dotted_name(node.module)
        if not module.startswith(SOURCE_MODULES):
            return []
        found = [(alias, f"{module}.{alias.name.value}") for alias in node.names]
        return [(alias, qualified) for alias, qualified in found if not self._claimed(qualified)]

    def _claimed(self, qualified: str) -> bool:
        # A rule may claim a whole module (e.g. "torch_xla.core.xla_model") or one symbol.
        return any(qualified == name or qualified.startswith(name + ".") for name in self.ctx.claimed)


def _package(qualified: str) -> str:
    """The package a name comes from, as a person names it: `optimum.neuron`, `torch_xla`."""
    parts = qualified.split(".")
    return ".".join(parts[:2]) if parts[0] == "optimum" else parts[0]


HANDLER = UnknownSymbol
