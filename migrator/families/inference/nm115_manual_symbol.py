"""NM115: optimum-neuron inference symbols with no mechanical equivalent get a TODO naming the replacement
(table `MANUAL_SYMBOLS` in `tables.py`)."""

from __future__ import annotations

import libcst as cst

from migrator.cst_helpers import source_code
from migrator.families.inference import tables as t
from migrator.families.inference.state import HINTS, TRIGGERS
from migrator.rules import Example, Rule, Severity
from migrator.transform import Handler

MANUAL_SYMBOL = Rule(
    "NM115",
    Severity.ERROR,
    "An optimum-neuron inference symbol with no mechanical equivalent (decoder embeddings, "
    "ControlNet pipelines, base classes, exporters, compilation configs), or a class of the script that "
    "subclasses an optimum-neuron model, and its loads",
    "Left with a TODO that names the replacement.",
    examples=(
        Example(
            before="""\
from optimum.neuron import NeuronModelForEmbedding

model = NeuronModelForEmbedding.from_pretrained("Qwen/Qwen3-Embedding-0.6B")
""",
            after="""\
# TODO(neuron-migrate): NM115 `NeuronModelForEmbedding`: optimum-neuron's compiled embedding model returns the hidden state of each sequence's last token (batch x 1 x hidden: right padding only, not normalised), for the batch size, sequence length and tensor-parallel degree it was exported with; which replacement is the owner's decision: sentence_transformers.SentenceTransformer(model_id, device="neuron") and `model.encode(...)` (the model card's pooling and normalisation), or transformers.AutoModel.from_pretrained(model_id, device_map="neuron") and `model(**inputs).last_hidden_state` read by your own pooling, inputs padded to the exported sequence_length
from optimum.neuron import NeuronModelForEmbedding
import os

os.environ.setdefault("HF_DEACTIVATE_ASYNC_LOAD", "1")

# TODO(neuron-migrate): NM501 `NeuronModelForEmbedding` (`optimum.neuron.NeuronModelForEmbedding`) comes from an import that carries the NM115 TODO; the same decision: rewrite this statement with it
model = NeuronModelForEmbedding.from_pretrained("Qwen/Qwen3-Embedding-0.6B")
""",
        ),
        Example(
            before="""\
from optimum.neuron import NeuronModelForCausalLM


class Chat(NeuronModelForCausalLM):
    def ask(self, inputs):
        return self.generate(**inputs, max_new_tokens=32)


model = Chat.from_pretrained("Qwen/Qwen3-0.6B", export=True, sequence_length=1024)
""",
            after="""\
# TODO(neuron-migrate): NM501 `optimum.neuron` stays imported only for line 9 (NM115), under its own TODO: `optimum.neuron` is optimum-neuron, which TorchNeuron replaces; remove this import once that statement is rewritten
from optimum.neuron import NeuronModelForCausalLM
import os

os.environ.setdefault("HF_DEACTIVATE_ASYNC_LOAD", "1")


# TODO(neuron-migrate): NM115 `Chat` subclasses optimum-neuron's `NeuronModelForCausalLM`, whose loads compile the model ahead of time; Transformers' `AutoModelForCausalLM` cannot be subclassed; make `Chat` hold the model instead of being it: load it with `AutoModelForCausalLM.from_pretrained(model_id, device_map="neuron")` with a static cache and keep `Chat`'s own methods on top
class Chat(NeuronModelForCausalLM):
    def ask(self, inputs):
        return self.generate(**inputs, max_new_tokens=32)


# TODO(neuron-migrate): NM115 `Chat.from_pretrained` loads through optimum-neuron's `NeuronModelForCausalLM` (export=True, sequence_length=1024); once the class holds a Transformers model, load the original checkpoint on device "neuron" (NM101 shows where each argument goes: sequence_length to generation_config.max_cache_len, num_cores / tensor_parallel_size to DistributedConfig(tp_size=...) under torchrun, auto_cast_type to dtype)
model = Chat.from_pretrained("Qwen/Qwen3-0.6B", export=True, sequence_length=1024)
""",
        ),
    ),
)
RULES = (MANUAL_SYMBOL,)
# optimum-neuron model classes a script may subclass -> the Transformers / Diffusers class that loads the model.
MODEL_CLASSES = {
    **t.TRANSFORMERS_MODELS,
    **t.DIFFUSERS_PIPELINES,
    **dict.fromkeys(t.CAUSAL_LM, "AutoModelForCausalLM"),
}
# Load arguments that only mean something to optimum-neuron's compiled models (named in the TODO of a load).
_COMPILE_ARGS = (
    t.EXPORT_ONLY_ARGS | t.TRACED_SHAPE_ARGS | {*t.TP_ARGS, *t.DTYPE_ARGS, *t.UNMAPPED_DECODER_ARGS}
)


class ManualSymbols(Handler):
    HINTS = HINTS
    TRIGGERS = TRIGGERS

    def __init__(self, ctx) -> None:
        super().__init__(ctx)
        self.subclasses: dict[
            str, str
        ] = {}  # class of this file -> the optimum-neuron model class it extends

    def leave_ClassDef(self, original: cst.ClassDef, updated: cst.ClassDef):
        """`class ChatModel(NeuronModelForCausalLM)`: nothing loads such a class on TorchNeuron (an Auto class
        cannot be subclassed), so its own loads are left too, each with its TODO."""
        node = original
        for base in node.bases:
            qualified = self.ctx.qualified(base.value)
            if qualified not in MODEL_CLASSES:
                continue
            name, target = node.name.value, MODEL_CLASSES[qualified]
            self.subclasses[name] = qualified
            static = " with a static cache" if target == "AutoModelForCausalLM" else ""
            self.ctx.todo(
                node,
                MANUAL_SYMBOL,
                f"`{name}` subclasses optimum-neuron's `{qualified.rpartition('.')[2]}`, whose loads compile the "
                f"model ahead of time; Transformers' `{target}` cannot be subclassed",
                f"make `{name}` hold the model instead of being it: load it with `{target}.from_pretrained("
                f'model_id, device_map="neuron")`{static} and keep `{name}`\'s own methods on top',
                subject=qualified,
            )
        return updated

    def leave_Call(self, original: cst.Call, updated: cst.Call):
        func = original.func
        if not (
            self.subclasses
            and isinstance(func, cst.Attribute)
            and isinstance(func.value, cst.Name)
            and func.value.value in self.subclasses
            and func.attr.value in ("from_pretrained", "export")
        ):
            return updated
        name, base = func.value.value, self.subclasses[func.value.value]
        compiled = [
            source_code(arg).strip().rstrip(",")
            for arg in original.args
            if arg.keyword is not None and arg.keyword.value in _COMPILE_ARGS
        ]
        how = f" ({', '.join(compiled)})" if compiled else ""
        self.ctx.todo(
            original,
            MANUAL_SYMBOL,
            f"`{name}.{func.attr.value}` loads through optimum-neuron's `{base.rpartition('.')[2]}`{how}",
            'once the class holds a Transformers model, load the original checkpoint on device "neuron" (NM101 '
            "shows where each argument goes: sequence_length to generation_config.max_cache_len, num_cores / "
            "tensor_parallel_size to DistributedConfig(tp_size=...) under torchrun, auto_cast_type to dtype)",
            subject=f"{name}.{func.attr.value}",
        )
        return updated

    def visit_ImportFrom(self, node: cst.ImportFrom) -> None:
        if node.relative or node.module is None or isinstance(node.names, cst.ImportStar):
            return
        module = source_code(node.module)
        for alias in node.names:
            qualified = f"{module}.{alias.name.value}"
            why = t.MANUAL_SYMBOLS.get(qualified)
            if why is None and module.startswith(t.EXPORTERS_MODULE):
                why = t.EXPORTERS_WHY
            if why:
                self.ctx.todo(alias, MANUAL_SYMBOL, f"`{alias.name.value}`: {why}", subject=qualified)


HANDLER = ManualSymbols
