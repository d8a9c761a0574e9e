"""Checks `neuron-migrate bench` against CUDA's own clocks on a GPU: run it where `torch.cuda.is_available()`.

    .venv/bin/python benchmarks/bench_cuda_check.py [--steps 30]

A training loop records a CUDA event after every optimizer step and, at exit, the elapsed GPU time between
consecutive step ends and `torch.cuda.max_memory_allocated()`. `neuron-migrate bench` runs the same loop and
times the same intervals on the host, with the device synchronized at each step end. The check passes when,
over the steps both measured, bench's median step time and its peak memory are within 5 % of CUDA's. It
prints the card, both figures and the differences; exit 1 when a figure is off, 2 when there is no GPU.
No GPU was lent to the session that wrote it: its figures are for the person who runs it to record.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

LOOP = """
import atexit, json, sys
import torch
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)
width = 4096
model = torch.nn.Sequential(*[torch.nn.Linear(width, width) for _ in range(4)]).cuda()
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
data = TensorDataset(torch.randn(64 * 200, width), torch.randn(64 * 200, width))
ends = []


def dump():
    torch.cuda.synchronize()
    seconds = {n + 1: ends[n - 1].elapsed_time(ends[n]) / 1000 for n in range(1, len(ends))}
    with open(sys.argv[1], "w") as handle:
        json.dump({"seconds_by_step": seconds, "max_memory_allocated": torch.cuda.max_memory_allocated()}, handle)


atexit.register(dump)  # the bench ends the loop at its step cap (SystemExit in the optimizer's step hook)
for x, y in DataLoader(data, batch_size=64):
    loss = torch.nn.functional.mse_loss(model(x.cuda()), y.cuda())
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
    end = torch.cuda.Event(enable_timing=True)
    end.record()
    ends.append(end)
"""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--warmup", type=int, default=5)
    options = parser.parse_args()
    import torch

    if not torch.cuda.is_available():
        print("no CUDA device here: run this on a GPU host", file=sys.stderr)
        return 2
    card = torch.cuda.get_device_name()
    with tempfile.TemporaryDirectory() as folder:
        script, events = Path(folder, "loop.py"), Path(folder, "events.json")
        script.write_text(LOOP, encoding="utf-8")
        neuron_migrate = str(Path(sys.executable).with_name("neuron-migrate"))
        command = [neuron_migrate, "bench", str(script), "--format", "json"]
        command += ["--warmup", str(options.warmup), "--steps", str(options.steps), "--", str(events)]
        done = subprocess.run(
            command, capture_output=True, text=True, cwd=Path(__file__).resolve().parents[1]
        )
        if done.returncode != 0:
            print(done.stdout[-2000:], done.stderr[-2000:], file=sys.stderr)
            return 1
        result = json.loads(done.stdout)["results"][0]
        cuda = json.loads(events.read_text())
    bench_steps = {int(n): s for n, s in result["steps"]["seconds_by_step"].items()}
    cuda_steps = {int(n): s for n, s in cuda["seconds_by_step"].items()}
    common = sorted(set(bench_steps) & set(cuda_steps))
    bench_median = statistics.median(bench_steps[n] for n in common)
    cuda_median = statistics.median(cuda_steps[n] for n in common)
    bench_peak, cuda_peak = result["peak_memory"]["bytes"], cuda["max_memory_allocated"]
    step_off = abs(bench_median - cuda_median) / cuda_median
    memory_off = abs(bench_peak - cuda_peak) / cuda_peak
    print(f"card: {card}; steps compared: {len(common)} (after {options.warmup} warm-up)")
    print(
        f"median step: bench {bench_median * 1000:.3f} ms, CUDA events {cuda_median * 1000:.3f} ms ({step_off:.2%})"
    )
    print(
        f"peak memory: bench {bench_peak} B, torch.cuda.max_memory_allocated {cuda_peak} B ({memory_off:.2%})"
    )
    print(f"bench's own hooks: {result['overhead_fraction']:.3%} of the timed seconds")
    return 0 if step_off <= 0.05 and memory_off <= 0.05 else 1


if __name__ == "__main__":
    sys.exit(main())
