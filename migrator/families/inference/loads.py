"""What every compiled-model load rewrite shares: its arguments split by meaning, and how it decides the rules
about single arguments (static shapes NM104, export-only NM105, dtype NM107) and about loads that cannot be
rewritten (compiled artifacts NM106, unmapped arguments NM116), each defined in its own module. A rewrite
raises `Unmapped` to leave the whole call as it is, with a TODO."""

from __future__ import annotations

import re
from dataclasses import dataclass

import libcst as cst

from migrator.cst_helpers import keyword_arg, literal_value, source_code
from migrator.families.inference import tables as t
from migrator.rules import Rule
from migrator.transform import FileContext


def shape_dropped(name: str, value: cst.BaseExpression, ctx: FileContext) -> str:
    """NM104's message naming the shape that was dropped (a load can drop several, through `**kwargs` too)."""
    return f"`{name}={source_code(value)}` dropped from the loader." + ctx.rule("NM104").action.removeprefix(
        "Dropped from the loader."
    )


_COMPILED_HUB_ID = re.compile(t.COMPILED_HUB_ID)
_MODEL_ID_KEYWORDS = ("model_id", "model_name_or_path", "pretrained_model_name_or_path")


class Unmapped(Exception):
    """A call the codemod cannot rewrite faithfully: why, and what to do (the TODO reads `why; action`)."""

    def __init__(self, rule: Rule | str, why: str, action: str | None = None) -> None:
        super().__init__(why)
        self.rule = rule
        self.why = why
        self.action = action


@dataclass
class Args:
    """A call's arguments, split by meaning. Each entry pairs the original node (for findings) with the
    updated one (for output)."""

    model: tuple[cst.Arg, cst.Arg] | None
    keywords: dict[str, tuple[cst.Arg, cst.Arg]]
    order: list[str]  # keyword names in source order
    last_comma: cst.Comma | cst.MaybeSentinel  # layout after the last argument...
    closing: cst.BaseParenthesizableWhitespace  # ...and before `)`
    separator: cst.Comma  # layout between arguments (comment-free)


def split_args(
    original: cst.Call,
    updated: cst.Call,
    what: str,
    dicts: dict[str, cst.Dict] | None = None,
    positional: tuple[str, ...] = (),
) -> Args:
    """Split a call's arguments; `**name` is expanded when `name` holds a literal dict (`dicts`); positional
    arguments after the first are filed under the parameter names in `positional` (and stay positional)."""
    if len(original.args) != len(updated.args):
        raise Unmapped("NM116", f"the arguments of this {what} were changed by another rewrite")
    model = None
    keywords: dict[str, tuple[cst.Arg, cst.Arg]] = {}
    order = []
    for index, (old, new) in enumerate(zip(original.args, updated.args, strict=True)):
        if old.star == "**" and isinstance(old.value, cst.Name) and old.value.value in (dicts or {}):
            for element in dicts[old.value.value].elements:
                key = element.key.evaluated_value
                keywords[key] = (old, keyword_arg(key, element.value))
                order.append(key)
            continue
        if old.star:
            raise Unmapped(
                "NM116",
                f"{what} receives `{old.star}{source_code(old.value)}`, whose keys the codemod cannot see",
                "spell the arguments out and run neuron-migrate again",
            )
        if old.keyword is None and 0 < index <= len(positional):
            keywords[positional[index - 1]] = (old, new)
            order.append(positional[index - 1])
        elif old.keyword is None:
            if index:
                raise Unmapped("NM116", f"{what} has extra positional arguments", "rewrite it by hand")
            model = (old, new)
        else:
            keywords[old.keyword.value] = (old, new)
            order.append(old.keyword.value)
    if model is None:
        for name in _MODEL_ID_KEYWORDS:
            if name in keywords:
                model = keywords.pop(name)
                order.remove(name)
                break
    separator = next(
        (_without_comment(arg.comma) for arg in updated.args[:-1] if isinstance(arg.comma, cst.Comma)),
        cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")),
    )
    last_comma = updated.args[-1].comma if updated.args else cst.MaybeSentinel.DEFAULT
    last_comma = _without_comment(last_comma) if isinstance(last_comma, cst.Comma) else last_comma
    closing = updated.args[-1].whitespace_after_arg if updated.args else cst.SimpleWhitespace("")
    return Args(model, keywords, order, last_comma, closing, separator)


def _without_comment(comma: cst.Comma) -> cst.Comma:
    """The layout of a comma without the comment that belongs to the argument before it."""
    after = comma.whitespace_after
    if isinstance(after, cst.ParenthesizedWhitespace):
        after = after.with_changes(first_line=cst.TrailingWhitespace(), empty_lines=[])
    return comma.with_changes(whitespace_after=after)


def string(value: str) -> cst.SimpleString:
    return cst.SimpleString(f'"{value}"')


def assemble(args: Args, kept: list[str], extra: list[cst.Arg]) -> list[cst.Arg]:
    """Model id + kept keywords (with their own formatting and comments) + new keywords."""
    original_last = args.order[-1] if args.order else None
    result: list[tuple[cst.Arg, bool]] = []  # (arg, keeps its own comma)
    if args.model:
        model = args.model[1]
        if model.keyword is not None and model.keyword.value != "pretrained_model_name_or_path":
            # optimum's `model_id=` / `model_name_or_path=`: the targets' from_pretrained take the id first.
            model = model.with_changes(keyword=None, equal=cst.MaybeSentinel.DEFAULT)
        result.append((model, bool(args.order)))
    for name in kept:
        result.append((args.keywords[name][1], name != original_last))
    result.extend((arg, False) for arg in extra)
    out = []
    for index, (arg, own_comma) in enumerate(result):
        if index == len(result) - 1:
            comma = args.last_comma
        elif own_comma and isinstance(arg.comma, cst.Comma):
            comma = arg.comma
        else:
            comma = args.separator
        last = index == len(result) - 1
        closing = args.closing if last else cst.SimpleWhitespace("")
        out.append(arg.with_changes(comma=comma, whitespace_after_arg=closing))
    return out


def one_line(args: list[cst.Arg]) -> list[cst.Arg]:
    """Arguments laid out on one line (those of another call, moved into a load written on one line)."""
    separator = cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))
    return [
        arg.with_changes(
            comma=separator if index < len(args) - 1 else cst.MaybeSentinel.DEFAULT,
            whitespace_after_arg=cst.SimpleWhitespace(""),
        )
        for index, arg in enumerate(args)
    ]


def dtype_expr(value: cst.BaseExpression) -> cst.BaseExpression:
    """`"bf16"` -> `torch.bfloat16`; a runtime string -> a lookup in the same table."""
    literal = literal_value(value)
    if isinstance(literal, str):
        if literal not in t.AUTO_CAST_DTYPES:
            raise Unmapped(
                "NM116",
                f'auto_cast_type="{literal}" has no load dtype equivalent',
                "pick dtype=torch.bfloat16 (or torch.float32) and use torch.autocast for mixed precision",
            )
        return cst.parse_expression(f"torch.{t.AUTO_CAST_DTYPES[literal]}")
    if literal is not ...:
        raise Unmapped("NM116", f"auto_cast_type={literal!r} is not a dtype name", "set dtype= by hand")
    table = ", ".join(f'"{name}": torch.{dtype}' for name, dtype in t.AUTO_CAST_DTYPES.items())
    return cst.parse_expression(f"{{{table}}}[{source_code(value)}]")


# The helper a load of a compiled decoder becomes (NM106): TorchNeuron loads the checkpoint the compiled model
# records, as it was compiled (its dtype, a static cache of its sequence length).
FROM_NEURON_EXPORT = t.FROM_NEURON_EXPORT
FROM_NEURON_EXPORT_SOURCE = '''
def _from_neuron_export(model_class, model_id, **kwargs):
    """`model_class.from_pretrained` of the checkpoint optimum-neuron compiled `model_id` from, as it compiled it
    (added by neuron-migrate: TorchNeuron loads checkpoints, not compiled models). The checkpoint, its revision,
    the dtype and the sequence length are the compiled model's record: its neuron_config.json (optimum-neuron
    0.4.x), else the `neuron` entry of its config.json (earlier releases); a model that generates gets a static
    cache of that length; `model.neuron_export` holds the record, for the code that read `model.neuron_config`.
    A model without that record (a checkpoint, such as a folder the migrated export saved) is loaded as it is."""
    import json
    import os

    import torch
    from huggingface_hub import hf_hub_download
    from huggingface_hub.errors import EntryNotFoundError

    record = {}
    for name, entry in (("neuron_config.json", None), ("config.json", "neuron")):
        path = os.path.join(model_id, name)
        if not os.path.isdir(model_id):
            try:
                path = hf_hub_download(model_id, name, token=kwargs.get("token"), cache_dir=kwargs.get("cache_dir"))
            except EntryNotFoundError:  # (offline, a file never downloaded too)
                continue
        if os.path.isfile(path):
            with open(path) as file:
                found = json.load(file)
            record = (found.get(entry) or {}) if entry else found
        if record:
            break
    if record and not record.get("checkpoint_id"):
        raise ValueError(
            f"{model_id} was compiled by optimum-neuron, which did not record the checkpoint it was compiled "
            "from: load that checkpoint instead (the model card names it)"
        )
    auto_cast = {"bf16": "bfloat16", "fp16": "float16", "fp32": "float32"}.get(record.get("auto_cast_type"))
    dtype = record.get("torch_dtype") or auto_cast
    if dtype:
        kwargs.setdefault("dtype", getattr(torch, dtype))
    if record.get("checkpoint_revision"):
        kwargs.setdefault("revision", record["checkpoint_revision"])
    model = model_class.from_pretrained(record.get("checkpoint_id", model_id), **kwargs)
    # The shapes it was compiled for, which optimum-neuron's `model.neuron_config` held (a checkpoint: those its
    # export defaulted to, batch size 1 and the model's positions up to 4096).
    text_config = model.config.get_text_config()
    positions = getattr(text_config, "n_positions", None) or getattr(text_config, "max_position_embeddings", 1024)
    model.neuron_export = {"batch_size": 1, "sequence_length": min(positions, 4096), **record}
    if model.can_generate():
        model.generation_config.cache_implementation = "static"
        if record.get("sequence_length"):
            model.generation_config.max_cache_len = record["sequence_length"]
    return model
'''


def compiled(args: Args) -> bool:
    """Whether a load reads a model optimum-neuron compiled (no `export=True`); raises `Unmapped` when the
    program decides that at run time."""
    export = args.keywords.get("export")
    value = literal_value(export[1].value) if export else False
    if value is ...:
        model = source_code(args.model[1].value) if args.model else "the model"
        raise Unmapped(
            "NM116",
            f"export={source_code(export[1].value)} is decided at run time, so {model} may be a compiled artifact",
            "make the load always use the original checkpoint and rewrite it by hand",
        )
    return value is not True


def check_not_compiled(args: Args, what: str) -> None:
    """The load exports from the original checkpoint (`export=True`); else it reads a compiled artifact."""
    if not compiled(args):
        return
    model = source_code(args.model[1].value) if args.model else "the model"
    raise Unmapped(
        "NM106",
        f"{model} is {what} compiled by optimum-neuron, which Transformers/Diffusers cannot load",
        f"load the original checkpoint instead ({t.ORIGINAL_CHECKPOINT_RECORD}) with export=True, then run "
        "neuron-migrate again",
    )


def check_hub_id(args: Args) -> None:
    if args.model is None:
        raise Unmapped("NM116", "no model id is passed", "rewrite this load by hand")
    model_id = literal_value(args.model[1].value)
    if isinstance(model_id, str) and _COMPILED_HUB_ID.match(model_id):
        raise Unmapped(
            "NM106",
            f'"{model_id}" is a precompiled Neuron repo, which Transformers cannot load',
            f"use the original checkpoint it was exported from ({t.ORIGINAL_CHECKPOINT_RECORD})",
        )


def check_known(args: Args, known: frozenset[str], also: tuple[str, ...]) -> None:
    unknown = [name for name in args.order if name not in known and name not in also]
    if unknown:
        raise Unmapped(
            "NM116",
            f"no TorchNeuron equivalent known for {', '.join(unknown)}",
            "rewrite this load by hand",
        )


def auto_cast(args: Args, default: str | None) -> bool:
    """Whether the export cast weights to `auto_cast_type` (`auto_cast` None or "none" means it did not)."""
    value = literal_value(args.keywords["auto_cast"][1].value) if "auto_cast" in args.keywords else default
    if value is ...:
        raise Unmapped(
            "NM116",
            "auto_cast is decided at run time, so the load dtype is unknown",
            "set dtype= by hand",
        )
    return value not in (None, "none")
