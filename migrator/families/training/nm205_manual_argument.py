"""NM205, decided by the walk of `nm202_arguments.py`: one table (`training_args.py`) decides each keyword of
a training-arguments call: renamed, dropped, moved or left."""

from __future__ import annotations

from migrator.rules import Example, Rule, Severity

MANUAL_ARGUMENT = Rule(
    "NM205",
    Severity.ERROR,
    "A training argument with no faithful rewrite (`pipeline_parallel_size`, `mp_plugin`, ...)",
    "The call is left as it is with a TODO saying what to do; run neuron-migrate again afterwards.",
    examples=(
        Example(
            before="""\
from optimum.neuron import NeuronTrainingArguments

args = NeuronTrainingArguments(output_dir="out", pipeline_parallel_size=4)
""",
            after="""\
# TODO(neuron-migrate): NM501 `optimum.neuron` stays imported only for line 5 (NM205), under its own TODO: `optimum.neuron` is optimum-neuron, which TorchNeuron replaces; remove this import once that statement is rewritten
from optimum.neuron import NeuronTrainingArguments

# TODO(neuron-migrate): NM205 `pipeline_parallel_size`: pipeline parallelism of HF models is not documented on TorchNeuron and DistributedConfig(pp_size=...) cannot be combined with FSDP; remove the pipeline stages and shard with DistributedConfig(tp_size=..., fsdp_size=...) instead; until then the call stays as it was (`NeuronTrainingArguments`): run neuron-migrate again afterwards
args = NeuronTrainingArguments(output_dir="out", pipeline_parallel_size=4)
""",
        ),
    ),
)
RULES = (MANUAL_ARGUMENT,)
HANDLER = None  # decided in `nm202_arguments.py`
