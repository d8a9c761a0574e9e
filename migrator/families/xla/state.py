"""What the XLA rules share in one file: its facts (distributed or not, whole-statement calls, called
functions, enclosing f-string quotes), the helpers they add to it, and how they write expressions."""

from __future__ import annotations

import itertools

import libcst as cst
from libcst.helpers import parse_template_expression

from migrator.cst_helpers import dotted_name, imports_end
from migrator.families.xla.names import DISTRIBUTED_NAMES, METRICS_CALLS, TORCHRUN_VARIABLES, XM
from migrator.transform import FileContext, Handler

# torch_xla / Neuron names (through their imports), "xla" strings (devices, backends, autocast, process
# groups, the pjrt:// rendezvous), and the loader method called on a ParallelLoader.
HINTS = frozenset({"xla", "neuron", "per_device_loader", "pjrt"})

_TO_DEVICE_SOURCE = '''
def _to_device(data, device):
    """Move the tensors of a (nested) dict/list/tuple batch to `device` (added by neuron-migrate)."""
    if isinstance(data, torch.Tensor):
        return data.to(device)
    if isinstance(data, dict):
        return {key: _to_device(value, device) for key, value in data.items()}
    if isinstance(data, (list, tuple)):
        return type(data)(_to_device(value, device) for value in data)
    return data
'''
_DEVICE_LOADER_SOURCE = '''
class _DeviceLoader:
    """Iterate `loader`, moving each batch to `device` (replaces torch_xla's MpDeviceLoader)."""

    def __init__(self, loader, device):
        self.loader = loader
        self.device = device

    def __iter__(self):
        for batch in self.loader:
            yield _to_device(batch, self.device)

    def __len__(self):
        return len(self.loader)
'''


class XlaFile:
    def __init__(self, ctx: FileContext) -> None:
        self.ctx = ctx
        # A script that runs several processes: its device gets the LOCAL_RANK index.
        identifiers = ctx.source.identifiers
        self.distributed = (
            not DISTRIBUTED_NAMES.isdisjoint(identifiers)
            or not TORCHRUN_VARIABLES.isdisjoint(ctx.source.strings)
            or {"torch_xla", "launch"} <= identifiers  # `torch_xla.launch(fn)`: one process per device
        )
        # Names bound to the neuron device of this process (`torch.device("neuron", LOCAL_RANK)`).
        self.local_devices: set[str] = set()
        # Names that held the "xla" device string (`device = "xla"`): `init_process_group(device)` used it.
        self.xla_device_names: set[str] = set()
        # Gradient-sync calls whose all-reduce DistributedDataParallel takes over (nm319 decides).
        self.synced_by_ddp: set[cst.Call] = set()
        # ... and those that stay, with a TODO, since the model to wrap could not be located.
        self.sync_unlocated: set[cst.Call] = set()
        self.statement_calls: set[cst.Call] = set()  # calls that are a whole expression statement
        # Calls that are a statement sharing its line: a one-line `if`/`for`/`with` body, or after a `;`.
        self.inline_statement_calls: set[cst.Call] = set()
        self.called: set[cst.BaseExpression] = set()  # the `func` of every call
        self.string_quotes: list[str] = []  # quotes of the f-strings around the current node
        self.helpers: set[str] = set()  # "_to_device", "_DeviceLoader": added to the file at the end

    def prints_metrics(self, call: cst.Call) -> bool:
        """`print(met.metrics_report())` (`flush=True` too): goes as a whole."""
        printer = self.ctx.qualified(call.func)
        shown = [arg for arg in call.args if arg.keyword is None]  # `flush=True`, `file=` only say where to
        return (
            printer in ("print", f"{XM}.master_print")
            and bool(shown)
            and all(
                isinstance(arg.value, cst.Call) and self.ctx.qualified(arg.value.func) in METRICS_CALLS
                for arg in shown
            )
        )

    def expression(self, source: str, **nodes) -> cst.BaseExpression:
        """Parse an emitted expression; inside a double-quoted f-string its strings use single quotes."""
        if any('"' in quote for quote in self.string_quotes):
            source = source.replace('"', "'")
        return parse_template_expression(source, **nodes) if nodes else cst.parse_expression(source)

    def dist(self) -> str:
        """The file's local name for torch.distributed, importing it as `dist` if needed."""
        for local, qualified in self.ctx.imported.items():
            if qualified == "torch.distributed":
                return local
        self.ctx.add_import("torch.distributed", asname="dist")
        return "dist"

    @staticmethod
    def guarded(line: cst.SimpleStatementLine, test: str, expression: cst.BaseExpression) -> cst.If:
        """`if <test>:` around the statement `line` with `expression` as its only content."""
        inner = line.with_changes(body=[cst.Expr(expression)], leading_lines=[])
        return cst.If(
            test=cst.parse_expression(test),
            body=cst.IndentedBlock([inner]),
            leading_lines=line.leading_lines,
        )

    def if_initialized(self, line: cst.SimpleStatementLine, template: str) -> cst.If:
        dist = self.dist()
        return self.guarded(
            line, f"{dist}.is_initialized()", cst.parse_expression(template.format(dist=dist))
        )


def whole_statement_call(line: cst.CSTNode) -> cst.Call | None:
    """The call a simple statement consists of (`f(...)` alone on its line), else None."""
    if type(line) is cst.SimpleStatementLine and len(line.body) == 1:
        statement = line.body[0]
        if type(statement) is cst.Expr and type(statement.value) is cst.Call:
            return statement.value
    return None


class XlaTracker(Handler):
    """Keeps the XLA state up to date, drops the torch_xla imports nothing uses any more, and adds the
    helpers the rules asked for after the imports."""

    SYMBOLS = frozenset({"torch_xla", "neuronx_distributed", "torch_neuronx.trace", "torch_neuronx.xla_impl"})
    HINTS = HINTS

    def __init__(self, ctx: FileContext) -> None:
        super().__init__(ctx)
        self.file = ctx.state(XlaFile)

    def visit_Import(self, node: cst.Import) -> None:
        for alias in node.names:
            module = dotted_name(alias.name)
            if module.startswith("torch_xla"):
                asname = alias.asname.name.value if alias.asname else None
                self.ctx.remove_import(module, asname=asname)

    def visit_ImportFrom(self, node: cst.ImportFrom) -> None:
        if node.relative or node.module is None or isinstance(node.names, cst.ImportStar):
            return
        module = dotted_name(node.module)
        if module.startswith("torch_xla"):
            for alias in node.names:
                asname = alias.asname.name.value if alias.asname else None
                self.ctx.remove_import(module, alias.name.value, asname)

    def visit_SimpleStatementLine(self, node: cst.SimpleStatementLine) -> None:
        call = whole_statement_call(node)
        if call is not None:
            self.file.statement_calls.add(call)
            if self.file.prints_metrics(call):
                self.file.statement_calls.update(arg.value for arg in call.args if arg.keyword is None)
        elif len(node.body) > 1:
            self._inline_calls(node.body)

    def visit_SimpleStatementSuite(self, node: cst.SimpleStatementSuite) -> None:
        self._inline_calls(node.body)

    def _inline_calls(self, statements) -> None:
        self.file.inline_statement_calls.update(
            statement.value
            for statement in statements
            if type(statement) is cst.Expr and type(statement.value) is cst.Call
        )

    def visit_FormattedString(self, node: cst.FormattedString) -> None:
        self.file.string_quotes.append(node.quote)

    def leave_FormattedString(self, original, updated):
        self.file.string_quotes.pop()
        return updated

    def visit_Call(self, node: cst.Call) -> None:
        self.file.called.add(node.func)

    def leave_Module(self, original: cst.Module, updated: cst.Module):
        defined = {
            statement.name.value
            for statement in updated.body
            if isinstance(statement, (cst.FunctionDef, cst.ClassDef))
        }
        sources = []
        if self.file.helpers and "_to_device" not in defined:
            sources.append(_TO_DEVICE_SOURCE)
        if "_DeviceLoader" in self.file.helpers and "_DeviceLoader" not in defined:
            sources.append(_DEVICE_LOADER_SOURCE)
        if not sources:
            return updated
        self.ctx.add_import("torch")
        helpers = []
        for source in sources:
            statement = cst.parse_statement(source.lstrip("\n"))
            helpers.append(statement.with_changes(leading_lines=[cst.EmptyLine(), cst.EmptyLine()]))
        index = imports_end(updated)
        rest = list(updated.body[index:])
        if rest:  # two blank lines between the helpers and what follows
            blank = sum(
                1 for _ in itertools.takewhile(lambda line: line.comment is None, rest[0].leading_lines)
            )
            extra = [cst.EmptyLine()] * max(0, 2 - blank)
            rest[0] = rest[0].with_changes(leading_lines=[*extra, *rest[0].leading_lines])
        return updated.with_changes(body=[*updated.body[:index], *helpers, *rest])


RULES = ()  # reports nothing itself
HANDLER = XlaTracker
