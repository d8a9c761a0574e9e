"""Run under the stand-in (tests/compat_matrix/test_standin.py): the device, its tensors and ops, torch.neuron,
torch_neuronx, the neuron Dynamo backend. Prints one JSON object of findings; the test asserts on them."""

import copy  # noqa: I001  (torch_neuronx is imported before torch on purpose)
import json
import sys
import tempfile
import warnings
import weakref
from pathlib import Path

import torch_neuronx  # before torch, as a trn2 script may do
import torch

warnings.simplefilter("ignore")
sockets = []
sys.addaudithook(lambda event, args: sockets.append(event) if event == "socket.connect" else None)

from torch._dynamo.utils import counters  # noqa: E402
from transformers import AutoModelForCausalLM  # noqa: E402
from transformers.utils import is_torch_neuron_available  # noqa: E402

from compat_matrix.tiny import build_tiny_model  # noqa: E402
from standin import sim_backend  # noqa: E402

found = {
    "accelerator": str(torch.accelerator.current_accelerator()),
    "device_count": torch.neuron.device_count(),
    "is_torch_neuron_available": is_torch_neuron_available(),
    "torch_neuronx_version": torch_neuronx.__version__,
}

# Tensors, ops, copies, dtypes.
cpu = torch.randn(4, 8)
on_device = cpu.to("neuron")
found["tensor_device"] = str(on_device.device)
found["is_neuron"] = on_device.is_neuron
found["ops_match_cpu"] = torch.equal(
    (on_device @ on_device.T).relu().sum(0).cpu(), (cpu @ cpu.T).relu().sum(0)
)
found["repr"] = repr(torch.ones(2, device="neuron"))
found["dtypes"] = [str((on_device.to(dtype) * 2).dtype) for dtype in (torch.bfloat16, torch.float16)]
found["second_device"] = str(on_device.to("neuron:1").device)
view = on_device[1:3]
view.add_(1)
found["view_writes_through"] = torch.equal(on_device.cpu()[1:3], cpu[1:3] + 1)
try:
    on_device + cpu
    found["mixed_devices"] = "no error"
except RuntimeError as error:
    found["mixed_devices"] = str(error)
try:
    on_device + on_device.to("neuron:1")
    found["two_devices"] = "no error"
except RuntimeError as error:
    found["two_devices"] = str(error)
found["cpu_scalar_mixes"] = (on_device * torch.tensor(2.0)).device.type

# Pinned memory, as a DataLoader(pin_memory=True) asks for it on this accelerator.
loader = torch.utils.data.DataLoader(torch.arange(8.0), batch_size=4, pin_memory=True)
found["pinned_batches"] = [batch.tolist() for batch in loader]

# Convolutions (the overrideable convolution PyTorch calls on a device) and integer histograms (MoE routing).
conv = torch.nn.Conv1d(4, 8, 3, padding=1, groups=2)
signal = torch.randn(2, 4, 10, requires_grad=True)
conv(signal).square().sum().backward()
device_conv = copy.deepcopy(conv).to("neuron")
device_conv.zero_grad()
device_signal = signal.detach().to("neuron").requires_grad_()
device_conv(device_signal).square().sum().backward()
found["conv_grads_equal_cpu"] = torch.allclose(
    device_signal.grad.cpu(), signal.grad, atol=1e-5
) and torch.allclose(device_conv.weight.grad.cpu(), conv.weight.grad, atol=1e-5)
complex_values = torch.randn(3, dtype=torch.complex64)
found["conjugate_copies_to_cpu"] = torch.equal(
    complex_values.to("neuron").conj().cpu(), complex_values.conj()
)
on_device.record_stream(torch.neuron.current_stream())  # DDP's buckets do, with the device's stream
found["int_histc"] = torch.histc(torch.tensor([0, 1, 1, 3], device="neuron"), bins=4, min=0, max=3).tolist()


# torch.neuron: devices, random numbers (its own generator, seeded by torch.manual_seed too), streams, memory.
torch.neuron.set_device(1)
found["current_device_after_set"] = torch.neuron.current_device()
found["factory_device_after_set"] = str(torch.empty(1, device="neuron").device)
torch.neuron.set_device(0)
# torch.accelerator's device-agnostic functions reach the same current device, streams and memory figures.
torch.accelerator.set_device_index(2)
with torch.accelerator.device_index(3):
    inside = str(torch.empty(1, device="neuron").device)
found["accelerator_device_index"] = [
    torch.neuron.current_device(),
    inside,
    torch.accelerator.current_device_index(),
]
torch.accelerator.set_device_index(0)
torch.accelerator.synchronize()
torch.Event(device="neuron").record(torch.accelerator.current_stream())
torch.manual_seed(7)
first = torch.randn(3, device="neuron").cpu()
torch.manual_seed(7)
found["rng_reproducible"] = torch.equal(torch.randn(3, device="neuron").cpu(), first)
state = torch.neuron.get_rng_state()
again = torch.rand(2, device="neuron").cpu()
torch.neuron.set_rng_state(state)
found["rng_state_restores"] = torch.equal(torch.rand(2, device="neuron").cpu(), again)
stream = torch.neuron.Stream()
start, end = torch.neuron.Event(enable_timing=True), torch.neuron.Event(enable_timing=True)
with torch.neuron.stream(stream):
    start.record()
    torch.ones(1000, device="neuron").sum()
    end.record()
torch.neuron.synchronize()
found["event_elapsed_ms"] = start.elapsed_time(end)
big = torch.zeros(1024, 1024, device="neuron")
found["memory_allocated_covers_a_4MiB_tensor"] = (
    torch.neuron.memory_allocated() >= big.numel() * 4
    and torch.accelerator.memory_allocated() >= big.numel() * 4
)
del big
torch.neuron.empty_cache()

# An op TorchNeuron runs on the CPU in eager mode is recorded.
torch_neuronx.clear_op_tracking()
torch.nonzero(on_device > 0)
found["fallback_ops"] = torch_neuronx.get_fallback_ops()

# Eager attention takes the fused ("overrideable") kernel, forward and backward, with the CPU's results.
query = torch.randn(2, 4, 16, 8, requires_grad=True)
mask = torch.ones(16, 16, dtype=torch.bool).tril()
torch.nn.functional.scaled_dot_product_attention(query, query, query, attn_mask=mask).sum().backward()
device_query = query.detach().to("neuron").requires_grad_()
torch_neuronx.clear_op_tracking()
attention = torch.nn.functional.scaled_dot_product_attention(
    device_query, device_query, device_query, attn_mask=mask.to("neuron")
)
attention.sum().backward()
found["attention_ops"] = [
    name for name in torch_neuronx.get_executed_ops() if "attention" in name or "bmm" in name
]
found["attention_grad_equal_cpu"] = torch.allclose(device_query.grad.cpu(), query.grad, atol=1e-6)

# generate with a static cache: Transformers' neuron branch compiles by itself with backend "neuron".
model = build_tiny_model("llama")
ids = torch.randint(3, 200, (1, 7), generator=torch.Generator().manual_seed(0))
kwargs = {"max_new_tokens": 8, "do_sample": False, "cache_implementation": "static"}
reference = model.generate(ids, attention_mask=torch.ones_like(ids), **kwargs)
dynamic_reference = model.generate(
    ids, attention_mask=torch.ones_like(ids), max_new_tokens=8, do_sample=False
)
with tempfile.TemporaryDirectory() as folder:
    model.save_pretrained(folder)
    cpu_saved = {path.name: path.read_bytes() for path in Path(folder).iterdir()}
model.to("neuron")
torch_neuronx.reset_dynamo_metrics()
generated = model.generate(ids.to("neuron"), attention_mask=torch.ones_like(ids).to("neuron"), **kwargs)
found["generate_tokens_equal_cpu"] = torch.equal(generated.cpu(), reference)
found["generate_graphs"] = counters["neuron"]["compiled_graphs"]
found["dynamo_metrics"] = [metric.graph_name for metric in torch_neuronx.get_dynamo_metrics()]

# A user's own fullgraph compile of forward (SDPA inside): Dynamo's fake propagation meets plain fake keys.
own = build_tiny_model("llama").to("neuron")
own.forward = torch.compile(own.forward, backend="neuron", fullgraph=True, dynamic=False)
own_tokens = own.generate(ids.to("neuron"), attention_mask=torch.ones_like(ids).to("neuron"), **kwargs)
found["fullgraph_forward_tokens_equal_cpu"] = torch.equal(own_tokens.cpu(), reference)

# Saving and loading as on a device: save_pretrained (safetensors tells tied weights apart by storage),
# torch.save / torch.load (map_location), deepcopy.
with tempfile.TemporaryDirectory() as folder:
    model.save_pretrained(folder)
    reloaded = AutoModelForCausalLM.from_pretrained(folder, device_map="neuron")
    found["reloaded"] = [
        str(reloaded.device),
        torch.equal(reloaded.lm_head.weight.cpu(), model.lm_head.weight.cpu()),
    ]
    torch.save(model.state_dict(), f"{folder}/state.pt")
    found["torch_load_devices"] = [
        str(torch.load(f"{folder}/state.pt")["lm_head.weight"].device),
        str(torch.load(f"{folder}/state.pt", map_location="cpu")["lm_head.weight"].device),
    ]
found["deepcopy_device"] = str(next(copy.deepcopy(model).parameters()).device)
# Moving a model that is already on the device again is a no-op, as on a device, also while something holds
# its parameters (a compiled graph's guards hold weak references to them).
held = weakref.ref(model.lm_head.weight)
model.to("neuron")
found["moved_again"] = held() is model.lm_head.weight
# The files save_pretrained writes from the device are the ones it writes from the CPU, and load on the CPU.
with tempfile.TemporaryDirectory() as folder:
    model.save_pretrained(folder)
    found["saved_files_equal_cpu"] = {p.name: p.read_bytes() for p in Path(folder).iterdir()} == cpu_saved
    on_cpu = AutoModelForCausalLM.from_pretrained(folder).state_dict()
    found["saved_tensors_equal_on_cpu"] = on_cpu.keys() == model.state_dict().keys() and all(
        torch.equal(on_cpu[name], tensor.cpu()) for name, tensor in model.state_dict().items()
    )

# Under torch.inference_mode (pipelines and most inference scripts): a view of an ordinary tensor stays an
# ordinary tensor that shares its base's version counter, and composite ops (`to`) decompose, as on a device.
device_ids = ids.to("neuron")
with torch.inference_mode():
    eager = model.generate(
        device_ids, attention_mask=torch.ones_like(device_ids), max_new_tokens=8, do_sample=False
    )
    static = model.generate(device_ids, attention_mask=torch.ones_like(device_ids), **kwargs)
    view = on_device[1:]
    view.mul_(1)
    made_inside = on_device * 1
found["inference_mode_tokens_equal_cpu"] = [
    torch.equal(eager.cpu(), dynamic_reference),
    torch.equal(static.cpu(), reference),
]
found["inference_mode_tensors"] = [view.is_inference(), on_device._version > 0, made_inside.is_inference()]

# A dynamic shape is rejected by the neuron backend, as the device rejects it.
try:
    torch.compile(lambda x: x * 2, backend="neuron", dynamic=True)(torch.ones(5, device="neuron"))
    found["dynamic_shape"] = "compiled"
except Exception as error:  # noqa: BLE001  (Dynamo wraps the backend's error)
    cause = getattr(error, "inner_exception", error)
    found["dynamic_shape"] = type(cause).__name__
    found["dynamic_rule"] = isinstance(cause, sim_backend.DynamicShapeRejected)


# torch.vmap inside a compiled region (Mamba's associative_scan): Dynamo inlines it, and its batched values hold
# the device's tensors; gradients as on CPU.
def scaled_sum(a, b):
    return torch.vmap(lambda x, y: x * y + y)(a, b).sum()


host = torch.randn(4, 3)
host_grad = host.clone().requires_grad_()
scaled_sum(host_grad, host).backward()
device_grad = host.to("neuron").requires_grad_()
torch.compile(scaled_sum, backend="neuron", dynamic=False)(device_grad, host.to("neuron")).backward()
found["vmap_grad_equal_cpu"] = torch.allclose(device_grad.grad.cpu(), host_grad.grad)


# Dropout draws from the device's generator, and activation checkpointing replays its mask, eager and compiled.
def dropout_block(values):
    return torch.nn.functional.dropout(values.sin(), p=0.5, training=True).sum()


replayed = []
for compile_backend in (None, "neuron"):

    def checkpointed(values):
        return torch.utils.checkpoint.checkpoint(dropout_block, values, use_reentrant=False)

    run = torch.compile(checkpointed, backend=compile_backend) if compile_backend else checkpointed
    values = torch.randn(64, device="neuron", requires_grad=True)
    total = run(values)
    total.backward()
    kept = values.grad != 0  # the backward's (recomputed) mask
    replayed.append(torch.allclose(total.cpu(), (kept * 2 * values.detach().sin()).sum().cpu(), atol=1e-5))
found["checkpoint_replays_dropout"] = replayed
torch.neuron.manual_seed(5)
first_mask = torch.nn.functional.dropout(torch.ones(32, device="neuron"), 0.5).cpu()
torch.rand(100)  # the CPU's generator moves, not the device's
torch.neuron.manual_seed(5)
found["dropout_on_device_generator"] = torch.equal(
    torch.nn.functional.dropout(torch.ones(32, device="neuron"), 0.5).cpu(), first_mask
)

found["network_connections"] = len(sockets)
print(json.dumps(found))
