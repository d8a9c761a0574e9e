"""Which names of a file hold a training-arguments object (read by the rules that act on its fields)."""

from __future__ import annotations

from collections.abc import Callable

import libcst as cst
import libcst.matchers as m

from migrator.cst_helpers import descendants, source_code
from migrator.families.training.targets import ARGUMENTS_CLASSES, RENAMES
from migrator.transform import FileContext

# The HfArgumentParser / TrlParser methods that return one instance per dataclass of the parser, in its order.
PARSES = frozenset({"parse_args_into_dataclasses", "parse_json_file", "parse_yaml_file", "parse_dict"})


def arguments_names(ctx: FileContext, is_arguments: Callable[[str | None], bool]) -> frozenset[str]:
    """Names that only ever hold an instance of a class `is_arguments` accepts (given its qualified name):
    `args = TrainingArguments(...)`, or its place in
    `model_args, args = HfArgumentParser((ModelArguments, TrainingArguments)).parse_args_into_dataclasses()`.
    A name any other assignment binds as well is left out."""
    parsers: dict[str, list[str | None]] = {}  # parser variable -> the qualified class at each position
    bound: dict[str, list[bool]] = {}  # name -> for each binding, whether it is an arguments object
    for assign in descendants(ctx.module, cst.Assign):
        if len(assign.targets) != 1:
            continue
        target, value = assign.targets[0].target, assign.value
        if isinstance(target, cst.Name) and m.matches(value, m.Call(args=[m.Arg(m.Tuple() | m.List())])):
            parsers[target.value] = [ctx.qualified(e.value) for e in value.args[0].value.elements]
        if isinstance(target, cst.Name):
            arguments = isinstance(value, cst.Call) and is_arguments(ctx.qualified(value.func))
            bound.setdefault(target.value, []).append(arguments)
        elif isinstance(target, (cst.Tuple, cst.List)):
            classes = []
            if m.matches(value, m.Call(func=m.Attribute(value=m.Name(), attr=m.Name()))) and (
                value.func.attr.value in PARSES
            ):
                classes = parsers.get(value.func.value.value, [])
            for index, element in enumerate(target.elements):
                if isinstance(element.value, cst.Name):
                    arguments = index < len(classes) and is_arguments(classes[index])
                    bound.setdefault(element.value.value, []).append(arguments)
    return frozenset(name for name, kinds in bound.items() if all(kinds))


# Removed flags that only the script itself read (Transformers 4's example scripts: `if ... and not
# training_args.overwrite_output_dir:`), as Transformers 4 declared them (type, default, help). Where the
# arguments come from a parse next to a dataclass of the script, the field moves there (NM224): the launcher's flag
# still parses and the read gets what it got.
OWN_FIELDS = {
    "overwrite_output_dir": (
        "bool",
        "False",
        "Overwrite the content of the output directory. Use this to continue training if output_dir points to a "
        "checkpoint directory.",
    )
}


def is_arguments(qualified: str | None) -> bool:
    """A training-arguments class of Transformers, TRL or optimum-neuron (before the migration renames it)."""
    if qualified is None:
        return False
    target = RENAMES.get(qualified)
    if target is not None:
        return target.arguments is not None
    package, _, name = qualified.rpartition(".")
    return package.split(".")[0] in ("transformers", "trl") and name in ARGUMENTS_CLASSES


def own_field_reads(ctx: FileContext, names: frozenset[str]) -> dict[tuple[str, str], tuple[str, str]]:
    """The `OWN_FIELDS` reads on the arguments `names` whose field moves to the script's own dataclass: (holder,
    field) -> (the variable that dataclass is unpacked to, the dataclass). Only reads (a file that sets the field
    keeps its TODO), in the same top-level statement as the unpacking or after one made at module level."""
    moved = {}
    written = {
        source_code(target.target)
        for target in descendants(ctx.module, cst.AssignTarget)
        if isinstance(target.target, cst.Attribute)
    }
    for statement in ctx.module.body:
        for read in descendants(statement, cst.Attribute):
            key = (source_code(read.value), read.attr.value)
            if key[1] not in OWN_FIELDS or key[0] not in names or ".".join(key) in written:
                continue
            own = own_dataclass_holders(ctx, key[0])
            if own is not None and _unpacked_in_reach(ctx.module, statement, key[0]):
                moved[key] = own
    return moved


def _unpacked_in_reach(module: cst.Module, statement: cst.BaseStatement, holder: str) -> bool:
    """Whether each unpacking assignment of `holder` is in `statement` (the same function as the read) or
    at module level, where every function sees it."""
    for top in module.body:
        unpacks = [
            assign
            for assign in descendants(top, cst.Assign)
            if any(holder in _bound_names(target.target) for target in assign.targets)
        ]
        if unpacks and top is not statement and isinstance(top, (cst.FunctionDef, cst.ClassDef)):
            return False
    return True


def _bound_names(target: cst.BaseAssignTargetExpression) -> set[str]:
    """The plain names an assignment target binds (`a`, `a, b`, `(a, b)`, `[a, b]`)."""
    if isinstance(target, cst.Name):
        return {target.value}
    if isinstance(target, (cst.Tuple, cst.List)):
        return {element.value.value for element in target.elements if isinstance(element.value, cst.Name)}
    return set()


def own_dataclass_holders(ctx: FileContext, holder: str) -> tuple[str, str] | None:
    """For a name every assignment of which unpacks one parse of an HfArgumentParser / TrlParser next to a
    dataclass the module itself defines (`model_args, data_args, training_args = parser.parse_...()`): (the
    variable that dataclass is unpacked to, the dataclass), the same in every such assignment; else None."""
    own_classes = {
        node.name.value
        for node in descendants(ctx.module, cst.ClassDef)
        if any("dataclass" in ctx.module.code_for_node(d.decorator) for d in node.decorators)
    }
    parsers: dict[str, list[str]] = {}
    found: set[tuple[str, str] | None] = set()
    for assign in descendants(ctx.module, cst.Assign):
        if len(assign.targets) != 1:
            continue
        target, value = assign.targets[0].target, assign.value
        if isinstance(target, cst.Name) and m.matches(value, m.Call(args=[m.Arg(m.Tuple() | m.List())])):
            parsers[target.value] = [ctx.module.code_for_node(e.value) for e in value.args[0].value.elements]
            continue
        names = (
            [e.value.value if isinstance(e.value, cst.Name) else None for e in target.elements]
            if isinstance(target, (cst.Tuple, cst.List))
            else [target.value if isinstance(target, cst.Name) else None]
        )
        if holder not in names:
            continue
        classes: list[str] = []
        if (
            m.matches(value, m.Call(func=m.Attribute(value=m.Name(), attr=m.Name())))
            and value.func.attr.value in PARSES
        ):
            classes = parsers.get(value.func.value.value, [])
        own = [(n, c) for n, c in zip(names, classes, strict=False) if n is not None and c in own_classes]
        found.add(own[0] if own else None)
    return next(iter(found)) if len(found) == 1 else None


def with_fields(
    original: cst.ClassDef, updated: cst.ClassDef, fields: dict[str, tuple[str, str, str]]
) -> tuple[cst.ClassDef, list[str]]:
    """An argument dataclass with a declaration of each of `fields` (name -> type, default, help) that it does not
    declare yet, written as its other fields are (`field(default=..., metadata={"help": ...})` where they use
    field()), and the names added."""
    if not isinstance(updated.body, cst.IndentedBlock):
        return updated, []
    declared = {
        item.body[0].target.value
        for item in original.body.body
        if m.matches(item, m.SimpleStatementLine(body=[m.AnnAssign(target=m.Name())]))
    }
    uses_field = any(
        isinstance(item, cst.SimpleStatementLine) and "field(" in source_code(item)
        for item in original.body.body
    )
    added = [name for name in fields if name not in declared]
    lines = []
    for name in added:
        kind, default, help_text = fields[name]
        value = f'field(default={default}, metadata={{"help": "{help_text}"}})' if uses_field else default
        lines.append(cst.parse_statement(f"{name}: {kind} = {value}\n"))
    return updated.with_changes(body=updated.body.with_changes(body=[*updated.body.body, *lines])), added
