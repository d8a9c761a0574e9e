"""NM109, decided by the walk of `nm101_causal_lm.py`: a `get_neuron_config` is paired with its load by
`nm108_neuron_config_pair.py`, but only the load rewrite knows whether the pair can be merged; what it cannot
merge keeps the config with a TODO."""

from __future__ import annotations

from migrator.rules import Example, Rule, Severity

UNPAIRED_NEURON_CONFIG = Rule(
    "NM109",
    Severity.ERROR,
    "`get_neuron_config` / `export` that cannot be paired in one scope with visible arguments",
    "Left with a TODO: load the checkpoint with AutoModelForCausalLM on neuron and carry sequence_length to "
    "generation_config.max_cache_len and tensor_parallel_size to DistributedConfig by hand.",
    examples=(
        Example(
            before="""\
from optimum.neuron import NeuronModelForCausalLM


def compile_model(neuron_config, output_dir):
    model = NeuronModelForCausalLM.export("Qwen/Qwen3-0.6B", neuron_config, load_weights=False)
    model.save_pretrained(output_dir)
""",
            after="""\
# TODO(neuron-migrate): NM501 `optimum.neuron` stays imported only for line 7 (NM109), under its own TODO: `optimum.neuron` is optimum-neuron, which TorchNeuron replaces; remove this import once that statement is rewritten
from optimum.neuron import NeuronModelForCausalLM


def compile_model(neuron_config, output_dir):
    # TODO(neuron-migrate): NM109 the neuron config passed to export() is not built by get_neuron_config in the same scope; load the checkpoint with AutoModelForCausalLM.from_pretrained(id, device_map="neuron") and set the static cache by hand
    model = NeuronModelForCausalLM.export("Qwen/Qwen3-0.6B", neuron_config, load_weights=False)
    model.save_pretrained(output_dir)
""",
        ),
    ),
)
RULES = (UNPAIRED_NEURON_CONFIG,)
HANDLER = None  # decided in `nm108_neuron_config_pair.py`
