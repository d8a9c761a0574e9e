"""Why tensor parallelism + torch_compile + activation checkpointing fails, and what turning checkpointing off
costs: NM222's finding, on a migrated `SFTConfig` and on a launcher's `--gradient_checkpointing` (measured:
docs/reference/tensor-parallel.md)."""

WHY = (
    "tensor parallelism + torch_compile + activation checkpointing fails in PyTorch's AOT autograd (the "
    "DeviceMesh of Transformers' TP layers is saved for backward: AssertionError: expected all "
    "tensors_saved_with_vc_check to be Tensors), on CPU with gloo as on the device"
)
MEMORY = (
    "every layer's activations are kept for backward instead of its input only: about s*b*h*(10 + 24/t) bytes "
    "per layer in bf16 at sequence s, batch b, hidden h, TP degree t (attention scores aside), against 2*s*b*h "
    "with checkpointing"
)
