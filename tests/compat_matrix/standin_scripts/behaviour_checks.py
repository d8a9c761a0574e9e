"""Run under the stand-in (tests/compat_matrix/test_standin.py): the device behaviours TorchNeuron documents that
PyTorch's own code relies on: streams and events, generators, torch.compile's mode, options and varying shapes,
LSTM/GRU, the attention mask's device, device tensors between processes, device index checks. Prints one JSON
object of findings; the test asserts on them."""

import json
import logging
import multiprocessing
import pickle
import warnings

import torch
import torch.nn.functional as F
from torch._dynamo.utils import counters

from standin import sim_backend

warnings.simplefilter("ignore")
found = {}


def error_of(call) -> str:
    try:
        call()
    except Exception as error:  # noqa: BLE001  (the message is the finding)
        return str(getattr(error, "inner_exception", error)).splitlines()[0]
    return "no error"


# Streams and events are PyTorch's own on the device: a stream of PyTorch's waits on an event of torch.neuron
# (FSDP2's end of backward does), `with stream` makes it current, timing is host time.
event = torch.neuron.current_stream().record_event()
found["accelerator_stream_waits_on_neuron_event"] = error_of(
    lambda: torch.accelerator.current_stream().wait_event(event)
)
found["unrecorded_event_wait"] = error_of(
    lambda: torch.accelerator.current_stream().wait_event(torch.neuron.Event())
)
side = torch.neuron.Stream()
with torch.neuron.stream(side):
    inside = torch.neuron.current_stream() == side and torch.accelerator.current_stream() == side
found["stream_context"] = [inside, torch.neuron.current_stream() == torch.neuron.default_stream()]
start, end = torch.neuron.Event(enable_timing=True), torch.neuron.Event(enable_timing=True)
start.record()
end.record()
found["elapsed_ms"] = start.elapsed_time(end)

# Generators of the device: torch.Generator(device="neuron") and the default ones are the device's; a random op
# on the device draws from the one it is given; a CPU generator is refused, as a device refuses it.
generator = torch.Generator(device="neuron")
found["generator_device"] = str(generator.device)
found["default_generators"] = [str(g.device) for g in torch.neuron.default_generators]
draws = [torch.randn(4, device="neuron", generator=generator.manual_seed(7)).cpu() for _ in range(2)]
found["generator_reproducible"] = torch.equal(*draws)
found["cpu_generator"] = error_of(lambda: torch.randn(4, device="neuron", generator=torch.Generator()))


# torch.compile(backend="neuron") with mode and options, as the compile reference says: other modes log a
# warning and compile as the default.
class Recorder(logging.Handler):
    def emit(self, record):
        warnings_logged.append(record.getMessage())


warnings_logged = []
logging.getLogger("standin.dynamo").addHandler(Recorder())
double = torch.ones(3, device="neuron")
compiled_modes = []
for settings in ({"mode": "max-autotune"}, {"mode": "reduce-overhead"}, {"options": {"some_key": 1}}):
    torch._dynamo.reset()
    compiled_modes.append(torch.compile(lambda x: x * 2, backend="neuron", **settings)(double).cpu().tolist())
found["compiled_with_modes_and_options"] = compiled_modes
found["mode_warnings"] = len(warnings_logged)

# Shapes that vary between calls under the default dynamic=None: one graph per shape; dynamic=True and
# mark_dynamic: rejected.
torch._dynamo.reset()
counters.clear()
step = torch.compile(lambda x: (x * 2).sum(), backend="neuron")
for length in (4, 5, 6):
    step(torch.ones(length, device="neuron"))
found["graphs_for_three_shapes"] = counters["neuron"]["compiled_graphs"]
torch._dynamo.reset()
marked = torch.ones(7, device="neuron")
torch._dynamo.mark_dynamic(marked, 0)
found["mark_dynamic"] = error_of(lambda: torch.compile(lambda x: x * 2, backend="neuron")(marked))
torch._dynamo.reset()
found["dynamic_true"] = error_of(
    lambda: torch.compile(lambda x: x * 2, backend="neuron", dynamic=True)(marked)
)
found["static_shapes_rule"] = sim_backend._rules("symbolic-shape")[0]["id"]

# LSTM and GRU: outputs and gradients equal the CPU's.
for kind in (torch.nn.LSTM, torch.nn.GRU):
    torch.manual_seed(0)
    layer, inputs = kind(4, 8, batch_first=True), torch.randn(2, 3, 4, requires_grad=True)
    output = layer(inputs)[0]
    output.square().sum().backward()
    expected = [p.grad.clone() for p in layer.parameters()] + [inputs.grad]
    layer.zero_grad()
    layer.to("neuron")
    on_device = inputs.detach().to("neuron").requires_grad_()
    device_output = layer(on_device)[0]
    device_output.square().sum().backward()
    got = [p.grad.cpu() for p in layer.parameters()] + [on_device.grad.cpu()]
    found[f"{kind.__name__}_equal_cpu"] = torch.allclose(device_output.cpu(), output, atol=1e-6) and all(
        torch.allclose(a, b, atol=1e-5) for a, b in zip(expected, got, strict=True)
    )

# The attention mask's device is checked like every other argument's.
query = torch.randn(1, 2, 4, 8, device="neuron")
found["cpu_attention_mask"] = error_of(
    lambda: F.scaled_dot_product_attention(query, query, query, attn_mask=torch.ones(4, 4, dtype=torch.bool))
)

# bfloat16 / float16 matrix products and convolutions accumulate in float32 and round once, as a NeuronCore's
# matrix engine does (PyTorch's CPU kernels round along the way, and without AVX-512 BF16 take 20-50x longer);
# mixed dtypes are refused as on the CPU.
torch.manual_seed(0)
rounded_once = []
for dtype in (torch.bfloat16, torch.float16):
    a, b, c = (torch.randn(shape).to(dtype) for shape in ((48, 40), (40, 24), (24,)))
    batched = torch.randn(3, 48, 40).to(dtype), torch.randn(3, 40, 24).to(dtype)
    image, kernel = torch.randn(2, 4, 16, 16).to(dtype), torch.randn(6, 4, 3, 3).to(dtype)
    out = torch.empty(0, dtype=dtype, device="neuron")
    torch.mm(a.to("neuron"), b.to("neuron"), out=out)
    on_device = {
        "mm": torch.mm(a.to("neuron"), b.to("neuron")),
        "mm out=": out,
        "addmm": torch.addmm(c.to("neuron"), a.to("neuron"), b.to("neuron")),
        "bmm": torch.bmm(*(x.to("neuron") for x in batched)),
        "conv2d": torch.nn.functional.conv2d(image.to("neuron"), kernel.to("neuron"), c[:6].to("neuron")),
    }
    in_float = {
        "mm": a.float() @ b.float(),
        "mm out=": a.float() @ b.float(),
        "addmm": torch.addmm(c.float(), a.float(), b.float()),
        "bmm": torch.bmm(*(x.float() for x in batched)),
        "conv2d": torch.nn.functional.conv2d(image.float(), kernel.float(), c[:6].float()),
    }
    rounded_once += [
        name
        for name, result in on_device.items()
        if result.dtype == dtype and torch.equal(result.cpu(), in_float[name].to(dtype))
    ]
    weight = kernel.to("neuron").requires_grad_()
    torch.nn.functional.conv2d(image.to("neuron"), weight).float().sum().backward()
    cpu_weight = kernel.float().requires_grad_()
    torch.nn.functional.conv2d(image.float(), cpu_weight).sum().backward()
    if weight.grad.dtype == dtype and torch.equal(weight.grad.cpu(), cpu_weight.grad.to(dtype)):
        rounded_once.append("conv2d backward")
found["rounded_once"] = rounded_once
found["mixed_dtypes"] = error_of(lambda: torch.mm(a.to("neuron"), b.float().to("neuron")))

# Device tensors pickle (their data, loaded back onto the device); a torch.multiprocessing queue, which shares
# memory, refuses them with what to do.
values = torch.arange(4.0, device="neuron")
loaded = pickle.loads(pickle.dumps(values))
found["pickled"] = [str(loaded.device), loaded.cpu().tolist()]
found["queue"] = error_of(lambda: multiprocessing.get_context("spawn").SimpleQueue().put(values))

# Every torch.neuron function that takes a device checks its index (the backend's message, or PyTorch's own for
# a negative index where PyTorch checks first).
unchecked = []
for name in ("get_device_name", "get_device_properties", "synchronize", "memory_allocated", "max_memory_allocated",
             "memory_reserved", "memory_stats", "memory_summary", "reset_peak_memory_stats", "mem_get_info",
             "get_rng_state", "current_stream", "default_stream", "set_device", "Stream"):  # fmt: skip
    for bad in (9, "neuron:9", -2):
        if error_of(lambda name=name, bad=bad: getattr(torch.neuron, name)(bad)) == "no error":
            unchecked.append(f"{name}({bad!r})")
found["unchecked_indices"] = unchecked
print(json.dumps(found))
