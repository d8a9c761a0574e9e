"""Environment (NM400-NM449, Python side): variables, async weight loading, dynamic shapes.

- XLA/NxD-only variables set through `os.environ` are removed; the ones whose TorchNeuron
  replacement is unverified get a TODO (migration map §3.3). The tables are shared with the shell family.
- Tests of `NEURON_EXTRACT_GRAPHS_ONLY` / `NEURON_PARALLEL_COMPILE` (only ever set by
  `neuron_parallel_compile`, which TorchNeuron does not have) are folded to their value when unset.
- `HF_DEACTIVATE_ASYNC_LOAD=1` is set once after the imports of a migrated file that loads weights (C9).
- `torch.compile` gets `dynamic=False` and loses `mode=` values the neuron backend ignores (C4, C6).
"""

from __future__ import annotations

import libcst as cst
import libcst.matchers as m

from migrator.families.comments import KeepsComments
from migrator.families.xla import imports_end, tidy_args
from migrator.rules import Severity, define
from migrator.transform import SOURCE_MODULES, is_method_call, literal_value, method_calls

# Variables only the XLA / NxD flow reads (migration map §3.3); any XLA_* / PT_XLA_* is torch_xla's.
DROPPED_VARIABLES: dict[str, str] = {
    "XLA_USE_BF16": "XLA-only casting flag; load the model with dtype=torch.bfloat16 or train with bf16=True",
    "XLA_DOWNCAST_BF16": "XLA-only casting flag; load the model with dtype=torch.bfloat16 or train with bf16=True",
    "NEURON_FUSE_SOFTMAX": "compiler toggle of the XLA/NxD flow",
    "NEURON_RT_ASYNC_EXEC_MAX_INFLIGHT_REQUESTS": "no longer enables asynchronous execution (Neuron 2.31+)",
    "NEURON_NUM_RECENT_MODELS_TO_KEEP": "runtime tuning of the XLA flow",
    "NEURON_RT_ONE_TMPBUF_PAGE_SIZE_MB": "runtime tuning of the XLA flow",
    "NEURON_RT_STOCHASTIC_ROUNDING_EN": "runtime tuning of the XLA flow",
    "NEURON_PLATFORM_TARGET_OVERRIDE": "ahead-of-time compilation for another target; TorchNeuron compiles on the "
    "device it runs on",
    "NEURON_EXTRACT_GRAPHS_ONLY": "only meaningful under neuron_parallel_compile, which TorchNeuron does not have",
    "NEURON_PARALLEL_COMPILE": "only meaningful under neuron_parallel_compile, which TorchNeuron does not have",
}
DROPPED_PREFIXES = ("XLA_", "PT_XLA_")
MANUAL_VARIABLES: dict[str, str] = {
    "NEURON_CC_FLAGS": "compiler flags tuned for the XLA/NxD graph flow, and whether TorchNeuron's neuron "
    "backend reads them is not documented; remove them, or keep only flags the TorchNeuron compiler "
    "reference lists",
    "NEURON_COMPILE_CACHE_URL": "the XLA-flow compile cache location; set TorchNeuron's NEFF cache variables "
    "(see the TorchNeuron environment variable reference) instead",
}
PRECOMPILE_VARIABLES = frozenset({"NEURON_EXTRACT_GRAPHS_ONLY", "NEURON_PARALLEL_COMPILE"})
ASYNC_LOAD = "HF_DEACTIVATE_ASYNC_LOAD"
IGNORED_COMPILE_MODES = frozenset({"reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs"})
LEGACY_MODULES = tuple(module for module in SOURCE_MODULES if module != "torch_neuronx")


def dropped_reason(variable: str) -> str | None:
    if variable in DROPPED_VARIABLES:
        return DROPPED_VARIABLES[variable]
    if variable.startswith(DROPPED_PREFIXES):
        return "PyTorch/XLA setting"
    return None


DROPPED_VARIABLE = define(
    "NM400",
    Severity.INFO,
    "An XLA/NxD-only environment variable set from Python (`XLA_USE_BF16`, `NEURON_FUSE_SOFTMAX`, ...)",
    "Removed: nothing reads it on TorchNeuron (express bf16 with `dtype=torch.bfloat16` or `bf16=True`).",
)
MANUAL_VARIABLE = define(
    "NM401",
    Severity.WARNING,
    "`NEURON_CC_FLAGS` / `NEURON_COMPILE_CACHE_URL` set from Python",
    "Left in place with a TODO: these configured the XLA-flow compiler and cache; check the TorchNeuron "
    "environment variable reference and remove or replace them.",
)
PRECOMPILE_TEST = define(
    "NM402",
    Severity.INFO,
    "A test of `NEURON_EXTRACT_GRAPHS_ONLY` / `NEURON_PARALLEL_COMPILE` (set only by neuron_parallel_compile)",
    "Folded to its value with the variable unset: the branch for the graph-extraction run is removed.",
)
PRECOMPILE_READ = define(
    "NM403",
    Severity.WARNING,
    "A read of `NEURON_EXTRACT_GRAPHS_ONLY` / `NEURON_PARALLEL_COMPILE` the codemod cannot fold",
    "Left in place with a TODO: the variable is never set on TorchNeuron; remove the code that depends on it.",
)
ASYNC_LOAD_ADDED = define(
    "NM404",
    Severity.INFO,
    "Weights are loaded with `from_pretrained` but `HF_DEACTIVATE_ASYNC_LOAD` is not set",
    'Added `os.environ.setdefault("HF_DEACTIVATE_ASYNC_LOAD", "1")` after the imports: asynchronous weight '
    "loading is not supported on TorchNeuron.",
)
COMPILE_DYNAMIC = define(
    "NM405",
    Severity.INFO,
    "`torch.compile(...)` without `dynamic=` (automatic dynamic shapes)",
    "Added `dynamic=False`: the neuron backend compiles static shapes only; pad inputs to fixed sizes.",
)
COMPILE_DYNAMIC_TRUE = define(
    "NM406",
    Severity.WARNING,
    "`torch.compile(..., dynamic=True)`",
    "Rewritten to `dynamic=False`: the neuron backend rejects dynamic shapes; pad inputs to fixed sizes "
    "(each new shape is a recompilation).",
)
COMPILE_MODE = define(
    "NM407",
    Severity.INFO,
    '`torch.compile(..., mode="reduce-overhead" / "max-autotune*")`',
    "Removed: the neuron backend ignores modes other than the default.",
)

_FALSE = cst.Name("False")
_EQUAL = cst.AssignEqual(cst.SimpleWhitespace(""), cst.SimpleWhitespace(""))
_UNKNOWN = ...  # what literal_value gives for a non-literal


def _string(node) -> str | None:
    return node.evaluated_value if isinstance(node, cst.SimpleString) else None


class EnvironmentFamily(KeepsComments):
    name = "environment"
    # Environment reads and writes, torch.compile calls and decorators, weight loads.
    HINTS = frozenset({"environ", "getenv", "putenv", "unsetenv", "compile", "from_pretrained"})

    def __init__(self, ctx) -> None:
        super().__init__(ctx)
        self.handled: set[int] = set()  # env reads/writes dealt with by their statement
        self.first_load: cst.Call | None = None

    # -- helpers ---------------------------------------------------------------------------------

    def _legacy(self) -> bool:
        """The file uses the optimum-neuron / XLA stack (a TorchNeuron file is left byte-identical)."""
        return bool(self.ctx.reports) or any(
            qualified.startswith(LEGACY_MODULES) for qualified in self.ctx.imported.values()
        )

    def _is_environ(self, node) -> bool:
        return self.ctx.qualified(node) == "os.environ"

    def _variable_of(self, node) -> str | None:
        """Variable a read/write node names: os.environ[K], os.environ.get/pop/setdefault(K), os.getenv(K)..."""
        if isinstance(node, cst.Subscript) and self._is_environ(node.value) and len(node.slice) == 1:
            index = node.slice[0].slice
            return _string(index.value) if isinstance(index, cst.Index) else None
        if isinstance(node, cst.Call) and node.args:
            name = self.ctx.qualified(node.func)
            methods = ("get", "pop", "setdefault")
            environ_method = isinstance(node.func, cst.Attribute) and self._is_environ(node.func.value)
            if name in ("os.getenv", "os.putenv", "os.unsetenv") or (
                environ_method and node.func.attr.value in methods
            ):
                return _string(node.args[0].value)
        if isinstance(node, cst.Comparison) and len(node.comparisons) == 1:
            target = node.comparisons[0]
            if isinstance(target.operator, (cst.In, cst.NotIn)) and self._is_environ(target.comparator):
                return _string(node.left)
        return None

    # -- writes: assignments, setdefault/update/pop, del -------------------------------------------

    def visit_Module(self, node: cst.Module) -> None:
        super().visit_Module(node)

    def visit_Assign(self, node: cst.Assign) -> None:
        for target in node.targets:
            self.handled.add(id(target.target))
        if len(node.targets) == 1 and self._variable_of(node.targets[0].target) is None:
            self._mark_foldable(node.value)

    def visit_Del(self, node: cst.Del) -> None:
        self.handled.add(id(node.target))

    def leave_Assign(self, original: cst.Assign, updated: cst.Assign):
        if len(original.targets) == 1:
            variable = self._variable_of(original.targets[0].target)
            if variable is not None:
                return self._write(original, variable, updated)
            value = self._fold(original.value)
            if value is not _UNKNOWN:
                self.ctx.report(original.value, PRECOMPILE_TEST)
                return updated.with_changes(value=cst.parse_expression(repr(value)))
        return updated

    def leave_Del(self, original: cst.Del, updated: cst.Del):
        variable = self._variable_of(original.target)
        return updated if variable is None else self._write(original, variable, updated)

    def visit_Expr(self, node: cst.Expr) -> None:
        if isinstance(node.value, cst.Call):
            self.handled.add(id(node.value))

    def leave_Expr(self, original: cst.Expr, updated: cst.Expr):
        call = original.value
        if not isinstance(call, cst.Call):
            return updated
        if (
            isinstance(call.func, cst.Attribute)
            and self._is_environ(call.func.value)
            and call.func.attr.value == "update"
        ):
            return self._update(original, updated)
        variable = self._variable_of(call)
        if variable is None or self.ctx.qualified(call.func) == "os.getenv":
            return updated
        return self._write(original, variable, updated)

    def _write(self, original, variable: str, updated):
        reason = dropped_reason(variable)
        if reason is not None:
            self.ctx.report(original, DROPPED_VARIABLE, f"`{variable}` removed: {reason}.")
            return cst.RemoveFromParent()
        if variable in MANUAL_VARIABLES:
            self.ctx.todo(original, MANUAL_VARIABLE, f"`{variable}` holds {MANUAL_VARIABLES[variable]}")
        return updated

    def _update(self, original: cst.Expr, updated: cst.Expr):
        """`os.environ.update({...})` / `update(K=v)`: remove the dropped keys, TODO the manual ones."""
        call = original.value
        new_call = updated.value
        if len(call.args) == 1 and isinstance(call.args[0].value, cst.Dict):
            elements = call.args[0].value.elements
            new_elements = new_call.args[0].value.elements
            keys = [_string(e.key) if isinstance(e, cst.DictElement) else None for e in elements]
        else:
            elements, new_elements = call.args, new_call.args
            keys = [arg.keyword.value if arg.keyword else None for arg in call.args]
        kept = []
        for element, new_element, key in zip(elements, new_elements, keys, strict=True):
            if key is not None and dropped_reason(key) is not None:
                self.ctx.report(element, DROPPED_VARIABLE, f"`{key}` removed: {dropped_reason(key)}.")
                continue
            if key in MANUAL_VARIABLES:
                self.ctx.todo(element, MANUAL_VARIABLE, f"`{key}` holds {MANUAL_VARIABLES[key]}")
            kept.append(new_element)
        if len(kept) == len(elements):
            return updated
        if not kept:
            return cst.RemoveFromParent()
        if isinstance(new_call.args[0].value, cst.Dict) and len(call.args) == 1:
            kept[-1] = kept[-1].with_changes(comma=new_elements[-1].comma)
            mapping = new_call.args[0].value.with_changes(elements=kept)
            return updated.with_changes(
                value=new_call.with_changes(args=[new_call.args[0].with_changes(value=mapping)])
            )
        return updated.with_changes(value=new_call.with_changes(args=tidy_args(kept)))

    # -- reads of the pre-compilation variables ---------------------------------------------------

    def _reads(self, expression) -> list:
        if PRECOMPILE_VARIABLES.isdisjoint(self.ctx.source.strings):  # the file never names them
            return []
        found = []

        def visit(node):
            variable = self._variable_of(node)
            if variable in PRECOMPILE_VARIABLES:
                found.append(node)
                return
            for child in node.children:
                visit(child)

        visit(expression)
        return found

    def _fold(self, expression):
        """Value of an expression that reads a pre-compilation variable, with the variable unset."""
        if not self._reads(expression):
            return _UNKNOWN
        return self._evaluate(expression)

    def _mark_foldable(self, expression) -> None:
        if self._fold(expression) is not _UNKNOWN:
            self.handled.update(id(read) for read in self._reads(expression))

    def _evaluate(self, node):  # noqa: PLR0911 - one case per expression kind
        variable = self._variable_of(node)
        if variable in PRECOMPILE_VARIABLES:
            if isinstance(node, cst.Comparison):
                return isinstance(node.comparisons[0].operator, cst.NotIn)
            if isinstance(node, cst.Call):
                if len(node.args) == 1:
                    return None
                return literal_value(node.args[1].value)
            return _UNKNOWN  # os.environ[K] raises KeyError when unset
        if isinstance(node, (cst.SimpleString, cst.Integer, cst.Name)):
            return literal_value(node)
        if isinstance(node, cst.UnaryOperation) and isinstance(node.operator, cst.Not):
            value = self._evaluate(node.expression)
            return _UNKNOWN if value is _UNKNOWN else not value
        if isinstance(node, cst.BooleanOperation):
            left = self._evaluate(node.left)
            is_and = isinstance(node.operator, cst.And)
            if left is not _UNKNOWN and bool(left) != is_and:
                return left  # short circuit: False and ..., True or ...
            right = self._evaluate(node.right)
            return _UNKNOWN if _UNKNOWN in (left, right) else right
        if isinstance(node, cst.Comparison) and len(node.comparisons) == 1:
            return self._compare(node)
        if isinstance(node, cst.Call) and len(node.args) == 1 and not node.args[0].keyword:
            function = {"int": int, "bool": bool, "str": str}.get(self.ctx.qualified(node.func))
            value = self._evaluate(node.args[0].value)
            if function is None or value is _UNKNOWN:
                return _UNKNOWN
            try:
                return function(value)
            except (TypeError, ValueError):
                return _UNKNOWN
        return _UNKNOWN

    def _compare(self, node: cst.Comparison):
        comparison = node.comparisons[0]
        left = self._evaluate(node.left)
        operator = comparison.operator
        if isinstance(operator, (cst.In, cst.NotIn)) and isinstance(
            comparison.comparator, (cst.Tuple, cst.List)
        ):
            options = [literal_value(element.value) for element in comparison.comparator.elements]
            if left is _UNKNOWN or _UNKNOWN in options:
                return _UNKNOWN
            return (left in options) == isinstance(operator, cst.In)
        right = self._evaluate(comparison.comparator)
        if _UNKNOWN in (left, right):
            return _UNKNOWN
        if isinstance(operator, (cst.Equal, cst.Is)):
            return left == right
        if isinstance(operator, (cst.NotEqual, cst.IsNot)):
            return left != right
        return _UNKNOWN

    def visit_If(self, node: cst.If) -> None:
        self._mark_foldable(node.test)

    def visit_IfExp(self, node: cst.IfExp) -> None:
        self._mark_foldable(node.test)

    def leave_SimpleStatementLine(self, original, updated):
        if not updated.body:  # every small statement on the line was removed
            self.removed(original)
            return updated
        return self.adopt(original, updated)

    def leave_If(self, original: cst.If, updated: cst.If):
        result = self._fold_if(original, updated)
        if isinstance(result, cst.RemovalSentinel):
            self.removed(original)
            return result
        return self.adopt(original, result)

    def _fold_if(self, original: cst.If, updated: cst.If):
        value = self._fold(original.test)
        if value is _UNKNOWN:
            return updated
        self.ctx.report(original.test, PRECOMPILE_TEST)
        if value:
            return self._inline(updated.body, updated.leading_lines)
        if updated.orelse is None:
            return cst.RemoveFromParent()
        if isinstance(updated.orelse, cst.If):  # elif: becomes the if
            return updated.orelse.with_changes(leading_lines=updated.leading_lines)
        return self._inline(updated.orelse.body, updated.leading_lines)

    def _inline(self, block, leading_lines):
        if isinstance(block, cst.SimpleStatementSuite):
            statements = [cst.SimpleStatementLine(body=block.body)]
        else:
            statements = list(block.body)
        first = statements[0]
        statements[0] = first.with_changes(leading_lines=[*leading_lines, *first.leading_lines])
        return cst.FlattenSentinel(statements)

    def leave_IfExp(self, original: cst.IfExp, updated: cst.IfExp):
        value = self._fold(original.test)
        if value is _UNKNOWN:
            return updated
        self.ctx.report(original.test, PRECOMPILE_TEST)
        return updated.body if value else updated.orelse

    def _unfolded_read(self, original) -> None:
        if id(original) in self.handled:
            return
        variable = self._variable_of(original)
        if variable in PRECOMPILE_VARIABLES:
            self.ctx.todo(
                original,
                PRECOMPILE_READ,
                f"`{variable}` is only set by neuron_parallel_compile, which TorchNeuron does not have; "
                "treat it as unset and remove the code for the graph-extraction run",
            )

    def leave_Comparison(self, original: cst.Comparison, updated: cst.Comparison):
        self._unfolded_read(original)
        return updated

    def leave_Subscript(self, original: cst.Subscript, updated: cst.Subscript):
        self._unfolded_read(original)
        return updated

    # -- calls: weight loading and torch.compile --------------------------------------------------

    def leave_Call(self, original: cst.Call, updated: cst.Call):
        if self.first_load is None and is_method_call(original, "from_pretrained"):
            self.first_load = original
        if self.ctx.qualified(original.func) == "torch.compile" and self._legacy():
            return self._compile(original, updated)
        if self.ctx.qualified(original.func) in ("os.getenv",) or (
            isinstance(original.func, cst.Attribute) and original.func.attr.value == "get"
        ):
            self._unfolded_read(original)
        return updated

    def _compile(self, original: cst.Call, updated: cst.Call):
        args = []
        has_dynamic = False
        for arg in updated.args:
            keyword = arg.keyword.value if arg.keyword else None
            if keyword == "mode" and _string(arg.value) in IGNORED_COMPILE_MODES:
                self.ctx.report(original, COMPILE_MODE)
                continue
            if keyword == "dynamic":
                has_dynamic = True
                if m.matches(arg.value, m.Name("True")):
                    self.ctx.report(original, COMPILE_DYNAMIC_TRUE)
                    arg = arg.with_changes(value=_FALSE)
            args.append(arg)
        if not has_dynamic:
            self.ctx.report(original, COMPILE_DYNAMIC)
            if args:
                args[-1] = args[-1].with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
            args.append(cst.Arg(_FALSE, keyword=cst.Name("dynamic"), equal=_EQUAL))
        if args == list(updated.args):
            return updated
        return updated.with_changes(args=tidy_args(args))

    def leave_Decorator(self, original: cst.Decorator, updated: cst.Decorator):
        if self.ctx.qualified(original.decorator) == "torch.compile" and self._legacy():
            self.ctx.report(original.decorator, COMPILE_DYNAMIC)
            call = cst.Call(
                func=updated.decorator, args=[cst.Arg(_FALSE, keyword=cst.Name("dynamic"), equal=_EQUAL)]
            )
            return updated.with_changes(decorator=call)
        return updated

    # -- module: HF_DEACTIVATE_ASYNC_LOAD ---------------------------------------------------------

    def leave_Module(self, original: cst.Module, updated: cst.Module):
        updated = self.adopt(original, updated)
        if not self._legacy() or not self._loads_weights(updated):
            return updated
        # The text test is cheap and necessary; the tree search decides.
        if any(ASYNC_LOAD in string for string in self.ctx.source.strings) and m.findall(
            original, m.SimpleString(value=m.MatchIfTrue(lambda value: ASYNC_LOAD in value))
        ):
            return updated
        index = imports_end(updated)
        anchor = self.first_load or (original.body[imports_end(original)] if original.body else original)
        self.ctx.report(anchor, ASYNC_LOAD_ADDED)
        self.ctx.add_import("os")
        statement = cst.parse_statement(f'os.environ.setdefault("{ASYNC_LOAD}", "1")\n')
        statement = statement.with_changes(leading_lines=[cst.EmptyLine()])
        body = list(updated.body)
        if index < len(body) and not body[index].leading_lines:
            body[index] = body[index].with_changes(leading_lines=[cst.EmptyLine()])
        return updated.with_changes(body=[*body[:index], statement, *body[index:]])

    def _loads_weights(self, updated: cst.Module) -> bool:
        """A `from_pretrained` call in the input, or written by a family (the inference family turns
        `export` calls into loads)."""
        if self.first_load is not None:
            return True
        return "export" in self.ctx.code and bool(method_calls(updated, "from_pretrained"))
