"""NM303: XLA runtime queries and synchronisation become torchrun's environment and torch.distributed."""

from __future__ import annotations

import libcst as cst
import libcst.matchers as m

from migrator.cst_helpers import find_keyword
from migrator.families.xla.names import CALL_RENAMES, IS_MASTER, LOCAL_RANK, RANK, SET_RNG_STATE, XM
from migrator.families.xla.state import HINTS, XlaFile, expanded_suite, whole_statement_call
from migrator.rules import Example, Rule, Severity
from migrator.transform import Handler

RUNTIME_CALL = Rule(
    "NM303",
    Severity.INFO,
    "XLA runtime query or synchronisation (`xr.world_size()`, `xm.get_ordinal()`, `xm.is_master_ordinal()`, "
    "`xm.rendezvous()`, `xm.wait_device_ops()`, `xm.set_rng_state(seed)`...)",
    "Rewritten to the torchrun environment (RANK, LOCAL_RANK, WORLD_SIZE), `dist.barrier()`, "
    "`torch.accelerator.synchronize()` or `torch.neuron.manual_seed(seed)` (which seeds this process's device "
    "generator, as `xm.set_rng_state` seeded its XLA device's).",
    examples=(
        Example(
            before="""\
import torch_xla.runtime as xr

world_size = xr.world_size()
rank = xr.global_ordinal()
""",
            after="""\
import os

world_size = int(os.environ.get("WORLD_SIZE", 1))
rank = int(os.environ.get("RANK", 0))
""",
        ),
        Example(
            before="""\
import torch_xla.core.xla_model as xm

if not xm.is_master_ordinal(): xm.rendezvous("dataset_download")
download()
if xm.is_master_ordinal(): xm.rendezvous("dataset_download")
""",
            after="""\
import os
import torch.distributed as dist

if not int(os.environ.get("LOCAL_RANK", 0)) == 0:
    if dist.is_initialized():
        dist.barrier()
download()
if int(os.environ.get("LOCAL_RANK", 0)) == 0:
    if dist.is_initialized():
        dist.barrier()
""",
        ),
    ),
)
RULES = (RUNTIME_CALL,)


class RuntimeCalls(Handler):
    CALLS = frozenset({*CALL_RENAMES, IS_MASTER, SET_RNG_STATE})
    STATEMENTS = frozenset({f"{XM}.rendezvous"})
    HINTS = HINTS

    def __init__(self, ctx) -> None:
        super().__init__(ctx)
        self.file = ctx.state(XlaFile)

    def leave_SimpleStatementLine(self, original: cst.SimpleStatementLine, updated: cst.SimpleStatementLine):
        call = whole_statement_call(original)
        if call is None or whole_statement_call(updated) is None:
            return updated
        if self.ctx.qualified(call.func) == f"{XM}.rendezvous":
            self.ctx.report(call, RUNTIME_CALL)
            return self.file.if_initialized(updated, "{dist}.barrier()")
        return updated

    def leave_SimpleStatementSuite(
        self, original: cst.SimpleStatementSuite, updated: cst.SimpleStatementSuite
    ):
        """`if not master: xm.rendezvous("download")`: the body becomes a block holding the barrier."""
        call = whole_statement_call(original)
        if (
            call is None
            or whole_statement_call(updated) is None
            or self.ctx.qualified(call.func) != f"{XM}.rendezvous"
        ):
            return updated
        self.ctx.report(call, RUNTIME_CALL)
        line = cst.SimpleStatementLine(body=list(updated.body))
        return expanded_suite(updated, self.file.if_initialized(line, "{dist}.barrier()"))

    def leave_Call(self, original: cst.Call, updated: cst.Call):
        name = self.ctx.qualified(original.func)
        if name in CALL_RENAMES:
            return self._rename(original, updated, *CALL_RENAMES[name])
        if name == IS_MASTER:
            return self._is_master(original, updated)
        if name == SET_RNG_STATE:
            return self._set_rng_state(original, updated)
        return updated

    def _set_rng_state(self, original: cst.Call, updated: cst.Call):
        """`xm.set_rng_state(seed)` seeded the current XLA device's generator: `torch.neuron.manual_seed(seed)`
        seeds the current neuron device's (TorchNeuron's random-number-generation reference)."""
        seed = [arg for arg in updated.args if arg.keyword is None or arg.keyword.value == "seed"]
        if len(updated.args) != 1 or len(seed) != 1 or seed[0].star:
            self.ctx.todo(
                original,
                "NM318",
                "`xm.set_rng_state` with a device or unpacked arguments",
                "seed that device's generator by hand (torch.neuron.manual_seed(seed) seeds the current device's)",
            )
            return updated
        self.ctx.report(original, RUNTIME_CALL)
        self.ctx.add_import("torch")
        return cst.Call(
            func=cst.parse_expression("torch.neuron.manual_seed"),
            args=[seed[0].with_changes(keyword=None, equal=cst.MaybeSentinel.DEFAULT)],
        )

    def _rename(self, original: cst.Call, updated: cst.Call, template: str, imports: tuple[str, ...]):
        if updated.args:
            self.ctx.todo(original, "NM318", "unexpected arguments", "rewrite this call by hand")
            return updated
        self.ctx.report(original, RUNTIME_CALL)
        for module in imports:
            self.ctx.add_import(module)
        return self.file.expression(template)

    def _is_master(self, original: cst.Call, updated: cst.Call):
        local = find_keyword(updated, "local")
        positional = [arg for arg in updated.args if not arg.keyword]
        value = local.value if local else positional[0].value if positional else cst.Name("True")
        if len(updated.args) > 1 or not m.matches(value, m.Name("True") | m.Name("False")):
            self.ctx.todo(
                original,
                "NM318",
                "is_master_ordinal with a computed argument",
                "compare RANK or LOCAL_RANK with 0 by hand",
            )
            return updated
        self.ctx.report(original, RUNTIME_CALL)
        self.ctx.add_import("os")
        rank = LOCAL_RANK if value.value == "True" else RANK
        return self.file.expression(f"{rank} == 0")


HANDLER = RuntimeCalls
