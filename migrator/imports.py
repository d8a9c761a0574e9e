"""Import edits the families ask for, applied once the walk is done.

Additions follow libcst's AddImportsVisitor rules without its two whole-tree walks. Removals do not
use libcst's RemoveImportsVisitor: its scope analysis costs several libcst round trips on a large file. The families
only remove imports of names they rewrote, so "still used" is read from the Python AST of the rewritten
code (every `Name` outside the import statements, plus `__all__` entries), and a small transformer
that descends through statements only drops the unused aliases.
"""

from __future__ import annotations

import ast
from bisect import bisect_left
from dataclasses import dataclass
from typing import Any

import libcst as cst
from libcst.helpers import get_full_name_for_node

from migrator.cst_helpers import (
    block_comments,
    is_setup_line,
    may_hold_imports,
    transform,
    without_empty_branches,
    without_empty_try,
)
from migrator.source_map import module_code
from usercode.python import ast_nodes, parsed

ImportRequest = tuple[str, str | None, str | None]  # module, imported object (None: the module), alias


def add_missing_imports(module: cst.Module, requests: list[ImportRequest]) -> cst.Module:
    """Add the requested imports the module lacks, with AddImportsVisitor's placement and merging.

    Same rules as libcst's AddImportsVisitor (the fixtures were produced with it), applied to the
    top-level statements only: the visitor walks the whole tree twice and costs more to set up than
    a round trip of a small script. An import counts as present when the leading import block has it;
    a missing `from M import x` joins the first leading `from M import ...`; other missing imports go
    after the leading import block: `import M` (sorted), `import M as A`, then `from M import ...`.
    """
    body = list(module.body)
    start = 1 if body and _is_docstring_or_strict(body[0]) else 0
    end = _leading_imports_end(body, start)
    missing = _MissingImports.of([request for request in requests if request[0] != "__future__"])
    for node in map(_single_import, body[start:end]):
        if node is not None:
            missing.discard_present(node)
    body[start:end] = [_joined(statement, missing) for statement in body[start:end]]
    if not missing:
        return module.with_changes(body=body)
    new_imports = missing.statements(module.config_for_parsing)
    return module.with_changes(body=[*body[:end], *new_imports, *_apart_from_imports(body[end:])])


def _leading_imports_end(body: list[cst.BaseStatement], start: int) -> int:
    """Where the leading import block ends (after its last import). The block goes on through environment
    settings (`os.environ[...] = ...` written before `import torch`): what is added goes after the last
    import, never above what the author set before importing."""
    end = start
    for index in range(start, len(body)):
        if _single_import(body[index]) is not None:
            end = index + 1
        elif not is_setup_line(body[index]):
            break
    return end


def _joined(statement: cst.BaseStatement, missing: _MissingImports) -> cst.BaseStatement:
    """A `from M import ...` of the leading block with the missing names of M added (only the first such
    import of M gets them: they are no longer missing then)."""
    node = _single_import(statement)
    name = _from_module(node) if isinstance(node, cst.ImportFrom) else None
    if name is None or isinstance(node.names, cst.ImportStar):
        return statement
    added = missing.pop_from_aliases(name)
    if not added:
        return statement
    return statement.with_changes(body=[node.with_changes(names=[*added, *node.names])])


@dataclass
class _MissingImports:
    """The requested imports the module lacks, grouped as AddImportsVisitor groups them."""

    modules: set[str]  # import M
    module_aliases: dict[str, str]  # import M as A
    objects: dict[str, set[str]]  # from M import x
    aliased_objects: dict[str, list[tuple[str, str]]]  # from M import x as A

    @classmethod
    def of(cls, requests: list[ImportRequest]) -> _MissingImports:
        objects: dict[str, set[str]] = {}
        aliased_objects: dict[str, list[tuple[str, str]]] = {}
        for name, obj, asname in requests:
            if obj is not None and asname is None:
                objects.setdefault(name, set()).add(obj)
            elif obj is not None:
                aliased_objects.setdefault(name, []).append((obj, asname))
        return cls(
            modules={name for name, obj, asname in requests if obj is None and asname is None},
            module_aliases={
                name: asname for name, obj, asname in requests if obj is None and asname is not None
            },
            objects=dict(sorted(objects.items())),
            aliased_objects=dict(sorted(aliased_objects.items())),
        )

    def __bool__(self) -> bool:
        return bool(self.modules or self.module_aliases or self.objects or self.aliased_objects)

    def discard_present(self, node: cst.Import | cst.ImportFrom) -> None:
        """Drop what this import of the leading block already has."""
        if isinstance(node, cst.Import):
            for alias in node.names:
                if alias.asname is None:
                    self.modules.discard(alias.evaluated_name)
                elif self.module_aliases.get(alias.evaluated_name) == alias.evaluated_alias:
                    del self.module_aliases[alias.evaluated_name]
            return
        name = _from_module(node)
        if name is None:
            return
        if isinstance(node.names, cst.ImportStar):
            self.objects.pop(name, None)
            return
        for alias in node.names:
            if alias.asname is None:
                _discard(self.objects, name, alias.evaluated_name)
            else:
                _discard(self.aliased_objects, name, (alias.evaluated_name, alias.evaluated_alias))

    def pop_from_aliases(self, name: str) -> list[cst.ImportAlias]:
        """The missing `from name import ...` aliases, no longer missing once they join an existing import."""
        added = [cst.ImportAlias(name=cst.Name(obj)) for obj in sorted(self.objects.pop(name, ()))]
        return added + [
            cst.ImportAlias(name=cst.Name(obj), asname=cst.AsName(name=cst.Name(asname)))
            for obj, asname in sorted(self.aliased_objects.pop(name, []))
        ]

    def statements(self, config: cst.PartialParserConfig) -> list[cst.BaseStatement]:
        """The missing imports as statements: `import M` (sorted), `import M as A`, then `from M import ...`."""
        from_imports: dict[str, list[tuple[str, str | None]]] = {}
        for name, pairs in self.aliased_objects.items():
            from_imports.setdefault(name, []).extend(pairs)
        for name, names in self.objects.items():
            from_imports.setdefault(name, []).extend((obj, None) for obj in names)
        return [
            *(cst.parse_statement(f"import {name}", config=config) for name in sorted(self.modules)),
            *(
                cst.parse_statement(f"import {name} as {asname}", config=config)
                for name, asname in self.module_aliases.items()
            ),
            *(
                cst.parse_statement(
                    f"from {name} import "
                    + ", ".join(
                        obj if asname is None else f"{obj} as {asname}" for obj, asname in sorted(pairs)
                    ),
                    config=config,
                )
                for name, pairs in from_imports.items()
            ),
        ]


def _discard(groups: dict[str, Any], name: str, item: Any) -> None:
    """Remove `item` from the group of module `name` (a set or a list), and the group once it is empty."""
    if item in groups.get(name, ()):
        groups[name].remove(item)
        if not groups[name]:
            del groups[name]


def _apart_from_imports(rest: list[cst.BaseStatement]) -> list[cst.BaseStatement]:
    """The code after the imports, with at least one blank line between the imports and it."""
    if rest and not rest[0].leading_lines:
        return [rest[0].with_changes(leading_lines=(cst.EmptyLine(),)), *rest[1:]]
    if rest and rest[0].leading_lines[0].comment is not None:
        return [rest[0].with_changes(leading_lines=(cst.EmptyLine(), *rest[0].leading_lines)), *rest[1:]]
    return rest


def _single_import(statement: cst.BaseStatement) -> cst.Import | cst.ImportFrom | None:
    if isinstance(statement, cst.SimpleStatementLine) and len(statement.body) == 1:
        node = statement.body[0]
        if isinstance(node, (cst.Import, cst.ImportFrom)):
            return node
    return None


def _from_module(node: cst.ImportFrom) -> str | None:
    """Absolute module of `from M import ...`; None for relative imports (not resolved, as in libcst)."""
    if node.relative or node.module is None:
        return None
    return get_full_name_for_node(node.module)


def _is_docstring_or_strict(statement: cst.BaseStatement) -> bool:
    """AddImportsVisitor never inserts above a module docstring or a `__strict__` flag."""
    if not (isinstance(statement, cst.SimpleStatementLine) and len(statement.body) == 1):
        return False
    node = statement.body[0]
    if isinstance(node, cst.Expr):
        return isinstance(node.value, cst.SimpleString)
    return (
        isinstance(node, cst.Assign)
        and len(node.targets) == 1
        and isinstance(node.targets[0].target, cst.Name)
        and node.targets[0].target.value == "__strict__"
    )


def used_names(code: str, tree: ast.Module | None = None) -> set[str]:
    """Names the code reads or binds outside import statements, and the names listed in `__all__`.
    `tree`: Python's parse of `code`, when the caller has it."""
    names: set[str] = set()
    for node in ast_nodes(tree or ast.parse(code)):
        if isinstance(node, ast.Name):
            names.add(node.id)
        elif isinstance(node, ast.Assign | ast.AugAssign | ast.AnnAssign) and _assigns_all(node):
            names.update(
                element.value
                for element in ast_nodes(node.value)
                if isinstance(element, ast.Constant) and isinstance(element.value, str)
            )
    return names


def _assigns_all(node: ast.Assign | ast.AugAssign | ast.AnnAssign) -> bool:
    targets = node.targets if isinstance(node, ast.Assign) else [node.target]
    return node.value is not None and any(
        isinstance(target, ast.Name) and target.id == "__all__" for target in targets
    )


def code_without_unused_imports(
    module: cst.Module, requests: list[ImportRequest], known: dict[cst.CSTNode, str] | None = None
) -> str:
    """The module's code, less the requested import aliases whose name it no longer uses; `known`: text
    already printed for top-level statements (see `module_code`)."""
    printed = module_code(module, known)
    tree = parsed(printed.code)
    if tree is None:  # a broken rewrite: left as is for the engine's verification to report
        return printed.code
    used = used_names(printed.code, tree)
    if all(_bound_name(request) in used for request in requests):
        return printed.code  # every requested import is still used: nothing to drop
    # The remover enters only the top-level statements that hold an import: the others keep their text.
    import_lines = sorted(
        node.lineno for node in ast_nodes(tree) if isinstance(node, (ast.Import, ast.ImportFrom))
    )
    without_imports = {
        statement
        for statement, first, after in printed.statement_lines()
        if bisect_left(import_lines, first) == bisect_left(import_lines, after)
    }
    remover = _UnusedImportRemover(requests, used, without_imports)
    return module_code(transform(module, remover), printed.statements).code


def _bound_name(request: ImportRequest) -> str:
    module_name, obj, asname = request
    return asname or obj or module_name.split(".")[0]  # `import a.b` binds `a`


_STATEMENTS = (cst.SimpleStatementLine, cst.BaseCompoundStatement)


class _UnusedImportRemover(cst.CSTTransformer):
    def __init__(
        self, requests: list[ImportRequest], used: set[str], without_imports: set[cst.CSTNode] = frozenset()
    ) -> None:
        super().__init__()
        self.without_imports = without_imports  # statements known to hold no import: not entered
        self.modules = {(module, asname) for module, obj, asname in requests if obj is None}
        self.objects = {(module, obj, asname) for module, obj, asname in requests if obj is not None}
        self.used = used
        # Comment lines of removed statements, per enclosing block, waiting for the next statement.
        self.orphan_lines: list[list[cst.EmptyLine]] = []

    def on_visit(self, node: cst.CSTNode) -> bool:
        if isinstance(node, (cst.Module, cst.IndentedBlock)):
            self.orphan_lines.append([])
        return node not in self.without_imports and may_hold_imports(node)

    def on_leave(self, original: cst.CSTNode, updated: cst.CSTNode):
        if isinstance(original, (cst.Import, cst.ImportFrom)):
            return self._leave_import(original, updated)
        if isinstance(original, cst.SimpleStatementLine) and not updated.body:
            # Its comments introduce what follows, and its blank line separates an import group.
            self.orphan_lines[-1].extend(updated.leading_lines)
            return cst.RemoveFromParent()
        if isinstance(original, (cst.If, cst.Try)) and isinstance(updated, (cst.If, cst.Try)):
            updated = self._without_empty_parts(original, updated)
            if isinstance(updated, cst.RemovalSentinel):
                return updated
        if isinstance(updated, _STATEMENTS) and self.orphan_lines[-1]:
            lines, self.orphan_lines[-1] = self.orphan_lines[-1], []
            return updated.with_changes(leading_lines=_joined_leading_lines(lines, updated.leading_lines))
        if isinstance(original, (cst.Module, cst.IndentedBlock)):
            return self._leave_block(original, updated)
        return updated

    def _leave_import(self, original: cst.Import | cst.ImportFrom, updated: cst.Import | cst.ImportFrom):
        if isinstance(original, cst.Import):
            return self._kept_aliases(updated, [(alias.evaluated_name, None) for alias in original.names])
        if original.relative or original.module is None or isinstance(original.names, cst.ImportStar):
            return updated
        module_name = get_full_name_for_node(original.module)
        return self._kept_aliases(updated, [(module_name, alias.evaluated_name) for alias in original.names])

    def _without_empty_parts(self, original: cst.If | cst.Try, updated: cst.If | cst.Try):
        """`if is_xla:` (or `try:`) over a function-local `import torch_xla` and nothing else now: its empty
        branches go, or the whole statement, whose comments then wait for the next statement."""
        simplify = without_empty_branches if isinstance(updated, cst.If) else without_empty_try
        simplified = simplify(original, updated)
        if isinstance(simplified, cst.RemovalSentinel):
            self.orphan_lines[-1].extend([*updated.leading_lines, *block_comments(updated.body)])
        return simplified

    def _leave_block(self, original: cst.Module | cst.IndentedBlock, updated: cst.Module | cst.IndentedBlock):
        """The block's waiting comment lines go to its footer; a block whose first statement went (`import
        torch_xla` in `if on_xla:`) does not open with a blank line."""
        lines = [line for line in self.orphan_lines.pop() if line.comment]
        if lines:
            updated = updated.with_changes(footer=[*lines, *updated.footer])
        if (
            isinstance(updated, cst.IndentedBlock)
            and updated.body
            and updated.body[0] is not original.body[0]
        ):
            first = updated.body[0]
            leading = list(first.leading_lines)
            while leading and leading[0].comment is None:
                leading.pop(0)
            updated = updated.with_changes(
                body=[first.with_changes(leading_lines=leading), *updated.body[1:]]
            )
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


def _joined_leading_lines(
    carried: list[cst.EmptyLine], own: tuple[cst.EmptyLine, ...]
) -> list[cst.EmptyLine]:
    """Lines of removed statements above the next one, without doubling the blank line it already has."""
    if own and not own[0].comment:
        carried = list(carried)
        while carried and not carried[-1].comment:
            carried.pop()
    return [*carried, *own]
