"""NM119: optimum-neuron's traced sentence-transformers model becomes `sentence_transformers.SentenceTransformer` on
device "neuron", and calling it with a tokenizer's outputs keeps returning them with `token_embeddings` and
`sentence_embedding` (optimum-neuron's `ModelOutput` fields, which sentence-transformers adds to the same batch)."""

from __future__ import annotations

import libcst as cst
import libcst.matchers as m

from migrator.cst_helpers import is_method_call, keyword_arg, source_code
from migrator.families.inference import tables as t
from migrator.families.inference.loads import (
    Unmapped,
    assemble,
    auto_cast,
    check_hub_id,
    check_known,
    check_not_compiled,
    one_line,
    shape_dropped,
    split_args,
    string,
)
from migrator.families.inference.state import HINTS, TRIGGERS, InferenceFile
from migrator.rules import Example, Rule, Severity
from migrator.transform import FileContext, Handler

SENTENCE_TRANSFORMER = Rule(
    "NM119",
    Severity.INFO,
    "A `NeuronSentenceTransformers` / `NeuronModelForSentenceTransformers` model exported at load (or loaded from "
    "the folder such an export saved in the same file), and its calls on a tokenizer's outputs",
    'Rewritten to `SentenceTransformer(checkpoint, device="neuron")`; `model(**inputs)` becomes `model(inputs)`, '
    "which returns the tokenizer's batch with `token_embeddings` and `sentence_embedding` added, read as "
    "attributes as before (`model.encode(...)` is the same on both). The export's batch size and sequence "
    "length are NM104 findings: each new input shape compiles again on neuron.",
    examples=(
        Example(
            before="""\
from optimum.neuron import NeuronModelForSentenceTransformers
from transformers import AutoTokenizer

model = NeuronModelForSentenceTransformers.from_pretrained(
    "BAAI/bge-small-en-v1.5", export=True, batch_size=1, sequence_length=384
)
tokenizer = AutoTokenizer.from_pretrained("BAAI/bge-small-en-v1.5")
encoded_input = tokenizer("I like to eat apples", return_tensors="pt")
outputs = model(**encoded_input)
print(outputs.sentence_embedding.shape)
""",
            after="""\
from transformers import AutoTokenizer
import os
from sentence_transformers import SentenceTransformer

os.environ.setdefault("HF_DEACTIVATE_ASYNC_LOAD", "1")

model = SentenceTransformer(
    "BAAI/bge-small-en-v1.5", device="neuron"
)
tokenizer = AutoTokenizer.from_pretrained("BAAI/bge-small-en-v1.5")
encoded_input = tokenizer("I like to eat apples", return_tensors="pt").to(model.device)
outputs = model(encoded_input)
print(outputs.sentence_embedding.shape)
""",
        ),
    ),
)
RULES = (SENTENCE_TRANSFORMER,)


class SentenceTransformers(Handler):
    HINTS = HINTS | {"**"}  # a model call passes the tokenizer's outputs as `**inputs`
    TRIGGERS = TRIGGERS

    def __init__(self, ctx: FileContext) -> None:
        super().__init__(ctx)
        self.file = ctx.state(InferenceFile)
        self.models: set[str] = set()  # names holding a migrated sentence-transformers model
        self.encodings: set[str] = set()  # names holding a tokenizer's outputs (a BatchEncoding)
        self.loaded: dict[str, cst.Call] = {}  # name -> the load (original node) that made it a model

    def leave_Assign(self, original: cst.Assign, updated: cst.Assign):
        """Names that hold a tokenizer's outputs, and names that stop holding a migrated model or a batch."""
        value = original.value
        if m.matches(value, m.Call(func=m.Attribute(attr=m.Name("to")))):
            value = value.func.value  # `tokenizer(...).to(device)` is the same batch
        for target in original.targets:
            name = source_code(target.target)
            if value is not self.loaded.get(name):
                self.models.discard(name)
            self.encodings.discard(name)
        if (
            len(original.targets) == 1
            and isinstance(value, cst.Call)
            and self.file.preprocessor_kind(value.func)
        ):
            self.encodings.add(source_code(original.targets[0].target))
        return updated

    def leave_Call(self, original: cst.Call, updated: cst.Call):
        if source_code(original.func) in self.models:
            return self._model_call(original, updated)
        if not is_method_call(original, "from_pretrained"):
            return updated
        owner = self.ctx.qualified(original.func.value)
        if owner not in t.SENTENCE_TRANSFORMERS:
            return updated
        return self.file.guarded(self._rewrite, original, updated, owner)

    def _holds_model(self, name: str, load: cst.Call) -> None:
        self.models.add(name)
        self.loaded[name] = load
        self.ctx.watch(name)  # to see it called, and reassigned

    def _model_call(self, original: cst.Call, updated: cst.Call) -> cst.Call:
        """`model(**inputs)`: optimum-neuron's model took the tensors as keywords, a SentenceTransformer takes the
        batch itself and returns it with the embeddings added (a BatchEncoding reads them as attributes)."""
        if len(original.args) != 1 or original.args[0].star != "**":
            return updated
        inputs = original.args[0].value
        if source_code(inputs) not in self.encodings:
            self.ctx.todo(
                original,
                SENTENCE_TRANSFORMER,
                f"`{source_code(inputs)}` is not a tokenizer's outputs assigned in this file: a SentenceTransformer "
                "takes the batch as one dict and returns that dict with `token_embeddings` and "
                "`sentence_embedding` added (keys, read as attributes only on a tokenizer's BatchEncoding)",
                f"pass the tokenizer's outputs as `{source_code(original.func)}(inputs)` and read the embeddings "
                "from the result, or call `.encode(sentences)`",
            )
            return updated
        self.ctx.report(original, SENTENCE_TRANSFORMER, "`model(**inputs)` rewritten to `model(inputs)`.")
        return updated.with_changes(args=[updated.args[0].with_changes(star="")])

    def _rewrite(self, original: cst.Call, updated: cst.Call, owner: str) -> cst.Call:
        file = self.file
        export = file.export_of_folder(original)
        if export is None:
            args = self._arguments(original, updated)
            file.report(original, SENTENCE_TRANSFORMER)
        else:
            # Its findings are the export's own (reported there).
            args = one_line(file.quietly(self._arguments, export, export))
            line = (self.ctx.source_map.position(export) or (0,))[0]
            file.report(
                original,
                SENTENCE_TRANSFORMER,
                f"Loads the folder the export on line {line} saved: rewritten to load what that export loaded "
                "(a compiled folder cannot be loaded by sentence-transformers).",
            )
        if original in file.assigned_calls:
            target = source_code(file.assigned_calls[original])
            file.remember_model(target)
            file.effects.append(lambda: self._holds_model(target, original))
            file.effects.append(lambda: file.uploadable.add(target))
        file.add_import("sentence_transformers", "SentenceTransformer")
        file.drop_source_import(original.func.value, owner)
        return updated.with_changes(func=cst.Name("SentenceTransformer"), args=args)

    def _arguments(self, original: cst.Call, updated: cst.Call) -> list[cst.Arg]:
        """The SentenceTransformer(...) arguments of an export; raises `Unmapped`."""
        file = self.file
        args = split_args(original, updated, "this load", file.visible_dicts())
        check_not_compiled(args, "a model")
        check_hub_id(args)
        check_known(
            args,
            frozenset(t.SENTENCE_TRANSFORMER_LOAD_ARGS) | t.EXPORT_ONLY_ARGS | t.TRACED_SHAPE_ARGS,
            ("auto_cast_type",),
        )
        # optimum ignores auto_cast_type unless auto_cast is set (modeling_traced.py `_export`)
        if auto_cast(args, default=None):
            raise Unmapped(
                "NM116",
                "the export cast the model's matmuls (auto_cast), which a SentenceTransformer takes as "
                "model_kwargs={'dtype': ...} for the whole model",
                "choose the dtype (model_kwargs={'dtype': torch.bfloat16}, or float32 to keep every op exact) "
                "and rewrite this load by hand",
            )
        for name, (old, new) in args.keywords.items():
            if name in t.EXPORT_ONLY_ARGS or name == "auto_cast_type":
                file.report(old, "NM105", subject=name)
            elif name in t.TRACED_SHAPE_ARGS:
                file.report(old, "NM104", shape_dropped(name, new.value, file.ctx), subject=name)
        kept = [name for name in args.order if name in t.SENTENCE_TRANSFORMER_LOAD_ARGS]
        renamed = {
            name: args.keywords[name][1].with_changes(
                keyword=cst.Name(t.SENTENCE_TRANSFORMER_LOAD_ARGS[name])
            )
            for name in kept
        }
        args.keywords.update({name: (args.keywords[name][0], arg) for name, arg in renamed.items()})
        return assemble(args, kept, [keyword_arg("device", string("neuron"))])


HANDLER = SentenceTransformers
