"""The stand-in's `neuron` process group takes the flat tensors NCCL takes: Accelerate's gather (what Trainer's
evaluation runs under several processes) passes `all_gather_into_tensor` a flat output for every backend but
gloo, and gloo under the stand-in refused it ("ProcessGroupGloo::allgather: invalid tensor size at index 0
(expected (1, 2), got (2))", philschmid/aws-neuron-samples' getting-started.ipynb). The same script on plain CPU
with gloo takes Accelerate's gloo path and evaluates."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

import standin

GATHERS = textwrap.dedent(
    """
    import json, sys
    import torch, torch.distributed as dist
    from accelerate import PartialState
    from accelerate.utils import gather

    state = PartialState()  # init_process_group with the device's backend: "neuron" on the stand-in
    rank, world = dist.get_rank(), dist.get_world_size()
    device = state.device
    logits = torch.tensor([[rank, rank + 0.5]], device=device)  # one row of an evaluation batch: (1, 2)
    flat = torch.empty(world * 2, device=device)
    dist.all_gather_into_tensor(flat, logits)
    scattered = torch.empty(1, 2, device=device)
    dist.reduce_scatter_tensor(scattered, torch.arange(2.0 * world, device=device))
    found = {
        "backend": dist.get_backend(),
        "accelerate_gather": gather(logits).cpu().tolist(),
        "flat_all_gather": flat.cpu().tolist(),
        "flat_reduce_scatter": scattered.cpu().tolist(),
    }
    if rank == 0:
        print(json.dumps(found))
    dist.destroy_process_group()
    """
)


@pytest.mark.slow
def test_accelerate_s_gather_of_a_row_and_flat_collective_tensors_on_the_neuron_process_group(tmp_path):
    script = tmp_path / "gathers.py"
    script.write_text(GATHERS)
    env = {**standin.activation_env(), "OMP_NUM_THREADS": "1"}
    launcher = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2"]
    done = subprocess.run(
        [*launcher, str(script)], capture_output=True, text=True, env=env, timeout=300, check=False
    )
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    assert lines, done.stderr[-3000:]
    found = json.loads(lines[-1])
    assert found["backend"] == "neuron"
    assert found["accelerate_gather"] == [[0.0, 0.5], [1.0, 1.5]]
    assert found["flat_all_gather"] == [0.0, 0.5, 1.0, 1.5]
    assert found["flat_reduce_scatter"] == [[0.0, 2.0]]  # rank 0's half of the sum of [0, 1, 2, 3] twice
