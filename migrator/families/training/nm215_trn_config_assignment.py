"""NM215: `trn_config = training_args.trn_config` is removed once the sharding is carried to the load."""

from __future__ import annotations

import libcst as cst
import libcst.matchers as m

from migrator.families.training.state import TrainingFile
from migrator.families.training.targets import HINTS, TRIGGERS
from migrator.rules import Example, Rule, Severity
from migrator.transform import FileContext, Handler

TRN_CONFIG_ASSIGNMENT = Rule(
    "NM215",
    Severity.INFO,
    "`trn_config = training_args.trn_config`",
    "Removed: TrainingArguments has no `trn_config`; its sharding is now `distributed_config=` on the model "
    "load (NM204).",
    examples=(
        Example(
            before="""\
from optimum.neuron import NeuronTrainingArguments
from optimum.neuron.models.training import NeuronModelForCausalLM

args = NeuronTrainingArguments(output_dir="out", tensor_parallel_size=2)
trn_config = args.trn_config
model = NeuronModelForCausalLM.from_pretrained("Qwen/Qwen3-0.6B", trn_config)
""",
            after="""\
import os
from transformers import AutoModelForCausalLM, DistributedConfig, TrainingArguments

os.environ.setdefault("HF_DEACTIVATE_ASYNC_LOAD", "1")

args = TrainingArguments(output_dir="out", torch_compile=True, save_only_model=True)
model = AutoModelForCausalLM.from_pretrained("Qwen/Qwen3-0.6B", distributed_config=DistributedConfig(tp_size=2, fsdp_size=int(os.environ.get("WORLD_SIZE", "1")) // 2))
""",
        ),
    ),
)
RULES = (TRN_CONFIG_ASSIGNMENT,)
_TRN_CONFIG_ASSIGN = m.Assign(
    targets=[m.AssignTarget(m.Name())], value=m.Attribute(attr=m.Name("trn_config"))
)


class TrnConfigAssignment(Handler):
    HINTS = HINTS
    TRIGGERS = TRIGGERS

    def __init__(self, ctx: FileContext) -> None:
        super().__init__(ctx)
        self.file = ctx.state(TrainingFile)

    def leave_SimpleStatementLine(self, original: cst.SimpleStatementLine, updated: cst.SimpleStatementLine):
        statement = original.body[0] if len(original.body) == 1 else None
        removable = (  # the attribute's name first: the matcher costs more, and every line passes here
            isinstance(statement, cst.Assign)
            and isinstance(statement.value, cst.Attribute)
            and statement.value.attr.value == "trn_config"
            and m.matches(statement, _TRN_CONFIG_ASSIGN)
        )
        return cst.RemoveFromParent() if removable and self._removable(original.body[0]) else updated

    def _removable(self, assign: cst.Assign) -> bool:
        """Removable when the arguments it reads are literal arguments whose sharding this scope already
        carries, or parsed ones whose flags the script's dataclass now carries (nm209), and the name is used only
        as the trn_config of model loads."""
        scope = self.file.scope
        source = assign.value.value
        name = assign.targets[0].target.value
        parsed = {arguments for _, arguments in self.file.parsed_loads.values()}
        if not (
            isinstance(source, cst.Name) and (source.value == scope.args_variable or source.value in parsed)
        ):
            return False
        if not self.file.only_trn_config_uses(name, scope):
            return False
        scope.trn_config_names.add(name)
        self.ctx.report(assign, TRN_CONFIG_ASSIGNMENT)
        return True


HANDLER = TrnConfigAssignment
