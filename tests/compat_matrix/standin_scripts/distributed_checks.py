"""Run under the stand-in with ``torchrun --nproc_per_node=2`` (tests/compat_matrix/test_standin.py): the
``neuron`` process group through DDP and through Transformers' tensor parallelism. Rank 0 writes one JSON
object of findings to the path given as the first argument; the test asserts on them."""

import json
import os
import sys
import warnings

import torch
import torch.distributed as dist
from transformers import AutoModelForCausalLM
from transformers.distributed import DistributedConfig

from compat_matrix.tiny import VOCAB, build_tiny_model

warnings.simplefilter("ignore")
rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
local_rank = int(os.environ["LOCAL_RANK"])
output, checkpoint = sys.argv[1], sys.argv[2]  # checkpoint: a saved tiny Llama (the test saves it)
found = {}
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
tp_loss = tp_model(input_ids=batch.to(device), labels=batch.to(device)).loss
found["tp_loss"] = tp_loss.item()
if rank == 0:
    found["reference_loss"] = reference(input_ids=batch, labels=batch).loss.item()

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

# The collectives the issue names, on device tensors.
ones = torch.ones(4, device=device) * (rank + 1)
dist.all_reduce(ones)
gathered = torch.empty(4 * world, device=device)
dist.all_gather_into_tensor(gathered, torch.full((4,), float(rank), device=device))
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
    "reduce_scatter_tensor": scattered.tolist(),
    "all_to_all_single": exchanged.tolist(),
    "send_recv_broadcast": sent.tolist(),
}
if rank == 0:
    with open(output, "w") as handle:
        json.dump(found, handle)
dist.destroy_process_group()
