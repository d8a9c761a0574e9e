"""libcst helpers every rule shares: names, node search, literals, arguments (build, find, remove, append),
the import block, and comment re-homing for removed statements (applied by the dispatcher)."""

from __future__ import annotations

import dataclasses
import itertools
from functools import cache

import libcst as cst
import libcst.matchers as m

from migrator.source_map import NODE_CLASSES, TOKEN_CLASSES, PlainCodegen

# --- names and search ------------------------------------------------------------------------------------


def dotted_name(node: cst.BaseExpression) -> str | None:
    """`a.b.c` for a Name/Attribute chain, None for anything else (calls, subscripts...)."""
    if isinstance(node, cst.Name):
        return node.value
    if isinstance(node, cst.Attribute):
        base = dotted_name(node.value)
        return f"{base}.{node.attr.value}" if base else None
    return None


class _FieldOrder(cst.CSTVisitor):
    """Records the fields libcst visits on a node, in its visiting (source) order, without going deeper."""

    def __init__(self) -> None:
        super().__init__()
        self.fields: list[str] = []

    def on_visit(self, node: cst.CSTNode) -> bool:
        return False

    def on_visit_attribute(self, node: cst.CSTNode, attribute: str) -> None:
        self.fields.append(attribute)


_CHILD_FIELDS: dict[type, tuple[str, ...]] = {}


def _child_fields(node: cst.CSTNode) -> tuple[str, ...]:
    """The fields of a node class that hold nodes, in the order libcst visits them (learnt once per class):
    libcst's own visit rebuilds every node it passes, reading these fields does not."""
    fields = _CHILD_FIELDS.get(type(node))
    if fields is None:
        recorder = _FieldOrder()
        node._visit_and_replace_children(recorder)
        fields = list(dict.fromkeys(recorder.fields))
        # A field libcst does not visit when it is None (an f-string's `format_spec`) is its last one.
        fields += [
            field.name
            for field in dataclasses.fields(node)
            if field.name not in fields and getattr(node, field.name) is None
        ]
        _CHILD_FIELDS[type(node)] = fields = tuple(fields)
    return fields


def _children(node: cst.CSTNode) -> list[cst.CSTNode]:
    """The node's children in source order, read from its fields."""
    children = []
    for name in _child_fields(node):
        value = getattr(node, name)
        kind = type(value)
        if kind is tuple or kind is list:
            children.extend(value)
        elif _is_node(value, kind):
            children.append(value)
    return children


def _is_node(value, kind: type) -> bool:
    """Whether a field's value (of class `kind`) is a node: a concrete class is found without an ABC isinstance
    check; None, MaybeSentinel and text are not."""
    return kind in NODE_CLASSES or (
        value is not None and kind is not cst.MaybeSentinel and isinstance(value, cst.CSTNode)
    )


def _children_but_tokens(node: cst.CSTNode) -> list[cst.CSTNode]:
    """The node's children in reverse source order (for a stack), less the tokens (`TOKEN_CLASSES`)."""
    return [child for child in reversed(_children(node)) if type(child) not in TOKEN_CLASSES]


def descendants(node: cst.CSTNode, kinds: type | tuple[type, ...]) -> list:
    """Nodes of the given types in `node` (itself included), in source order: `m.findall` for a bare
    node type; several types gather in one walk. A whole module's nodes are walked once (the rules ask
    of the same module dozens of times): its nodes of each type, and any node's subtree, are read from
    that walk."""
    matching = _matching_classes(kinds)
    if not matching.isdisjoint(TOKEN_CLASSES):  # the module's walk leaves them out
        return [found for found in _walk(node) if type(found) in matching]
    if isinstance(node, cst.Module):
        return list(_walked(node).of_kinds(kinds))
    walked = _WALKED
    start = walked.positions.get(id(node)) if walked is not None else None
    if start is None:  # not a node of the module walked last (a rewritten one, a snippet)
        return [found for found in _walk(node) if type(found) in matching]
    return [found for found in walked.nodes[start : walked.ends[start]] if type(found) in matching]


@cache
def _matching_classes(kinds: type | tuple[type, ...]) -> frozenset[type]:
    """The concrete node classes that are instances of `kinds`: a set lookup per node, not an ABC check."""
    return frozenset(kind for kind in NODE_CLASSES if issubclass(kind, kinds))


class _Walked:
    """A module's nodes in source order, tokens aside (each subtree a slice of them: `ends`), and those of each
    type asked."""

    def __init__(self, module: cst.Module) -> None:
        self.module = module  # held: while it lives, no other node has its nodes' ids
        self.nodes: list[cst.CSTNode] = []
        self.ends: list[int] = []  # for the node at each index, the index after its last descendant
        stack: list = [module]
        while stack:
            item = stack.pop()
            if type(item) is int:  # the subtree that started at this index ends here
                self.ends[item] = len(self.nodes)
                continue
            stack.append(len(self.nodes))
            self.nodes.append(item)
            self.ends.append(0)
            stack.extend(_children_but_tokens(item))
        self.positions = {id(node): index for index, node in enumerate(self.nodes)}
        self._of_kinds: dict = {}

    def of_kinds(self, kinds: type | tuple[type, ...]) -> list[cst.CSTNode]:
        found = self._of_kinds.get(kinds)
        if found is None:
            matching = _matching_classes(kinds)
            found = self._of_kinds[kinds] = [node for node in self.nodes if type(node) in matching]
        return found


_WALKED: _Walked | None = None  # the module walked last


def _walked(module: cst.Module) -> _Walked:
    global _WALKED
    if _WALKED is None or _WALKED.module is not module:
        _WALKED = _Walked(module)
    return _WALKED


def _walk(node: cst.CSTNode) -> list[cst.CSTNode]:
    found = []
    stack = [node]
    while stack:
        current = stack.pop()
        found.append(current)
        stack.extend(reversed(_children(current)))
    return found


def parents(node: cst.CSTNode) -> dict[cst.CSTNode, cst.CSTNode]:
    """Each node's parent within `node`: libcst's ParentNodeProvider, read from the child fields (a
    tenth of its cost: no visitor, no metadata wrapper)."""
    found: dict[cst.CSTNode, cst.CSTNode] = {}
    stack = [node]
    while stack:
        current = stack.pop()
        children = _children(current)
        for child in children:
            found[child] = current
        stack.extend(children)
    return found


def visit_read_only(node: cst.CSTNode, visitor: cst.CSTVisitor) -> None:
    """`node.visit(visitor)` for a visitor that only reads, and reads no token (`TOKEN_CLASSES`: whitespace,
    comments, operators, brackets, passed over): the same `visit_<Node>` / `leave_<Node>` calls on every other
    node in the same order (field handlers such as `visit_Call_func` aside), reading the child fields instead
    of rebuilding every node passed, which makes libcst's visit cost as much as a transform."""
    stack: list[tuple[cst.CSTNode, bool]] = [(node, False)]
    while stack:
        current, leaving = stack.pop()
        if leaving:
            visitor.on_leave(current)
        elif visitor.on_visit(current):
            stack.append((current, True))
            stack.extend((child, False) for child in _children_but_tokens(current))
        else:
            visitor.on_leave(current)


def transform(node: cst.CSTNode, transformer: cst.CSTTransformer, leave_out: frozenset[type] = frozenset()):
    """`node.visit(transformer)` that rebuilds a node only where a child changed: the same `visit_<Node>` /
    `leave_<Node>` calls in the same order (field handlers such as `visit_Call_func` aside), removals and
    flattening as libcst applies them, but an unchanged subtree comes back as the same objects (libcst's
    visit constructs and validates a copy of every node it passes: most of a transform's cost).
    `leave_out`: node classes the transformer has nothing to do with, nor with anything in them (see
    `TOKEN_CLASSES`): passed over, as they are."""
    if transformer.on_visit(node):
        changes = None
        for name in _child_fields(node):
            value = getattr(node, name)
            kind = type(value)
            if kind is tuple or kind is list:
                visited = _transformed_children(node, name, value, transformer, leave_out)
            elif kind in leave_out:
                continue
            elif _is_node(value, kind):
                visited = _transformed_child(node, name, value, transformer, leave_out)
            else:  # None, MaybeSentinel, or the text of an optional field (`IndentedBlock.indent`)
                continue
            if visited is not value:
                changes = changes or {}
                changes[name] = visited
        updated = node.with_changes(**changes) if changes else node
    else:
        updated = node
    result = transformer.on_leave(node, updated)
    if isinstance(result, cst.RemovalSentinel) and type(node) is cst.Module:
        return node.with_changes(body=(), header=(), footer=())
    return result


def _transformed_children(
    parent, name: str, children, transformer: cst.CSTTransformer, leave_out: frozenset[type]
):
    """A sequence field transformed (libcst's `visit_sequence` / `visit_body_sequence`): the same sequence
    when no child changed."""
    body = name == "body" and type(parent) in (cst.Module, cst.IndentedBlock)
    visited = []
    changed = False
    for child in children:
        result = child if type(child) in leave_out else transform(child, transformer, leave_out)
        if result is child:
            visited.append(child)
            continue
        changed = True
        if isinstance(result, cst.RemovalSentinel):
            continue
        for new in result if isinstance(result, cst.FlattenSentinel) else (result,):
            # A statement line whose small statements were all removed goes with them.
            if not (body and new._is_removable() and not child._is_removable()):
                visited.append(new)
    return tuple(visited) if changed else children


def _transformed_child(
    parent, name: str, child: cst.CSTNode, transformer: cst.CSTTransformer, leave_out: frozenset[type]
):
    """A single-node field transformed (libcst's `visit_required` / `visit_optional` / `visit_sentinel`)."""
    result = transform(child, transformer, leave_out)
    if result is child or isinstance(result, cst.CSTNode):
        return result
    annotation = str(parent.__dataclass_fields__[name].type)
    if isinstance(result, cst.RemovalSentinel) and "MaybeSentinel" in annotation:
        return cst.MaybeSentinel.DEFAULT
    if isinstance(result, cst.RemovalSentinel) and ("Optional" in annotation or "None" in annotation):
        return None
    raise TypeError(f"{type(parent).__name__}.{name} cannot be removed or replaced by a sequence")


# Calls whose arguments a program only shows to a person: `print(...)`, a logger's methods, `warnings.warn`,
# `xm.master_print`, `click.echo`, Streamlit's `st.write`, pytest's `skip` / `xfail` / `fail` (their reason).
PRINT_FUNCTIONS = frozenset({"print", "pprint", "master_print", "echo", "secho"})
LOG_METHODS = frozenset(
    {"debug", "info", "warning", "warn", "error", "exception", "critical", "fatal", "log"}
)
_STREAMLIT = frozenset(
    {"write", "markdown", "text", "caption", "info", "warning", "error", "success", "title"}
)
_PYTEST_OUTCOMES = frozenset({"skip", "xfail", "fail", "exit"})
SHOWN_METHODS = PRINT_FUNCTIONS | LOG_METHODS | _STREAMLIT | _PYTEST_OUTCOMES


def shows(callee: str | None) -> bool:
    """Whether a call of `callee` (a dotted name as written) only shows its arguments to a person."""
    if not callee:
        return False
    owner, _, method = callee.rpartition(".")
    owner = owner.rpartition(".")[2].lower()
    if not owner:
        return method in PRINT_FUNCTIONS
    if method in PRINT_FUNCTIONS:
        return True  # console.print, xm.master_print, click.echo
    if method in LOG_METHODS and ("log" in owner or owner == "warnings"):
        return True
    if owner == "st" and method in _STREAMLIT:
        return True
    return owner == "pytest" and method in _PYTEST_OUTCOMES


def is_method_call(node: cst.CSTNode, method: str) -> bool:
    """`<anything>.<method>(...)`, e.g. any `from_pretrained` call."""
    return (
        isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) and node.func.attr.value == method
    )


def method_calls(node: cst.CSTNode, method: str) -> list[cst.Call]:
    """The `<anything>.<method>(...)` calls in `node` (itself included), in source order."""
    return [call for call in descendants(node, cst.Call) if is_method_call(call, method)]


def source_code(node: cst.CSTNode) -> str:
    """The code of one node, printed on its own with libcst's default module settings."""
    state = PlainCodegen(default_indent="    ", default_newline="\n")
    node._codegen(state)
    return "".join(state.tokens)


# --- literals --------------------------------------------------------------------------------------------


def literal_value(node: cst.BaseExpression):
    """Python value of a literal (str, int, bool, None); `...` (Ellipsis) when it is not a literal."""
    if isinstance(node, (cst.SimpleString, cst.Integer)):
        return node.evaluated_value
    if isinstance(node, cst.Name) and node.value in ("True", "False", "None"):
        return {"True": True, "False": False, "None": None}[node.value]
    return ...


def string_value(node: cst.BaseExpression | None) -> str | None:
    """The value of a plain string literal, None for anything else."""
    return node.evaluated_value if isinstance(node, cst.SimpleString) else None


def is_literal(node: cst.BaseExpression, value: str) -> bool:
    """`node` is the integer or name literal spelled `value` (`1`, `True`...)."""
    return isinstance(node, (cst.Integer, cst.Name)) and node.value == value


# --- arguments -------------------------------------------------------------------------------------------


def keyword_arg(name: str, value: cst.BaseExpression) -> cst.Arg:
    """`name=value`, written the way PEP 8 writes keyword arguments."""
    return cst.Arg(
        value=value,
        keyword=cst.Name(name),
        equal=cst.AssignEqual(
            whitespace_before=cst.SimpleWhitespace(""), whitespace_after=cst.SimpleWhitespace("")
        ),
    )


def find_keyword(call: cst.Call, name: str) -> cst.Arg | None:
    return next((arg for arg in call.args if arg.keyword is not None and arg.keyword.value == name), None)


def argument(call: cst.Call, index: int, keyword: str) -> cst.BaseExpression | None:
    """The value of a parameter given by keyword or as the `index`-th positional argument (None: not given)."""
    found = find_keyword(call, keyword)
    if found is not None:
        return found.value
    positional = [arg for arg in call.args if arg.keyword is None and not arg.star]
    return positional[index].value if len(positional) > index else None


def bound_arguments(call: cst.Call, parameters: tuple[str, ...]) -> dict[str, cst.BaseExpression] | None:
    """The call's arguments by the parameter of `parameters` (the callee's, in order) each binds; None when one is
    unpacked (`*args`, `**kwargs`), is positional past them or names none of them, or binds one twice."""
    found: dict[str, cst.BaseExpression] = {}
    for index, arg in enumerate(call.args):
        if arg.star:
            return None
        name = arg.keyword.value if arg.keyword else parameters[index] if index < len(parameters) else None
        if name not in parameters or name in found:
            return None
        found[name] = arg.value
    return found


def literal_mapping(node: cst.BaseExpression) -> dict[str, cst.BaseExpression] | None:
    """Keys and values of a dict display with string keys (`{"a": 1}`) or of a `dict(a=1)` call; None for
    anything else (a key only known at run time, `**other` inside)."""
    if isinstance(node, cst.Dict):
        mapping = {}
        for element in node.elements:
            key = string_value(element.key) if isinstance(element, cst.DictElement) else None
            if key is None:
                return None
            mapping[key] = element.value
        return mapping
    if m.matches(node, m.Call(func=m.Name("dict"))) and all(arg.keyword for arg in node.args):
        return {arg.keyword.value: arg.value for arg in node.args}
    return None


def bound_mapping(module: cst.Module, name: str) -> dict[str, cst.BaseExpression] | None:
    """The literal mapping the variable `name` holds wherever it is unpacked: the module assigns it once, a
    literal mapping, and uses it nowhere but in `**name` (a mapping handed on, changed or rebound can hold any
    key); None otherwise."""
    nodes = descendants(module, (cst.Name, cst.Attribute, cst.Arg, cst.Assign, cst.FunctionDef, cst.ClassDef))
    not_variables = set()  # attribute and keyword names, definitions' names
    assigned, unpacked, mapping = set(), set(), None
    for node in nodes:
        if isinstance(node, cst.Attribute):
            not_variables.add(node.attr)
        elif isinstance(node, (cst.FunctionDef, cst.ClassDef)):
            not_variables.add(node.name)
        elif isinstance(node, cst.Arg):
            if node.keyword is not None:
                not_variables.add(node.keyword)
            if node.star == "**" and m.matches(node.value, m.Name(name)):
                unpacked.add(node.value)
        elif isinstance(node, cst.Assign) and m.matches(
            node, m.Assign(targets=[m.AssignTarget(m.Name(name))])
        ):
            assigned.add(node.targets[0].target)
            mapping = literal_mapping(node.value)
    if len(assigned) != 1 or mapping is None:
        return None
    uses = [node for node in nodes if isinstance(node, cst.Name) and node.value == name]
    if any(use not in not_variables and use not in assigned and use not in unpacked for use in uses):
        return None
    return mapping


def unpacked_mapping(
    call: cst.Call, module: cst.Module, read=None
) -> dict[str, cst.BaseExpression | None] | None:
    """What the `**` arguments of `call` pass, when the file fixes it: key -> value (None: a value not known);
    None when one of them cannot be read. `read(expression)`: a family's own reading of an unpacked
    expression (the same kind of mapping, or None), tried after literal mappings and names bound to one.

    A keyword may be added to a call with `**` arguments only when this says they lack it: given twice, it
    raises `TypeError: got multiple values for keyword argument`."""
    passed: dict[str, cst.BaseExpression | None] = {}
    for arg in call.args:
        if arg.star != "**":
            continue
        mapping = literal_mapping(arg.value)
        if mapping is None and isinstance(arg.value, cst.Name):
            mapping = bound_mapping(module, arg.value.value)
        if mapping is None and read is not None:
            mapping = read(arg.value)
        if mapping is None:
            return None
        passed.update(mapping)
    return passed


def tidy_args(args: list[cst.Arg]) -> list[cst.Arg]:
    """Drop the trailing comma left on the new last argument after removing some (one-line calls only)."""
    if args and args[-1].comma is not cst.MaybeSentinel.DEFAULT:
        last = args[-1]
        if isinstance(last.comma, cst.Comma) and not isinstance(
            last.comma.whitespace_after, cst.ParenthesizedWhitespace
        ):
            args = [*args[:-1], last.with_changes(comma=cst.MaybeSentinel.DEFAULT)]
    return args


def _end_of_line(arg: cst.Arg) -> cst.TrailingWhitespace | None:
    """The end-of-line part (comment) after an argument of a call written one argument per line."""
    whitespace = arg.comma.whitespace_after if isinstance(arg.comma, cst.Comma) else arg.whitespace_after_arg
    return whitespace.first_line if isinstance(whitespace, cst.ParenthesizedWhitespace) else None


def _with_end_of_line(arg: cst.Arg, line: cst.TrailingWhitespace | None) -> cst.Arg:
    line = line or cst.TrailingWhitespace()
    if isinstance(arg.comma, cst.Comma):
        if isinstance(arg.comma.whitespace_after, cst.ParenthesizedWhitespace):
            whitespace = arg.comma.whitespace_after.with_changes(first_line=line)
            return arg.with_changes(comma=arg.comma.with_changes(whitespace_after=whitespace))
    elif isinstance(arg.whitespace_after_arg, cst.ParenthesizedWhitespace):
        return arg.with_changes(whitespace_after_arg=arg.whitespace_after_arg.with_changes(first_line=line))
    return arg


def without_args(args: list[cst.Arg], removed: set[cst.Arg]) -> list[cst.Arg]:
    """`args` minus the ones in `removed`. Comments stay where they were: a removed argument's end-of-line
    comment goes with it, the comment lines under it (about the next argument) stay, and the new last
    argument takes the old ending (trailing comma or not)."""
    kept: list[cst.Arg] = []
    for arg in args:
        if arg not in removed:
            kept.append(arg)
            continue
        below = arg.comma.whitespace_after if isinstance(arg.comma, cst.Comma) else None
        if isinstance(below, cst.ParenthesizedWhitespace) and below.empty_lines and kept:
            previous = kept[-1]
            if isinstance(previous.comma, cst.Comma) and isinstance(
                previous.comma.whitespace_after, cst.ParenthesizedWhitespace
            ):
                whitespace = previous.comma.whitespace_after
                whitespace = whitespace.with_changes(
                    empty_lines=[*whitespace.empty_lines, *below.empty_lines]
                )
                kept[-1] = previous.with_changes(
                    comma=previous.comma.with_changes(whitespace_after=whitespace)
                )
    if kept and args[-1] in removed:
        last = kept[-1].with_changes(comma=args[-1].comma, whitespace_after_arg=args[-1].whitespace_after_arg)
        kept[-1] = _with_end_of_line(last, _end_of_line(kept[-1]))
    return kept


def with_appended(args: list[cst.Arg], new: list[cst.Arg]) -> list[cst.Arg]:
    """`args` plus `new` at the end, laid out like the existing arguments (one per line stays one per
    line); end-of-line comments stay on the argument they belong to."""
    if not new:
        return args
    separator = next(
        (arg.comma for arg in reversed(args[:-1]) if isinstance(arg.comma, cst.Comma)),
        cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")),
    )
    if isinstance(separator.whitespace_after, cst.ParenthesizedWhitespace):
        separator = separator.with_changes(
            whitespace_after=separator.whitespace_after.with_changes(
                first_line=cst.TrailingWhitespace(), empty_lines=[]
            )
        )
    if not args:
        return [*(arg.with_changes(comma=separator) for arg in new[:-1]), new[-1]]
    last = args[-1]
    old_last = last.with_changes(comma=separator, whitespace_after_arg=cst.SimpleWhitespace(""))
    final = new[-1].with_changes(comma=last.comma, whitespace_after_arg=last.whitespace_after_arg)
    return [
        *args[:-1],
        _with_end_of_line(old_last, _end_of_line(last)),
        *(arg.with_changes(comma=separator) for arg in new[:-1]),
        _with_end_of_line(final, None),
    ]


# --- module layout ---------------------------------------------------------------------------------------


_OS_ENVIRON = m.Attribute(value=m.Name("os"), attr=m.Name("environ"))
# Settings a script makes before the imports that read them: `os.environ["X"] = ...`, `os.environ.setdefault(...)`
# / `update(...)`, `os.putenv(...)`, `sys.path.insert(...)` / `append(...)`.
_SETUP = m.Assign(targets=[m.AssignTarget(m.Subscript(value=_OS_ENVIRON))]) | m.Expr(
    m.Call(
        func=m.Attribute(value=_OS_ENVIRON)
        | m.Attribute(value=m.Name("os"), attr=m.Name("putenv"))
        | m.Attribute(value=m.Attribute(value=m.Name("sys"), attr=m.Name("path")))
    )
)


def is_import_line(statement: cst.CSTNode) -> bool:
    return m.matches(statement, m.SimpleStatementLine(body=[m.Import() | m.ImportFrom()]))


def is_setup_line(statement: cst.CSTNode) -> bool:
    """A line of environment settings (`os.environ[...] = ...`, `sys.path.insert(...)`...) only."""
    return isinstance(statement, cst.SimpleStatementLine) and all(
        m.matches(small, _SETUP) for small in statement.body
    )


def imports_end(module: cst.Module) -> int:
    """Index in `module.body` just after its header: the docstring, the imports and the environment settings
    among and right after them (`os.environ["NEURON_CC_FLAGS"] = ...` written before `import torch` must still
    come first: what is added to the imports or after them goes below)."""
    index = 0
    for position, statement in enumerate(module.body):
        if is_import_line(statement) or is_setup_line(statement):
            index = position + 1
        elif position == 0 and m.matches(statement, m.SimpleStatementLine(body=[m.Expr(m.SimpleString())])):
            index = 1
        else:
            break
    return index


@cache
def definition_statement(source: str) -> cst.BaseStatement:
    """A helper's definition (the source of a function or class a rule adds to the file) as a statement, two blank
    lines above it; parsed once per source (nodes are immutable)."""
    statement = cst.parse_statement(source.lstrip("\n"))
    return statement.with_changes(leading_lines=[cst.EmptyLine(), cst.EmptyLine()])


def with_definitions(module: cst.Module, sources: list[str]) -> cst.Module:
    """`module` with the helper definitions `sources` after its header (`imports_end`), each with two blank lines
    above it, as many below the last one; a definition the module already has (by name) is not added again."""
    defined = {
        statement.name.value
        for statement in module.body
        if isinstance(statement, (cst.FunctionDef, cst.ClassDef))
    }
    helpers = [
        statement for statement in map(definition_statement, sources) if statement.name.value not in defined
    ]
    if not helpers:
        return module
    index = imports_end(module)
    rest = list(module.body[index:])
    if rest:  # two blank lines between the helpers and what follows
        blank = sum(1 for _ in itertools.takewhile(lambda line: line.comment is None, rest[0].leading_lines))
        extra = [cst.EmptyLine()] * max(0, 2 - blank)
        rest[0] = rest[0].with_changes(leading_lines=[*extra, *rest[0].leading_lines])
    return module.with_changes(body=[*module.body[:index], *helpers, *rest])


# Nodes that hold statements: a transform of import statements descends through these only.
_STATEMENT_CONTAINERS = (
    cst.Module,
    cst.BaseCompoundStatement,
    cst.BaseSuite,
    cst.Else,
    cst.ExceptHandler,
    cst.ExceptStarHandler,
    cst.Finally,
    cst.MatchCase,
)


def may_hold_imports(node: cst.CSTNode) -> bool:
    """Whether a transform that edits import statements must enter `node` (never an expression)."""
    if isinstance(node, cst.SimpleStatementLine):
        return any(isinstance(small, (cst.Import, cst.ImportFrom)) for small in node.body)
    return isinstance(node, (*_STATEMENT_CONTAINERS, cst.Import, cst.ImportFrom))


def with_leading_lines(statement, lines: list[cst.EmptyLine]):
    return statement.with_changes(leading_lines=[*lines, *statement.leading_lines])


class CommentKeeper:
    """Keeps the comments of removed statements (the dispatcher calls it for every statement it leaves).

    A comment line above a removed statement usually introduces the code that follows it as well, so it
    moves to the next statement of the same block (or to the end of the block when the removed statement
    was the last one).
    """

    def __init__(self) -> None:
        self.following: dict[cst.CSTNode, cst.CSTNode] = {}  # statement -> next one, or its block when last
        self._orphans: dict[cst.CSTNode, list[cst.EmptyLine]] = {}

    def index(self, block: cst.Module | cst.IndentedBlock) -> None:
        """Note which statement follows which in a block of the input, before the walk enters it."""
        body = block.body
        for statement, following in zip(body, [*body[1:], block], strict=True):
            self.following[statement] = following

    def removed(self, original: cst.CSTNode) -> None:
        """`original` (a statement) is being removed: its comment lines go to what follows it."""
        lines = [*self._orphans.pop(original, []), *getattr(original, "leading_lines", ())]
        if any(line.comment for line in lines) and original in self.following:
            self._orphans.setdefault(self.following[original], []).extend(lines)

    def hand_on(self, original: cst.CSTNode, lines: list[cst.EmptyLine]) -> None:
        """Comment lines `original` holds elsewhere than above it (its emptied block's): they go where its own
        go, should it be removed."""
        if lines:
            self._orphans.setdefault(original, []).extend(lines)

    def left(self, original: cst.CSTNode, updated):
        """What the walk returns for a statement or block, with the comments handed to it."""
        if isinstance(updated, cst.RemovalSentinel):
            self.removed(original)
            return updated
        lines = self._orphans.pop(original, None)
        if not lines:
            return updated
        if isinstance(updated, (cst.IndentedBlock, cst.Module)):
            return updated.with_changes(footer=[*lines, *updated.footer])
        if isinstance(updated, (cst.SimpleStatementLine, cst.BaseCompoundStatement)):
            return with_leading_lines(updated, lines)
        if isinstance(updated, cst.FlattenSentinel) and updated.nodes:
            first, *rest = updated.nodes
            return cst.FlattenSentinel([with_leading_lines(first, lines), *rest])
        self._orphans[original] = lines  # removed as well: `removed` passes them on
        self.removed(original)
        return updated


# --- blocks a removal emptied ------------------------------------------------------------------------------


def _emptied(updated: cst.BaseSuite, original: cst.BaseSuite) -> bool:
    """A block the rewrite removed every statement of (libcst would print `pass` for it)."""
    return not updated.body and bool(original.body)


# Calls that only read a value: an `if` test made of them has no effect of its own.
_READING_CALLS = frozenset(
    {"os.environ.get", "os.getenv", "int", "str", "float", "bool", "len", "isinstance", "hasattr"}
)


def _pure(test: cst.BaseExpression) -> bool:
    """An `if` test that does nothing but compute a value: names, attributes, literals, comparisons, `and` /
    `or` / `not` of these, and calls that only read (`os.environ.get`, `int`...); no other call, subscript,
    walrus or await."""
    allowed = (
        cst.Arg,
        cst.Name,
        cst.Attribute,
        cst.Comparison,
        cst.ComparisonTarget,
        cst.BooleanOperation,
        cst.UnaryOperation,
        cst.BaseNumber,
        cst.BaseString,
        cst.FormattedStringText,
        cst.LeftParen,
        cst.RightParen,
    )
    return all(
        isinstance(node, allowed)
        or (isinstance(node, cst.Call) and dotted_name(node.func) in _READING_CALLS)
        or not isinstance(node, (cst.BaseExpression, cst.Arg))
        for node in descendants(test, cst.CSTNode)
    )


_INVERSE = {
    cst.Equal: cst.NotEqual,
    cst.NotEqual: cst.Equal,
    cst.Is: cst.IsNot,
    cst.IsNot: cst.Is,
    cst.In: cst.NotIn,
    cst.NotIn: cst.In,
}


def negated(test: cst.BaseExpression) -> cst.BaseExpression:
    """`not test`, written the way a person would: `a == b` -> `a != b`, `not a` -> `a`."""
    if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not) and not test.lpar:
        return test.expression
    if isinstance(test, cst.Comparison) and len(test.comparisons) == 1 and not test.lpar:
        target = test.comparisons[0]
        inverse = _INVERSE.get(type(target.operator))
        if inverse is not None:
            operator = inverse(
                whitespace_before=target.operator.whitespace_before,
                whitespace_after=target.operator.whitespace_after,
            )
            return test.with_changes(comparisons=[target.with_changes(operator=operator)])
    if isinstance(test, (cst.BooleanOperation, cst.Comparison, cst.IfExp, cst.Lambda, cst.NamedExpr)):
        test = test.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])
    return cst.UnaryOperation(operator=cst.Not(), expression=test)


def without_empty_branches(original: cst.If, updated: cst.If):
    """An `if` whose branch the rewrite emptied (`if is_xla: xm.mark_step()`), simplified: an emptied `else`
    goes, `if t: <emptied> else: B` becomes `if not t: B`, and an `if` with nothing left goes when its test has
    no effect, or becomes its test alone when it may have one (`if step():` -> `step()`). Returns the new
    statement, `cst.RemoveFromParent()`, or `updated` when nothing was emptied; the `if` of an `elif` chain
    keeps its branches, unless its `elif` went whole (emptied, with a test that has no effect)."""
    if isinstance(original.orelse, cst.If) and updated.orelse is None:
        original = original.with_changes(orelse=None)  # the `elif` went whole: an `if` without one is left
    if isinstance(updated.orelse, cst.If) or isinstance(original.orelse, cst.If):
        return updated
    body_gone = _emptied(updated.body, original.body)
    else_gone = updated.orelse is not None and _emptied(updated.orelse.body, original.orelse.body)
    if not body_gone and not else_gone:
        return updated
    if else_gone:
        updated = updated.with_changes(orelse=None)
        if not body_gone:
            return updated
    if updated.orelse is not None:
        return updated.with_changes(test=negated(updated.test), body=updated.orelse.body, orelse=None)
    if _pure(updated.test):
        return cst.RemoveFromParent()
    test = updated.test.with_changes(lpar=[], rpar=[]) if len(updated.test.lpar) == 1 else updated.test
    return cst.SimpleStatementLine([cst.Expr(test)], leading_lines=updated.leading_lines)


def without_empty_try(original: cst.Try, updated: cst.Try):
    """A `try` whose body the rewrite emptied (`try: xm.mark_step()` / `except ImportError: pass`) goes when
    nothing else of it can run: an empty body raises nothing, so handlers that only `pass` are dead too. One
    with an `else`, a `finally` or a handler that does something stays (`updated`)."""
    if not _emptied(updated.body, original.body) or updated.orelse or updated.finalbody:
        return updated
    for handler in updated.handlers:
        block = handler.body
        lines = block.body if isinstance(block, cst.IndentedBlock) else [block]
        if not all(isinstance(small, cst.Pass) for line in lines for small in line.body):
            return updated
    return cst.RemoveFromParent()


def block_comments(block: cst.BaseSuite) -> list[cst.EmptyLine]:
    """The comment lines an emptied block still holds (those of the statements removed from it)."""
    if isinstance(block, cst.IndentedBlock):
        return [line for line in block.footer if line.comment is not None]
    return []
