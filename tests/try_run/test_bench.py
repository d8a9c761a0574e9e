"""`neuron-migrate bench` measured against what the scripts themselves see: a loop that times its own steps,
padded batches whose length changes once (a recompile), greedy generation requests; and the runs that cannot
be measured. CPU and the stand-in neuron device (whose torch.neuron memory statistics and compile metrics are
read as on a trn2)."""

from __future__ import annotations

import json
import statistics
from pathlib import Path

import pytest
from click.testing import CliRunner

from commands.neuron_migrate import main
from try_run.bench import MEASURED, NOT_MEASURED, BenchOptions, _generation, bench_path
from try_run.runner import TryUsageError

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "bench"


def _options(**changes) -> BenchOptions:
    return BenchOptions(**{"show_output": False, "timeout_s": 300, **changes})


@pytest.mark.parametrize("standin", [False, True], ids=["cpu", "standin"])
def test_step_time_matches_a_hand_timed_loop(tmp_path, standin) -> None:
    hand = tmp_path / "hand.json"
    result = bench_path(
        FIXTURES / "timed_loop.py", [str(hand)], _options(warmup=3, steps=15, standin=standin)
    )
    assert result.status == MEASURED, result.reason
    assert result.device.startswith("neuron (stand-in" if standin else "cpu")
    ends = json.loads(hand.read_text())
    hand_seconds = {n: ends[n - 1] - ends[n - 2] for n in range(2, len(ends) + 1)}
    steps = result.steps
    measured = {int(n): seconds for n, seconds in steps["seconds_by_step"].items()}
    assert sorted(measured) == list(range(4, 19))  # warm-up left out, the 15 steps asked for
    assert steps["median_seconds"] == pytest.approx(statistics.median(measured.values()))
    common = sorted(set(measured) & set(hand_seconds))  # the step the cap ends is never timed by the loop
    bench_median = statistics.median(measured[n] for n in common)
    hand_median = statistics.median(hand_seconds[n] for n in common)
    assert bench_median == pytest.approx(hand_median, rel=0.05)
    assert result.overhead_fraction <= 0.02
    assert steps["samples_per_s"] == pytest.approx(64 / statistics.mean(measured.values()), rel=1e-3)
    assert steps["tokens_per_s"] is None  # float features: no tokens
    assert result.peak_memory["of"] == ("neuron allocated" if standin else "host peak RSS")


def test_recompiles_are_timed_at_the_users_line_and_left_out(tmp_path) -> None:
    result = bench_path(
        FIXTURES / "compiled_steps.py", [], _options(warmup=2, steps=8, standin=True, price_per_hour=1.5)
    )
    assert result.status == MEASURED, result.reason
    (recompile,) = result.compile["recompiles"]
    assert recompile["in"] == "step 7" and "size mismatch at index 1" in recompile["reason"]
    call = "logits = compiled(**inputs)"
    line = [text.strip() for text in (FIXTURES / "compiled_steps.py").read_text().splitlines()].index(
        call
    ) + 1
    assert recompile["where"].endswith(f"compiled_steps.py:{line}") and recompile["code"] == call
    assert result.steps["left_out_recompiling"] == [7] and "7" not in result.steps["seconds_by_step"]
    assert result.compile["first_step_seconds"] > 0 and result.compile["dynamo_compile_seconds"] > 0
    # torch.neuron.get_dynamo_metrics(): the stand-in's torch_neuronx records each forward and backward graph
    assert len(result.compile["device_compile"]) == result.compile["device_graphs"] == 4
    assert result.peak_memory["of"] == "neuron allocated" and result.peak_memory["bytes"] > 0
    assert result.layout["batch"] == [4] and result.layout["sequence"] == [8, 12]
    # every batch has 2 padding tokens in each of its 4 rows
    steps = result.steps
    seconds = sum(steps["seconds_by_step"].values())
    assert steps["padding_tokens_per_s"] * seconds == pytest.approx(8 * steps["measured"], rel=1e-3)
    assert result.cost["usd_per_million_tokens"] == pytest.approx(
        1.5 / 3600 / steps["tokens_per_s"] * 1e6, rel=1e-3
    )


def test_generation_latency_per_batch_size() -> None:
    result = bench_path(FIXTURES / "generate_requests.py", [], _options(warmup=2, requests=4, standin=True))
    assert result.status == MEASURED, result.reason
    (row,) = result.generation
    assert row["batch"] == 2 and row["requests"] == 4 and row["prompt_tokens"] == [10]
    assert 0 < row["first_token_median_seconds"] < row["request_median_seconds"]
    assert 0 < row["per_token_median_seconds"] < row["request_median_seconds"]
    # Tokens over the total time of the 4 requests, which is at least twice their median (a loaded machine
    # makes one request slow, so the median gives no lower bound): the exact formula is tested below.
    assert 0 < row["tokens_per_s"] <= 4 * 2 * 6 / (2 * row["request_median_seconds"]) * 1.001


def test_generation_rows_are_grouped_by_batch_and_count_every_request() -> None:
    requests = [
        {"batch": 2, "seconds": 1.0, "first_token_seconds": 0.4, "new_tokens": 4, "prompt_tokens": 10},
        {"batch": 2, "seconds": 3.0, "first_token_seconds": 0.6, "new_tokens": 4, "prompt_tokens": 10},
        {"batch": 1, "seconds": 0.5, "first_token_seconds": 0.2, "new_tokens": 2, "prompt_tokens": 7},
    ]
    one, two = _generation(requests)
    assert (one["batch"], one["requests"], one["tokens_per_s"]) == (1, 1, 4.0)
    assert two["prompt_tokens"] == [10] and two["request_median_seconds"] == 2.0
    assert two["first_token_median_seconds"] == 0.5 and two["per_token_median_seconds"] == pytest.approx(0.5)
    assert two["tokens_per_s"] == 2 * 4 * 2 / 4.0


def test_a_script_without_a_step_is_not_measured(tmp_path) -> None:
    idle = tmp_path / "idle.py"
    idle.write_text("import time\nimport torch\ntime.sleep(60)\n")
    result = bench_path(idle, [], _options(timeout_s=5))
    assert result.status == NOT_MEASURED
    assert "within the --timeout of 5 s" in result.reason
    ends = tmp_path / "ends.py"
    ends.write_text("import torch\nprint(torch.ones(2).sum())\n")
    result = bench_path(ends, [], _options())
    assert result.status == NOT_MEASURED and "ended before a measured optimizer step" in result.reason


def test_command_line_usage_errors(tmp_path) -> None:
    script = tmp_path / "s.py"
    script.write_text("pass\n")
    runner = CliRunner()
    unknown = runner.invoke(main, ["bench", str(script), "--instance", "x1.nano"])
    assert unknown.exit_code == 2 and "not in the price table" in unknown.output
    assert runner.invoke(main, ["bench", str(tmp_path / "missing.py")]).exit_code == 2
    assert runner.invoke(main, ["bench", str(script), "--page", "p.md"]).exit_code == 2


def test_a_baseline_report_from_another_host_is_compared(tmp_path) -> None:
    script = tmp_path / "train.py"
    script.write_text((FIXTURES / "timed_loop.py").read_text())
    other = {"command": "python train.py", "status": "measured", "device": "cuda (NVIDIA H100)", "layout": {}}
    earlier = tmp_path / "gpu.json"
    earlier.write_text(json.dumps({"path": "train.py", "results": [other]}))
    page = tmp_path / "page.md"
    arguments = [
        "bench",
        str(script),
        "-q",
        "--steps",
        "3",
        "--baseline-report",
        str(earlier),
        "--page",
        str(page),
    ]
    outcome = CliRunner().invoke(main, [*arguments, "--", str(tmp_path / "hand.json")])
    assert outcome.exit_code == 0, outcome.output
    assert "differs from the baseline: device: cpu vs cuda (NVIDIA H100)" in outcome.output
    assert "Not a like-for-like comparison" in page.read_text()


def test_a_trainer_is_measured_and_never_saves_over_the_users_model(tmp_path) -> None:
    script = tmp_path / "train.py"
    script.write_text((FIXTURES / "trainer_steps.py").read_text())
    result = bench_path(script, [], _options(warmup=1, steps=3))
    assert result.status == MEASURED, result.reason
    steps = result.steps
    assert steps["measured"] == 3 and result.layout["batch"] == [4] and result.layout["sequence"] == [16]
    assert steps["padding_tokens_per_s"] * 3 == pytest.approx(steps["tokens_per_s"], rel=1e-3)  # 4 of 12
    assert not list((tmp_path / "out").iterdir())  # checkpoints and save_model() went to the bench's folder


def test_a_notebook_is_measured_in_its_kernel(tmp_path) -> None:
    import nbformat

    notebook = nbformat.v4.new_notebook()
    notebook.cells = [nbformat.v4.new_code_cell((FIXTURES / "generate_requests.py").read_text())]
    nbformat.write(notebook, tmp_path / "generate.ipynb")
    result = bench_path(tmp_path / "generate.ipynb", [], _options(warmup=1, requests=3))
    assert result.status == MEASURED, result.reason
    assert result.command.startswith("notebook generate.ipynb") and result.generation[0]["requests"] == 3


def test_a_launcher_is_measured_and_leaves_its_folder_as_it_was(tmp_path) -> None:
    (tmp_path / "loop.py").write_text((FIXTURES / "timed_loop.py").read_text())
    (tmp_path / "run.sh").write_text(
        "#!/bin/bash\nset -e\npip install nothing-at-all\npython loop.py ends.json\n"
    )
    result = bench_path(tmp_path / "run.sh", [], _options(warmup=1, steps=3))
    assert result.status == MEASURED, result.reason
    assert result.command == "python loop.py ends.json" and result.steps["measured"] == 3
    assert sorted(path.name for path in tmp_path.iterdir()) == ["ends.json", "loop.py", "run.sh"]


def test_another_interpreter_runs_the_script_and_names_the_device(tmp_path) -> None:
    import sys

    used = tmp_path / "used"
    python = tmp_path / "python"  # the user's interpreter: records each start, then runs this environment's
    python.write_text(f'#!/bin/sh\necho "$@" >> {used}\nexec {sys.executable} "$@"\n')
    python.chmod(0o755)
    hand = tmp_path / "hand.json"
    result = bench_path(FIXTURES / "timed_loop.py", [str(hand)], _options(steps=3, python=str(python)))
    assert result.status == MEASURED, result.reason
    assert result.device == "cpu"
    assert "timed_loop.py" in used.read_text()  # the script ran under --python, not the tool's interpreter
    missing = tmp_path / "broken"
    missing.write_text("#!/bin/sh\nexit 3\n")
    missing.chmod(0o755)
    with pytest.raises(TryUsageError, match="cannot tell its device"):
        bench_path(FIXTURES / "timed_loop.py", [str(hand)], _options(python=str(missing)))


def test_a_baseline_command_is_measured_the_same_way_and_compared(tmp_path) -> None:
    script = tmp_path / "train.py"
    script.write_text((FIXTURES / "timed_loop.py").read_text())
    report, page = tmp_path / "report.json", tmp_path / "page.md"
    arguments = ["bench", str(script), "-q", "--steps", "3", "--format", "json", "--report", str(report)]
    baseline = f"python {script} {tmp_path / 'baseline.json'}"
    outcome = CliRunner().invoke(
        main, [*arguments, "--baseline", baseline, "--page", str(page), "--", str(tmp_path / "hand.json")]
    )
    assert outcome.exit_code == 0, outcome.output
    document = json.loads(report.read_text())
    ours, theirs = document["results"]
    assert theirs["command"] == baseline and theirs["status"] == MEASURED
    assert theirs["steps"]["measured"] == 3 and (tmp_path / "baseline.json").exists()
    assert document["comparison"]["differences"] == []  # the same script on the same device: like for like
    assert "Not a like-for-like comparison" not in page.read_text()
