"""NM471: a `%%writefile` cell that writes a configuration file naming optimum-neuron / XLA settings."""

from __future__ import annotations

from migrator.notebook_rules import example
from migrator.rules import Example, Rule, Severity

WRITEFILE_CONFIG = Rule(
    "NM471",
    Severity.WARNING,
    "A `%%writefile` cell writes a configuration file that names optimum-neuron / XLA settings",
    "Left unchanged, with one TODO below the `%%writefile` line where the file's format has `#` comments (YAML, "
    "TOML, INI): review these keys by hand (the launcher-flag and environment rules say what each becomes on "
    "TorchNeuron).",
    examples=(
        Example(
            example("%%writefile config.yaml\ntraining:\n  zero_1: true\n  tensor_parallel_size: 8").before,
            example(
                "%%writefile config.yaml\n# TODO(neuron-migrate): NM471 `zero_1`, `tensor_parallel_size` in this "
                "file are optimum-neuron / XLA settings: review them\ntraining:\n  zero_1: true\n"
                "  tensor_parallel_size: 8"
            ).before,
            kind="notebook",
        ),
    ),
)
RULES = (WRITEFILE_CONFIG,)
