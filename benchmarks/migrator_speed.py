"""Speed of neuron-migrate against a bare libcst round trip (parse + codegen) on the same files.

For files to migrate it also times the least any libcst rewrite costs (parse, one transformer walk that
changes nothing, codegen), the floor under the migrator's own figure.

Corpus: the installed trl, transformers and torch sources (real Python files, --limit of them) plus the
bundled fixtures. Files are classified by what the migrator did with them: "nothing to migrate" (no change,
no finding) or "to migrate". Timings are per phase, in-process, best of --repeat runs; `-j` scaling is
measured on the whole corpus through the same runner the CLI uses (check mode: nothing is written).

    .venv/bin/python benchmarks/migrator_speed.py [--limit 1500] [--repeat 3]
"""

from __future__ import annotations

import argparse
import importlib.metadata
import importlib.util
import json
import os
import platform
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import libcst as cst

from migrator.engine import REWRITERS, Job, Mode, run
from migrator.sources import SourceFile, discover, read_text

ROOT = Path(__file__).resolve().parent.parent


def corpus(limit: int) -> list[SourceFile]:
    """Up to `limit` library files, an equal share from each package (trl is smaller: the rest of its
    share goes to the others), plus the fixtures' inputs."""
    packages = ("trl", "transformers", "torch")
    files: list[SourceFile] = []
    for index, package in enumerate(packages):
        origin = Path(importlib.util.find_spec(package).origin).parent
        share = (limit - len(files)) // (len(packages) - index)
        files += [source for source in discover([origin]) if source.kind == "python"][:share]
    fixtures = [
        source
        for source in discover([ROOT / "fixtures" / "migrator"])
        if source.kind == "python" and ".expected." not in source.path.name
    ]
    return files + fixtures


def best_of(repeat: int, work) -> float:
    timings = []
    for _ in range(repeat):
        start = time.perf_counter()
        work()
        timings.append(time.perf_counter() - start)
    return min(timings)


def spin(iterations: int) -> int:
    total = 0
    for i in range(iterations):
        total += i
    return total


def parallel_ceiling(repeat: int, iterations: int = 5_000_000) -> float:
    """Speed-up of two processes over one on pure CPU work: the bound for `-j 2` here and now."""
    with ProcessPoolExecutor(max_workers=2) as pool:
        list(pool.map(spin, [1, 1]))  # workers started before timing
        serial = best_of(repeat, lambda: [spin(iterations) for _ in range(2)])
        parallel = best_of(repeat, lambda: list(pool.map(spin, [iterations] * 2)))
    return serial / parallel


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--limit", type=int, default=1500, help="library files in the corpus")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args()

    sources = corpus(args.limit)
    texts = {source.path: read_text(source.path, source.kind).content for source in sources}
    outcome = {path: REWRITERS["python"](text) for path, text in texts.items()}
    to_migrate = [p for p, (code, findings) in outcome.items() if code != texts[p] or findings]
    nothing = [p for p in texts if p not in set(to_migrate)]

    figures = {
        "corpus_files": len(texts),
        "corpus_lines": sum(text.count("\n") for text in texts.values()),
        "python": platform.python_version(),
        "libcst": importlib.metadata.version("libcst"),
        "cpus": os.cpu_count(),
    }
    for label, paths in (("nothing_to_migrate", nothing), ("to_migrate", to_migrate)):
        round_trip = best_of(
            args.repeat, lambda paths=paths: [cst.parse_module(texts[p]).code for p in paths]
        )
        migrate = best_of(args.repeat, lambda paths=paths: [REWRITERS["python"](texts[p]) for p in paths])
        figures[label] = {
            "files": len(paths),
            "round_trip_s": round(round_trip, 3),
            "migrate_s": round(migrate, 3),
            "migrate_files_per_s": round(len(paths) / migrate, 1),
            "migrate_over_round_trip": round(migrate / round_trip, 3),
        }
    # The least any libcst rewrite costs: parse, one transformer walk that changes nothing, codegen.
    paths = to_migrate
    floor = best_of(
        args.repeat,
        lambda: [cst.parse_module(texts[p]).visit(cst.CSTTransformer()).code for p in paths],
    )
    figures["to_migrate"]["noop_transform_s"] = round(floor, 3)
    figures["to_migrate"]["noop_transform_over_round_trip"] = round(
        floor / figures["to_migrate"]["round_trip_s"], 3
    )

    jobs = [Job(source, Mode.CHECK) for source in sources]
    serial = best_of(args.repeat, lambda: run(jobs, workers=1))
    parallel = best_of(args.repeat, lambda: run(jobs, workers=2))
    figures["jobs"] = {
        "j1_s": round(serial, 3),
        "j2_s": round(parallel, 3),
        "j2_speedup": round(serial / parallel, 2),
        "j1_files_per_s": round(len(jobs) / serial, 1),
        # What two processes could gain on this machine at that moment (other load shares the cores).
        "cpu_bound_j2_ceiling": round(parallel_ceiling(args.repeat), 2),
    }
    text = json.dumps(figures, indent=2)
    print(text)
    if args.json:
        args.json.write_text(text + "\n")


if __name__ == "__main__":
    main()
