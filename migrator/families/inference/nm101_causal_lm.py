"""NM101 (and NM102, NM103, NM117, each defined in its own module): a `NeuronModelForCausalLM` export/load
becomes `AutoModelForCausalLM.from_pretrained(checkpoint, device_map="neuron")` with a static cache; the
`get_neuron_config` paired with it (`nm108_neuron_config_pair.py`) moves into it and goes."""

from __future__ import annotations

import libcst as cst
import libcst.matchers as m

from migrator.cst_helpers import find_keyword, keyword_arg, literal_value, source_code
from migrator.families.inference import tables as t
from migrator.families.inference.loads import (
    Args,
    Unmapped,
    assemble,
    check_hub_id,
    check_not_compiled,
    compiled,
    one_line,
    shape_dropped,
    split_args,
    string,
)
from migrator.families.inference.state import HINTS, LOAD_METHODS, TRIGGERS, InferenceFile, PendingLoad
from migrator.families.leftovers.platforms import LEGACY_TARGETS, core_count_why
from migrator.rules import Example, Rule, Severity
from migrator.transform import FileContext, Handler

CAUSAL_LM = Rule(
    "NM101",
    Severity.INFO,
    "`NeuronModelForCausalLM` export/load (`from_pretrained(export=True, ...)` or `get_neuron_config` + `export`)",
    'Rewritten to `AutoModelForCausalLM.from_pretrained(checkpoint, device_map="neuron")` followed by '
    '`model.generation_config.cache_implementation = "static"`: generate() then compiles the decode step on '
    "neuron once.",
    examples=(
        Example(
            before="""\
from optimum.neuron import NeuronModelForCausalLM

model = NeuronModelForCausalLM.from_pretrained(
    "Qwen/Qwen3-0.6B", export=True, batch_size=1, sequence_length=1024, auto_cast_type="bf16"
)
""",
            after="""\
import os
import torch
from transformers import AutoModelForCausalLM

os.environ.setdefault("HF_DEACTIVATE_ASYNC_LOAD", "1")

model = AutoModelForCausalLM.from_pretrained(
    "Qwen/Qwen3-0.6B", dtype=torch.bfloat16, device_map="neuron"
)
model.generation_config.cache_implementation = "static"
model.generation_config.max_cache_len = 1024
""",
        ),
    ),
)
RULES = (CAUSAL_LM,)


def _without_config(call: cst.Call, method: str, paired: bool) -> cst.Call:
    """The load without the neuron config it consumes: `export(id, cfg, ...)`'s second positional argument,
    or (paired with its get_neuron_config) `neuron_config=cfg`."""
    consumed = find_keyword(call, "neuron_config") if paired else None
    if consumed is None and method == "export" and len(call.args) >= 2:
        second = call.args[1]
        consumed = second if second.keyword is None and not second.star else None
    if consumed is None:
        return call
    args = [arg for arg in call.args if arg is not consumed]
    if consumed is call.args[-1]:
        args[-1] = args[-1].with_changes(comma=consumed.comma)
    return call.with_changes(args=args)


class CausalLM(Handler):
    CALLS = frozenset(f"{owner}.{method}" for owner in t.CAUSAL_LM for method in LOAD_METHODS)
    HINTS = HINTS
    TRIGGERS = TRIGGERS

    def __init__(self, ctx: FileContext) -> None:
        super().__init__(ctx)
        self.file = ctx.state(InferenceFile)

    def leave_Call(self, original: cst.Call, updated: cst.Call):
        if not m.matches(original.func, m.Attribute(attr=m.OneOf(*(m.Name(n) for n in LOAD_METHODS)))):
            return updated
        owner = self.ctx.qualified(original.func.value)
        if owner not in t.CAUSAL_LM:
            return updated
        return self.file.guarded(self._rewrite, original, updated, owner, original.func.attr.value)

    def _rewrite(self, original: cst.Call, updated: cst.Call, owner: str, method: str) -> cst.Call:
        file = self.file
        if method == "get_neuron_config":
            self._consumed_config(original, owner)
            file.report(original, "NM108")
            return updated
        if original not in file.assigned_calls:
            raise Unmapped(
                "NM116",
                "this load is not assigned to a name, so the static cache cannot be set after it",
                "assign the model to a variable and run neuron-migrate again",
            )
        export = file.export_of_folder(original) if method == "from_pretrained" else None
        if export is not None:
            # The folder holds what the export compiled: load what the export loaded, as it did. Its findings
            # are the export's own (reported there).
            new_args, cache_len = file.quietly(self._arguments, export, export, owner, "from_pretrained")
            new_args = one_line(new_args)  # as the load was written
            line = (self.ctx.source_map.position(export) or (0,))[0]
            file.report(
                original,
                CAUSAL_LM,
                f"Loads the folder the export on line {line} saved: rewritten to load what that export loaded, "
                "as it did (a compiled folder cannot be loaded by Transformers).",
            )
        elif (compiled_args := self._compiled_args(original, updated, owner, method)) is not None:
            return self._compiled_load(original, updated, owner, compiled_args)
        else:
            new_args, cache_len = self._arguments(original, updated, owner, method)
            file.report(original, CAUSAL_LM)
        if cache_len is None:
            file.report(original, "NM102", t.NO_CACHE_LEN)
        target = source_code(file.assigned_calls[original])
        file.loads[original] = PendingLoad(f"{target}.generation_config", cache_len)
        file.remember_model(target)
        file.effects.append(lambda: file.decoders.add(target))
        return file.retarget(updated, "transformers", "AutoModelForCausalLM", owner, new_args)

    def _compiled_args(self, original: cst.Call, updated: cst.Call, owner: str, method: str) -> Args | None:
        """The arguments of a load that reads a model optimum-neuron compiled (no export, no neuron config
        consumed), else None."""
        if method != "from_pretrained" or original in self.file.config_pairs:
            return None
        args = split_args(original, updated, self._what(owner, method), self.file.visible_dicts())
        return args if compiled(args) else None

    def _compiled_load(self, original: cst.Call, updated: cst.Call, owner: str, args: Args) -> cst.Call:
        """A load of a model optimum-neuron compiled: the helper that loads the checkpoint its record names, as it
        was compiled (NM106)."""
        file = self.file
        if args.model is None:
            raise Unmapped("NM116", "no model id is passed", "rewrite this load by hand")
        for name, (old, _) in args.keywords.items():
            if name == "revision":
                raise Unmapped(
                    "NM116",
                    "`revision` is that of the compiled model, whose record names the checkpoint's own",
                    "load the checkpoint it was compiled from by hand",
                )
            if name not in t.COMPILED_LOAD_PASSED:
                file.ignored_by_compiled_load(old, name)
        passed = [name for name in args.order if name in t.COMPILED_LOAD_PASSED]
        new_args = assemble(args, passed, [keyword_arg("device_map", string("neuron"))])
        load = file.compiled_decoder_load(original, new_args, args.separator)
        file.drop_source_import(updated.func.value, owner)
        target = file.assigned_calls.get(original)
        if target is not None:
            name = source_code(target)
            file.remember_model(name)
            file.effects.append(lambda: (file.decoders.add(name), file.compiled_decoders.add(name)))
        return updated.with_changes(func=load.func, args=load.args)

    @staticmethod
    def _what(owner: str, method: str) -> str:
        return f"{owner.rsplit('.', 1)[1]}.{method}"

    def _consumed_config(self, config: cst.Call, owner: str) -> None:
        """A `get_neuron_config` goes only when the load that consumes it can be rewritten too: otherwise
        that load stays, with its TODO, and must still find the config variable."""
        file = self.file
        load = next((load for load, paired in file.config_pairs.items() if paired is config), None)
        if config in file.paired_configs and load is not None:
            try:
                file.quietly(self._arguments, load, load, owner, load.func.attr.value)
            except Unmapped:
                file.paired_configs.discard(config)
                raise Unmapped(
                    "NM109",
                    "the load that consumes this neuron config cannot be rewritten (see its TODO), so the "
                    "config stays for it",
                    "rewrite that load by hand, then remove this statement",
                ) from None
            return
        unpaired = file.unpaired_configs.get(config)
        raise Unmapped(
            "NM109",
            f"this neuron config cannot be merged into its load: {unpaired}"
            if unpaired
            else "this neuron config cannot be paired with a load: no later NeuronModelForCausalLM.export / "
            "from_pretrained in the same function consumes it",
            "carry sequence_length to generation_config.max_cache_len and tensor_parallel_size to "
            "DistributedConfig(tp_size=...) by hand",
        )

    def _arguments(
        self, original: cst.Call, updated: cst.Call, owner: str, method: str
    ) -> tuple[list[cst.Arg], cst.BaseExpression | None]:
        """The arguments of the rewritten load and its static cache length; raises `Unmapped`."""
        file = self.file
        config_call = file.config_pairs.get(original)
        unpaired = file.unpaired_configs.get(original)
        paired = config_call is not None
        original, updated = (
            _without_config(original, method, paired),
            _without_config(updated, method, paired),
        )
        args = split_args(original, updated, self._what(owner, method), file.visible_dicts())
        if method == "export" and config_call is None:
            raise Unmapped(
                "NM109",
                f"the neuron config passed to export() is {unpaired}"
                if unpaired
                else "the neuron config passed to export() is not built by get_neuron_config in the same scope",
                'load the checkpoint with AutoModelForCausalLM.from_pretrained(id, device_map="neuron") and '
                "set the static cache by hand",
            )
        if config_call is not None:
            config_args = split_args(config_call, config_call, "get_neuron_config")
            for name in t.CONFIG_ARGS:
                if name in config_args.keywords:
                    args.keywords[name] = config_args.keywords[name]
            if "tensor_parallel_size" not in config_args.keywords:
                file.report(config_call, "NM117", f"{t.ONE_CORE}{self.ctx.launch(script='generate.py')}.")
        if method != "export":
            check_not_compiled(args, "a decoder")
        check_hub_id(args)
        return self._decoder_arguments(args)

    def _decoder_arguments(self, args: Args) -> tuple[list[cst.Arg], cst.BaseExpression | None]:
        file = self.file
        kept, extra, cache_len, tp_size = [], [], None, None
        unknown = [
            name
            for name in args.order
            if name not in t.KEPT_LOAD_ARGS | t.EXPORT_ONLY_ARGS | {"batch_size", *t.SEQUENCE_LENGTH_ARGS}
            and name not in t.TP_ARGS + t.DTYPE_ARGS + ("config",)
        ]
        if set(t.SEQUENCE_LENGTH_ARGS) <= set(args.order):
            raise Unmapped(
                "NM116",
                "both `sequence_length` and its old name `n_positions` are given",
                "keep the one the export used and run neuron-migrate again",
            )
        if unknown:
            explained = [
                f"`{name}` is {t.UNMAPPED_DECODER_ARGS[name]}"
                for name in unknown
                if name in t.UNMAPPED_DECODER_ARGS
            ]
            others = [name for name in unknown if name not in t.UNMAPPED_DECODER_ARGS]
            if others:
                explained.append(f"no TorchNeuron equivalent known for {', '.join(others)}")
            raise Unmapped("NM116", "; ".join(explained), "rewrite this load by hand")
        dtype = None
        for name, (old, new) in args.keywords.items():
            if name in t.KEPT_LOAD_ARGS or name == "config":
                kept.append(name)
            elif name in t.EXPORT_ONLY_ARGS:
                file.report(old, "NM105", subject=name)
            elif name == "batch_size":
                file.report(old, "NM104", shape_dropped(name, new.value, file.ctx), subject=name)
            elif name in t.SEQUENCE_LENGTH_ARGS:  # `n_positions`: its old name
                cache_len = new.value
                file.report(old, "NM102", subject=name)
            elif name in t.TP_ARGS:
                if literal_value(new.value) != 1:
                    tp_size = new.value
                    file.report_launch(
                        old,
                        "NM103",
                        f"Rewritten to DistributedConfig(tp_size={source_code(new.value)})",
                        source_code(new.value),
                        " (all ranks run generate; print on rank 0)",
                    )
                    instance = args.keywords.get("instance_type")
                    target = literal_value(instance[1].value) if instance is not None else None
                    if name == "num_cores" or target in LEGACY_TARGETS:
                        why = core_count_why(name, literal_value(new.value), source_code(new.value), target)
                        file.todo(old, "NM504", why, "choose tp_size for the trn2 / trn3 instance")
                else:
                    file.report(old, "NM105", subject=name)
            elif name in t.DTYPE_ARGS:
                dtype = file.dtype(name, old, new)
        if dtype is not None:
            extra.append(keyword_arg("dtype", dtype))
        if tp_size is None:
            extra.append(keyword_arg("device_map", string("neuron")))
        else:
            file.add_import("transformers", "DistributedConfig")
            config = cst.Call(func=cst.Name("DistributedConfig"), args=[keyword_arg("tp_size", tp_size)])
            extra.append(keyword_arg("distributed_config", config))
        return assemble(args, [n for n in args.order if n in kept], extra), cache_len


HANDLER = CausalLM
