"""NM301 (and NM312, defined in `nm312_metrics_report.py`): calls that only steer or report on the lazy XLA
graph are removed."""

from __future__ import annotations

import libcst as cst

from migrator.cst_helpers import descendants, visit_read_only
from migrator.families.xla.names import CLOCKS, METRICS_CALLS, SYNC_CALLS, SYNCHRONIZE, XM
from migrator.families.xla.state import HINTS, XlaFile, whole_statement_call
from migrator.rules import Example, Rule, Severity
from migrator.transform import Handler

MARK_STEP = Rule(
    "NM301",
    Severity.INFO,
    "`xm.mark_step()` / `torch_xla.sync()` cuts the lazy XLA graph",
    "Removed: TorchNeuron runs eagerly, there is no lazy graph to cut. Where it is timed (a clock is read "
    "before and after it in its function, or in the loop that holds it, or it is in a helper called so), it becomes "
    "`torch.accelerator.synchronize()`: TorchNeuron runs asynchronously, and without a wait the clock would "
    "measure the dispatch only. Where it ends the work before a timed region (the next clock read in its function "
    "starts one, with no other wait before it: a warm-up), it becomes that wait too, after the loop that holds "
    "it: without it the queued warm-up work would run inside the timed region.",
    examples=(
        Example(
            before="""\
import torch_xla.core.xla_model as xm

for batch in loader:
    loss = model(batch).sum()
    loss.backward()
    optimizer.step()
    xm.mark_step()
""",
            after="""\

for batch in loader:
    loss = model(batch).sum()
    loss.backward()
    optimizer.step()
""",
        ),
        Example(
            before="""\
import time

import torch_xla.core.xla_model as xm

start = time.perf_counter()
for _ in range(10):
    out = model(batch)
    xm.mark_step()
print(f"{(time.perf_counter() - start) / 10 * 1000:.1f} ms per step")
""",
            after="""\
import time

import torch

start = time.perf_counter()
for _ in range(10):
    out = model(batch)
    torch.accelerator.synchronize()
print(f"{(time.perf_counter() - start) / 10 * 1000:.1f} ms per step")
""",
        ),
        Example(
            before="""\
import time

import torch_xla

for _ in range(3):
    model(batch)
    torch_xla.sync()
start = time.perf_counter()
model(batch)
torch_xla.sync()
print(f"{(time.perf_counter() - start) * 1000:.1f} ms")
""",
            after="""\
import time

import torch

for _ in range(3):
    model(batch)
torch.accelerator.synchronize()
start = time.perf_counter()
model(batch)
torch.accelerator.synchronize()
print(f"{(time.perf_counter() - start) * 1000:.1f} ms")
""",
        ),
    ),
)
RULES = (MARK_STEP,)
WAITS = SYNC_CALLS | {f"{XM}.wait_device_ops"}
CLOCK_MODULES = frozenset(name.partition(".")[0] for name in CLOCKS) | {
    name.rpartition(".")[2] for name in CLOCKS
}


class RemoveGraphCalls(Handler):
    STATEMENTS = SYNC_CALLS | METRICS_CALLS
    HINTS = HINTS

    def __init__(self, ctx) -> None:
        super().__init__(ctx)
        self.file = ctx.state(XlaFile)
        self.scopes: list[cst.CSTNode] = []  # the module and the functions around the walk
        self.loops: list[cst.CSTNode] = []  # the loops around it, in the innermost function
        self.clock_lines: dict[cst.CSTNode, tuple[list[int], list[int]]] = {}  # scope or loop -> `_lines`
        self.helpers: set[str] | None = None  # see `_timed_helpers`
        # loops whose graph cuts drained a warm-up: a wait after them
        self.drained_loops: set[cst.CSTNode] = set()

    def visit_Module(self, node: cst.Module) -> None:
        self.scopes.append(node)

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        self.scopes.append(node)
        self.loops.append(node)  # a marker: the loops of the outer function do not time this one

    def leave_FunctionDef(self, original: cst.FunctionDef, updated: cst.FunctionDef):
        self.scopes.pop()
        self.loops.pop()
        return updated

    def visit_For(self, node: cst.For) -> None:
        self.loops.append(node)

    def leave_For(self, original: cst.For, updated: cst.For):
        self.loops.pop()
        return self._wait_after(original, updated)

    def visit_While(self, node: cst.While) -> None:
        self.loops.append(node)

    def leave_While(self, original: cst.While, updated: cst.While):
        self.loops.pop()
        return self._wait_after(original, updated)

    def _wait_after(self, original: cst.CSTNode, updated: cst.CSTNode):
        if original not in self.drained_loops:
            return updated
        return cst.FlattenSentinel(
            [updated, cst.SimpleStatementLine([cst.Expr(cst.parse_expression(f"{SYNCHRONIZE}()"))])]
        )

    def _lines(self, node: cst.CSTNode) -> tuple[list[int], list[int]]:
        """Lines of the clock reads and of the device waits (graph cuts, `xm.wait_device_ops()`) in `node`."""
        found = self.clock_lines.get(node)
        if found is None:
            clocks, waits = [], []
            for call in descendants(node, cst.Call):
                name = self.ctx.qualified(call.func)
                if name in CLOCKS:
                    clocks.append(self.ctx.source_map.position(call)[0])
                elif name in WAITS:
                    waits.append(self.ctx.source_map.position(call)[0])
            found = self.clock_lines[node] = (sorted(clocks), sorted(waits))
        return found

    def _timed(self, statement: cst.CSTNode) -> bool:
        """The graph cut is timed where it stands, or it is in a helper the script calls where it times
        (`def sync(): torch_xla.sync()`, then `sync()` between two clock reads)."""
        if CLOCK_MODULES.isdisjoint(self.ctx.source.identifiers):
            return False
        line = self.ctx.source_map.position(statement)[0]
        if self._timed_at(line, self.loops, self.scopes[-1]):
            return True
        function = self.scopes[-1]
        return isinstance(function, cst.FunctionDef) and function.name.value in self._timed_helpers()

    def _timed_at(self, line: int, loops: list[cst.CSTNode], scope: cst.CSTNode) -> bool:
        """A loop around `line` in its function reads a clock, or a clock is read before it in `scope` and the
        next clock read comes before any other device wait."""
        for loop in reversed(loops):
            if isinstance(loop, cst.FunctionDef):
                break
            if self._lines(loop)[0]:
                return True
        clocks, waits = self._lines(scope)
        after = [clock for clock in clocks if clock > line]
        return bool(after) and clocks[0] < line and not any(line < wait < after[0] for wait in waits)

    def _drained_before_timing(self, statement: cst.CSTNode) -> cst.CSTNode | None:
        """The graph cut ends the work queued before a timed region: after it (after the outermost loop that
        holds it in its function), the next clock read of its scope, with no other device wait before it,
        starts a region that a later clock read ends (`warm-up; sync; start = clock; ...; end = clock`).
        Returns the statement the wait goes after: the cut itself, or that loop."""
        if CLOCK_MODULES.isdisjoint(self.ctx.source.identifiers):
            return None
        loops = []
        for loop in reversed(self.loops):
            if isinstance(loop, cst.FunctionDef):
                break
            loops.append(loop)
        anchor = loops[-1] if loops else statement
        if loops and self._lines(anchor)[0]:
            return None
        if loops:
            end = max(
                self.ctx.source_map.position(line)[0] for line in descendants(anchor, cst.SimpleStatementLine)
            )
        else:
            end = self.ctx.source_map.position(statement)[0]
        clocks, waits = self._lines(self.scopes[-1])
        after = [clock for clock in clocks if clock > end]
        if len(after) < 2 or any(end < wait < after[0] for wait in waits):
            return None
        return anchor

    def _timed_helpers(self) -> set[str]:
        """The functions of the module that are called (by name) where the script times."""
        if self.helpers is None:
            sites = _CallSites({f.name.value for f in descendants(self.ctx.module, cst.FunctionDef)})
            visit_read_only(self.ctx.module, sites)
            self.helpers = {
                call.func.value
                for call, loops, scope in sites.found
                if self._timed_at(self.ctx.source_map.position(call)[0], loops, scope)
            }
        return self.helpers

    def leave_SimpleStatementLine(self, original: cst.SimpleStatementLine, updated: cst.SimpleStatementLine):
        call = whole_statement_call(original)
        if call is None or whole_statement_call(updated) is None:
            return updated
        name = self.ctx.qualified(call.func)
        timed = name in SYNC_CALLS and self._timed(original)
        drained = self._drained_before_timing(original) if name in SYNC_CALLS and not timed else None
        if drained is not None and drained is not original:  # in a warm-up loop: one wait after the loop
            self.drained_loops.add(drained)
            self.ctx.add_import("torch")
            self.ctx.report(
                call,
                MARK_STEP,
                f"Removed; `{SYNCHRONIZE}()` added after its loop: the loop's last graph cut ended the warm-up "
                "work before the clock started, and TorchNeuron runs asynchronously (without a wait the queued "
                "work would run inside the timed region).",
            )
            return cst.RemoveFromParent()
        if timed or drained is not None:
            self.ctx.add_import("torch")
            self.ctx.report(
                call,
                MARK_STEP,
                f"Rewritten to `{SYNCHRONIZE}()`: "
                + (
                    "it is timed, and TorchNeuron runs asynchronously (without a wait the clock measures the "
                    "dispatch only)."
                    if timed
                    else "it ends the work queued before the clock starts, and TorchNeuron runs asynchronously "
                    "(without a wait that work would run inside the timed region)."
                ),
            )
            return updated.with_changes(body=[cst.Expr(cst.parse_expression(f"{SYNCHRONIZE}()"))])
        if name in SYNC_CALLS or name in METRICS_CALLS or self.file.prints_metrics(call):
            self.ctx.report(call, MARK_STEP if name in SYNC_CALLS else "NM312")
            return cst.RemoveFromParent()
        return updated


class _CallSites(cst.CSTVisitor):
    """The calls of the functions `names` (by plain name), with the loops and the scope around each."""

    def __init__(self, names: set[str]) -> None:
        self.names = names
        self.scopes: list[cst.CSTNode] = []
        self.loops: list[cst.CSTNode] = []
        self.found: list[tuple[cst.Call, list[cst.CSTNode], cst.CSTNode]] = []

    def visit_Module(self, node: cst.Module) -> None:
        self.scopes.append(node)

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        self.scopes.append(node)
        self.loops.append(node)

    def leave_FunctionDef(self, original: cst.FunctionDef) -> None:
        self.scopes.pop()
        self.loops.pop()

    def visit_For(self, node: cst.For) -> None:
        self.loops.append(node)

    def leave_For(self, original: cst.For) -> None:
        self.loops.pop()

    def visit_While(self, node: cst.While) -> None:
        self.loops.append(node)

    def leave_While(self, original: cst.While) -> None:
        self.loops.pop()

    def visit_Call(self, node: cst.Call) -> None:
        if isinstance(node.func, cst.Name) and node.func.value in self.names:
            self.found.append((node, list(self.loops), self.scopes[-1]))


HANDLER = RemoveGraphCalls
