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
    "Left in place with a TODO; replace it by hand with the plain Transformers/TRL/PEFT/Diffusers API on "
    'device "neuron" (see the migration guide).',
    examples=(
        Example(
            before="""\
from optimum.neuron import NeuronModelForSpeechToText
from optimum.neuron.utils import some_private_helper

some_private_helper()
""",
            after="""\
# TODO(neuron-migrate): NM901 `optimum.neuron.NeuronModelForSpeechToText` has no rewrite rule; replace it with the plain Transformers/TRL/PEFT/Diffusers API on device "neuron" by hand.
from optimum.neuron import NeuronModelForSpeechToText
# TODO(neuron-migrate): NM901 `optimum.neuron.utils.some_private_helper` has no rewrite rule; replace it with the plain Transformers/TRL/PEFT/Diffusers API on device "neuron" by hand.
from optimum.neuron.utils import some_private_helper

some_private_helper()
""",
        ),
    ),
)
RULES = (UNKNOWN_OPTIMUM_SYMBOL,)


class UnknownSymbol(Handler):
    HINTS = frozenset()  # imports only, which the walk always visits

    def visit_ImportFrom(self, node: cst.ImportFrom) -> None:
        if node.relative or node.module is None or isinstance(node.names, cst.ImportStar):
            return
        module = dotted_name(node.module)
        if not module.startswith(SOURCE_MODULES):
            return
        for alias in node.names:
            qualified = f"{module}.{alias.name.value}"
            if not self._claimed(qualified):
                self.ctx.todo(
                    alias,
                    UNKNOWN_OPTIMUM_SYMBOL,
                    f"`{qualified}` has no rewrite rule",
                    'replace it with the plain Transformers/TRL/PEFT/Diffusers API on device "neuron" by hand.',
                    subject=qualified,
                )

    def _claimed(self, qualified: str) -> bool:
        # A rule may claim a whole module (e.g. "torch_xla.core.xla_model") or one symbol.
        return any(qualified == name or qualified.startswith(name + ".") for name in self.ctx.claimed)


HANDLER = UnknownSymbol
