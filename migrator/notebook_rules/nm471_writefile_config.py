"""NM471: a `%%writefile` cell that writes a configuration file naming optimum-neuron / XLA settings gets a
finding and, where the format has `#` comments, a TODO (`flag_config`; `migrator/notebook.py` hands it each
such cell)."""

from __future__ import annotations

import re

from migrator.notebook_rules import example
from migrator.rules import Example, Finding, Rule, Severity, also_on
from migrator.transform import TODO_PREFIX

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
HOOKS = {"file_cell": "flag_config"}  # the events of `migrator/notebook.py` it takes

# What names an optimum-neuron / XLA setting in a configuration file.
_CONFIG_KEYS = re.compile(
    r"optimum[-_.]neuron|torch[-_]xla|neuronx[-_]distributed|neuron_parallel_compile|\b(?:XLA|NEURON)_[A-Z0-9_]+"
    r"|\bzero_1\b|\btensor_parallel_size\b|\bpipeline_parallel_size\b|\basync_save\b"
)


# Files whose format reads `#` lines as comments: the TODO of a configuration cell can go into them.
_COMMENTED_CONFIGS = (".yaml", ".yml", ".toml", ".cfg", ".ini", ".conf", ".env", ".properties")


def flag_config(
    header: str, newline: str, target: str, body: str, number: int, findings: list[Finding]
) -> str | None:
    """Findings for the optimum-neuron / XLA keys a configuration cell writes, and the cell with one TODO below
    its `%%writefile` line naming them, where the file's format has `#` comments (None: the cell stays)."""
    named_keys: list[str] = []
    where: list[tuple[int, int]] = []  # (line, column) of each line naming keys
    for line_number, line in enumerate(body.splitlines(), start=2):
        if line.lstrip().startswith("#"):
            continue
        keys = list(dict.fromkeys(m[0] for m in _CONFIG_KEYS.finditer(line)))
        if keys:
            where.append((line_number, line.find(keys[0]) + 1))
            named_keys += keys
    if not named_keys:
        return None
    # One decision (review the file's settings): one finding, at the first line, naming the others.
    keys = ", ".join(f"`{key}`" for key in dict.fromkeys(named_keys))
    also = tuple(line for line, _ in where[1:])
    why = f"{keys} in `{target}`, which this cell writes{also_on(also)}"
    message = f"{why}. {WRITEFILE_CONFIG.action}"
    findings.append(Finding(WRITEFILE_CONFIG, *where[0], message, False, number, why=why, also=also))
    if not target.endswith(_COMMENTED_CONFIGS) or TODO_PREFIX in body:
        return None
    todo = f"{TODO_PREFIX} {WRITEFILE_CONFIG.code} {keys} in this file are optimum-neuron / XLA settings: review them"
    return f"{header}{newline}{todo}\n{body}"
