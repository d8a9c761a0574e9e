"""The rule registry: every rule module, in the order its handler runs at each node of the walk.

Order matters only where two rules touch the same node: XLA idioms first (device, step, collectives),
then environment, training, inference (a later rule gets what an earlier one returned). Within a family,
its `state` tracker comes first, so that the rules read what it tracked; otherwise rules go by code, except
where a comment says why. A new rule is one module (see `docs/writing-rules.md`) named once in these lists
(`make new-rule` adds it).
"""

from __future__ import annotations

from importlib import import_module
from types import ModuleType

from migrator import notebook, risks
from migrator.rules import Rule
from migrator.transform import Handler


def _modules(package: str, *names: str) -> tuple[ModuleType, ...]:
    return tuple(import_module(f"{package}.{name}") for name in names)


# Rule modules of the Python families (`migrator/families/<family>/<module>`), in dispatch order. Each has
# `RULES` (its rules, none for a family's `state` tracker) and `HANDLER` (its matcher, a `transform.Handler`).
PYTHON_RULE_MODULES: tuple[ModuleType, ...] = _modules(
    "migrator.families",
    "manual.nm901_unknown_symbol",  # first: its TODO goes above an import before any other rule's
    "xla.state",
    "xla.nm301_sync_and_metrics",
    "xla.nm302_device",
    "xla.nm303_runtime",
    "xla.nm304_optimizer_step",
    "xla.nm305_master_print",
    "xla.nm306_save",
    "xla.nm307_device_loader",
    "xla.nm308_spawn",
    "xla.nm309_process_group",
    "xla.nm310_autocast",
    "xla.nm311_compile_backend",
    "xla.nm313_checkpoint",
    "xla.nm314_manual",
    "xla.nm319_data_parallel",
    "xla.nm320_device_string",
    "xla.nm321_inf1",
    "xla.nm322_traced_serving",
    "xla.nm323_traced_load",
    "xla.nm324_import_probe",
    "xla.nm326_unused_import",
    "xla.nm327_profiler_annotations",
    "environment.state",
    "environment.nm400_variables",
    "environment.nm402_precompile",
    "environment.nm404_async_load",
    "environment.nm405_compile",
    "training.state",
    "training.nm201_renames",
    # Statement removals before nm202 inserts statements ahead of a line; nm206 adds to nm202's calls.
    "training.nm212_consolidation",
    "training.nm215_trn_config_assignment",
    "training.nm202_arguments",
    "training.nm206_added_arguments",
    "training.nm217_neuron_config",
    "training.nm218_bf16",
    "training.nm219_stack_names",
    "training.nm220_cpu_argument",
    "training.nm213_accelerator",
    "training.nm209_model_load",
    "training.nm211_lazy_load",
    "training.nm221_stack_calls",
    "inference.state",  # before nm110: it records the preprocessors an assignment creates
    "inference.nm108_neuron_config_pair",
    "inference.nm115_manual_symbol",
    "inference.nm110_inputs_to_device",
    "inference.nm101_causal_lm",
    "inference.nm112_traced_model",
    "inference.nm113_diffusion",
    "inference.nm114_pipeline",
    "inference.loads",
    "leftovers.nm503_command_string",
    "leftovers.nm504_core_count",
    # Found by the scan of each output after the walk (`families/leftovers/marking.py`), not in it.
    "leftovers.nm501_legacy_reference",
    "leftovers.nm502_platform",
)
PYTHON_HANDLERS: tuple[type[Handler], ...] = tuple(
    module.HANDLER for module in PYTHON_RULE_MODULES if module.HANDLER is not None
)


# Rule modules of the shell family (`migrator/shell/nm*.py`). Each has `RULES` and `MATCHER`, a mixin of
# `shell.rewrite.ShellRewriter`: one walk of each launcher on tree-sitter's tree decides them all (in the
# order the walk reaches commands, not this one), on the edit list of `shell/edits.py`.
SHELL_RULE_MODULES: tuple[ModuleType, ...] = _modules(
    "migrator.shell",
    "nm450_precompile",
    "nm452_optimum_cli",
    "nm456_variables",
    "nm460_installs",
    "nm461_flags",
    "nm465_async_load",
)
SHELL_RULES: tuple[Rule, ...] = tuple(rule for module in SHELL_RULE_MODULES for rule in module.RULES)


# Notebook-level rules (a cell as a whole); `migrator/notebook.py` decides them.
NOTEBOOK_RULES: tuple[Rule, ...] = (notebook.CELL_ERROR, notebook.WRITEFILE_CONFIG)


def _table() -> tuple[dict[str, Rule], dict[str, str]]:
    rules: dict[str, Rule] = {}
    homes: dict[str, str] = {}
    modules = (*PYTHON_RULE_MODULES, *SHELL_RULE_MODULES)
    homed = [(rule, module.__name__) for module in modules for rule in module.RULES]
    homed += [(rule, notebook.__name__) for rule in NOTEBOOK_RULES] + [
        (rule, module.__name__) for module in risks.RISK_MODULES for rule in module.RULES
    ]
    for rule, home in homed:
        if rules.setdefault(rule.code, rule) is not rule:
            raise ValueError(f"rule {rule.code} defined twice")
        homes[rule.code] = home
    return dict(sorted(rules.items())), homes


RULES, RULE_MODULES = (
    _table()
)  # code -> rule; code -> the module that defines it (`migrator.shell.nm461_flags`)
