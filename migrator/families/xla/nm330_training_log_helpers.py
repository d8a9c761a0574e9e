"""NM330: the training-loop logging of PyTorch/XLA's examples (`xm.RateTracker`, `xm.add_step_closure`, the
`torch_xla.test.test_utils` progress lines and TensorBoard writer) becomes small helpers added to the file and a
direct call of the closure."""

from __future__ import annotations

import libcst as cst

from migrator.cst_helpers import source_code
from migrator.families.xla.names import XM
from migrator.families.xla.state import HINTS, XlaFile, left_on_xla_flow
from migrator.rules import Example, Rule, Severity
from migrator.transform import Handler

TEST_UTILS = "torch_xla.test.test_utils"
# torch_xla's function -> the helper it becomes (state.py's `_HELPER_SOURCES`: same parameters, same output).
HELPERS = {
    f"{XM}.RateTracker": "_RateTracker",
    f"{TEST_UTILS}.get_summary_writer": "_summary_writer",
    f"{TEST_UTILS}.write_to_summary": "_write_to_summary",
    f"{TEST_UTILS}.close_summary_writer": "_close_summary_writer",
    f"{TEST_UTILS}.print_training_update": "_print_training_update",
    f"{TEST_UTILS}.print_test_update": "_print_test_update",
}
STEP_CLOSURE = f"{XM}.add_step_closure"
_CLOSURE_PARAMETERS = ("closure", "args", "run_async")

TRAINING_LOG_HELPERS = Rule(
    "NM330",
    Severity.INFO,
    "The training-loop logging of PyTorch/XLA's examples: `xm.RateTracker()`, `xm.add_step_closure(fn, args=...)`, "
    "`test_utils.print_training_update` / `print_test_update` / `get_summary_writer` / `write_to_summary` / "
    "`close_summary_writer`",
    "Each `test_utils` function and `xm.RateTracker` becomes a helper of the same name with an underscore "
    "(`_print_training_update`, `_RateTracker`, ...), added to the file: the same parameters, the same progress "
    "line and TensorBoard scalars (torch's `SummaryWriter`), the same smoothed rate. "
    "`xm.add_step_closure(fn, args=(...))` becomes `fn(...)`, called at once: TorchNeuron runs eagerly, so the "
    "tensors it reads hold their values now (PyTorch/XLA ran it once the step's graph had run, `run_async` on a "
    "thread); a value it reads on the host (`loss.item()`) waits for the device there. A `write_to_summary` "
    "asked for XLA's metrics (`write_xla_metrics=True`) keeps a TODO: TorchNeuron has none; so does a step "
    "closure left on the XLA / NxD flow (`nxd.save_checkpoint`).",
    examples=(
        Example(
            before="""\
import torch_xla.core.xla_model as xm
import torch_xla.test.test_utils as test_utils

tracker = xm.RateTracker()
for step, batch in enumerate(loader):
    loss = train_step(batch)
    tracker.add(len(batch))
    xm.add_step_closure(test_utils.print_training_update, args=(device, step, loss, tracker.rate(), tracker.global_rate()))
""",
            after='''\
import os
import time


class _RateTracker:
    """Examples per second, counted as torch_xla's xm.RateTracker counted them (added by neuron-migrate): `rate()`
    since its previous call, smoothed with the rate it gave then (RATE_TRACKER_SMOOTHING, 0.4 by default), and
    `global_rate()` since it was made."""

    def __init__(self, smooth_factor=None):
        default = float(os.environ.get("RATE_TRACKER_SMOOTHING", 0.4))
        self.smooth_factor = default if smooth_factor is None else smooth_factor
        self.started = self.since = time.time()
        self.count = self.total = 0.0
        self.last_rate = None

    def add(self, count):
        self.count += count
        self.total += count

    def rate(self):
        now = time.time()
        if now <= self.since:
            return 0.0
        rate = self.count / (now - self.since)
        if self.last_rate is not None:
            rate = (1 - self.smooth_factor) * rate + self.smooth_factor * self.last_rate
        self.since, self.count, self.last_rate = now, 0.0, rate
        return rate

    def global_rate(self):
        elapsed = time.time() - self.started
        return self.total / elapsed if elapsed > 0 else 0.0


def _write_to_summary(summary_writer, global_step=None, dict_to_write=None, write_xla_metrics=False):
    """Each value of `dict_to_write` as a scalar of `summary_writer` (torch_xla's test_utils.write_to_summary; added by
    neuron-migrate; PyTorch/XLA's metrics, `write_xla_metrics`, are not kept by TorchNeuron)."""
    if summary_writer is not None:
        for name, value in (dict_to_write or {}).items():
            summary_writer.add_scalar(name, value, global_step)


def _print_training_update(device, step, loss, rate, global_rate, epoch=None, summary_writer=None):
    """The progress line torch_xla's test_utils.print_training_update printed, its rates written to
    `summary_writer` (added by neuron-migrate)."""
    fields = [
        "Training",
        f"Device={device}",
        None if epoch is None else f"Epoch={epoch}",
        f"Step={step}",
        f"Loss={loss:.5f}",
        f"Rate={rate:.2f}",
        f"GlobalRate={global_rate:.2f}",
        f"Time={time.strftime('%H:%M:%S')}",
    ]
    print("|", " ".join(field for field in fields if field), flush=True)
    _write_to_summary(summary_writer, dict_to_write={"examples/sec": rate, "average_examples/sec": global_rate})


tracker = _RateTracker()
for step, batch in enumerate(loader):
    loss = train_step(batch)
    tracker.add(len(batch))
    _print_training_update(device, step, loss, tracker.rate(), tracker.global_rate())
''',
        ),
    ),
)
RULES = (TRAINING_LOG_HELPERS,)


class TrainingLogHelpers(Handler):
    HINTS = HINTS
    CALLS = frozenset({*HELPERS, STEP_CLOSURE})

    def __init__(self, ctx) -> None:
        super().__init__(ctx)
        self.file = ctx.state(XlaFile)

    def visit_Call(self, node: cst.Call) -> None:
        """A closure handed to `add_step_closure` is called by its rewrite: not a use as a value (NM318)."""
        if self.ctx.qualified(node.func) == STEP_CLOSURE:
            arguments = _by_parameter(node)
            if arguments and "closure" in arguments:
                self.file.called.add(arguments["closure"])

    def leave_Call(self, original: cst.Call, updated: cst.Call):
        name = self.ctx.qualified(original.func)
        if name == STEP_CLOSURE:
            return self._closure(original, updated)
        if name not in HELPERS:
            return updated
        if name == f"{TEST_UTILS}.write_to_summary" and _asks_xla_metrics(updated):
            self.ctx.todo(
                original,
                TRAINING_LOG_HELPERS,
                "`write_xla_metrics` writes PyTorch/XLA's metrics report, which TorchNeuron does not keep",
                "drop write_xla_metrics (the scalars are written by `_write_to_summary`) and rewrite the call",
            )
            return updated
        helper = HELPERS[name]
        self.ctx.report(original, TRAINING_LOG_HELPERS)
        self.file.helpers.add(helper)
        return updated.with_changes(func=cst.Name(helper))

    def _closure(self, original: cst.Call, updated: cst.Call):
        arguments = _by_parameter(updated)
        if arguments is None or "closure" not in arguments:
            self.ctx.todo(
                original,
                TRAINING_LOG_HELPERS,
                "`xm.add_step_closure` with unpacked or unknown arguments has no mechanical rewrite",
                "call the closure with its arguments where the step ends",
            )
            return updated
        closure_name = self.ctx.qualified(_by_parameter(original)["closure"]) or ""
        if closure_name not in HELPERS and left_on_xla_flow(self.ctx, closure_name):
            self.ctx.todo(
                original,
                TRAINING_LOG_HELPERS,
                f"the step closure `{closure_name}` stays on the XLA / NxD flow, which TorchNeuron does not use",
                "replace it (and this call) with its TorchNeuron equivalent, called where the step ends",
            )
            return updated
        self.ctx.report(original, TRAINING_LOG_HELPERS)
        closure, args = arguments["closure"], arguments.get("args")
        helper = HELPERS.get(closure_name)
        if helper is not None:  # `add_step_closure(test_utils.print_training_update, args=...)`
            self.file.helpers.add(helper)
            closure = cst.Name(helper)
        if args is None:
            call_args = []
        elif isinstance(args, (cst.Tuple, cst.List)) and not any(
            isinstance(element, cst.StarredElement) for element in args.elements
        ):
            call_args = [cst.Arg(element.value) for element in args.elements]
        else:
            call_args = [cst.Arg(args, star="*")]
        separator = cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))
        call_args = [
            arg.with_changes(comma=separator if index < len(call_args) - 1 else cst.MaybeSentinel.DEFAULT)
            for index, arg in enumerate(call_args)
        ]
        if isinstance(closure, (cst.Lambda, cst.IfExp, cst.BinaryOperation, cst.BooleanOperation)):
            closure = closure.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])
        return cst.Call(func=closure, args=call_args)


def _asks_xla_metrics(call: cst.Call) -> bool:
    """`write_to_summary(writer, step, values, write_xla_metrics=...)` (the 4th parameter) set to other than False."""
    for index, arg in enumerate(call.args):
        if arg.star == "**":
            return True
        if (arg.keyword and arg.keyword.value == "write_xla_metrics") or (arg.keyword is None and index == 3):
            return source_code(arg.value) != "False"
    return False


def _by_parameter(call: cst.Call) -> dict[str, cst.BaseExpression] | None:
    """The call's arguments by the parameter of `add_step_closure(closure, args=(), run_async=False)` they bind;
    None when one is unpacked or unknown."""
    found: dict[str, cst.BaseExpression] = {}
    for index, arg in enumerate(call.args):
        if arg.star:
            return None
        name = arg.keyword.value if arg.keyword else (_CLOSURE_PARAMETERS[index] if index < 3 else None)
        if name not in _CLOSURE_PARAMETERS or name in found:
            return None
        found[name] = arg.value
    return found


HANDLER = TrainingLogHelpers
