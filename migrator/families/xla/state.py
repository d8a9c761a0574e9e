"""What the XLA rules share in one file: its facts (distributed or not, whole-statement calls, called
functions), the helpers they add to it, and how they write expressions."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

import libcst as cst
from libcst.helpers import parse_template_expression

from migrator.cst_helpers import descendants, dotted_name, with_definitions
from migrator.families.xla.names import (
    DISTRIBUTED_NAMES,
    METRICS_CALLS,
    SUITE_CALLS,
    TORCHRUN_VARIABLES,
    XM,
)
from migrator.families.xla.traced import TracedFlows, traced_flows
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
_PARALLEL_LOADER_SOURCE = '''
class _ParallelLoader:
    """torch_xla's ParallelLoader with one device per process (replaces it; added by neuron-migrate):
    `per_device_loader(device)` iterates `loader`, moving each batch to `device`."""

    def __init__(self, loader, devices):
        self.loader = loader
        self.devices = devices

    def per_device_loader(self, device):
        return _DeviceLoader(self.loader, device)
'''
_INIT_PROCESS_GROUP_SOURCE = '''
def _init_process_group():
    """torchrun's process group, initialised once as torch_xla's runtime did, and destroyed at exit (added by
    neuron-migrate): a group left to the interpreter's exit can abort the process ("terminate called without an
    active exception", gloo)."""
    if torch.distributed.is_initialized():
        return

    def destroy():
        if torch.distributed.is_initialized():
            torch.distributed.destroy_process_group()

    torch.distributed.init_process_group("neuron")
    atexit.register(destroy)
'''
_REDUCE_GRADIENTS_SOURCE = '''
def _reduce_gradients(optimizer):
    """Average the gradients of `optimizer`'s parameters over the processes, as torch_xla's xm.reduce_gradients
    did (added by neuron-migrate where the model could not be wrapped in DistributedDataParallel)."""
    if int(os.environ.get("WORLD_SIZE", 1)) == 1:
        return
    _init_process_group()
    world_size = torch.distributed.get_world_size()
    for group in optimizer.param_groups:
        for parameter in group["params"]:
            if parameter.grad is not None:
                torch.distributed.all_reduce(parameter.grad)
                parameter.grad.div_(world_size)
'''
_OPTIMIZER_STEP_SOURCE = '''
def _optimizer_step(optimizer, optimizer_args=None):
    """`optimizer.step()` after its gradients are averaged over the processes, as torch_xla's xm.optimizer_step
    did (added by neuron-migrate where the model could not be wrapped in DistributedDataParallel)."""
    _reduce_gradients(optimizer)
    return optimizer.step(**(optimizer_args or {}))
'''
_ALL_REDUCE_SOURCE = '''
def _all_reduce(reduce_type, inputs, scale=1.0):
    """torch_xla's xm.all_reduce over every process (added by neuron-migrate): a reduced copy of a tensor, or a
    list of tensors reduced in place, times `scale`."""
    tensors = [inputs.clone()] if isinstance(inputs, torch.Tensor) else list(inputs)
    if int(os.environ.get("WORLD_SIZE", 1)) > 1:
        _init_process_group()
        ops = torch.distributed.ReduceOp
        op = {"sum": ops.SUM, "mul": ops.PRODUCT, "min": ops.MIN, "max": ops.MAX, "and": ops.BAND, "or": ops.BOR}
        for tensor in tensors:
            torch.distributed.all_reduce(tensor, op=op[reduce_type])
    if scale != 1.0:
        for tensor in tensors:
            tensor.mul_(scale)
    return tensors[0] if isinstance(inputs, torch.Tensor) else inputs
'''
_MESH_REDUCE_SOURCE = '''
def _mesh_reduce(data, reduce_fn):
    """`reduce_fn` of the list of every process's `data`, copied to the CPU (replaces torch_xla's xm.mesh_reduce;
    added by neuron-migrate)."""
    data = _to_device(data, "cpu")
    if not torch.distributed.is_initialized():
        return reduce_fn([data])
    gathered = [None] * torch.distributed.get_world_size()
    torch.distributed.all_gather_object(gathered, data)
    return reduce_fn(gathered)
'''
_NEURON_COMPILED_SOURCE = '''
class _NeuronCompiled(torch.nn.Module):
    """What `torch_neuronx.trace(model, ...)` returned, on TorchNeuron (added by neuron-migrate): a copy of `model`
    on the neuron device, compiled when first called and called as the traced model was, with CPU tensors in and out at
    the example's shapes (`tuples`: a Transformers model's ModelOutput as its tuple, as the trace of a model loaded with
    torchscript=True returned it); `save(path)` (what torch.jit.save calls) writes the model and `tuples`, which
    `_NeuronCompiled.load(path)` (what torch.jit.load of that file became) compiles again."""

    def __init__(self, model, tuples=False):
        super().__init__()
        self.model = copy.deepcopy(model).to("neuron").requires_grad_(False)  # the traced model was a copy too
        self.compiled = torch.compile(self.model, backend="neuron", fullgraph=True, dynamic=False)
        self.tuples = tuples

    def forward(self, *args, **kwargs):
        outputs = self.compiled(*_to_device(args, "neuron"), **_to_device(kwargs, "neuron"))
        return _to_device(outputs.to_tuple() if self.tuples else outputs, "cpu")

    def save(self, path, **_):
        torch.save({"neuron_compiled": copy.deepcopy(self.model).to("cpu"), "tuples": self.tuples}, path)

    @classmethod
    def load(cls, path):
        """The model `save(path)` wrote, compiled again (what torch.jit.load / torch.load of that file became)."""
        traced = False  # what torch_neuronx saved: a TorchScript archive, which holds constants.pkl (torch.save's not)
        if zipfile.is_zipfile(path):
            with zipfile.ZipFile(path) as archive:
                traced = any(name.endswith("/constants.pkl") for name in archive.namelist())
        if traced:
            raise RuntimeError(
                f"{path} holds a model traced by torch_neuronx (TorchScript), which TorchNeuron does not run: "
                "delete it, and the program compiles the model again and saves it there"
            )
        saved = torch.load(path, weights_only=False)  # a model, as the traced model's load trusted the file too
        if not isinstance(saved, dict) or "neuron_compiled" not in saved:
            raise RuntimeError(
                f"{path} does not hold what _NeuronCompiled.save writes: delete it, and the program compiles the "
                "model again and saves it there"
            )
        return cls(saved["neuron_compiled"], saved["tuples"])
'''
_RATE_TRACKER_SOURCE = '''
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
'''
_SUMMARY_WRITER_SOURCE = '''
def _summary_writer(logdir):
    """A TensorBoard writer of `logdir`, None without one (torch_xla's test_utils.get_summary_writer; added by
    neuron-migrate)."""
    if not logdir:
        return None
    from torch.utils.tensorboard import SummaryWriter

    writer = SummaryWriter(log_dir=logdir)
    writer.add_scalar("TensorboardStartTimestamp", time.time(), 0)
    return writer
'''
_WRITE_TO_SUMMARY_SOURCE = '''
def _write_to_summary(summary_writer, global_step=None, dict_to_write=None, write_xla_metrics=False):
    """Each value of `dict_to_write` as a scalar of `summary_writer` (torch_xla's test_utils.write_to_summary; added by
    neuron-migrate; PyTorch/XLA's metrics, `write_xla_metrics`, are not kept by TorchNeuron)."""
    if summary_writer is not None:
        for name, value in (dict_to_write or {}).items():
            summary_writer.add_scalar(name, value, global_step)
'''
_CLOSE_SUMMARY_WRITER_SOURCE = '''
def _close_summary_writer(summary_writer):
    """torch_xla's test_utils.close_summary_writer (added by neuron-migrate)."""
    if summary_writer is not None:
        summary_writer.flush()
        summary_writer.close()
'''
_PRINT_TRAINING_UPDATE_SOURCE = '''
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
'''
_PRINT_TEST_UPDATE_SOURCE = '''
def _print_test_update(device, accuracy, epoch=None, step=None):
    """The test line torch_xla's test_utils.print_test_update printed (added by neuron-migrate)."""
    fields = [
        "Test",
        f"Device={device}",
        None if step is None else f"Step={step}",
        None if epoch is None else f"Epoch={epoch}",
        None if accuracy is None else f"Accuracy={accuracy:.2f}",
        f"Time={time.strftime('%H:%M:%S')}",
    ]
    print("|", " ".join(field for field in fields if field), flush=True)
'''
# The helpers the rules add to a file, in the order they are written.
_HELPER_SOURCES = {
    "_to_device": _TO_DEVICE_SOURCE,
    "_DeviceLoader": _DEVICE_LOADER_SOURCE,
    "_ParallelLoader": _PARALLEL_LOADER_SOURCE,
    "_init_process_group": _INIT_PROCESS_GROUP_SOURCE,
    "_reduce_gradients": _REDUCE_GRADIENTS_SOURCE,
    "_optimizer_step": _OPTIMIZER_STEP_SOURCE,
    "_all_reduce": _ALL_REDUCE_SOURCE,
    "_mesh_reduce": _MESH_REDUCE_SOURCE,
    "_NeuronCompiled": _NEURON_COMPILED_SOURCE,
    "_RateTracker": _RATE_TRACKER_SOURCE,
    "_summary_writer": _SUMMARY_WRITER_SOURCE,
    "_write_to_summary": _WRITE_TO_SUMMARY_SOURCE,
    "_close_summary_writer": _CLOSE_SUMMARY_WRITER_SOURCE,
    "_print_training_update": _PRINT_TRAINING_UPDATE_SOURCE,
    "_print_test_update": _PRINT_TEST_UPDATE_SOURCE,
}
# What each helper uses: other helpers, then the modules it imports (in the order they are imported).
_HELPER_NEEDS: dict[str, tuple[str, ...]] = {
    "_to_device": ("torch",),
    "_DeviceLoader": ("_to_device",),
    "_ParallelLoader": ("_DeviceLoader",),
    "_init_process_group": ("atexit", "torch"),
    "_reduce_gradients": ("_init_process_group", "os", "torch"),
    "_optimizer_step": ("_reduce_gradients",),
    "_all_reduce": ("_init_process_group", "os", "torch"),
    "_mesh_reduce": ("_to_device", "torch"),
    "_NeuronCompiled": ("_to_device", "torch", "copy", "zipfile"),
    "_RateTracker": ("os", "time"),
    "_summary_writer": ("time",),
    "_print_training_update": ("_write_to_summary", "time"),
    "_print_test_update": ("time",),
}


def _helpers_needed(names: set[str]) -> tuple[set[str], list[str]]:
    """The helpers `names` need (themselves included) and the modules those import, in `_HELPER_NEEDS`' order."""
    helpers, modules, pending = set(), [], sorted(names)
    while pending:
        name = pending.pop()
        if name in helpers:
            continue
        helpers.add(name)
        pending.extend(need for need in _HELPER_NEEDS.get(name, ()) if need in _HELPER_SOURCES)
    for name in _HELPER_SOURCES:
        if name in helpers:
            modules += [
                m for m in _HELPER_NEEDS.get(name, ()) if m not in _HELPER_SOURCES and m not in modules
            ]
    return helpers, modules


@dataclass(frozen=True)
class DeclaredCalls:
    """What the XLA family's rules declare they handle (`Handler.CALLS`, `STATEMENTS`, `DECIDES`)."""

    decided: frozenset[str]  # calls some rule decides on: NM318's catch-all leaves them alone
    rewritten: frozenset[str]  # torch_xla functions some rule rewrites: used as a value instead, a TODO
    statements: frozenset[str]  # calls rewritten only where they are a whole expression statement


@cache
def declared_calls(handlers: tuple[type[Handler], ...]) -> DeclaredCalls:
    """What the family's handlers among `handlers` (a walk's, `FileContext.handlers`) declare."""
    handlers = [handler for handler in handlers if handler.__module__.startswith(f"{__package__}.")]
    matched = frozenset(
        name for handler in handlers for name in (*(handler.CALLS or ()), *handler.STATEMENTS)
    )
    return DeclaredCalls(
        decided=matched | {name for handler in handlers for name in handler.DECIDES},
        rewritten=frozenset(name for name in matched if name.startswith("torch_xla")),
        statements=frozenset(name for handler in handlers for name in handler.STATEMENTS),
    )


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
        # A module of definitions without an entry point of its own (a library of its program): the processes
        # that run it are its importers'. Its device takes the LOCAL_RANK index too (index 0 in one process), so that every
        # module of a program names the same device.
        self.library = (
            not ctx.notebook
            and any(isinstance(statement, (cst.FunctionDef, cst.ClassDef)) for statement in ctx.module.body)
            and not runs_itself(ctx.module)
        )
        self.per_process_device = self.distributed or self.library
        # Names bound to the neuron device of this process (`torch.device("neuron", LOCAL_RANK)`).
        self.local_devices: set[str] = set()
        # Names that held the "xla" device string (`device = "xla"`): `init_process_group(device)` used it.
        self.xla_device_names: set[str] = set()
        # Gradient-sync calls whose all-reduce DistributedDataParallel takes over (nm319 decides).
        self.synced_by_ddp: set[cst.Call] = set()
        # ... and those whose model could not be located to wrap it: a helper all-reduces its optimizer's
        # gradients (`synced_by_helper`), or the call stays with a TODO.
        self.sync_unlocated: set[cst.Call] = set()
        self.synced_by_helper: set[cst.Call] = set()
        self.statement_calls: set[cst.Call] = set()  # calls that are a whole expression statement
        # Calls that are a statement sharing its line: a one-line `if`/`for`/`with` body, or after a `;`.
        self.inline_statement_calls: set[cst.Call] = set()
        self.called: set[cst.BaseExpression] = set()  # the `func` of every call
        self.helpers: set[str] = set()  # names of `_HELPER_SOURCES`: added to the file at the end
        self._parameters_of: dict[str, list[list[str]]] | None = None  # function name -> parameter lists
        self._traced: TracedFlows | None = None

    def traced(self) -> TracedFlows:
        """The traced-model flows NM317 rewrites whole (none where each process needs its own device: the
        rewrite names device "neuron"), and the traces, saves and loads of compiled models it wraps."""
        if self._traced is None:
            self._traced = traced_flows(self.ctx, whole=not self.per_process_device)
        return self._traced

    def tested_as_xla(self, name: str) -> str | None:
        """Where the value of the variable `name` (its last part for `args.device`) is compared to "xla": "this
        file" (`device == "xla"`), or the function of the file it is handed to (`setup(device)` with `def
        setup(dev): if dev == "xla": ...`); None: nowhere. Its value and those tests must change together."""
        compared = self.ctx.source.compared
        if (name, "xla") in compared:
            return "in this file"
        if not {parameter for parameter, value in compared if value == "xla"}:
            return None
        if self._parameters_of is None:
            self._parameters_of = {}
            for function in descendants(self.ctx.module, cst.FunctionDef):
                parameters = [param.name.value for param in function.params.params]
                if parameters[:1] in (["self"], ["cls"]):
                    parameters = parameters[1:]  # called as a method
                self._parameters_of.setdefault(function.name.value, []).append(parameters)
        for call in descendants(self.ctx.module, cst.Call):
            callee = dotted_name(call.func)
            functions = self._parameters_of.get((callee or "").rpartition(".")[2], [])
            for index, arg in enumerate(call.args):
                if (dotted_name(arg.value) or "").rpartition(".")[2] != name:
                    continue
                for parameters in functions:
                    receiving = arg.keyword.value if arg.keyword else None
                    if receiving is None and not arg.star and index < len(parameters):
                        receiving = parameters[index]
                    if (receiving, "xla") in compared:
                        return f"by `{callee}()`, which it is passed to"
        return None

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
        if self.ctx.free_quote() != '"':
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


# Code the migration leaves on the XLA / NxD flow for manual work (NM314, NM316, NM317).
_LEFT_ON_XLA = ("neuronx_distributed", "torch_neuronx.xla_impl")


def left_on_xla_flow(ctx: FileContext, qualified: str) -> bool:
    """Whether the migration leaves an API on the XLA / NxD flow: NxD's, or a torch_xla one no rule decides on."""
    return qualified.startswith(_LEFT_ON_XLA) or (
        qualified.startswith("torch_xla") and qualified not in declared_calls(ctx.handlers).decided
    )


class XlaFlowBlocks:
    """Per file (`ctx.state`): which blocks run code the migration leaves on the XLA / NxD flow (an NxD import or
    call, a torch_xla call no rule rewrites). The XLA flow's settings there still configure something."""

    def __init__(self, ctx: FileContext) -> None:
        self.ctx = ctx
        self.aliases: dict[str, str] | None = None  # local name -> qualified, from every import of the file
        self.found: dict[cst.CSTNode, bool] = {}

    def runs_xla_flow(self, block: cst.CSTNode) -> bool:
        identifiers = self.ctx.source.identifiers
        if "neuronx_distributed" not in identifiers and "torch_xla" not in identifiers:
            return False
        if block not in self.found:
            self.found[block] = any(
                self._left(node) for node in descendants(block, (cst.Import, cst.ImportFrom, cst.Call))
            )
        return self.found[block]

    def _left(self, node: cst.CSTNode) -> bool:
        if isinstance(node, cst.Import):
            return any((dotted_name(alias.name) or "").startswith(_LEFT_ON_XLA) for alias in node.names)
        if isinstance(node, cst.ImportFrom):
            return node.module is not None and (dotted_name(node.module) or "").startswith(_LEFT_ON_XLA)
        name = dotted_name(node.func) or ""
        head, _, rest = name.partition(".")
        return left_on_xla_flow(self.ctx, self._imports().get(head, head) + (f".{rest}" if rest else ""))

    def _imports(self) -> dict[str, str]:
        if self.aliases is None:
            self.aliases = {}
            for node in descendants(self.ctx.module, (cst.Import, cst.ImportFrom)):
                if isinstance(node, cst.Import):
                    for alias in node.names:
                        full = dotted_name(alias.name) or ""
                        local = alias.asname.name.value if alias.asname else full.partition(".")[0]
                        self.aliases[local] = full if alias.asname else local
                elif (
                    node.module is not None
                    and not node.relative
                    and not isinstance(node.names, cst.ImportStar)
                ):
                    for alias in node.names:
                        local = alias.asname.name.value if alias.asname else alias.name.value
                        self.aliases[local] = f"{dotted_name(node.module)}.{alias.name.value}"
        return self.aliases


def runs_itself(module: cst.Module) -> bool:
    """Whether running the module does something: an `if __name__ == "__main__":` block, or a call, a loop or a
    `with` at its top level (in a top-level `if`/`try` too), beyond imports, definitions, assignments and settings
    of the environment (`os.environ.setdefault(...)`, which NM404 itself adds to a library module)."""
    pending = list(module.body)
    while pending:
        statement = pending.pop()
        if isinstance(statement, (cst.For, cst.While, cst.With)):
            return True
        if isinstance(statement, cst.If):
            if "__name__" in {name.value for name in descendants(statement.test, cst.Name)}:
                return True
            pending += [*statement.body.body, *([statement.orelse] if statement.orelse else [])]
        elif isinstance(statement, (cst.Else, cst.Try)):
            pending += statement.body.body
        elif isinstance(statement, cst.SimpleStatementLine) and any(
            isinstance(small, cst.Expr)
            and isinstance(small.value, (cst.Call, cst.Await))
            and not (dotted_name(small.value.func) or "").startswith("os.environ.")
            for small in statement.body
        ):
            return True
    return False


def expanded_suite(suite: cst.SimpleStatementSuite, block: cst.BaseStatement) -> cst.IndentedBlock:
    """A one-line body as an indented block holding `block` (the rewrite of its call), its comment kept."""
    return cst.IndentedBlock(body=[block], header=suite.trailing_whitespace)


def whole_statement_call(line: cst.CSTNode) -> cst.Call | None:
    """The call a simple statement consists of (`f(...)` alone on its line, or a one-line body: `if x: f(...)`),
    else None."""
    if type(line) in _SIMPLE_LINES and len(line.body) == 1:
        statement = line.body[0]
        if type(statement) is cst.Expr and type(statement.value) is cst.Call:
            return statement.value
    return None


_SIMPLE_LINES = (cst.SimpleStatementLine, cst.SimpleStatementSuite)


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
        call = whole_statement_call(node)
        if call is not None and self.ctx.qualified(call.func) in SUITE_CALLS:
            self.file.statement_calls.add(call)  # its handler makes the body a block (`expanded_suite`)
            return
        self._inline_calls(node.body)

    def _inline_calls(self, statements) -> None:
        self.file.inline_statement_calls.update(
            statement.value
            for statement in statements
            if type(statement) is cst.Expr and type(statement.value) is cst.Call
        )

    def visit_Call(self, node: cst.Call) -> None:
        self.file.called.add(node.func)

    def leave_Module(self, original: cst.Module, updated: cst.Module):
        wanted, modules = _helpers_needed(self.file.helpers)
        sources = [source for name, source in _HELPER_SOURCES.items() if name in wanted]
        with_helpers = with_definitions(updated, sources)
        if with_helpers is not updated:
            for module in modules:
                self.ctx.add_import(module)
        return with_helpers


RULES = ()  # reports nothing itself
HANDLER = XlaTracker
