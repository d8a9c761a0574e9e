"""Run under the stand-in with ``torchrun --nproc_per_node=2`` (tests/compat_matrix/test_standin.py): the
``neuron`` process group through DDP, FSDP2 and Transformers' tensor parallelism. Rank 0 writes one JSON
object of findings to the path given as the first argument; the test asserts on them."""

import json
import os
import sys
import warnings

import torch
import torch.distributed as dist
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import fully_shard
from transformers import AutoModelForCausalLM
from transformers.distributed import DistributedConfig

from compat_matrix.tiny import VOCAB, build_tiny_model

warnings.simplefilter("ignore")
rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
local_rank = int(os.environ["LOCAL_RANK"])
output, checkpoint = sys.argv[1], sys.argv[2]  # checkpoint: a saved tiny Llama (the test saves it)
found = {}
first_device = torch.neuron.current_device()  # before anything sets one: each worker starts on its own core
batch = torch.randint(3, VOCAB - 16, (2 * world, 32), generator=torch.Generator().manual_seed(0))

# Tensor parallelism as Transformers sets it up on neuron: it initialises the "neuron" process group and
# binds neuron:LOCAL_RANK itself. The loss equals one process's over the same batch.
reference = AutoModelForCausalLM.from_pretrained(checkpoint) if rank == 0 else None
tp_model = AutoModelForCausalLM.from_pretrained(
    checkpoint, distributed_config=DistributedConfig(tp_size=world)
)
found["backend"] = dist.get_backend()
found["tp_device"] = str(tp_model.device)
device = tp_model.device
first_devices = torch.empty(world, dtype=torch.long, device=device)
dist.all_gather_into_tensor(first_devices, torch.tensor([first_device], device=device))
found["first_devices"] = first_devices.tolist()
tp_loss = tp_model(input_ids=batch.to(device), labels=batch.to(device)).loss
found["tp_loss"] = tp_loss.item()
if rank == 0:
    found["reference_loss"] = reference(input_ids=batch, labels=batch).loss.item()

# Generation of the tensor-parallel model as an inference script runs it: under torch.inference_mode, with a
# static cache, so Transformers compiles it with the neuron backend (the graphs hold DTensors of device
# tensors). The tokens equal one process's.
prompt = batch[:2, :8]
settings = {"max_new_tokens": 4, "do_sample": False, "cache_implementation": "static"}
with torch.inference_mode():
    tokens = tp_model.generate(
        prompt.to(device), attention_mask=torch.ones_like(prompt).to(device), **settings
    )
found["tp_generate_device"] = str(tokens.device)
if rank == 0:
    expected = reference.generate(prompt, attention_mask=torch.ones_like(prompt), **settings)
    found["tp_generate_equal_one_process"] = torch.equal(tokens.cpu(), expected)

# DDP: each rank's half of the global batch; the averaged gradients equal one process's over all of it.
model = build_tiny_model("llama").to(device).train()
ddp = torch.nn.parallel.DistributedDataParallel(model, device_ids=[device.index])
half = batch.chunk(world)[rank].to(device)
ddp(input_ids=half, labels=half).loss.backward()
if rank == 0:
    single = build_tiny_model("llama").train()
    single(input_ids=batch, labels=batch).loss.backward()
    diffs = [
        (p.grad.cpu() - q.grad).abs().max().item()
        for p, q in zip(model.parameters(), single.parameters(), strict=True)
        if q.grad is not None
    ]
    found["ddp_grad_device"] = str(next(model.parameters()).grad.device)
    found["ddp_max_grad_diff"] = max(diffs)
    found["ddp_params"] = len(diffs)

# FSDP2: fully_shard over a neuron device mesh (parameters become DTensors of device shards); each rank trains
# on its half of the global batch, and its losses over two AdamW steps equal one process's on that half.
mesh = init_device_mesh("neuron", (world,))
sharded = build_tiny_model("llama").to(device).train()
for layer in sharded.model.layers:
    fully_shard(layer, mesh=mesh)
fully_shard(sharded, mesh=mesh)
optimizer = torch.optim.AdamW(sharded.parameters(), lr=1e-2)
fsdp_losses = []
for _ in range(2):
    loss = sharded(input_ids=half, labels=half).loss
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
    fsdp_losses.append(loss.item())
shard = next(sharded.parameters())
found["fsdp_shard"] = [type(shard).__name__, str(shard.to_local().device)]
every_rank = [None] * world
dist.all_gather_object(every_rank, fsdp_losses)
if rank == 0:
    single = build_tiny_model("llama").train()
    optimizer = torch.optim.AdamW(single.parameters(), lr=1e-2)
    reference_losses = []
    for _ in range(2):
        losses = [single(input_ids=part, labels=part).loss for part in batch.chunk(world)]
        (sum(losses) / world).backward()
        optimizer.step()
        optimizer.zero_grad()
        reference_losses.append([loss.item() for loss in losses])
    found["fsdp_max_loss_diff"] = max(
        abs(every_rank[r][step] - reference_losses[step][r]) for r in range(world) for step in range(2)
    )

# FSDP2 with a frozen first layer that a later layer prefetches in backward: that layer runs no backward, so
# FSDP2's end of backward waits, on PyTorch's current stream, for the all-gather event of torch.neuron's stream.
frozen = build_tiny_model("llama").to(device).train()
frozen.model.embed_tokens.requires_grad_(False)
frozen.model.layers[0].requires_grad_(False)
for layer in frozen.model.layers:
    fully_shard(layer, mesh=mesh)
fully_shard(frozen, mesh=mesh)
frozen.model.layers[1].set_modules_to_backward_prefetch([frozen.model.layers[0]])
frozen_losses = []
for _ in range(2):
    loss = frozen(input_ids=half, labels=half).loss
    loss.backward()
    frozen_losses.append(loss.item())
found["fsdp_frozen_prefetch_losses"] = len(frozen_losses)

# The collectives the issue names, on device tensors.
ones = torch.ones(4, device=device) * (rank + 1)
dist.all_reduce(ones)
gathered = torch.empty(4 * world, device=device)
dist.all_gather_into_tensor(gathered, torch.full((4,), float(rank), device=device))
# a flat output for rows of two (accelerate's gather of a batch of logits)
flat = torch.empty(2 * world, device=device)
dist.all_gather_into_tensor(flat, torch.full((1, 2), float(rank), device=device))
scattered = torch.empty(2, device=device)
dist.reduce_scatter_tensor(scattered, torch.arange(2.0 * world, device=device))
exchanged = torch.empty(world, device=device)
dist.all_to_all_single(exchanged, torch.full((world,), float(rank), device=device))
sent = torch.full((3,), 7.0, device=device) if rank == 0 else torch.zeros(3, device=device)
if rank == 0:
    dist.send(sent, dst=1)
else:
    dist.recv(sent, src=0)
dist.broadcast(sent, src=1)
dist.barrier()
found["collectives"] = {
    "all_reduce": ones.tolist(),
    "all_gather_into_tensor": gathered.tolist(),
    "all_gather_into_flat_tensor": flat.tolist(),
    "reduce_scatter_tensor": scattered.tolist(),
    "all_to_all_single": exchanged.tolist(),
    "send_recv_broadcast": sent.tolist(),
}
# A random op on a sharded DTensor (the head a sharded load initialises, dropout under TP): DTensor's RNG tracker
# reads the device generator's 16-byte (seed, offset) state and gives each shard its own offset.
mesh = init_device_mesh("neuron", (world,))
torch.manual_seed(3)
weight = torch.distributed.tensor.distribute_tensor(
    torch.empty(8, 4, device=device), mesh, [torch.distributed.tensor.Shard(0)]
)
weight.normal_()
full = weight.full_tensor().cpu()
found["dtensor_random_shards_differ"] = not torch.equal(full[:4], full[4:])
found["rng_state_bytes"] = torch.neuron.get_rng_state().numel()
if rank == 0:
    with open(output, "w") as handle:
        json.dump(found, handle)
dist.destroy_process_group()
