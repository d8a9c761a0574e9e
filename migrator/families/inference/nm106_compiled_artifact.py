"""NM106, decided by `loads.py` (`check_not_compiled`, `check_hub_id`), which every load rewrite calls before it
rewrites (`nm101_causal_lm.py`, `nm112_traced_model.py`, `nm113_diffusion.py`, `nm114_pipeline.py`)."""

from __future__ import annotations

from migrator.families.inference.tables import ORIGINAL_CHECKPOINT_RECORD
from migrator.rules import Example, Rule, Severity

COMPILED_ARTIFACT = Rule(
    "NM106",
    Severity.ERROR,
    "A load of a model already compiled by optimum-neuron (a folder from `optimum-cli export neuron` / "
    "`save_pretrained`, or an `aws-neuron/*-neuron*` Hub repo)",
    "Left with a TODO: Transformers cannot load compiled artifacts. Re-point the load at the original "
    f"checkpoint ({ORIGINAL_CHECKPOINT_RECORD}), add "
    "`export=True`, and run neuron-migrate again.",
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
    ),
)
RULES = (COMPILED_ARTIFACT,)
HANDLER = None  # decided in `loads.py`
