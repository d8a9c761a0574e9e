"""NM455, decided by the walk of `nm452_optimum_cli.py`: one look at each `optimum-cli` command decides which
of its subcommands it is."""

from __future__ import annotations

from migrator.rules import Rule, Severity
from migrator.shell import example

OPTIMUM_CLI_MANUAL = Rule(
    "NM455",
    Severity.ERROR,
    "Another `optimum-cli neuron ...` command (`serve`, ...)",
    "Left in place with a TODO: serve with vLLM on Neuron (`vllm serve`) or run the model with Transformers "
    'on device "neuron".',
    examples=(
        example(
            "#!/bin/bash\noptimum-cli neuron serve --model Qwen/Qwen3-0.6B\n",
            "#!/bin/bash\n"
            '# TODO(neuron-migrate): NM455 `optimum-cli neuron serve` has no TorchNeuron equivalent; serve with vLLM on Neuron (`vllm serve`) or run the model with Transformers on device "neuron".\n'
            "optimum-cli neuron serve --model Qwen/Qwen3-0.6B\n",
        ),
    ),
)
RULES = (OPTIMUM_CLI_MANUAL,)
MATCHER = None  # decided in `nm452_optimum_cli.py`
