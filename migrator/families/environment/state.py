"""What the environment rules share in one file: which environment reads and writes a statement already
deals with, the first weight load, and the value of tests of the pre-compilation variables."""

from __future__ import annotations

import ast

import libcst as cst

from migrator.cst_helpers import is_method_call, literal_value, string_value
from migrator.families.environment.variables import MANUAL_VARIABLES, PRECOMPILE_VARIABLES, dropped_reason
from migrator.transform import SOURCE_MODULES, FileContext, Handler
from usercode.python import ast_nodes

# Environment reads and writes, torch.compile calls and decorators, weight loads.
HINTS = frozenset({"environ", "getenv", "putenv", "unsetenv", "compile", "from_pretrained"})
LEGACY_MODULES = tuple(module for module in SOURCE_MODULES if module != "torch_neuronx")
UNKNOWN = ...  # what literal_value gives for a non-literal


# Setters of test code that write the environment like `os.environ[K] = v` (pytest's monkeypatch fixture).
ENVIRONMENT_SETTERS = frozenset({"os.putenv", "os.unsetenv", "monkeypatch.setenv", "monkeypatch.delenv"})


class EnvironmentFile:
    def __init__(self, ctx: FileContext) -> None:
        self.ctx = ctx
        self.handled: set[cst.CSTNode] = set()  # env reads/writes dealt with by their statement
        self.first_load: cst.Call | None = None
        # Names bound to a copy of the environment (`env = os.environ.copy()`), by the function that binds them:
        # what is set in one is the environment of the process it is handed to.
        self.copies: set[tuple[cst.CSTNode | None, str]] = set()
        # Functions of the file that only set a variable (`def set_env(name, value): os.environ[name] = value`).
        self.setters: set[str] = set()
        # Module-level dicts of variables that are only ever handed to an environment (their keys are set).
        self.environment_dicts: frozenset[str] = frozenset()
        if "environ" in ctx.source.identifiers and any(
            isinstance(statement, cst.SimpleStatementLine)
            and isinstance(statement.body[0], cst.Assign)
            and isinstance(statement.body[0].value, cst.Dict)
            and any(
                _acted_on(string_value(getattr(e, "key", None))) for e in statement.body[0].value.elements
            )
            for statement in ctx.module.body
        ):  # a module-level dict of variables the rules act on, in a file that touches the environment
            self.environment_dicts = frozenset(
                name for name, only in _environment_dicts(ctx.code).items() if only
            )
            for name in self.environment_dicts:
                ctx.watch(name)

    def legacy(self) -> bool:
        """The file uses the optimum-neuron / XLA stack (a TorchNeuron file is left byte-identical)."""
        return bool(self.ctx.reports) or any(
            qualified.startswith(LEGACY_MODULES) for qualified in self.ctx.imported.values()
        )

    def is_environ(self, node) -> bool:
        """`os.environ`, or a name that holds a copy of it in this function (`env = dict(os.environ)`)."""
        if isinstance(node, cst.Name) and (self._function(), node.value) in self.copies:
            return True
        return self.ctx.qualified(node) == "os.environ"

    def _function(self) -> cst.CSTNode | None:
        return self.ctx.functions[-1] if self.ctx.functions else None

    def copies_environ(self, value: cst.BaseExpression) -> bool:
        """`dict(os.environ)`, `os.environ.copy()`, `{**os.environ, ...}`, `copy.copy(os.environ)`."""
        if isinstance(value, cst.Dict):
            return any(
                isinstance(element, cst.StarredDictElement) and self.is_environ(element.value)
                for element in value.elements
            )
        if not isinstance(value, cst.Call):
            return False
        if isinstance(value.func, cst.Attribute) and value.func.attr.value == "copy" and not value.args:
            return self.is_environ(value.func.value)
        callee = self.ctx.qualified(value.func)
        return (
            callee in ("dict", "copy.copy", "copy.deepcopy")
            and len(value.args) == 1
            and self.is_environ(value.args[0].value)
        )

    def note_copy(self, name: str) -> None:
        self.copies.add((self._function(), name))
        self.ctx.watch(name)

    def variable_of(self, node) -> str | None:
        """Variable a read/write node names: os.environ[K], os.environ.get/pop/setdefault(K), os.getenv(K)..."""
        if isinstance(node, cst.Subscript) and self.is_environ(node.value) and len(node.slice) == 1:
            index = node.slice[0].slice
            return string_value(index.value) if isinstance(index, cst.Index) else None
        if isinstance(node, cst.Call) and node.args:
            name = self.ctx.qualified(node.func)
            if name in self.setters:
                return string_value(node.args[0].value)
            methods = ("get", "pop", "setdefault")
            environ_method = isinstance(node.func, cst.Attribute) and self.is_environ(node.func.value)
            if (
                name in ENVIRONMENT_SETTERS
                or name == "os.getenv"
                or (environ_method and node.func.attr.value in methods)
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


def _acted_on(key: str | None) -> bool:
    """A variable the environment rules remove or flag."""
    return key is not None and (dropped_reason(key, "") is not None or key in MANUAL_VARIABLES)


def _environment_dicts(code: str) -> dict[str, bool]:
    """Module-level names bound to a dict display -> whether each of their uses gives it to an environment:
    `os.environ.update(NAME)`, `env={**os.environ, **NAME}`, `env=NAME` of a subprocess call."""
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return {}
    dicts = {
        target.id
        for statement in tree.body
        if isinstance(statement, ast.Assign) and isinstance(statement.value, ast.Dict)
        for target in statement.targets
        if isinstance(target, ast.Name)
    }
    if not dicts:
        return {}
    parents = {child: node for node in ast_nodes(tree) for child in ast.iter_child_nodes(node)}
    verdict = dict.fromkeys(dicts, True)
    for node in ast_nodes(tree):
        if isinstance(node, ast.Name) and node.id in dicts and isinstance(node.ctx, ast.Load):
            verdict[node.id] = verdict[node.id] and _given_to_environment(node, parents)
        elif (
            isinstance(node, ast.Name) and node.id in dicts and not isinstance(parents.get(node), ast.Assign)
        ):
            verdict[node.id] = False  # rebound or deleted elsewhere
    return verdict


def _given_to_environment(node: ast.Name, parents: dict) -> bool:
    parent = parents.get(node)
    if isinstance(parent, ast.keyword):  # `subprocess.run(cmd, env=NAME)`
        return parent.arg == "env"
    if isinstance(parent, ast.Call) and node in parent.args:  # `os.environ.update(NAME)`
        func = parent.func
        return (
            isinstance(func, ast.Attribute)
            and func.attr == "update"
            and ast.unparse(func.value) in ("os.environ", "environ")
        )
    if isinstance(parent, ast.Dict) and None in parent.keys:  # `{**os.environ, **NAME}` given as `env=`
        holder = parents.get(parent)
        return isinstance(holder, ast.keyword) and holder.arg == "env"
    return False


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
            if isinstance(target.target, cst.Name) and self.file.copies_environ(node.value):
                self.file.note_copy(target.target.value)
        if len(node.targets) == 1 and self.file.variable_of(node.targets[0].target) is None:
            self.file.mark_foldable(node.value)

    def visit_Del(self, node: cst.Del) -> None:
        self.file.handled.add(node.target)

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        """`def set_env(name, value): os.environ[name] = value` at module level: its calls set a variable."""
        params = [param.name.value for param in node.params.params]
        body = node.body.body if isinstance(node.body, cst.IndentedBlock) else node.body.body
        statement = body[0] if len(body) == 1 else None
        if (
            len(self.ctx.functions) > 1
            or len(params) < 2
            or not isinstance(statement, cst.SimpleStatementLine)
        ):
            return
        small = statement.body[0] if len(statement.body) == 1 else None
        target = (
            small.targets[0].target if isinstance(small, cst.Assign) and len(small.targets) == 1 else None
        )
        index = (
            target.slice[0].slice if isinstance(target, cst.Subscript) and len(target.slice) == 1 else None
        )
        sets = (
            isinstance(index, cst.Index)
            and self.file.is_environ(target.value)
            and index.value.deep_equals(cst.Name(params[0]))
            and small.value.deep_equals(cst.Name(params[1]))
        )
        if sets:
            self.file.setters.add(node.name.value)
            self.ctx.watch(node.name.value)

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
