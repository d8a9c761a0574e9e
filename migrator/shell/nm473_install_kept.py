"""NM473, decided by the walk of `nm460_installs.py`: one plan of each `pip install` (`installs.py`) decides
every requirement of it."""

from __future__ import annotations

from migrator.rules import Rule, Severity
from migrator.shell import example

INSTALL_KEPT = Rule(
    "NM473",
    Severity.WARNING,
    "An optimum-neuron / XLA package in an install whose code still imports it once migrated (the same notebook "
    "or the scripts it writes; for a requirements file or a shell script, the Python files and notebooks of its "
    "folder and subfolders), whose extra (`optimum-neuron[vllm]`) has no TorchNeuron counterpart, or in a "
    "requirements file that pins hashes (pip's hash-checking mode)",
    "Left in place with a TODO: uninstalling it would break the code that still uses it; finish that code's "
    "migration first (or install what the extra stood for), then remove it.",
    examples=(
        example(
            '#!/bin/bash\npip install "optimum-neuron[vllm]" torch-xla\n',
            "#!/bin/bash\n"
            "# TODO(neuron-migrate): NM473 `optimum-neuron[vllm]` left as it is: its `[vllm]` extra has no TorchNeuron counterpart the codemod can name (serving moves to vLLM Neuron: install it as its documentation says)\n"
            'pip install "optimum-neuron[vllm]" torch-neuronx "transformers>=5.23" "trl>=1.16" peft accelerate --extra-index-url https://pip.repos.neuron.amazonaws.com\n',
        ),
    ),
)
RULES = (INSTALL_KEPT,)
MATCHER = None  # decided in `nm460_installs.py`
