"""PyTorch/XLA idioms (NM3xx) -> torch / torch.distributed on device "neuron": device and sync calls,
`xm` collectives and rank helpers, `xmp.spawn`, the XLA process-group init methods.

One module per rule; `state.py` holds what they share (the file's facts, the helpers they add, emitted
expressions). Rank and world size come from the variables torchrun sets, so the rewritten expressions
also work in a single process, before or without `init_process_group`. Anything else under torch_xla /
neuronx_distributed is left in place with a TODO (`nm314_manual.py`).
"""
