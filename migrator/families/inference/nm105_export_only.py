"""NM105, decided argument by argument inside each of the load rewrites (`nm101_causal_lm.py`,
`nm112_traced_model.py`, `nm113_diffusion.py`, `nm114_pipeline.py`): one rewrite of a load decides every
argument it carries."""

from __future__ import annotations

from migrator.rules import Example, Rule, Severity

EXPORT_ONLY = Rule(
    "NM105",
    Severity.INFO,
    "A compiler/export-only argument (`export`, `auto_cast`, `instance_type`, `optlevel`, "
    "`disable_neuron_cache`, `compiler_workdir`, ...)",
    "Dropped: TorchNeuron compiles just in time for the host it runs on.",
    examples=(
        Example(
            before="""\
from optimum.neuron import NeuronModelForFeatureExtraction

model = NeuronModelForFeatureExtraction.from_pretrained(
    "BAAI/bge-small-en-v1.5", export=True, optlevel="2", batch_size=1, sequence_length=384
)
""",
            after="""\
import os
from transformers import AutoModel

os.environ.setdefault("HF_DEACTIVATE_ASYNC_LOAD", "1")

model = AutoModel.from_pretrained(
    "BAAI/bge-small-en-v1.5", device_map="neuron"
)
""",
        ),
    ),
)
RULES = (EXPORT_ONLY,)
HANDLER = None  # decided in `loads.py`
