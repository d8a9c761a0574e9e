import json

import pytest
from click.testing import CliRunner

from commands import neuron_compat as cli
from compat_matrix import rank
from compat_matrix.results_file import append_row
from compat_matrix.runner import empty_measurement, make_row

DATA = __import__("pathlib").Path(__file__).with_name("data")


@pytest.fixture
def runner():
    return CliRunner()


def run_cli(runner, *args):
    return runner.invoke(cli.main, list(args), catch_exceptions=False)


def test_unknown_architecture_is_a_usage_error(runner, tmp_path):
    result = run_cli(runner, "run", "--archs", "llama,not_a_model", "-o", str(tmp_path / "r.jsonl"))
    assert result.exit_code == 2
    assert "unknown architecture(s): not_a_model" in result.output
    assert not (tmp_path / "r.jsonl").exists()


def test_missing_neuron_backend_says_so(runner, tmp_path):
    result = run_cli(
        runner, "run", "--archs", "llama", "--backend", "neuron", "-o", str(tmp_path / "r.jsonl")
    )
    assert result.exit_code == 2
    assert "needs torch_neuronx and a Neuron device" in result.output


@pytest.mark.parametrize("content", ["{broken\n", '{"foreign": true}\n'])
def test_corrupt_or_foreign_results_are_left_untouched(runner, tmp_path, content):
    path = tmp_path / "r.jsonl"
    path.write_text(content)
    result = run_cli(
        runner, "run", "--archs", "llama", "--backend", "neuron-sim", "-o", str(path), "--resume"
    )
    assert result.exit_code == 2
    assert str(path) in result.output
    assert path.read_text() == content


def test_unwritable_output_path(runner, tmp_path):
    result = run_cli(
        runner, "run", "--archs", "llama", "--backend", "neuron-sim", "-o", str(tmp_path / "no" / "r.jsonl")
    )
    assert result.exit_code == 2 and "does not exist" in result.output


def test_existing_results_need_resume(runner, tmp_path, settings):
    path = tmp_path / "r.jsonl"
    append_row(path, make_row("llama", settings, empty_measurement(), "works", 1.0, None))
    before = path.read_text()
    result = run_cli(runner, "run", "--archs", "llama", "--backend", "neuron-sim", "-o", str(path))
    assert result.exit_code == 2 and "--resume" in result.output
    assert path.read_text() == before


def test_resume_skips_recorded_rows_and_appends_new_ones(runner, tmp_path, settings):
    path = tmp_path / "r.jsonl"
    recorded = make_row("llama", settings, empty_measurement(), "works", 1.0, None)
    append_row(path, recorded)
    # musicgen cannot be built as a tiny causal LM: a fast, real harness-error row.
    result = run_cli(
        runner, "run", "--archs", "llama,musicgen", "--backend", "neuron-sim", "-o", str(path), "--resume"
    )
    assert result.exit_code == 0, result.output
    assert "1 architecture(s) already in" in result.output
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    assert rows[0] == json.loads(json.dumps(recorded))
    assert [r["model_type"] for r in rows] == ["llama", "musicgen"]
    assert rows[1]["verdict"] == "harness-error" and rows[1]["stage"] == "build"
    assert path.with_suffix(".csv").exists()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--sim-device", "not-a-device"], "is not a torch device"),
        (
            ["--backend", "neuron-sim", "--cores-per-task", "2"],
            "--cores-per-task applies to --backend neuron",
        ),
    ],
)
def test_bad_device_options_exit_2_before_any_work(runner, tmp_path, args, message):
    result = run_cli(runner, "run", "--archs", "llama", "-o", str(tmp_path / "r.jsonl"), *args)
    assert result.exit_code == 2 and message in result.output
    assert not (tmp_path / "r.jsonl").exists()


@pytest.mark.skipif(__import__("torch").cuda.is_available(), reason="this machine has CUDA")
def test_a_sim_device_this_machine_lacks_is_one_clear_error(runner, tmp_path):
    result = run_cli(
        runner, "run", "--archs", "llama", "--sim-device", "cuda", "-o", str(tmp_path / "r.jsonl")
    )
    assert result.exit_code == 2
    assert "--sim-device cuda: torch" in result.output and "sees no cuda device here" in result.output


@pytest.mark.parametrize("sim_device", ["cpu", "cuda"])
def test_sim_device_and_dtype_reach_the_row(runner, tmp_path, sim_device):
    """Runs everywhere with cpu; with cuda only where torch sees a CUDA GPU."""
    import torch

    if sim_device == "cuda" and not torch.cuda.is_available():
        pytest.skip("no CUDA device here")
    path = tmp_path / "r.jsonl"
    result = run_cli(runner, "run", "--archs", "llama", "--sim-device", sim_device, "--dtype", "bfloat16",
                     "-o", str(path))  # fmt: skip
    assert result.exit_code == 0, result.output
    [row] = [json.loads(line) for line in path.read_text().splitlines()]
    assert (row["sim_device"], row["dtype"], row["verdict"]) == (sim_device, "bfloat16", "works"), row[
        "reason"
    ]
    assert row["logit_tolerance"] == 3e-2 and row["max_diff_compiled_vs_dynamic"] <= 3e-2


def test_list_shows_rank_and_optimum_neuron_support(runner):
    result = run_cli(runner, "list", "--archs", "top100")
    lines = result.output.splitlines()
    assert result.exit_code == 0
    assert lines[1].split()[:4] == ["1", "llama", "yes", "yes"]
    assert len([line for line in lines[1:] if line.strip()]) == 101  # 100 rows + the count line


def test_rank_from_a_recorded_hub_response(runner, tmp_path, monkeypatch):
    import huggingface_hub.hf_api as hf_api

    recorded = json.loads((DATA / "hub_models_page.json").read_text())
    calls = []

    def recorded_pages(path, params=None, headers=None):
        calls.append(params)
        yield from recorded

    monkeypatch.setattr(hf_api, "paginate", recorded_pages)
    out = tmp_path / "ranking.csv"
    result = run_cli(runner, "rank", "--from-hub", "-o", str(out))
    assert result.exit_code == 0, result.output
    assert calls[0]["pipeline_tag"] == rank.PIPELINE_TAG
    lines = out.read_text().splitlines()
    assert lines[0] == "rank,model_type,downloads,repos,snapshot"
    # chatglm is not a Transformers causal-LM type and the config-less repo has no type: both left out.
    assert [line.split(",")[:4] for line in lines[1:]] == [
        ["1", "qwen3", "1500", "1"],
        ["2", "llama", "1200", "2"],
        ["3", "gpt2", "300", "2"],
    ]


def test_rank_offline_is_a_clear_error(runner, tmp_path):
    result = run_cli(runner, "rank", "--from-hub", "-o", str(tmp_path / "ranking.csv"))
    assert result.exit_code == 2
    assert "HF_HUB_OFFLINE" in result.output


def test_auto_backend_says_which_it_picked():
    from compat_matrix.environment import resolve_backend

    backend, why = resolve_backend("auto")
    assert backend == "neuron-sim"  # no Trainium on the test machines
    assert why.startswith("auto: no TorchNeuron device here")
