"""Speed of neuron-migrate against a bare libcst round trip (parse + codegen) on the same files.

For files to migrate it also times the least any libcst rewrite costs (parse, one transformer walk that
changes nothing, codegen), the floor under the migrator's own figure.

Corpus: the installed trl, transformers and torch sources (real Python files, --limit of them) plus the
bundled fixtures. Files are classified by what the migrator did with them: "nothing to migrate" (no change,
no finding) or "to migrate". Timings are per phase, in-process, best of --repeat runs; `-j` scaling is
measured on the whole corpus through the same runner the CLI uses (check mode: nothing is written), as the
median of --jobs-repeat back-to-back `-j 1` / `-j 2` ratios.

    .venv/bin/python benchmarks/migrator_speed.py [--limit 1500] [--repeat 3] [--jobs-repeat 9]
"""

from __future__ import annotations

import argparse
import importlib.metadata
import importlib.util
import json
import os
import platform
import statistics
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import libcst as cst

from migrator.engine import REWRITERS, Job, Mode, run
from usercode.sources import SourceFile, discover, read_text

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


def best_of_each(repeat: int, *works) -> list[float]:
    """Best time of each piece of work over `repeat` rounds (see `rounds`)."""
    return [min(times) for times in rounds(repeat, *works)]


def rounds(repeat: int, *works) -> list[list[float]]:
    """Times of each piece of work in each of `repeat` rounds; the works alternate within a round, so a
    passing load on the machine weighs on all of them alike."""
    timings: list[list[float]] = [[] for _ in works]
    for _ in range(repeat):
        for work, times in zip(works, timings, strict=True):
            start = time.perf_counter()
            work()
            times.append(time.perf_counter() - start)
    return timings


def speedup(repeat: int, serial_work, parallel_work) -> dict:
    """Serial over parallel time, round by round (the two ran back to back, under the same load): the median
    and the range of those ratios, and the best time of each."""
    serial, parallel = rounds(repeat, serial_work, parallel_work)
    ratios = sorted(s / p for s, p in zip(serial, parallel, strict=True))
    return {
        "serial_s": round(min(serial), 3),
        "parallel_s": round(min(parallel), 3),
        "median_speedup": round(statistics.median(ratios), 2),
        "speedup_range": [round(ratios[0], 2), round(ratios[-1], 2)],
    }


def spin(iterations: int) -> int:
    total = 0
    for i in range(iterations):
        total += i
    return total


def parallel_ceiling(repeat: int, iterations: int = 5_000_000) -> dict:
    """Speed-up of two processes over one on pure CPU work: the bound for `-j 2` here and now."""
    with ProcessPoolExecutor(max_workers=2) as pool:
        list(pool.map(spin, [1, 1]))  # workers started before timing
        return speedup(
            repeat,
            lambda: [spin(iterations) for _ in range(2)],
            lambda: list(pool.map(spin, [iterations] * 2)),
        )


def per_file_ratios(paths: list[Path], texts: dict[Path, str], repeat: int) -> dict:
    """Each file's migration over its own floor (best of `repeat` each): how the ratio spreads over files."""
    ratios = sorted(
        migrate / floor
        for path in paths
        for floor, migrate in [
            best_of_each(
                repeat,
                lambda path=path: cst.parse_module(texts[path]).visit(cst.CSTTransformer()).code,
                lambda path=path: REWRITERS["python"](texts[path]),
            )
        ]
    )
    return {
        "median_migrate_over_noop_transform": round(statistics.median(ratios), 2),
        "max_migrate_over_noop_transform": round(ratios[-1], 2),
        "files_over_2x": sum(ratio > 2 for ratio in ratios),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--limit", type=int, default=1500, help="library files in the corpus")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--jobs-repeat", type=int, default=9, help="rounds of the -j 1 / -j 2 comparison")
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
    fixtures = ROOT / "fixtures"
    groups = {
        "nothing_to_migrate": nothing,
        "to_migrate": to_migrate,
        # The same, split: small hand-written scripts, dense with rewrites, and library files.
        "to_migrate_fixture_scripts": [p for p in to_migrate if p.is_relative_to(fixtures)],
        "to_migrate_library_files": [p for p in to_migrate if not p.is_relative_to(fixtures)],
    }
    for label, paths in groups.items():
        works = [
            lambda paths=paths: [cst.parse_module(texts[p]).code for p in paths],
            lambda paths=paths: [REWRITERS["python"](texts[p]) for p in paths],
        ]
        if label != "nothing_to_migrate":  # the least any libcst rewrite costs: parse, no-op walk, codegen
            works.append(
                lambda paths=paths: [
                    cst.parse_module(texts[p]).visit(cst.CSTTransformer()).code for p in paths
                ]
            )
        round_trip, migrate, *floor = best_of_each(args.repeat, *works)
        figures[label] = {
            "files": len(paths),
            "round_trip_s": round(round_trip, 3),
            "migrate_s": round(migrate, 3),
            "migrate_files_per_s": round(len(paths) / migrate, 1),
            "migrate_over_round_trip": round(migrate / round_trip, 3),
        }
        if floor:
            figures[label]["noop_transform_s"] = round(floor[0], 3)
            figures[label]["noop_transform_over_round_trip"] = round(floor[0] / round_trip, 3)
            # The target: migrating costs at most 2x this floor.
            figures[label]["migrate_over_noop_transform"] = round(migrate / floor[0], 3)
            if label == "to_migrate":
                figures[label]["per_file"] = per_file_ratios(paths, texts, args.repeat)

    jobs = [Job(source, Mode.CHECK) for source in sources]
    scaling = speedup(args.jobs_repeat, lambda: run(jobs, workers=1), lambda: run(jobs, workers=2))
    figures["jobs"] = {
        "j1_s": scaling["serial_s"],
        "j2_s": scaling["parallel_s"],
        "j2_speedup_median": scaling["median_speedup"],
        "j2_speedup_range": scaling["speedup_range"],
        "j1_files_per_s": round(len(jobs) / scaling["serial_s"], 1),
        # What two processes could gain on this machine at that moment (other load shares the cores).
        "cpu_bound_j2_ceiling": parallel_ceiling(args.jobs_repeat),
    }
    text = json.dumps(figures, indent=2)
    print(text)
    if args.json:
        args.json.write_text(text + "\n")


if __name__ == "__main__":
    main()
