"""NM106, decided by `loads.py` (`compiled`, `check_not_compiled`, `check_hub_id`, the helper a compiled decoder's
load becomes), which every load rewrite calls before it rewrites (`nm101_causal_lm.py`, `nm112_traced_model.py`, `nm113_diffusion.py`, `nm114_pipeline.py`)."""

from __future__ import annotations

from migrator.families.inference.loads import FROM_NEURON_EXPORT_SOURCE
from migrator.families.inference.tables import ORIGINAL_CHECKPOINT_RECORD
from migrator.rules import Example, Rule, Severity

COMPILED_ARTIFACT = Rule(
    "NM106",
    Severity.ERROR,
    "A load of a model already compiled by optimum-neuron (a folder from `optimum-cli export neuron` / "
    "`save_pretrained`, or an `aws-neuron/*-neuron*` Hub repo)",
    "A decoder's (`NeuronModelForCausalLM.from_pretrained(compiled)`, a text-generation `pipeline` of it) is "
    'rewritten to `_from_neuron_export(AutoModelForCausalLM, compiled, device_map="neuron")`, a helper added to '
    "the file that reads, at run time, the checkpoint the compiled model records (`checkpoint_id` in its "
    "neuron_config.json (0.4.x), `neuron.checkpoint_id` in its config.json (earlier releases)) and loads it with "
    "the compiled dtype and a static cache of the compiled sequence length; a folder without that record (one the "
    "migrated program saved) loads as it is, and a record without a checkpoint stops the load with a message "
    "saying so. Other compiled models (encoders, diffusion pipelines: optimum-neuron records no checkpoint for "
    "them) are left with a TODO: re-point the load at the original "
    f"checkpoint ({ORIGINAL_CHECKPOINT_RECORD}), add `export=True`, and run neuron-migrate again.",
    examples=(
        Example(
            before="""\
from optimum.neuron import NeuronModelForSequenceClassification

model = NeuronModelForSequenceClassification.from_pretrained("./compiled-distilbert")
""",
            after=f"""\
# TODO(neuron-migrate): NM501 `optimum.neuron` stays imported only for line 8 (NM106), under its own TODO: `optimum.neuron` is optimum-neuron, which TorchNeuron replaces; remove this import once that statement is rewritten
from optimum.neuron import NeuronModelForSequenceClassification
import os

os.environ.setdefault("HF_DEACTIVATE_ASYNC_LOAD", "1")

# TODO(neuron-migrate): NM106 "./compiled-distilbert" is a model compiled by optimum-neuron, which Transformers/Diffusers cannot load; load the original checkpoint instead ({ORIGINAL_CHECKPOINT_RECORD}) with export=True, then run neuron-migrate again
model = NeuronModelForSequenceClassification.from_pretrained("./compiled-distilbert")
""",
        ),
        Example(
            before="""\
from optimum.neuron import NeuronModelForCausalLM

model = NeuronModelForCausalLM.from_pretrained("aws-neuron/Llama-3.1-8B-neuron")
""",
            after=f"""\
import os
from transformers import AutoModelForCausalLM

os.environ.setdefault("HF_DEACTIVATE_ASYNC_LOAD", "1")


{FROM_NEURON_EXPORT_SOURCE.strip()}


model = _from_neuron_export(AutoModelForCausalLM, "aws-neuron/Llama-3.1-8B-neuron", device_map="neuron")
""",
        ),
    ),
)
RULES = (COMPILED_ARTIFACT,)
HANDLER = None  # decided in `loads.py`
