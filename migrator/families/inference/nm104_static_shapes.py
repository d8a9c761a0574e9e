"""NM104, decided argument by argument inside each of the load rewrites (`nm101_causal_lm.py`,
`nm112_traced_model.py`, `nm113_diffusion.py`, `nm114_pipeline.py`), which share its message
(`loads.shape_dropped`): one rewrite of a load decides every argument it carries."""

from __future__ import annotations

from migrator.rules import Example, Rule, Severity

STATIC_SHAPES = Rule(
    "NM104",
    Severity.WARNING,
    "A static input shape fixed at export (`batch_size`, `sequence_length`, `height`, `num_beams`, ...)",
    "Dropped from the loader. Every new input shape compiles again on neuron: pad inputs to this fixed shape "
    '(tokenizer `padding="max_length", max_length=...`, full batches, constant image size).',
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
RULES = (STATIC_SHAPES,)
HANDLER = None  # decided in `loads.py`
