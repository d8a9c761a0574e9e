"""NM471: a `%%writefile` cell that writes a configuration file naming optimum-neuron / XLA settings gets a
finding and, where the format has `#` comments, a TODO (`flag_config`; `migrator/notebook.py` hands it each
such cell). A YAML file that a launch of the notebook passes to a script whose argument parser is known
(`torchrun run_sft.py --config sft.yaml`: TrlParser reads its keys as flags) has its top-level keys migrated as
that launch's flags would be (NM461 removed, NM462 renamed, NM222 checkpointing off, NM227 optimizer); a key the migrated script declares itself (a
parsed tensor-parallel degree) is read there and needs no review."""

from __future__ import annotations

import re

import yaml

from migrator.families.training.tp_compile import MEMORY, WHY
from migrator.families.training_args import REMOVED_OPTIMIZERS
from migrator.notebook_rules import example
from migrator.rules import Example, Finding, Rule, Severity, also_on
from migrator.shell.scripts import ScriptParser
from migrator.transform import TODO_PREFIX

WRITEFILE_CONFIG = Rule(
    "NM471",
    Severity.WARNING,
    "A `%%writefile` cell writes a configuration file that names optimum-neuron / XLA settings",
    "Left unchanged, with one TODO below the `%%writefile` line where the file's format has `#` comments (YAML, "
    "TOML, INI): review these keys by hand (the launcher-flag and environment rules say what each becomes on "
    "TorchNeuron). A YAML file a launch passes to a script whose parser is known: its keys renamed or removed as "
    "the launch's flags are (NM461, NM462, NM222, NM227), and only the keys the migrated script does not read are left "
    "for review.",
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


# A top-level key of a YAML mapping, as the flag it stands for, and the scalar value after its colon (blanks
# before it, the value, blanks and a comment after it).
_YAML_KEY = re.compile(r"^([A-Za-z_]\w*)(\s*):")
_YAML_VALUE = re.compile(r"([ \t]*)([^#\s][^#\n]*?)([ \t]*(?:#.*)?\r?\n?)$")


def flag_config(
    header: str,
    newline: str,
    target: str,
    body: str,
    number: int,
    findings: list[Finding],
    parser: ScriptParser | None,
    rules: dict[str, Rule],
) -> str | None:
    """Findings for the optimum-neuron / XLA keys a configuration cell writes, and the cell with one TODO below
    its `%%writefile` line naming them, where the file's format has `#` comments (None: the cell stays).
    `parser`: the argument parser of the script a launch passes the file to, if there is one; `rules`: the
    shell rules by code (the flag rules whose findings a key's migration makes)."""
    original, handled = body, set()
    if parser is not None and parser.table is not None and target.endswith((".yaml", ".yml")):
        body, handled = _as_flags(body, parser, number, findings, rules)
    named_keys: list[str] = []
    where: list[tuple[int, int]] = []  # (line, column) of each line naming keys
    owned = parser.own if parser is not None else frozenset()
    for line_number, line in enumerate(original.splitlines(), start=2):
        if line.lstrip().startswith("#") or line_number in handled:
            continue
        keys = list(dict.fromkeys(m[0] for m in _CONFIG_KEYS.finditer(line) if m[0] not in owned))
        if keys:
            where.append((line_number, line.find(keys[0]) + 1))
            named_keys += keys
    if not named_keys:
        return None if body == original else f"{header}{newline}{body}"
    # One decision (review the file's settings): one finding, at the first line, naming the others.
    keys = ", ".join(f"`{key}`" for key in dict.fromkeys(named_keys))
    also = tuple(line for line, _ in where[1:])
    why = f"{keys} in `{target}`, which this cell writes{also_on(also)}"
    message = f"{why}. {WRITEFILE_CONFIG.action}"
    findings.append(Finding(WRITEFILE_CONFIG, *where[0], message, False, number, why=why, also=also))
    if not target.endswith(_COMMENTED_CONFIGS) or TODO_PREFIX in body:
        return None if body == original else f"{header}{newline}{body}"
    todo = f"{TODO_PREFIX} {WRITEFILE_CONFIG.code} {keys} in this file are optimum-neuron / XLA settings: review them"
    return f"{header}{newline}{todo}\n{body}"


def _as_flags(
    body: str, parser: ScriptParser, number: int, findings: list[Finding], rules: dict[str, Rule]
) -> tuple[str, set[int]]:
    """The YAML's top-level keys renamed or removed as the launch's `--key` flags are (NM462, NM461), its
    `gradient_checkpointing: true` set to false where it gives the script a compiled tensor-parallel run (NM222),
    and the cell lines of those keys. A key whose value is a block below it is not removed."""
    lines = body.splitlines(keepends=True)
    kept, handled = [], set()
    checkpointing_off = _checkpointing_off(body, parser)
    for line_number, line in enumerate(lines, start=2):
        match = _YAML_KEY.match(line)
        action = parser.action(match.group(1)) if match else None
        value = _YAML_VALUE.match(line[match.end() :]) if match else None
        if match and match.group(1) == "gradient_checkpointing" and checkpointing_off and _on(value):
            handled.add(line_number)
            findings.append(
                Finding(
                    rules["NM222"],
                    line_number,
                    1,
                    f"`gradient_checkpointing` set to false: `{parser.script}` as migrated compiles "
                    f"(torch_compile=True) and this file gives it tensor parallelism; {WHY}. The memory cost: "
                    f"{MEMORY}.",
                    True,
                    number,
                )
            )
            kept.append(f"{line[: match.end()]}{value.group(1)}false{value.group(3)}")
            continue
        optimizer = value.group(2).strip("\"'") if match and value else None
        if (
            match
            and match.group(1) == "optim"
            and optimizer in REMOVED_OPTIMIZERS
            and "optim" not in parser.own
        ):
            handled.add(line_number)
            replacement, why = REMOVED_OPTIMIZERS[optimizer]
            message = f"`optim: {optimizer}` -> `optim: {replacement}`: {why}."
            findings.append(Finding(rules["NM227"], line_number, 1, message, True, number))
            kept.append(f"{line[: match.end()]}{value.group(1)}{replacement}{value.group(3)}")
            continue
        if (
            action is None
            or action.kind not in ("rename", "drop")
            or (action.kind == "drop" and value is None)
        ):
            kept.append(line)
            continue
        handled.add(line_number)
        key = f"`{match.group(1)}`"
        if action.kind == "drop":
            findings.append(
                Finding(rules["NM461"], line_number, 1, f"{key} removed: {action.note}.", True, number)
            )
            continue
        note = f": {action.note}" if action.note else ""
        findings.append(
            Finding(
                rules["NM462"], line_number, 1, f"{key} renamed to `{action.target}`{note}.", True, number
            )
        )
        kept.append(action.target + line[match.end(1) :])
    return "".join(kept), handled


def _checkpointing_off(body: str, parser: ScriptParser) -> bool:
    """Whether the file's `gradient_checkpointing: true` must go: it gives the migrated script a tensor-parallel
    degree and leaves compilation on (`ScriptParser.trains_compiled_tp`), which fails with checkpointing (NM222)."""
    try:
        settings = yaml.safe_load(body)
    except yaml.YAMLError:
        return False
    if not isinstance(settings, dict) or "gradient_checkpointing" in parser.own:
        return False
    degree, compiled = settings.get("tensor_parallel_size"), settings.get("torch_compile")
    return parser.trains_compiled_tp(_flag(degree), _flag(compiled))


def _flag(value: object) -> str | None:
    """A YAML value as the flag value it stands for (`true` for True)."""
    return None if value is None else str(value).lower() if isinstance(value, bool) else str(value)


def _on(value: re.Match | None) -> bool:
    return value is not None and value.group(2).strip("\"'").lower() in ("true", "yes", "on", "1")
