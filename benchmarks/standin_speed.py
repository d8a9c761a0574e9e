"""Speed benchmark for the neuron stand-in (not a test): an eager training step of the tiny models on the
stand-in's ``neuron`` device against the same step on CPU, in one process, paired.

For each architecture, one model on CPU and one identical model on ``neuron`` take steps in turn (forward,
backward, AdamW step; batch 2 x 128 tokens), after warm-up steps; the ratio is taken pair by pair (a neuron
step over the CPU step just before it), so a machine whose speed drifts (a shared one) still gives a fair
ratio. The figure to quote is the median of the paired ratios. One thread, as the harness's workers use.

``--device cpu|neuron`` runs the steps on that device only (no pairing, nothing written): a whole process to
time from outside against the same command on the other device.

Usage: .venv/bin/python benchmarks/standin_speed.py [--archs llama,gpt2,qwen3] [--steps 30]
       [--json benchmarks/standin_speed.json] [--device cpu|neuron]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
import warnings
from pathlib import Path

import torch

import standin

ROOT = Path(__file__).resolve().parents[1]


def training_step(model, batch: dict, optimizer) -> None:
    model(**batch).loss.backward()
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)


def measure(
    model_type: str, steps: int, warmup: int = 3, devices: tuple[str, ...] = ("cpu", "neuron")
) -> dict:
    from compat_matrix.tiny import VOCAB, build_tiny_model

    ids = torch.randint(3, VOCAB - 16, (2, 128), generator=torch.Generator().manual_seed(0))
    runs = {}
    for device in devices:
        model = build_tiny_model(model_type).to(device).train()
        batch = {"input_ids": ids.to(device), "labels": ids.to(device)}
        runs[device] = (model, batch, torch.optim.AdamW(model.parameters(), lr=1e-4))
    seconds: dict[str, list[float]] = {device: [] for device in devices}
    thread_seconds: dict[str, list[float]] = {device: [] for device in devices}
    for step in range(warmup + steps):
        for device, (model, batch, optimizer) in runs.items():
            start, thread_start = time.perf_counter(), time.thread_time()
            training_step(model, batch, optimizer)
            if device == "neuron":
                torch.neuron.synchronize()
            if step >= warmup:
                seconds[device].append(time.perf_counter() - start)
                thread_seconds[device].append(time.thread_time() - thread_start)
    if len(devices) == 1:
        return {
            f"{devices[0]}_ms_median": round(statistics.median(seconds[devices[0]]) * 1000, 2),
            "steps": steps,
        }
    ratios = [n / c for n, c in zip(seconds["neuron"], seconds["cpu"], strict=True)]
    # The step's CPU time on its thread (one intra-op thread; backward on the calling thread on both devices):
    # what a shared machine's other jobs change least.
    thread_ratios = [n / c for n, c in zip(thread_seconds["neuron"], thread_seconds["cpu"], strict=True)]
    return {
        "cpu_ms_median": round(statistics.median(seconds["cpu"]) * 1000, 2),
        "neuron_ms_median": round(statistics.median(seconds["neuron"]) * 1000, 2),
        "ratio_median": round(statistics.median(ratios), 2),
        "ratio_min": round(min(ratios), 2),
        "ratio_max": round(max(ratios), 2),
        "thread_time_ratio_median": round(statistics.median(thread_ratios), 2),
        "steps": steps,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--archs", default="llama,gpt2,qwen3")
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--json", type=Path, default=None, help="write the figures here")
    parser.add_argument("--device", choices=("cpu", "neuron"), default=None, help="this device only")
    args = parser.parse_args()
    warnings.simplefilter("ignore")
    standin.activate()
    import transformers  # (its version for the report; imported once the device exists, as in a run)

    torch.set_num_threads(1)
    if args.device:
        for model_type in args.archs.split(","):
            print(model_type, json.dumps(measure(model_type, args.steps, devices=(args.device,))))
        return
    results = {}
    load_at_start = [round(value, 2) for value in os.getloadavg()]
    for model_type in args.archs.split(","):
        results[model_type] = measure(model_type, args.steps)
        print(model_type, json.dumps(results[model_type]), file=sys.stderr)
    report = {
        "what": "eager training step (forward, backward, AdamW; batch 2x128) of a tiny model: neuron stand-in / CPU",
        "target": "ratio <= 2",
        "architectures": results,
        "target_met": {model_type: figures["ratio_median"] <= 2 for model_type, figures in results.items()},
        "command": " ".join([".venv/bin/python", "benchmarks/standin_speed.py", *sys.argv[1:]]),
        "environment": {
            "torch": torch.__version__,
            "transformers": transformers.__version__,
            "python": platform.python_version(),
            "cpus": os.cpu_count(),
            "load_average_at_start": load_at_start,
            "load_average_at_end": [round(value, 2) for value in os.getloadavg()],
            "note": "one run, paired steps in one process; ratio_* in wall time, thread_time_ratio_median in the "
            "step's thread CPU time",
        },
    }
    text = json.dumps(report, indent=2)
    if args.json:
        args.json.write_text(text + "\n")
    print(text)


if __name__ == "__main__":
    main()
