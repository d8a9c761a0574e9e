"""Speed benchmark for `neuron-migrate try` (not a test): a tiny-model try of a Trainer script, end to end.

It writes a small SFT-style Trainer script (a Hub model id and a Hub dataset, both served as stand-ins),
runs `neuron-migrate try` on it --runs times (the first with an empty tiny-model cache, the others warm) and
breaks each run's wall time down from the try's own report:

- serving: writing the tiny model, tokenizer and dataset stand-ins (parent process);
- process start: the child interpreter up to `import torch` done (torch with the stand-in registered);
- to first load: from there to the first `from_pretrained` (transformers, datasets imports, the script's top);
- to first step: loading, data preparation and the first optimizer step (the compile happens here);
- steps: first to last optimizer step; Dynamo compile seconds (its own timing of every frame compile);
- the rest: the script's end (saving into the temporary copy), process exit, the try's bookkeeping.

Targets on the 2-core machine: any try under 60 s (issue 18); a warm one (tiny-model cache filled) at most
10 s (issue 28).

Usage: .venv/bin/python benchmarks/try_speed.py [--runs 3] [--steps 3] [--json benchmarks/try_speed.json]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SCRIPT = """
from datasets import load_dataset
from transformers import AutoModelForCausalLM, AutoTokenizer, Trainer, TrainingArguments

model_id = "Qwen/Qwen3-0.6B"
tokenizer = AutoTokenizer.from_pretrained(model_id)
model = AutoModelForCausalLM.from_pretrained(model_id)
data = load_dataset("tatsu-lab/alpaca", split="train")


def tokenize(rows):
    texts = [f"{i}\\n{o}" for i, o in zip(rows["instruction"], rows["output"])]
    tokens = tokenizer(texts, truncation=True, max_length=128, padding="max_length")
    tokens["labels"] = tokens["input_ids"]
    return tokens


data = data.map(tokenize, batched=True, remove_columns=data.column_names)
arguments = TrainingArguments(
    output_dir="out", per_device_train_batch_size=4, torch_compile=True, report_to="none", save_strategy="no"
)
Trainer(model=model, args=arguments, train_dataset=data).train()
"""


def one_run(folder: Path, cache: Path, steps: int) -> dict:
    report = folder / "report.json"
    started = time.perf_counter()
    result = subprocess.run(
        [sys.executable, "-c", "from commands.neuron_migrate import main; main()", "try", "train.py", "-q", "--steps", str(steps),
         "--format", "json", "--report", str(report)],
        cwd=folder, capture_output=True, text=True, env={**os.environ, "NEURON_MIGRATE_CACHE": str(cache)},
    )  # fmt: skip
    wall = time.perf_counter() - started
    (run,) = json.loads(report.read_text())["runs"]
    if run["status"] != "ran":
        raise SystemExit(f"the benchmark's try did not run: {run['reason']}\n{result.stderr[-2000:]}")
    timings = run["timings"]
    process = timings["process_seconds"]
    marks = {
        name: timings.get(name) for name in ("torch_imported", "first_model_load", "first_step", "last_step")
    }
    return {
        "wall_seconds": round(wall, 2),
        "run_seconds": run["seconds"],
        "serving_stand_ins_seconds": timings["serving_stand_ins_seconds"],
        "process_start_to_torch_seconds": marks["torch_imported"],
        "torch_to_first_load_seconds": round(marks["first_model_load"] - marks["torch_imported"], 2),
        "first_load_to_first_step_seconds": round(marks["first_step"] - marks["first_model_load"], 2),
        "steps_seconds": round(marks["last_step"] - marks["first_step"], 2),
        "after_last_step_seconds": round(process - marks["last_step"], 2),
        "dynamo_compile_seconds": timings["compile_seconds"],
        "steps": run["steps"],
        "graphs": run["compile_count"],
        "device_graphs": run["device_graphs"],
        "recompiles": run["recompile_count"],
        "device": run["device"],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--json", type=Path, default=REPO / "benchmarks" / "try_speed.json")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        folder, cache = Path(scratch) / "user", Path(scratch) / "cache"
        folder.mkdir()
        (folder / "train.py").write_text(SCRIPT)
        runs = []
        for index in range(args.runs):
            runs.append(one_run(folder, cache, args.steps))
            print(f"run {index + 1}/{args.runs}: {runs[-1]['wall_seconds']} s", file=sys.stderr)
    warm = runs[1:] or runs
    result = {
        "what": "neuron-migrate try of a tiny-model Trainer script (torch_compile=True) on the stand-in device",
        "target_seconds": 60,
        "warm_target_seconds": 10,
        "cold_cache_wall_seconds": runs[0]["wall_seconds"],
        "warm_median_wall_seconds": statistics.median(run["wall_seconds"] for run in warm),
        "runs": runs,
        "environment": {
            "python": platform.python_version(),
            "cpus": os.cpu_count(),
            "load_average_at_end": [round(value, 2) for value in os.getloadavg()],
            "note": "how busy the 2-core machine was (other jobs share it): the load average at the end",
        },
    }
    args.json.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
