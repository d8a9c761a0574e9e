"""Speed benchmark for neuron-compat (not a test).

1. Matrix: wall time of `neuron-compat run --archs <archs> -j <jobs> --backend neuron-sim`, plus peak memory per
   worker (from the rows).
2. Overhead: for a few architectures, the harness's time per architecture (isolated worker, every probe) against a
   bare script doing the same compiled generate (two prompts, static cache) and the same two compiled training steps,
   in one process with nothing else (no eager reference, no comparison, no op recording, no isolation). The
   worker server (imports torch and transformers once per run) is started first and timed on its own.

Usage: .venv/bin/python benchmarks/compat_speed.py [--archs top100] [-j 2] [--overhead-archs llama,gpt2,qwen3]
       [--skip-matrix] [-o out_dir] [--json benchmarks/compat_speed.json]
       .venv/bin/python benchmarks/compat_speed.py --from-results RESULTS.jsonl --wall-seconds S --skip-overhead
           (the matrix figures of a run already made, e.g. the reference run's top 100, timed by its caller)
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BARE_SCRIPT = r"""
import sys, time, warnings
warnings.simplefilter("ignore")
import torch
from transformers import CompileConfig
from compat_matrix.tiny import build_tiny_model
from compat_matrix.generation_runs import prompt
from compat_matrix.training_runs import padded_training_batch
from compat_matrix.settings import ProbeSettings
import standin.sim_backend  # registers the neuron-sim backend

torch.set_num_threads(1)
settings = ProbeSettings()
start = time.perf_counter()
model = build_tiny_model(sys.argv[1])
config = CompileConfig(backend="neuron-sim", dynamic=False, mode="default")
config._compile_all_devices = True
with torch.no_grad():
    for length in settings.prompt_lengths:
        ids = prompt(length, 0, "cpu")
        model.generate(ids, attention_mask=torch.ones_like(ids), cache_implementation="static",
                       max_cache_len=settings.max_cache_len, compile_config=config,
                       max_new_tokens=settings.max_new_tokens, do_sample=False)
model.train()
compiled = torch.compile(model, backend="neuron-sim", dynamic=False)
optimizer = torch.optim.SGD(model.parameters(), lr=1e-3)
for raw_length in settings.train_lengths:
    compiled(**padded_training_batch(model, raw_length, settings, "cpu")).loss.backward()
    optimizer.step()
    optimizer.zero_grad()
print(time.perf_counter() - start)
"""


def run_matrix(archs: str, jobs: int, out_dir: Path) -> dict:
    output = out_dir / "bench-results.jsonl"
    output.unlink(missing_ok=True)
    start = time.perf_counter()
    subprocess.run(
        [str(Path(sys.executable).with_name("neuron-compat")), "run", "--archs", archs, "--backend", "neuron-sim",
         "-j", str(jobs), "-o", str(output)],
        check=True,
    )  # fmt: skip
    wall = time.perf_counter() - start
    rows = [json.loads(line) for line in output.read_text().splitlines()]
    return matrix_figures(rows, archs, jobs, wall)


def matrix_figures(rows: list[dict], archs: str, jobs: int, wall: float) -> dict:
    peaks = [row["peak_rss_mb"] for row in rows if row.get("peak_rss_mb")]
    seconds = sorted(row["seconds"] for row in rows)
    longest = sorted(rows, key=lambda row: -row["seconds"])[:5]
    return {
        "archs": archs,
        "jobs": jobs,
        "architectures": len(rows),
        "wall_seconds": round(wall, 1),
        "sum_seconds_per_arch": round(sum(seconds), 1),
        "mean_seconds_per_arch": round(statistics.mean(seconds), 1),
        "median_seconds_per_arch": round(statistics.median(seconds), 1),
        "longest": {row["model_type"]: row["seconds"] for row in longest},
        # The confirmation reruns: attribution, the code paths measured against a device rule, the artifact
        # guard's second tiny size. Their share is what this harness adds to a bare probe of the same model.
        **{
            f"{phase}_seconds": round(sum(row.get("probe_seconds", {}).get(phase, 0) for row in rows), 1)
            for phase in ("attribution", "code_paths", "artifact_guard")
        },
        "peak_rss_mb_per_worker": {"median": statistics.median(peaks), "max": max(peaks)},
    }


def run_overhead(model_types: list[str]) -> list[dict]:
    from compat_matrix.runner import run_one_isolated
    from compat_matrix.settings import ProbeSettings

    results = []
    for model_type in model_types:
        bare = subprocess.run(
            [sys.executable, "-c", BARE_SCRIPT, model_type], check=True, capture_output=True, text=True
        )
        bare_seconds = float(bare.stdout.strip().splitlines()[-1])
        row = run_one_isolated(model_type, ProbeSettings(), torch_threads=1)
        results.append(
            {
                "model_type": model_type,
                "verdict": row["verdict"],
                "harness_seconds": row["seconds"],
                "bare_seconds": round(bare_seconds, 2),
                "ratio": round(row["seconds"] / bare_seconds, 2),
                "peak_rss_mb": row["peak_rss_mb"],
            }
        )
        print(json.dumps(results[-1]), flush=True)
    return results


def environment() -> dict:
    import platform

    import torch
    import transformers

    return {
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "load_average_at_end": [round(load, 2) for load in os.getloadavg()],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--archs", default="top100")
    parser.add_argument("-j", "--jobs", type=int, default=2)
    parser.add_argument("--overhead-archs", default="llama,gpt2,qwen3")
    parser.add_argument("--skip-matrix", action="store_true")
    parser.add_argument(
        "-o", "--out-dir", type=Path, default=Path(tempfile.gettempdir()) / "neuron-compat-bench"
    )
    parser.add_argument("--skip-overhead", action="store_true")
    parser.add_argument("--from-results", type=Path, help="summarise this run instead of running the matrix")
    parser.add_argument(
        "--wall-seconds", type=float, help="with --from-results: the run's measured wall time"
    )
    parser.add_argument(
        "--config", default="checkpoint", help="with --from-results: the run's --config (its rows only)"
    )
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args()
    if (args.from_results is None) != (args.wall_seconds is None):
        parser.error("--from-results and --wall-seconds go together")
    args.out_dir.mkdir(parents=True, exist_ok=True)
    report = {}
    if not args.skip_overhead:
        from compat_matrix.runner import start_worker_server

        # Once per run, before the first architecture: reported on its own, never alongside a bare script.
        report["worker_server_start_seconds"] = round(start_worker_server(), 2)
        report["overhead"] = run_overhead(args.overhead_archs.split(","))
    if args.from_results is not None:
        rows = [json.loads(line) for line in args.from_results.read_text().splitlines()]
        rows = [row for row in rows if args.archs != "top100" or row.get("rank")]
        # One run of a results file that holds two (checkpoint configs, then the class-default comparison).
        rows = [row for row in rows if row.get("env", {}).get("config", "checkpoint") == args.config]
        report["matrix"] = matrix_figures(rows, args.archs, args.jobs, args.wall_seconds)
        report["matrix"]["source"] = str(args.from_results)
    elif not args.skip_matrix:
        report["matrix"] = run_matrix(args.archs, args.jobs, args.out_dir)
    report["environment"] = environment()
    print(json.dumps(report, indent=2))
    if args.json:
        args.json.write_text(json.dumps(report, indent=2) + "\n")


if __name__ == "__main__":
    main()
