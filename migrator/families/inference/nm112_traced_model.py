"""NM112: a traced `NeuronModelFor*` / `Neuron<Arch>For*` model exported at load becomes the Transformers
class on device "neuron"."""

from __future__ import annotations

import libcst as cst

from migrator.cst_helpers import keyword_arg, source_code
from migrator.families.inference import tables as t
from migrator.families.inference.loads import (
    assemble,
    auto_cast,
    check_hub_id,
    check_known,
    check_not_compiled,
    shape_dropped,
    split_args,
    string,
)
from migrator.families.inference.state import FromPretrainedRule
from migrator.rules import Example, Rule, Severity

TRACED_MODEL = Rule(
    "NM112",
    Severity.INFO,
    "A traced `NeuronModelFor*` / `Neuron<Arch>For*` encoder, seq2seq, audio or vision model exported at load",
    'Rewritten to the Transformers class, `from_pretrained(checkpoint, device_map="neuron")`.',
    examples=(
        Example(
            before="""\
from optimum.neuron import NeuronModelForSequenceClassification

model = NeuronModelForSequenceClassification.from_pretrained(
    "distilbert-base-uncased-finetuned-sst-2-english", export=True, batch_size=1, sequence_length=128
)
""",
            after="""\
import os
from transformers import AutoModelForSequenceClassification

os.environ.setdefault("HF_DEACTIVATE_ASYNC_LOAD", "1")

model = AutoModelForSequenceClassification.from_pretrained(
    "distilbert-base-uncased-finetuned-sst-2-english", device_map="neuron"
)
""",
        ),
    ),
)
RULES = (TRACED_MODEL,)


class TracedModel(FromPretrainedRule):
    OWNERS = frozenset(t.TRANSFORMERS_MODELS)

    def _rewrite(self, original: cst.Call, updated: cst.Call, owner: str) -> cst.Call:
        file = self.file
        args = split_args(original, updated, "this load", file.visible_dicts())
        check_not_compiled(args, "a model")
        check_hub_id(args)
        check_known(args, t.KEPT_LOAD_ARGS | t.EXPORT_ONLY_ARGS | t.TRACED_SHAPE_ARGS, t.DTYPE_ARGS)
        casts = auto_cast(args, default=None)
        dtype = None
        for name, (old, new) in args.keywords.items():
            if name in t.EXPORT_ONLY_ARGS:
                file.report(old, "NM105", subject=name)
            elif name in t.TRACED_SHAPE_ARGS:
                file.report(old, "NM104", shape_dropped(name, new.value, file.ctx), subject=name)
            elif name == "torch_dtype" or (name == "auto_cast_type" and casts):
                # optimum ignores auto_cast_type unless auto_cast is set (modeling_traced.py `_export`)
                dtype = file.dtype(name, old, new)
            elif name in t.DTYPE_ARGS:
                file.report(old, "NM105", subject=name)
        extra = ([keyword_arg("dtype", dtype)] if dtype is not None else []) + [
            keyword_arg("device_map", string("neuron"))
        ]
        kept = [name for name in args.order if name in t.KEPT_LOAD_ARGS]
        file.report(original, TRACED_MODEL)
        if original in file.assigned_calls:
            target = source_code(file.assigned_calls[original])
            file.remember_model(target)
            file.effects.append(lambda: file.uploadable.add(target))
        return file.retarget(
            updated, "transformers", t.TRANSFORMERS_MODELS[owner], owner, assemble(args, kept, extra)
        )


HANDLER = TracedModel
