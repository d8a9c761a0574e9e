"""NM472, decided by the walk of `nm460_installs.py`: one plan of each `pip install` (`installs.py`) decides
every requirement of it."""

from __future__ import annotations

from migrator.rules import Rule, Severity
from migrator.shell import example
from migrator.target_stack import PINS

INSTALL_CONFLICT = Rule(
    "NM472",
    Severity.WARNING,
    "An install pins transformers / trl to versions the migrated code cannot run with (`transformers==4.52.3`), "
    "in the install of the TorchNeuron stack or in any other install of a file that installs it",
    f"Left in place with a TODO: the migrated code needs {' and '.join(PINS)}; relax the pin.",
    examples=(
        example(
            '#!/bin/bash\npip install optimum-neuron transformers==4.52.3 "trl>=1.16"\n',
            "#!/bin/bash\n"
            "# TODO(neuron-migrate): NM472 `transformers==4.52.3` left as it is: it excludes `transformers>=5.23`, which the migrated code needs\n"
            'pip install torch-neuronx peft accelerate transformers==4.52.3 "trl>=1.16" --extra-index-url https://pip.repos.neuron.amazonaws.com\n',
        ),
    ),
)
RULES = (INSTALL_CONFLICT,)
MATCHER = None  # decided in `nm460_installs.py`
