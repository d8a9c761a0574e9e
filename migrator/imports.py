"""Import edits the families ask for, applied once the walk is done.

Additions go through libcst's AddImportsVisitor (its placement and merging rules), run only when a
requested import is missing from the file's leading import block. Removals do not use libcst's
RemoveImportsVisitor: its scope analysis costs several libcst round trips on a large file. The families
only remove imports of names they rewrote, so "still used" is read from the Python AST of the rewritten
code (every `Name` outside the import statements, plus `__all__` entries), and a small transformer
that descends through statements only drops the unused aliases.
"""

from __future__ import annotations

import ast

import libcst as cst
from libcst.codemod import CodemodContext
from libcst.codemod.visitors import AddImportsVisitor
from libcst.helpers import get_full_name_for_node

ImportRequest = tuple[str, str | None, str | None]  # module, imported object (None: the module), alias


def add_missing_imports(module: cst.Module, requests: list[ImportRequest]) -> cst.Module:
    present = _leading_imports(module)
    if all(request in present or (request[0], "*", None) in present for request in requests):
        return module
    context = CodemodContext()
    for module_name, obj, asname in requests:
        AddImportsVisitor.add_needed_import(context, module_name, obj, asname)
    # A plain visit: `transform_module` would first deep-copy the tree for metadata it does not use.
    return module.visit(AddImportsVisitor(context))


def _leading_imports(module: cst.Module) -> set[ImportRequest]:
    """The imports AddImportsVisitor sees as present: one-import lines before any other statement
    (a docstring excepted)."""
    body = list(module.body)
    if body and _is_docstring(body[0]):
        body = body[1:]
    present: set[ImportRequest] = set()
    for statement in body:
        if not (isinstance(statement, cst.SimpleStatementLine) and len(statement.body) == 1):
            break
        node = statement.body[0]
        if isinstance(node, cst.Import):
            present.update((alias.evaluated_name, None, alias.evaluated_alias) for alias in node.names)
        elif isinstance(node, cst.ImportFrom):
            if node.relative or node.module is None:
                continue  # AddImportsVisitor cannot resolve it either
            module_name = get_full_name_for_node(node.module)
            if isinstance(node.names, cst.ImportStar):
                present.add((module_name, "*", None))
            else:
                present.update(
                    (module_name, alias.evaluated_name, alias.evaluated_alias) for alias in node.names
                )
        else:
            break
    return present


def _is_docstring(statement: cst.BaseStatement) -> bool:
    return (
        isinstance(statement, cst.SimpleStatementLine)
        and len(statement.body) == 1
        and isinstance(statement.body[0], cst.Expr)
        and isinstance(statement.body[0].value, cst.SimpleString)
    )


def used_names(code: str) -> set[str]:
    """Names the code reads or binds outside import statements, and the names listed in `__all__`."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(code)):
        if isinstance(node, ast.Name):
            names.add(node.id)
        elif isinstance(node, ast.Assign | ast.AugAssign | ast.AnnAssign) and _assigns_all(node):
            names.update(
                element.value
                for element in ast.walk(node.value)
                if isinstance(element, ast.Constant) and isinstance(element.value, str)
            )
    return names


def _assigns_all(node: ast.Assign | ast.AugAssign | ast.AnnAssign) -> bool:
    targets = node.targets if isinstance(node, ast.Assign) else [node.target]
    return node.value is not None and any(
        isinstance(target, ast.Name) and target.id == "__all__" for target in targets
    )


def remove_unused_imports(module: cst.Module, requests: list[ImportRequest]) -> cst.Module:
    """Drop the requested import aliases whose name the rewritten module no longer uses."""
    try:
        used = used_names(module.code)
    except SyntaxError:  # a broken rewrite: left as is for the engine's verification to report
        return module
    return module.visit(_UnusedImportRemover(requests, used))


# Nodes that hold statements: the remover descends through these only (never into expressions).
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
_STATEMENTS = (cst.SimpleStatementLine, cst.BaseCompoundStatement)


class _UnusedImportRemover(cst.CSTTransformer):
    def __init__(self, requests: list[ImportRequest], used: set[str]) -> None:
        super().__init__()
        self.modules = {(module, asname) for module, obj, asname in requests if obj is None}
        self.objects = {(module, obj, asname) for module, obj, asname in requests if obj is not None}
        self.used = used
        # Comment lines of removed statements, per enclosing block, waiting for the next statement.
        self.orphan_lines: list[list[cst.EmptyLine]] = []

    def on_visit(self, node: cst.CSTNode) -> bool:
        if isinstance(node, (cst.Module, cst.IndentedBlock)):
            self.orphan_lines.append([])
        if isinstance(node, cst.SimpleStatementLine):
            return any(isinstance(small, (cst.Import, cst.ImportFrom)) for small in node.body)
        return isinstance(node, (*_STATEMENT_CONTAINERS, cst.Import, cst.ImportFrom))

    def on_leave(self, original: cst.CSTNode, updated: cst.CSTNode):
        if isinstance(original, cst.Import):
            return self._kept_aliases(updated, [(alias.evaluated_name, None) for alias in original.names])
        if isinstance(original, cst.ImportFrom):
            if original.relative or original.module is None or isinstance(original.names, cst.ImportStar):
                return updated
            module_name = get_full_name_for_node(original.module)
            return self._kept_aliases(
                updated, [(module_name, alias.evaluated_name) for alias in original.names]
            )
        if isinstance(original, cst.SimpleStatementLine) and not updated.body:
            if any(line.comment for line in updated.leading_lines):  # they introduce what follows
                self.orphan_lines[-1].extend(updated.leading_lines)
            return cst.RemoveFromParent()
        if isinstance(updated, _STATEMENTS) and self.orphan_lines[-1]:
            lines, self.orphan_lines[-1] = self.orphan_lines[-1], []
            return updated.with_changes(leading_lines=[*lines, *updated.leading_lines])
        if isinstance(original, (cst.Module, cst.IndentedBlock)):
            lines = self.orphan_lines.pop()
            if lines:
                return updated.with_changes(footer=[*lines, *updated.footer])
        return updated

    def _removable(self, module_name: str, obj: str | None, alias: cst.ImportAlias) -> bool:
        asname = alias.evaluated_alias
        requested = (
            (module_name, asname) in self.modules
            if obj is None
            else (module_name, obj, asname) in self.objects
        )
        if not requested:
            return False
        bound = asname or alias.evaluated_name.split(".")[0]  # `import a.b` binds `a`
        return bound not in self.used

    def _kept_aliases(self, updated: cst.Import | cst.ImportFrom, keys: list[tuple[str, str | None]]):
        kept = [
            alias
            for alias, (module_name, obj) in zip(updated.names, keys, strict=True)
            if not self._removable(module_name, obj, alias)
        ]
        if len(kept) == len(updated.names):
            return updated
        if not kept:
            return cst.RemoveFromParent()
        if kept[-1] is not updated.names[-1]:  # the new last alias must not keep a trailing comma
            kept[-1] = kept[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)
        return updated.with_changes(names=kept)
