"""NM401, decided by the walk of `nm400_variables.py`: one look at each variable set from Python, in one table
(`variables.py`), says whether it goes (NM400) or needs a person."""

from __future__ import annotations

from migrator.rules import Example, Rule, Severity

MANUAL_VARIABLE = Rule(
    "NM401",
    Severity.WARNING,
    "`NEURON_CC_FLAGS` / `NEURON_COMPILE_CACHE_URL` set from Python",
    "Left in place with a TODO: these configured the XLA-flow compiler and cache; check the TorchNeuron "
    "environment variable reference and remove or replace them.",
    examples=(
        Example(
            before="""\
import os

os.environ["NEURON_CC_FLAGS"] = "--model-type=transformer"
""",
            after="""\
import os

# TODO(neuron-migrate): NM401 `NEURON_CC_FLAGS` holds compiler flags tuned for the XLA/NxD graph flow, and whether TorchNeuron's neuron backend reads them is not documented; remove them, or keep only flags the TorchNeuron compiler reference lists
os.environ["NEURON_CC_FLAGS"] = "--model-type=transformer"
""",
        ),
    ),
)
RULES = (MANUAL_VARIABLE,)
HANDLER = None  # decided in `nm400_variables.py`
