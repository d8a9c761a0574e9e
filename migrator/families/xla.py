"""PyTorch/XLA idioms (NM3xx) -> torch / torch.distributed on device "neuron" (migration map §3.1-3.2).

Renames are data (`CALL_RENAMES`); code handles only structure: statements that become guarded
blocks (`master_print`, `save`, `rendezvous`), the optimizer step, device loaders, `xmp.spawn`, and
"xla" strings in torch's own APIs. Rank and world size come from the variables torchrun sets, so the
rewritten expressions also work in a single process, before or without `init_process_group`.
Anything else under torch_xla / neuronx_distributed is left in place with a TODO.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import libcst as cst
import libcst.matchers as m
from libcst.helpers import parse_template_expression

from migrator.families.comments import KeepsComments
from migrator.rules import Severity, define
from migrator.transform import dotted_name, source_code

XM = "torch_xla.core.xla_model"
XR = "torch_xla.runtime"
PL = "torch_xla.distributed.parallel_loader"
XMP = "torch_xla.distributed.xla_multiprocessing"
METRICS = "torch_xla.debug.metrics"

MARK_STEP = define(
    "NM301",
    Severity.INFO,
    "`xm.mark_step()` / `torch_xla.sync()` cuts the lazy XLA graph",
    "Removed: TorchNeuron runs eagerly, there is no lazy graph to cut.",
)
XLA_DEVICE = define(
    "NM302",
    Severity.INFO,
    '`xm.xla_device()` / `torch_xla.device()` / `torch.device("xla")` picks the XLA device',
    'Rewritten to `torch.device("neuron")`; in a distributed script the index is the LOCAL_RANK '
    "torchrun sets.",
)
RUNTIME_CALL = define(
    "NM303",
    Severity.INFO,
    "XLA runtime query or synchronisation (`xr.world_size()`, `xm.get_ordinal()`, `xm.is_master_ordinal()`, "
    "`xm.rendezvous()`, `xm.wait_device_ops()`...)",
    "Rewritten to the torchrun environment (RANK, LOCAL_RANK, WORLD_SIZE), `dist.barrier()` or "
    "`torch.accelerator.synchronize()`.",
)
OPTIMIZER_STEP = define(
    "NM304",
    Severity.WARNING,
    "`xm.optimizer_step(optimizer)` all-reduces gradients across replicas, then steps",
    "Rewritten to `optimizer.step()`; with more than one process the model must be wrapped in "
    "`torch.nn.parallel.DistributedDataParallel`, which now does the gradient all-reduce.",
)
MASTER_PRINT = define(
    "NM305",
    Severity.INFO,
    "`xm.master_print(...)` prints on the global master only",
    'Rewritten to `print(...)` guarded by `int(os.environ.get("RANK", 0)) == 0`.',
)
XLA_SAVE = define(
    "NM306",
    Severity.INFO,
    "`xm.save(obj, path)` writes a CPU copy on the (local) master, then waits for every process",
    "Rewritten to `torch.save` of a CPU copy on LOCAL_RANK 0 (RANK 0 with `global_master=True`), followed "
    "by `dist.barrier()` when a process group is initialised.",
)
DEVICE_LOADER = define(
    "NM307",
    Severity.INFO,
    "`pl.MpDeviceLoader(loader, device)` / `pl.ParallelLoader(...).per_device_loader(device)`",
    "Rewritten to `_DeviceLoader(loader, device)`, a small helper added to the file that iterates the plain "
    "loader and moves each batch (tensors in dicts, lists, tuples) to the device.",
)
SPAWN = define(
    "NM308",
    Severity.WARNING,
    "`xmp.spawn(fn, args=..., nprocs=N)` starts one process per device",
    'Rewritten to a direct call `fn(int(os.environ.get("LOCAL_RANK", 0)), *args)`: launch the script with '
    "`torchrun --nproc_per_node N` to get the processes back.",
)
PROCESS_GROUP = define(
    "NM309",
    Severity.INFO,
    '`init_process_group("xla", init_method="xla://")`',
    'Rewritten to `init_process_group("neuron")` (torchrun\'s env:// rendezvous is the default).',
)
AUTOCAST = define(
    "NM310",
    Severity.INFO,
    '`torch.autocast("xla", ...)` / `torch_xla.amp.autocast(device, ...)`',
    'Rewritten to `torch.autocast(device_type="neuron", ...)`.',
)
COMPILE_BACKEND = define(
    "NM311",
    Severity.INFO,
    '`torch.compile(..., backend="openxla")`',
    'Rewritten to `backend="neuron"`.',
)
METRICS_REPORT = define(
    "NM312",
    Severity.INFO,
    "`met.metrics_report()` / `met.short_metrics_report()` prints XLA compile/execution counters",
    "Removed; recompilations show with `TORCH_LOGS=recompiles`.",
)
CHECKPOINT = define(
    "NM313",
    Severity.INFO,
    "`torch_xla.utils.checkpoint.checkpoint`",
    "Rewritten to `torch.utils.checkpoint.checkpoint(..., use_reentrant=False)`.",
)
COLLECTIVE = define(
    "NM314",
    Severity.ERROR,
    "XLA collective with different semantics (`xm.all_reduce`, `xm.all_gather`, `xm.mesh_reduce`, "
    "`xm.reduce_gradients`...)",
    "Left in place with a TODO: rewrite with torch.distributed (`dist.all_reduce` works in place, "
    "`dist.all_gather_into_tensor`, `dist.all_gather_object`) or wrap the model in DistributedDataParallel.",
)
XLA_SHARDING = define(
    "NM315",
    Severity.ERROR,
    "PyTorch/XLA FSDP or ZeRO optimizer (`XlaFullyShardedDataParallel`, `ZeroRedundancyOptimizer`)",
    "Left in place with a TODO: shard with FSDP2 (`torch.distributed.fsdp.fully_shard` per block), or "
    "load Transformers models with `DistributedConfig(fsdp_size=...)`.",
)
NEURONX_DISTRIBUTED = define(
    "NM316",
    Severity.ERROR,
    "neuronx_distributed parallel layers / parallel state",
    "Left in place with a TODO: use a DeviceMesh with DTensor tensor parallelism (`parallelize_module`, "
    "`ColwiseParallel`, `RowwiseParallel`) or `DistributedConfig(tp_size=...)` for Transformers models.",
)
NEURON_TRACE = define(
    "NM317",
    Severity.ERROR,
    "`torch_neuronx.trace(model, example_inputs)` ahead-of-time compilation",
    'Left in place with a TODO: run the model on device "neuron" and compile it with '
    '`torch.compile(model, backend="neuron", fullgraph=True, dynamic=False)`.',
)
UNSUPPORTED_XLA = define(
    "NM318",
    Severity.ERROR,
    "A torch_xla API the codemod has no rewrite for",
    "Left in place with a TODO: replace it with the torch / torch.distributed equivalent on device "
    '"neuron" by hand.',
)


@dataclass(frozen=True)
class Rename:
    """A call replaced by an expression template; `{dist}` is the file's name for torch.distributed."""

    template: str
    rule: object
    imports: tuple[str, ...] = ()
    ignore_args: bool = False  # arguments with no meaning on TorchNeuron (a rendezvous tag)


_LOCAL_RANK = 'int(os.environ.get("LOCAL_RANK", 0))'
_RANK = 'int(os.environ.get("RANK", 0))'
_WORLD_SIZE = 'int(os.environ.get("WORLD_SIZE", 1))'

CALL_RENAMES: dict[str, Rename] = {
    f"{XM}.xrt_world_size": Rename(_WORLD_SIZE, RUNTIME_CALL, ("os",)),
    f"{XR}.world_size": Rename(_WORLD_SIZE, RUNTIME_CALL, ("os",)),
    f"{XM}.get_ordinal": Rename(_RANK, RUNTIME_CALL, ("os",)),
    f"{XR}.global_ordinal": Rename(_RANK, RUNTIME_CALL, ("os",)),
    f"{XM}.get_local_ordinal": Rename(_LOCAL_RANK, RUNTIME_CALL, ("os",)),
    f"{XR}.local_ordinal": Rename(_LOCAL_RANK, RUNTIME_CALL, ("os",)),
    f"{XM}.wait_device_ops": Rename("torch.accelerator.synchronize()", RUNTIME_CALL, ("torch",)),
}
DEVICE_CALLS = frozenset({f"{XM}.xla_device", "torch_xla.device"})
SYNC_CALLS = frozenset({f"{XM}.mark_step", "torch_xla.sync"})
METRICS_CALLS = frozenset({f"{METRICS}.metrics_report", f"{METRICS}.short_metrics_report"})
# Calls rewritten into statements: handled only when they are a whole expression statement.
STATEMENT_CALLS = frozenset(
    {*SYNC_CALLS, *METRICS_CALLS, f"{XM}.master_print", f"{XM}.save", f"{XM}.rendezvous"}
)
DEVICE_LOADERS = frozenset({f"{PL}.MpDeviceLoader"})
PARALLEL_LOADER = f"{PL}.ParallelLoader"
# Tuning options of the XLA loaders; the helper loader has nothing to tune.
LOADER_OPTIONS = frozenset(
    {
        "loader_prefetch_size",
        "device_prefetch_size",
        "host_to_device_transfer_threads",
        "batches_per_execution",
        "fixed_batch_size",
        "input_sharding",
        "loader_prefetch_time",
    }
)
AUTOCASTS = frozenset({"torch.autocast", "torch.amp.autocast"})
XLA_AUTOCAST = "torch_xla.amp.autocast"
XLA_COMPILE_BACKENDS = frozenset({"openxla", "openxla_eval"})
PROCESS_GROUP_INIT = "torch.distributed.init_process_group"
XLA_CHECKPOINT = "torch_xla.utils.checkpoint.checkpoint"

REWRITTEN_CALLS = frozenset(
    {
        *CALL_RENAMES,
        *DEVICE_CALLS,
        *STATEMENT_CALLS,
        f"{XM}.is_master_ordinal",
        f"{XM}.optimizer_step",
        f"{XMP}.spawn",
    }
)

# Qualified-name prefix -> rule for what has no faithful rewrite (longest prefix first).
MANUAL_PREFIXES: tuple[tuple[str, object], ...] = (
    (f"{XM}.all_reduce", COLLECTIVE),
    (f"{XM}.all_gather", COLLECTIVE),
    (f"{XM}.reduce_scatter", COLLECTIVE),
    (f"{XM}.all_to_all", COLLECTIVE),
    (f"{XM}.mesh_reduce", COLLECTIVE),
    (f"{XM}.reduce_gradients", COLLECTIVE),
    ("torch_xla.distributed.fsdp", XLA_SHARDING),
    ("torch_xla.distributed.zero_redundancy_optimizer", XLA_SHARDING),
    ("neuronx_distributed", NEURONX_DISTRIBUTED),
    ("torch_neuronx.trace", NEURON_TRACE),
    ("torch_neuronx.xla_impl.trace", NEURON_TRACE),
    ("torch_xla", UNSUPPORTED_XLA),
)

# Marks a script that runs several processes; its device gets the LOCAL_RANK index.
_DISTRIBUTED_NAMES = frozenset(
    {
        "init_process_group",
        "xrt_world_size",
        "world_size",
        "get_ordinal",
        "global_ordinal",
        "get_local_ordinal",
        "local_ordinal",
        "DistributedDataParallel",
        "xla_multiprocessing",
        "xmp",
    }
)

HELPER_NAMES = ("_to_device", "_DeviceLoader")
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


def _keyword(call: cst.Call, name: str) -> cst.Arg | None:
    return next((arg for arg in call.args if arg.keyword and arg.keyword.value == name), None)


def _string_value(node: cst.BaseExpression | None) -> str | None:
    if isinstance(node, cst.SimpleString):
        return node.evaluated_value
    return None


def tidy_args(args: list[cst.Arg]) -> list[cst.Arg]:
    """Drop the trailing comma left on the new last argument after removing keywords."""
    if args and args[-1].comma is not cst.MaybeSentinel.DEFAULT:
        last = args[-1]
        if isinstance(last.comma, cst.Comma) and not _has_newline(last.comma):
            args = [*args[:-1], last.with_changes(comma=cst.MaybeSentinel.DEFAULT)]
    return args


def _has_newline(comma: cst.Comma) -> bool:
    after = comma.whitespace_after
    return isinstance(after, cst.ParenthesizedWhitespace)


def without_keywords(call: cst.Call, names: set[str]) -> cst.Call:
    kept = [arg for arg in call.args if not (arg.keyword and arg.keyword.value in names)]
    if len(kept) == len(call.args):
        return call
    return call.with_changes(args=tidy_args(kept))


class XlaFamily(KeepsComments):
    name = "xla"
    SYMBOLS = frozenset({"torch_xla", "neuronx_distributed", "torch_neuronx.trace", "torch_neuronx.xla_impl"})
    # torch_xla / Neuron names (through their imports), "xla" strings (devices, backends, autocast,
    # process groups), and the loader method called on a ParallelLoader.
    HINTS = frozenset({"xla", "neuron", "per_device_loader"})

    def __init__(self, ctx) -> None:
        super().__init__(ctx)
        self.distributed = False
        self.statement_calls: set[int] = set()
        self.helpers: set[str] = set()
        self.string_quotes: list[str] = []  # quotes of the f-strings around the current node
        self.call_functions: set[int] = set()

    # -- imports and file-level facts ------------------------------------------------------------

    def visit_Module(self, node: cst.Module) -> None:
        super().visit_Module(node)
        self.distributed = not _DISTRIBUTED_NAMES.isdisjoint(self.ctx.source.identifiers)

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

    def leave_Module(self, original: cst.Module, updated: cst.Module):
        updated = self.adopt(original, updated)
        defined = {
            statement.name.value
            for statement in updated.body
            if isinstance(statement, (cst.FunctionDef, cst.ClassDef))
        }
        sources = []
        if self.helpers and "_to_device" not in defined:
            sources.append(_TO_DEVICE_SOURCE)
        if "_DeviceLoader" in self.helpers and "_DeviceLoader" not in defined:
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

    # -- statements ------------------------------------------------------------------------------

    def visit_SimpleStatementLine(self, node: cst.SimpleStatementLine) -> None:
        if len(node.body) == 1 and m.matches(node.body[0], m.Expr(m.Call())):
            call = node.body[0].value
            self.statement_calls.add(id(call))
            if self._prints_metrics(call):  # `print(met.metrics_report())` goes as a whole
                self.statement_calls.update(id(arg.value) for arg in call.args)

    def leave_SimpleStatementLine(self, original: cst.SimpleStatementLine, updated: cst.SimpleStatementLine):
        result = self._statement(original, updated)
        if isinstance(result, cst.RemovalSentinel):
            self.removed(original)
            return result
        return self.adopt(original, result)

    def _statement(self, original: cst.SimpleStatementLine, updated: cst.SimpleStatementLine):
        if not (len(original.body) == 1 and m.matches(original.body[0], m.Expr(m.Call()))):
            return updated
        if len(updated.body) != 1 or not m.matches(updated.body[0], m.Expr(m.Call())):
            return updated
        call, new_call = original.body[0].value, updated.body[0].value
        name = self.ctx.qualified(call.func)
        if name in SYNC_CALLS or name in METRICS_CALLS or self._prints_metrics(call):
            self.ctx.report(call, MARK_STEP if name in SYNC_CALLS else METRICS_REPORT)
            return cst.RemoveFromParent()
        if name == f"{XM}.master_print":
            return self._master_print(call, new_call, updated)
        if name == f"{XM}.save":
            return self._save(call, new_call, updated)
        if name == f"{XM}.rendezvous":
            self.ctx.report(call, RUNTIME_CALL)
            return self._if_initialized(updated, "{dist}.barrier()")
        return updated

    def _prints_metrics(self, call: cst.Call) -> bool:
        printer = self.ctx.qualified(call.func)
        return (
            printer in ("print", f"{XM}.master_print")
            and bool(call.args)
            and all(
                isinstance(arg.value, cst.Call) and self.ctx.qualified(arg.value.func) in METRICS_CALLS
                for arg in call.args
            )
        )

    def _master_print(self, call: cst.Call, new_call: cst.Call, line: cst.SimpleStatementLine):
        renames = {"fd": "file", "finalize": "flush"}
        args = []
        for arg in new_call.args:
            if arg.keyword and arg.keyword.value in renames:
                arg = arg.with_changes(keyword=cst.Name(renames[arg.keyword.value]))
            args.append(arg)
        self.ctx.report(call, MASTER_PRINT)
        self.ctx.add_import("os")
        printed = new_call.with_changes(func=cst.Name("print"), args=args)
        return self._guarded(line, _RANK + " == 0", printed)

    def _save(self, call: cst.Call, new_call: cst.Call, line: cst.SimpleStatementLine):
        positional = [arg for arg in new_call.args if not arg.keyword and not arg.star]
        options = {arg.keyword.value: arg.value for arg in new_call.args if arg.keyword}
        literal = {key: value.value for key, value in options.items() if isinstance(value, cst.Name)}
        known = set(options) <= {"master_only", "global_master", "sync"}
        if len(positional) != 2 or not known or len(literal) != len(options):
            self.ctx.todo(
                call,
                XLA_SAVE,
                "xm.save with these arguments has no mechanical rewrite; save a CPU copy with torch.save on "
                "rank 0 (or model.save_pretrained) and add dist.barrier() if other ranks read the file",
            )
            return line
        self.ctx.report(call, XLA_SAVE)
        self.ctx.add_import("torch")
        self.helpers.add("_to_device")
        saved = parse_template_expression(
            'torch.save(_to_device({obj}, "cpu"), {path})',
            obj=positional[0].value,
            path=positional[1].value,
        )
        statements = []
        if literal.get("master_only", "True") == "True":
            self.ctx.add_import("os")
            rank = _RANK if literal.get("global_master") == "True" else _LOCAL_RANK
            statements.append(self._guarded(line, rank + " == 0", saved))
        else:
            statements.append(line.with_changes(body=[cst.Expr(saved)]))
        if literal.get("sync", "True") == "True":
            statements.append(self._if_initialized(cst.SimpleStatementLine([]), "{dist}.barrier()"))
        return cst.FlattenSentinel(statements)

    def _guarded(self, line: cst.SimpleStatementLine, test: str, expression: cst.BaseExpression) -> cst.If:
        inner = line.with_changes(body=[cst.Expr(expression)], leading_lines=[])
        return cst.If(
            test=cst.parse_expression(test),
            body=cst.IndentedBlock([inner]),
            leading_lines=line.leading_lines,
        )

    def _if_initialized(self, line: cst.SimpleStatementLine, template: str) -> cst.If:
        dist = self._dist()
        return self._guarded(
            line, f"{dist}.is_initialized()", cst.parse_expression(template.format(dist=dist))
        )

    def _dist(self) -> str:
        """The file's local name for torch.distributed, importing it as `dist` if needed."""
        for local, qualified in self.ctx.imported.items():
            if qualified == "torch.distributed":
                return local
        self.ctx.add_import("torch.distributed", asname="dist")
        return "dist"

    # -- expressions -----------------------------------------------------------------------------

    def visit_FormattedString(self, node: cst.FormattedString) -> None:
        self.string_quotes.append(node.quote)

    def leave_FormattedString(self, original, updated):
        self.string_quotes.pop()
        return updated

    def _expression(self, source: str, **nodes) -> cst.BaseExpression:
        """Parse an emitted expression; inside a double-quoted f-string its strings use single quotes."""
        if any('"' in quote for quote in self.string_quotes):
            source = source.replace('"', "'")
        return parse_template_expression(source, **nodes) if nodes else cst.parse_expression(source)

    def visit_Call(self, node: cst.Call) -> None:
        self.call_functions.add(id(node.func))

    def leave_Attribute(self, original: cst.Attribute, updated: cst.Attribute):
        name = self.ctx.qualified(original)
        if id(original) not in self.call_functions and name in REWRITTEN_CALLS:
            self.ctx.todo(
                original,
                UNSUPPORTED_XLA,
                f"`{name}` is used as a value, not called; call its replacement where it is used",
            )
        return updated

    def leave_Call(self, original: cst.Call, updated: cst.Call):
        name = self.ctx.qualified(original.func)
        if name is None:
            if m.matches(original.func, m.Attribute(value=m.Call(), attr=m.Name("per_device_loader"))):
                return self._parallel_loader(original, updated)
            return updated
        if name in STATEMENT_CALLS:
            if id(original) not in self.statement_calls:
                self.ctx.todo(
                    original,
                    UNSUPPORTED_XLA,
                    f"`{name}` is used as a value and has no expression equivalent; "
                    "call it as a statement or rewrite it by hand",
                )
            return updated
        if name in DEVICE_CALLS:
            return self._device(original, updated)
        if name == "torch.device":
            return self._torch_device(original, updated)
        if name in CALL_RENAMES:
            return self._rename(original, updated, CALL_RENAMES[name])
        if name == f"{XM}.is_master_ordinal":
            return self._is_master(original, updated)
        if name == f"{XM}.optimizer_step":
            return self._optimizer_step(original, updated)
        if name in DEVICE_LOADERS:
            return self._device_loader(original, updated, updated.args)
        if name == PARALLEL_LOADER:
            return updated  # rewritten with its .per_device_loader(...) call, or reported there
        if name == f"{XMP}.spawn":
            return self._spawn(original, updated)
        if name == PROCESS_GROUP_INIT:
            return self._init_process_group(original, updated)
        if name in AUTOCASTS or name == XLA_AUTOCAST:
            return self._autocast(original, updated, name)
        if name == "torch.compile":
            return self._compile_backend(original, updated)
        if name == XLA_CHECKPOINT:
            return self._checkpoint(original, updated)
        for prefix, rule in MANUAL_PREFIXES:
            if name == prefix or name.startswith(prefix + "."):
                what = rule.action.removeprefix("Left in place with a TODO: ")
                self.ctx.todo(original, rule, f"`{name}` has no direct TorchNeuron equivalent; {what}")
                break
        return updated

    def _device(self, original: cst.Call, updated: cst.Call):
        if updated.args:
            self.ctx.todo(
                original, UNSUPPORTED_XLA, "XLA device with an explicit index; pick the neuron device by hand"
            )
            return updated
        self.ctx.report(original, XLA_DEVICE)
        self.ctx.add_import("torch")
        if self.distributed:
            self.ctx.add_import("os")
            return self._expression(f'torch.device("neuron", {_LOCAL_RANK})')
        return self._expression('torch.device("neuron")')

    def _torch_device(self, original: cst.Call, updated: cst.Call):
        if not updated.args or _string_value(updated.args[0].value) != "xla":
            return updated
        self.ctx.report(original, XLA_DEVICE)
        first = updated.args[0].with_changes(value=cst.SimpleString('"neuron"'))
        return updated.with_changes(args=[first, *updated.args[1:]])

    def _rename(self, original: cst.Call, updated: cst.Call, rename: Rename):
        if updated.args and not rename.ignore_args:
            self.ctx.todo(original, UNSUPPORTED_XLA, "unexpected arguments; rewrite this call by hand")
            return updated
        self.ctx.report(original, rename.rule)
        for module in rename.imports:
            self.ctx.add_import(module)
        return self._expression(rename.template)

    def _is_master(self, original: cst.Call, updated: cst.Call):
        local = _keyword(updated, "local")
        positional = [arg for arg in updated.args if not arg.keyword]
        value = local.value if local else positional[0].value if positional else cst.Name("True")
        if len(updated.args) > 1 or not m.matches(value, m.Name("True") | m.Name("False")):
            self.ctx.todo(
                original,
                UNSUPPORTED_XLA,
                "is_master_ordinal with a computed argument; compare RANK or LOCAL_RANK with 0 by hand",
            )
            return updated
        self.ctx.report(original, RUNTIME_CALL)
        self.ctx.add_import("os")
        rank = _LOCAL_RANK if value.value == "True" else _RANK
        return self._expression(f"{rank} == 0")

    def _optimizer_step(self, original: cst.Call, updated: cst.Call):
        positional = [arg for arg in updated.args if not arg.keyword and not arg.star]
        options = {arg.keyword.value for arg in updated.args if arg.keyword}
        if len(positional) != 1 or not options <= {"barrier"}:
            self.ctx.todo(
                original,
                OPTIMIZER_STEP,
                "xm.optimizer_step with optimizer_args; call "
                "optimizer.step(...) and wrap the model in DistributedDataParallel",
            )
            return updated
        self.ctx.report(original, OPTIMIZER_STEP)
        return parse_template_expression("{optimizer}.step()", optimizer=positional[0].value)

    def _parallel_loader(self, original: cst.Call, updated: cst.Call):
        loader_call = original.func.value
        if self.ctx.qualified(loader_call.func) != PARALLEL_LOADER:
            return updated
        inner = updated.func.value
        positional = [arg for arg in inner.args if not arg.keyword]
        if not positional or len(updated.args) != 1:
            self.ctx.todo(
                original,
                DEVICE_LOADER,
                "ParallelLoader without a loader argument; iterate the "
                "DataLoader and move each batch with .to(device)",
            )
            return updated
        return self._device_loader(original, updated, [positional[0], updated.args[0]])

    def _device_loader(self, original: cst.Call, updated: cst.Call, args):
        loader_args = [arg for arg in args if not (arg.keyword and arg.keyword.value in LOADER_OPTIONS)]
        if len(loader_args) != 2 or any(arg.keyword or arg.star for arg in loader_args):
            self.ctx.todo(
                original,
                DEVICE_LOADER,
                "device loader with unexpected arguments; iterate the "
                "DataLoader and move each batch with .to(device)",
            )
            return updated
        self.ctx.report(original, DEVICE_LOADER)
        self.helpers.update(HELPER_NAMES)
        return parse_template_expression(
            "_DeviceLoader({loader}, {device})", loader=loader_args[0].value, device=loader_args[1].value
        )

    def _spawn(self, original: cst.Call, updated: cst.Call):
        positional = [arg for arg in updated.args if not arg.keyword and not arg.star]
        options = {arg.keyword.value: arg.value for arg in updated.args if arg.keyword}
        if len(positional) != 1 or not set(options) <= {"args", "nprocs", "start_method"}:
            self.ctx.todo(
                original,
                SPAWN,
                "xmp.spawn with these arguments; call the function with "
                "LOCAL_RANK and launch the script with torchrun --nproc_per_node N",
            )
            return updated
        nprocs = options.get("nprocs")
        count = source_code(nprocs) if nprocs is not None else "<number of devices>"
        self.ctx.report(
            original,
            SPAWN,
            "xmp.spawn rewritten to a direct call: launch the script with "
            f"`torchrun --nproc_per_node {count}` "
            '(the function must init_process_group("neuron") before any collective).',
        )
        self.ctx.add_import("os")
        call_args = [cst.Arg(self._expression(_LOCAL_RANK))]
        fn_args = options.get("args")
        if isinstance(fn_args, cst.Tuple):
            call_args += [cst.Arg(element.value) for element in fn_args.elements]
        elif fn_args is not None:
            call_args.append(cst.Arg(fn_args, star="*"))
        call_args = [
            arg.with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
            for arg in call_args[:-1]
        ] + call_args[-1:]
        return cst.Call(func=positional[0].value, args=call_args)

    def _init_process_group(self, original: cst.Call, updated: cst.Call):
        backend = _keyword(updated, "backend")
        positional = [arg for arg in updated.args if not arg.keyword]
        target = backend or (positional[0] if positional else None)
        init_method = _keyword(updated, "init_method")
        xla_backend = target is not None and _string_value(target.value) == "xla"
        xla_init = init_method is not None and _string_value(init_method.value) == "xla://"
        if not (xla_backend or xla_init):
            return updated
        self.ctx.report(original, PROCESS_GROUP)
        args = [
            arg.with_changes(value=cst.SimpleString('"neuron"')) if arg is target and xla_backend else arg
            for arg in updated.args
            if arg is not init_method or not xla_init
        ]
        return updated.with_changes(args=tidy_args(args))

    def _autocast(self, original: cst.Call, updated: cst.Call, name: str):
        device_type = _keyword(updated, "device_type")
        positional = [arg for arg in updated.args if not arg.keyword]
        first = device_type or (positional[0] if positional else None)
        if name != XLA_AUTOCAST and (first is None or _string_value(first.value) != "xla"):
            return updated
        if name == XLA_AUTOCAST and len(positional) > 1:
            self.ctx.todo(
                original,
                AUTOCAST,
                "torch_xla.amp.autocast takes (device, enabled, dtype) "
                'positionally; rewrite it as torch.autocast(device_type="neuron", dtype=...) by hand',
            )
            return updated
        self.ctx.report(original, AUTOCAST)
        neuron = cst.Arg(
            cst.SimpleString('"neuron"'),
            keyword=cst.Name("device_type"),
            equal=cst.AssignEqual(cst.SimpleWhitespace(""), cst.SimpleWhitespace("")),
        )
        rest = [arg for arg in updated.args if arg is not first]
        if rest:
            neuron = neuron.with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
        if name == XLA_AUTOCAST:
            self.ctx.add_import("torch")
            return cst.Call(func=cst.parse_expression("torch.autocast"), args=[neuron, *rest])
        return updated.with_changes(args=[neuron, *rest])

    def _compile_backend(self, original: cst.Call, updated: cst.Call):
        backend = _keyword(updated, "backend")
        if backend is None or _string_value(backend.value) not in XLA_COMPILE_BACKENDS:
            return updated
        self.ctx.report(original, COMPILE_BACKEND)
        args = [
            arg.with_changes(value=cst.SimpleString('"neuron"')) if arg is backend else arg
            for arg in updated.args
        ]
        return updated.with_changes(args=args)

    def _checkpoint(self, original: cst.Call, updated: cst.Call):
        self.ctx.report(original, CHECKPOINT)
        self.ctx.add_import("torch.utils.checkpoint")
        args = list(updated.args)
        if _keyword(updated, "use_reentrant") is None:
            last = args[-1].with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
            args = [
                *args[:-1],
                last,
                cst.Arg(
                    cst.Name("False"),
                    keyword=cst.Name("use_reentrant"),
                    equal=cst.AssignEqual(cst.SimpleWhitespace(""), cst.SimpleWhitespace("")),
                ),
            ]
        return updated.with_changes(func=cst.parse_expression("torch.utils.checkpoint.checkpoint"), args=args)


def imports_end(module: cst.Module) -> int:
    """Index in `module.body` just after the leading block of imports (docstring and imports)."""
    index = 0
    for position, statement in enumerate(module.body):
        if m.matches(statement, m.SimpleStatementLine(body=[m.Import() | m.ImportFrom()])):
            index = position + 1
        elif position == 0 and m.matches(statement, m.SimpleStatementLine(body=[m.Expr(m.SimpleString())])):
            index = 1
        else:
            break
    return index
