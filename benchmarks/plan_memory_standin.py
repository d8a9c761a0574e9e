"""How well the planner's activation model predicts the stand-in's peak memory (issue 30 item 4).

Run under the stand-in: ``neuron-compat standin python benchmarks/plan_memory_standin.py llama qwen3 mistral``.
For tiny models of real architectures (fp32, 4 layers), one training forward per batch and sequence size on the
``neuron`` device: its ``torch.neuron.max_memory_allocated`` against the planner's weights + input ids +
activations saved for backward (``compat_matrix.planner.measure_sizes``). Figures: docs/using/planning.md.
"""

from __future__ import annotations

import sys

import torch
from transformers import AutoModelForCausalLM

from compat_matrix.meta_model import FullSizeConfig, build_config
from compat_matrix.planner import measure_sizes

TINY = dict(hidden_size=256, intermediate_size=688, num_hidden_layers=4, num_attention_heads=8,
            num_key_value_heads=4, vocab_size=2048, head_dim=32, max_position_embeddings=4096)  # fmt: skip
GRID = [(1, 128), (2, 256), (4, 512), (2, 1024), (8, 256), (1, 2048)]


def compare(model_type: str) -> None:
    full = FullSizeConfig(model_type, TINY, "tiny")
    model = AutoModelForCausalLM.from_config(build_config(full), dtype=torch.float32).to("neuron").train()
    weights = torch.neuron.memory_allocated()
    for batch, seq in GRID:
        predicted_activations = measure_sizes(full, "train", batch, seq, "fp32").activations
        ids = torch.randint(0, TINY["vocab_size"], (batch, seq), device="neuron")
        torch.neuron.reset_peak_memory_stats()
        output = model(input_ids=ids, labels=ids, use_cache=False)
        peak = torch.neuron.max_memory_allocated()
        predicted = weights + ids.numel() * ids.element_size() + predicted_activations
        print(
            f"{model_type} batch {batch} seq {seq}: forward peak {peak / 2**20:.1f} MiB, predicted "
            f"{predicted / 2**20:.1f} MiB ({(predicted - peak) / peak:+.1%})",
            flush=True,
        )
        del output, ids


if __name__ == "__main__":
    for name in sys.argv[1:] or ["llama"]:
        compare(name)
