"""The rule registry: every rule module, in the order its handler runs at each node of the walk.

Order matters only where two rules touch the same node: XLA idioms first (device, step, collectives),
then environment, training, inference (a later rule gets what an earlier one returned). Within a family,
its `state` tracker comes first, so that the rules read what it tracked; otherwise rules go by code, except
where a comment says why. A new rule is one module (see `docs/writing-rules.md`) added to this list.
"""

from __future__ import annotations

from types import ModuleType

from migrator import notebook, risks
from migrator.families.environment import (
    nm400_variables,
    nm402_precompile,
    nm404_async_load,
    nm405_compile,
)
from migrator.families.environment import state as environment_state
from migrator.families.inference import (
    loads,
    nm101_causal_lm,
    nm108_neuron_config_pair,
    nm110_inputs_to_device,
    nm112_traced_model,
    nm113_diffusion,
    nm114_pipeline,
    nm115_manual_symbol,
)
from migrator.families.inference import state as inference_state
from migrator.families.leftovers import (
    nm501_legacy_reference,
    nm502_platform,
    nm503_command_string,
    nm504_core_count,
)
from migrator.families.manual import nm901_unknown_symbol
from migrator.families.training import (
    nm201_renames,
    nm202_arguments,
    nm206_added_arguments,
    nm209_model_load,
    nm211_lazy_load,
    nm212_consolidation,
    nm213_accelerator,
    nm215_trn_config_assignment,
    nm217_neuron_config,
    nm218_bf16,
    nm219_stack_names,
    nm220_cpu_argument,
)
from migrator.families.training import state as training_state
from migrator.families.xla import (
    nm301_sync_and_metrics,
    nm302_device,
    nm303_runtime,
    nm304_optimizer_step,
    nm305_master_print,
    nm306_save,
    nm307_device_loader,
    nm308_spawn,
    nm309_process_group,
    nm310_autocast,
    nm311_compile_backend,
    nm313_checkpoint,
    nm314_manual,
    nm319_data_parallel,
    nm320_device_string,
    nm321_inf1,
    nm322_traced_serving,
    nm323_traced_load,
    nm324_import_probe,
    nm326_unused_import,
)
from migrator.families.xla import state as xla_state
from migrator.rules import Rule
from migrator.shell import (
    nm450_precompile,
    nm452_optimum_cli,
    nm456_variables,
    nm460_installs,
    nm461_flags,
    nm465_async_load,
)
from migrator.transform import Handler

# Rule modules of the Python families, in dispatch order. Each has `RULES` (its rules, none for a
# family's `state` tracker) and `HANDLER` (its matcher, a `transform.Handler`).
PYTHON_RULE_MODULES: tuple[ModuleType, ...] = (
    nm901_unknown_symbol,  # first: its TODO goes above an import before any other rule's
    xla_state,
    nm301_sync_and_metrics,
    nm302_device,
    nm303_runtime,
    nm304_optimizer_step,
    nm305_master_print,
    nm306_save,
    nm307_device_loader,
    nm308_spawn,
    nm309_process_group,
    nm310_autocast,
    nm311_compile_backend,
    nm313_checkpoint,
    nm314_manual,
    nm319_data_parallel,
    nm320_device_string,
    nm321_inf1,
    nm322_traced_serving,
    nm323_traced_load,
    nm324_import_probe,
    nm326_unused_import,
    environment_state,
    nm400_variables,
    nm402_precompile,
    nm404_async_load,
    nm405_compile,
    training_state,
    nm201_renames,
    # Statement removals before nm202 inserts statements ahead of a line; nm206 adds to nm202's calls.
    nm212_consolidation,
    nm215_trn_config_assignment,
    nm202_arguments,
    nm206_added_arguments,
    nm217_neuron_config,
    nm218_bf16,
    nm219_stack_names,
    nm220_cpu_argument,
    nm213_accelerator,
    nm209_model_load,
    nm211_lazy_load,
    inference_state,  # before nm110: it records the preprocessors an assignment creates
    nm108_neuron_config_pair,
    nm115_manual_symbol,
    nm110_inputs_to_device,
    nm101_causal_lm,
    nm112_traced_model,
    nm113_diffusion,
    nm114_pipeline,
    loads,
    nm503_command_string,
    nm504_core_count,
    # Found by the scan of each output after the walk (`families/leftovers/scan.py`), not in it.
    nm501_legacy_reference,
    nm502_platform,
)
PYTHON_HANDLERS: tuple[type[Handler], ...] = tuple(
    module.HANDLER for module in PYTHON_RULE_MODULES if module.HANDLER is not None
)


# Rule modules of the shell family (`migrator/shell/nm*.py`). Each has `RULES` and `MATCHER`, a mixin of
# `shell.rewrite.ShellRewriter`: one walk of each launcher on tree-sitter's tree decides them all (in the
# order the walk reaches commands, not this one), on the edit list of `shell/edits.py`.
SHELL_RULE_MODULES: tuple[ModuleType, ...] = (
    nm450_precompile,
    nm452_optimum_cli,
    nm456_variables,
    nm460_installs,
    nm461_flags,
    nm465_async_load,
)
SHELL_RULES: tuple[Rule, ...] = tuple(rule for module in SHELL_RULE_MODULES for rule in module.RULES)


# Notebook-level rules (a cell as a whole); `migrator/notebook.py` decides them.
NOTEBOOK_RULES: tuple[Rule, ...] = (notebook.CELL_ERROR, notebook.WRITEFILE_CONFIG)


def _table() -> dict[str, Rule]:
    rules: dict[str, Rule] = {}
    python = (rule for module in PYTHON_RULE_MODULES for rule in module.RULES)
    for rule in (*python, *SHELL_RULES, *NOTEBOOK_RULES, *risks.RULES):
        if rules.setdefault(rule.code, rule) is not rule:
            raise ValueError(f"rule {rule.code} defined twice")
    return dict(sorted(rules.items()))


RULES: dict[str, Rule] = _table()
