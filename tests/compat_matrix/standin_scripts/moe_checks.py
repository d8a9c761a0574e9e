"""Run under the stand-in (tests/compat_matrix/test_standin.py), in a process of its own: a tiny JetMoE's routing
(top-k, a scatter into zeros made inside the graph, the split by expert counts after a graph break) compiled
with backend "neuron" for generation and for a training step, against the same model on CPU, then the memory
figures. The first compile
of a fresh process is the one that failed when FakeTensor's dispatch cache was on. Prints one JSON object."""

import json
import warnings

import torch

from compat_matrix.tiny import build_tiny_model

warnings.simplefilter("ignore")
found = {}

model = build_tiny_model("jetmoe")
ids = torch.randint(3, 200, (1, 9), generator=torch.Generator().manual_seed(1))
kwargs = {"max_new_tokens": 8, "do_sample": False, "cache_implementation": "static"}
reference = model.generate(ids, attention_mask=torch.ones_like(ids), **kwargs)
model.to("neuron")
on_device = ids.to("neuron")
generated = model.generate(on_device, attention_mask=torch.ones_like(on_device), **kwargs)
found["generate_tokens_equal_cpu"] = torch.equal(generated.cpu(), reference)

batch = torch.randint(3, 200, (2, 16), generator=torch.Generator().manual_seed(2))
cpu_model = build_tiny_model("jetmoe").train()
cpu_loss = cpu_model(input_ids=batch, labels=batch).loss
model.train()
device_loss = torch.compile(model, backend="neuron", dynamic=False)(
    input_ids=batch.to("neuron"), labels=batch.to("neuron")
).loss
device_loss.backward()
found["train_loss_close_to_cpu"] = abs(device_loss.item() - cpu_loss.item()) < 1e-4
# The memory figures count the live device tensors, not those a compile keeps with fake data.
found["memory_allocated_after_compile"] = torch.neuron.memory_allocated() > 0

print(json.dumps(found))
