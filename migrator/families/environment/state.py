"""What the environment rules share in one file: which environment reads and writes a statement already
deals with, the first weight load, and the value of tests of the pre-compilation variables."""

from __future__ import annotations

import libcst as cst

from migrator.cst_helpers import is_method_call, literal_value, string_value
from migrator.families.environment.variables import PRECOMPILE_VARIABLES
from migrator.transform import SOURCE_MODULES, FileContext, Handler

# Environment reads and writes, torch.compile calls and decorators, weight loads.
HINTS = frozenset({"environ", "getenv", "putenv", "unsetenv", "compile", "from_pretrained"})
LEGACY_MODULES = tuple(module for module in SOURCE_MODULES if module != "torch_neuronx")
UNKNOWN = ...  # what literal_value gives for a non-literal


class EnvironmentFile:
    def __init__(self, ctx: FileContext) -> None:
        self.ctx = ctx
        self.handled: set[cst.CSTNode] = set()  # env reads/writes dealt with by their statement
        self.first_load: cst.Call | None = None

    def legacy(self) -> bool:
        """The file uses the optimum-neuron / XLA stack (a TorchNeuron file is left byte-identical)."""
        return bool(self.ctx.reports) or any(
            qualified.startswith(LEGACY_MODULES) for qualified in self.ctx.imported.values()
        )

    def is_environ(self, node) -> bool:
        return self.ctx.qualified(node) == "os.environ"

    def variable_of(self, node) -> str | None:
        """Variable a read/write node names: os.environ[K], os.environ.get/pop/setdefault(K), os.getenv(K)..."""
        if isinstance(node, cst.Subscript) and self.is_environ(node.value) and len(node.slice) == 1:
            index = node.slice[0].slice
            return string_value(index.value) if isinstance(index, cst.Index) else None
        if isinstance(node, cst.Call) and node.args:
            name = self.ctx.qualified(node.func)
            methods = ("get", "pop", "setdefault")
            environ_method = isinstance(node.func, cst.Attribute) and self.is_environ(node.func.value)
            if name in ("os.getenv", "os.putenv", "os.unsetenv") or (
                environ_method and node.func.attr.value in methods
            ):
                return string_value(node.args[0].value)
        if isinstance(node, cst.Comparison) and len(node.comparisons) == 1:
            target = node.comparisons[0]
            if isinstance(target.operator, (cst.In, cst.NotIn)) and self.is_environ(target.comparator):
                return string_value(node.left)
        return None

    # -- tests of the pre-compilation variables ------------------------------------------------------------

    def reads(self, expression) -> list:
        if PRECOMPILE_VARIABLES.isdisjoint(self.ctx.source.strings):  # the file never names them
            return []
        found = []

        def visit(node):
            variable = self.variable_of(node)
            if variable in PRECOMPILE_VARIABLES:
                found.append(node)
                return
            for child in node.children:
                visit(child)

        visit(expression)
        return found

    def fold(self, expression):
        """Value of an expression that reads a pre-compilation variable, with the variable unset."""
        if not self.reads(expression):
            return UNKNOWN
        return self._evaluate(expression)

    def mark_foldable(self, expression) -> None:
        if self.fold(expression) is not UNKNOWN:
            self.handled.update(self.reads(expression))

    def _evaluate(self, node):  # noqa: PLR0911 - one case per expression kind
        variable = self.variable_of(node)
        if variable in PRECOMPILE_VARIABLES:
            if isinstance(node, cst.Comparison):
                return isinstance(node.comparisons[0].operator, cst.NotIn)
            if isinstance(node, cst.Call):
                if len(node.args) == 1:
                    return None
                return literal_value(node.args[1].value)
            return UNKNOWN  # os.environ[K] raises KeyError when unset
        if isinstance(node, (cst.SimpleString, cst.Integer, cst.Name)):
            return literal_value(node)
        if isinstance(node, cst.UnaryOperation) and isinstance(node.operator, cst.Not):
            value = self._evaluate(node.expression)
            return UNKNOWN if value is UNKNOWN else not value
        if isinstance(node, cst.BooleanOperation):
            left = self._evaluate(node.left)
            is_and = isinstance(node.operator, cst.And)
            if left is not UNKNOWN and bool(left) != is_and:
                return left  # short circuit: False and ..., True or ...
            right = self._evaluate(node.right)
            return UNKNOWN if UNKNOWN in (left, right) else right
        if isinstance(node, cst.Comparison) and len(node.comparisons) == 1:
            return self._compare(node)
        if isinstance(node, cst.Call) and len(node.args) == 1 and not node.args[0].keyword:
            function = {"int": int, "bool": bool, "str": str}.get(self.ctx.qualified(node.func))
            value = self._evaluate(node.args[0].value)
            if function is None or value is UNKNOWN:
                return UNKNOWN
            try:
                return function(value)
            except (TypeError, ValueError):
                return UNKNOWN
        return UNKNOWN

    def _compare(self, node: cst.Comparison):
        comparison = node.comparisons[0]
        left = self._evaluate(node.left)
        operator = comparison.operator
        if isinstance(operator, (cst.In, cst.NotIn)) and isinstance(
            comparison.comparator, (cst.Tuple, cst.List)
        ):
            options = [literal_value(element.value) for element in comparison.comparator.elements]
            if left is UNKNOWN or UNKNOWN in options:
                return UNKNOWN
            return (left in options) == isinstance(operator, cst.In)
        right = self._evaluate(comparison.comparator)
        if UNKNOWN in (left, right):
            return UNKNOWN
        if isinstance(operator, (cst.Equal, cst.Is)):
            return left == right
        if isinstance(operator, (cst.NotEqual, cst.IsNot)):
            return left != right
        return UNKNOWN


class EnvironmentTracker(Handler):
    """Notes which environment reads a statement deals with (writes, foldable tests) before its parts are
    left, and the first weight load."""

    HINTS = HINTS

    def __init__(self, ctx: FileContext) -> None:
        super().__init__(ctx)
        self.file = ctx.state(EnvironmentFile)

    def visit_Assign(self, node: cst.Assign) -> None:
        for target in node.targets:
            self.file.handled.add(target.target)
        if len(node.targets) == 1 and self.file.variable_of(node.targets[0].target) is None:
            self.file.mark_foldable(node.value)

    def visit_Del(self, node: cst.Del) -> None:
        self.file.handled.add(node.target)

    def visit_Expr(self, node: cst.Expr) -> None:
        if isinstance(node.value, cst.Call):
            self.file.handled.add(node.value)

    def visit_If(self, node: cst.If) -> None:
        self.file.mark_foldable(node.test)

    def visit_IfExp(self, node: cst.IfExp) -> None:
        self.file.mark_foldable(node.test)

    def leave_Call(self, original: cst.Call, updated: cst.Call):
        if self.file.first_load is None and is_method_call(original, "from_pretrained"):
            self.file.first_load = original
        return updated


RULES = ()  # reports nothing itself
HANDLER = EnvironmentTracker
