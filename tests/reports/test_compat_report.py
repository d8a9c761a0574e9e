from __future__ import annotations

import html
import io
import json
import re
import shutil

import markupsafe
import pandas as pd
import pytest

from reports.compat_report import infer_format, write_report
from tests.reports.conftest import DATA, measured, write_jsonl


@pytest.fixture
def both(data):
    return [data / "results-sim.jsonl", data / "results-hw.jsonl"]


def test_html_is_self_contained(both, tmp_path, capsys):
    output = tmp_path / "compat.html"
    assert write_report(both, output, "html") == 0
    assert str(output.resolve()) in capsys.readouterr().out
    html = output.read_text()
    # Nothing is fetched: no external scripts, styles, images or fonts.
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", html)
    assert "@import" not in html and "url(" not in html
    assert "<script>" in html and "<style>" in html and "<svg" in html
    assert "SIMULATED" in html and "Published claim, not measured here" in html


def test_html_shows_evidence_and_advice_for_non_green_rows(both, tmp_path, rows):
    output = tmp_path / "compat.html"
    write_report(both, output, "html")
    html = output.read_text()
    failing = next(row for row in rows["results-sim"] if row["model_type"] == "gpt2")
    assert failing["error"] in html
    assert "aten::_unique2" in html
    for reason in next(row for row in rows["results-sim"] if row["model_type"] == "gemma3_text")[
        "graph_break_reasons"
    ]:
        assert reason in html
    assert "What to do" in html


def test_markdown_has_the_same_content(both, tmp_path, rows):
    output = tmp_path / "compat.md"
    assert write_report(both, output, "md") == 0
    text = output.read_text()
    assert "**fixed** (1): `gpt2`" in text and "**regressed** (1): `mistral`" in text
    matrix_lines = [line for line in text.splitlines() if line.startswith("| ") and "`" in line]
    listed = {re.search(r"`([^`]+)`", line).group(1) for line in matrix_lines}
    assert {row["model_type"] for row in rows["results-sim"] + rows["results-hw"]} <= listed
    assert "RuntimeError: aten::_unique2 has no neuron lowering" in text


def test_csv_round_trips_the_results(both, tmp_path, rows):
    output = tmp_path / "compat.csv"
    assert write_report(both, output, "csv") == 0
    frame = pd.read_csv(io.StringIO(output.read_text()))
    assert len(frame) == len(rows["results-sim"]) + len(rows["results-hw"])
    sim = frame[frame["backend"] == "neuron-sim"].set_index("model_type")
    for row in rows["results-sim"]:
        assert sim.loc[row["model_type"], "verdict"] == row["verdict"]
        assert sim.loc[row["model_type"], "recompile_count"] == row["recompile_count"]
        assert sim.loc[row["model_type"], "graph_breaks"] == row["graph_breaks"]
    hardware = frame[frame["backend"] == "neuron"].set_index("model_type")
    assert hardware.loc["gpt2", "change_vs_first_run"] == "fixed"
    assert "static" in hardware.loc["mistral", "what_to_do"]


@pytest.mark.parametrize(
    ("name", "content", "message"),
    [
        ("missing.jsonl", None, "no such results file"),
        (
            "corrupt.jsonl",
            '{"model_type": "llama", "verdict": "works"}\n{"model_type": \n',
            "corrupt.jsonl:2",
        ),
    ],
)
def test_bad_input_exits_2_without_writing(tmp_path, capsys, name, content, message):
    path = tmp_path / name
    if content is not None:
        path.write_text(content)
    output = tmp_path / "compat.html"
    assert write_report([path], output, "html") == 2
    assert message in capsys.readouterr().err
    assert not output.exists()


def test_unwritable_output_exits_2_and_keeps_the_old_file(data, tmp_path, capsys):
    blocker = tmp_path / "not-a-directory"
    blocker.write_text("keep me")
    assert write_report([data / "results-sim.jsonl"], blocker / "compat.html", "html") == 2
    assert "cannot write" in capsys.readouterr().err
    assert blocker.read_text() == "keep me"


def test_unknown_format_exits_2(data, tmp_path):
    assert write_report([data / "results-sim.jsonl"], tmp_path / "x.pdf", "pdf") == 2


@pytest.mark.parametrize(
    ("name", "fmt"), [("a.md", "md"), ("a.CSV", "csv"), ("a.html", "html"), ("a", "html")]
)
def test_format_follows_the_output_suffix(tmp_path, name, fmt):
    assert infer_format(tmp_path / name) == fmt


@pytest.mark.parametrize(
    ("row", "expected"),
    [
        ({"verdict": "harness-error", "stage": "build"}, ["not a verdict on TorchNeuron", "could not build"]),
        (
            {"verdict": "crash", "stage": "generate", "peak_rss_mb": 20480.0},
            ["peak memory 20480 MB", "static"],
        ),
        ({"verdict": "works-with-caveats", "recompile_count": 3}, ["3 recompile(s)", "padding='max_length'"]),
        ({"verdict": "works-with-caveats", "graph_breaks": 2}, ["2 graph break(s)"]),
        (
            {
                "verdict": "works-with-caveats",
                "recompile_count": 2,
                "recompile_reasons": ["0/0: kwargs['past_key_values'].layers[0].cumulative_length_int == 5"]
                * 2,
            },
            ["2 recompile(s) guard on the KV cache", "padding the inputs does not remove them"],
        ),
        (
            {
                "verdict": "works-with-caveats",
                "recompile_count": 7,
                "recompiles_every_step": True,
                "recompile_guard": "kwargs['past_key_values'].layers[N].cumulative_length_int == N",
                "recompile_limit": 8,
            },
            ["every decode step", "cumulative_length_int", "recompile_limit (8)", "runs eagerly"],
        ),
        ({"verdict": "fails", "stage": "compare", "outputs_match": False}, ["float32"]),
        ({"verdict": "works"}, []),
    ],
)
def test_advice_follows_the_evidence(row, expected):
    from reports.advice import advice

    text = " ".join(advice(row))
    assert all(fragment in text for fragment in expected)
    assert bool(text) == bool(expected)


def test_neuron_compat_report_command(both, tmp_path):
    from click.testing import CliRunner

    from commands.neuron_compat import main

    runner = CliRunner()
    output = tmp_path / "compat.csv"
    result = runner.invoke(main, ["report", *map(str, both), "-o", str(output)])
    assert result.exit_code == 0, result.output
    assert output.read_text().startswith("run_label,")  # format from the suffix
    result = runner.invoke(main, ["report", str(both[0]), "-o", str(tmp_path / "r.txt"), "--format", "md"])
    assert result.exit_code == 0 and (tmp_path / "r.txt").read_text().startswith(
        "# TorchNeuron compatibility"
    )
    assert runner.invoke(main, ["report", str(tmp_path / "missing.jsonl")]).exit_code == 2


def test_neuron_compat_report_merge_flag(data, tmp_path):
    from click.testing import CliRunner

    from commands.neuron_compat import main

    paths = [str(data / "results-v2-sim.jsonl"), str(data / "results-v2-sim-rerun.jsonl")]
    runner = CliRunner()
    apart = runner.invoke(main, ["report", *paths, "-o", str(tmp_path / "apart.md")])
    merged = runner.invoke(main, ["report", *paths, "--merge", "-o", str(tmp_path / "merged.md")])
    assert apart.exit_code == 0 and merged.exit_code == 0, apart.output + merged.output
    assert "2 run(s) side by side" in apart.output
    assert "1 run(s) side by side, 3 row(s) replaced by reruns" in merged.output
    assert "merged on request (`--merge`)" in (tmp_path / "merged.md").read_text()


def test_rows_written_by_the_harness(data, tmp_path):
    """Rows from a real `neuron-compat run --backend neuron-sim`, with every field the harness writes."""
    sample = data / "harness-sample.jsonl"
    rows = {row["model_type"]: row for row in map(json.loads, sample.read_text().splitlines())}
    assert write_report([sample], tmp_path / "r.csv", "csv") == 0
    frame = pd.read_csv(tmp_path / "r.csv").set_index("model_type")
    for model_type, row in rows.items():
        assert frame.loc[model_type, "verdict"] == row["verdict"]
        assert frame.loc[model_type, "recompile_count"] == row["recompile_count"]
        shown = frame.loc[model_type, "train_compile_count"]
        assert pd.isna(shown) if row["train_compile_count"] is None else shown == row["train_compile_count"]
    assert write_report([sample], tmp_path / "r.html", "html") == 0
    html = tmp_path.joinpath("r.html").read_text()
    failing = next(row for row in rows.values() if row["verdict"] == "fails")
    assert str(markupsafe.escape(failing["error"])) in html
    caveats = next(row for row in rows.values() if row["verdict"] == "works-with-caveats")
    assert f"{caveats['recompile_count']} recompile(s) guard on the KV cache" in html


def test_result_text_is_escaped_in_html(tmp_path):
    from tests.reports.conftest import write_jsonl

    hostile = "<script>alert('x')</script> & <b>"
    path = write_jsonl(
        tmp_path / "r.jsonl",
        [{"model_type": "llama", "verdict": "fails", "stage": "generate", "error": hostile}],
    )
    assert write_report([path], tmp_path / "r.html", "html") == 0
    html = (tmp_path / "r.html").read_text()
    assert hostile not in html and "&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt; &amp; &lt;b&gt;" in html


@pytest.fixture
def v2(data):
    return [data / "results-v2-sim.jsonl", data / "results-v2-hw.jsonl"]


def test_null_is_a_dash_in_markdown_and_empty_in_csv(v2, tmp_path, rows):
    assert write_report(v2, tmp_path / "r.md", "md") == 0
    text = (tmp_path / "r.md").read_text()
    line = next(line for line in text.splitlines() if line.startswith("| 11 | `gemma` |"))
    cells = [cell.strip() for cell in line.strip("|").split("|")]
    # rank, architecture, then the first run: verdict, generate, train, why, recompiles, graph breaks, compiles.
    assert cells[2:9] == [
        "harness-error",
        "–",
        "–",
        "harness: the tiny model could not be built from its config",
        "–",
        "–",
        "–",
    ]
    assert "Compiles / recompiles: – / –; graph breaks: –" in text
    assert write_report(v2, tmp_path / "r.csv", "csv") == 0
    frame = pd.read_csv(tmp_path / "r.csv", keep_default_na=False).set_index(["run_label", "model_type"])
    sim_label = next(label for label in frame.index.get_level_values(0) if label.startswith("results-v2-sim"))
    kept = {row["model_type"]: row for row in rows["results-v2-sim"]}
    for model_type, row in kept.items():
        for name in ("compile_count", "recompile_count", "graph_breaks", "recompile_reasons"):
            shown = frame.loc[(sim_label, model_type), name]
            if measured(row, name) is None:
                assert shown == "", (model_type, name)
            else:
                assert shown != ""


def test_runs_stay_side_by_side_unless_merged(data, tmp_path, capsys):
    paths = [data / "results-v2-sim.jsonl", data / "results-v2-sim-rerun.jsonl"]
    assert write_report(paths, tmp_path / "apart.md", "md") == 0
    assert "2 run(s) side by side" in capsys.readouterr().out
    apart = (tmp_path / "apart.md").read_text()
    assert "results-v2-sim-rerun.jsonl · neuron-sim" in apart and "never blended" in apart
    # The rerun file lacks most architectures: they are "missing" from it, not carried over.
    assert "**missing** (10)" in apart
    assert write_report(paths, tmp_path / "merged.md", "md", merge=True) == 0
    assert "1 run(s) side by side, 3 row(s) replaced by reruns" in capsys.readouterr().out
    merged = (tmp_path / "merged.md").read_text()
    assert "merged on request (`--merge`)" in merged
    assert (
        "| `phi3` | timeout (`results-v2-sim.jsonl:8`) | works (`results-v2-sim-rerun.jsonl:1`) |" in merged
    )
    assert "| `opt` | works (`results-v2-sim.jsonl:11`) | fails (`results-v2-sim.jsonl:13`) |" in merged


def test_verdict_split_reason_cause_and_older_rows(data, tmp_path):
    paths = [data / "results-v2-sim.jsonl", data / "results-sim.jsonl"]
    assert write_report(paths, tmp_path / "r.md", "md") == 0
    text = (tmp_path / "r.md").read_text()
    gpt2 = next(line for line in text.splitlines() if line.startswith("| 5 | `gpt2` |"))
    cells = [cell.strip() for cell in gpt2.strip("|").split("|")]
    assert cells[2:6] == [
        "fails",
        "fails",
        "works",
        # Markdown source: an `_` that could open emphasis is escaped (it reads as written).
        "device: compiled generation fails: aten::\\_unique2 has no neuron lowering (UNIQUE2MARK)",
    ]
    # The older-schema run still renders: overall verdict, no split, its first error line as the reason.
    assert cells[9:13] == [
        "fails (older schema)",
        "not split",
        "not split",
        "RuntimeError: aten::\\_unique2 has no neuron lowering",
    ]
    assert "older schema for 12 row(s)" in text
    qwen2 = next(line for line in text.splitlines() if line.startswith("| 2 | `qwen2` |"))
    assert "works-eager | works-eager | works |" in qwen2
    assert "| 5 (every step) |" in next(
        line for line in text.splitlines() if line.startswith("| 3 | `qwen3` |")
    )
    headline = next(line for line in text.splitlines() if line.startswith("| TorchNeuron: results-v2-sim"))
    assert [cell.strip() for cell in headline.strip("|").split("|")][1:] == [
        "1",  # works: llama
        "1",  # works-eager: qwen2
        "2",  # caveats: qwen3, mistral
        "3",  # fails on device: gpt2, gemma2 (crash), opt (rerun)
        "1",  # Transformers bug: gemma3_text
        "0",  # older rows only: none here, but the older run in the same report has some
        "1",  # not measured, simulator: qwen3_moe
        "1",  # not measured, harness error: gemma
        "4",  # not measured, time limit or no row: phi3 (timeout) + no row for gemma3, qwen3_5, gpt_neox
        "29%",
    ]
    assert (
        "2026-11-29 18:00 UTC to 2026-11-29 18:40 UTC" in text
        and "not recorded (rows carry no measured_at)" in text
    )


def version_3_runs(rows: list[dict]) -> list[dict]:
    """The synthetic v2 rows as harness 0.3 writes them: a checkpoint-config run with the new evidence, then
    the class defaults of the two architectures whose checkpoint values differ (a comparison run)."""
    evidence = {
        "llama": {"config_source": "checkpoint", "checkpoint": "meta-llama/Llama-3.1-8B-Instruct",
                  "checkpoint_values": {"rope_scaling": {"rope_type": "llama3", "factor": 8.0}}},
        "mistral": {"config_source": "checkpoint", "checkpoint": "mistralai/Mistral-7B-Instruct-v0.2",
                    "checkpoint_values": {"sliding_window": None}, "verdict": "works-with-caveats",
                    "generate_verdict": "works", "train_verdict": "works-with-caveats",
                    "reason": "train: in float32 the compiled training graph holds transformers.grouped_mm_fallback",
                    "device_raising_ops": ["operator-coverage: transformers.grouped_mm_fallback (compiled graph)"],
                    "unsupported_ops": ["operator-coverage: transformers.grouped_mm_fallback (compiled graph)"],
                    "avoided_by": 'AutoModelForCausalLM.from_pretrained(..., experts_implementation="batched_mm")',
                    "code_paths": [{"stage": "train", "path": "bfloat16", "change": "dtype", "runs": True,
                                    "error": None, "raising_ops": [], "loss_difference": None,
                                    "lowering_unverified_ops": ["aten._grouped_mm"]}],
                    "lowering_unverified_ops": ["aten.topk"], "train_content_compiles": 3,
                    "train_graph_break_reasons": ["Dynamic shape operator | aten.nonzero"]},
        "gemma3_text": {"artifact_check": {"generate": {
            "first": {"size": "primary tiny size", "failure": "static differs (0.2)"},
            "second": {"size": "second tiny size", "ties_broken": {"index_topk": 64}, "failure": "static differs (0.4)"},
            "outcome": "kept"}}},
    }  # fmt: skip
    checkpoint = []
    for row in rows:
        row = dict(
            row, schema_version=3, **evidence.get(row["model_type"], {"config_source": "class-defaults"})
        )
        row["env"] = dict(row["env"], config="checkpoint", settings_id="s-v3-checkpoint")
        checkpoint.append(row)
    defaults = [
        dict(row, config_source="class-defaults", checkpoint=None, checkpoint_values=None, verdict="works",
             generate_verdict="works", train_verdict="works", reason=None, device_raising_ops=None,
             avoided_by=None, code_paths=None, unsupported_ops=[], train_content_compiles=0,
             env=dict(row["env"], config="class-defaults", settings_id="s-v3-defaults"))
        for row in checkpoint if row["model_type"] in ("llama", "mistral")
    ]  # fmt: skip
    return defaults + checkpoint  # written in the other order on purpose: the report puts checkpoint first


def markdown_as_written(text: str) -> str:
    """The report's Markdown without the backslash escapes and entities its values go through."""
    return html.unescape(re.sub(r"\\([!-/:-@\[-`{-~])", r"\1", text))


def test_every_reading_trn2_gaps_and_the_evidence_of_version_3_rows(tmp_path, rows):
    path = write_jsonl(tmp_path / "results.jsonl", version_3_runs(rows["results-v2-sim"]))
    shutil.copy(DATA / "top100.csv", tmp_path / "top100.csv")
    assert write_report([path], tmp_path / "r.md", "md") == 0
    raw = (tmp_path / "r.md").read_text()
    # Readings by kind are indented with the template's own markup, which Markdown escaping must leave alone.
    assert "| &nbsp;&nbsp;&nbsp;&nbsp;" in raw and "&amp;nbsp;" not in raw
    text = markdown_as_written(raw)
    assert "nothing\nhere ran on a Neuron device" in text
    # The checkpoint run is the first column; the class-default run beside it is a partial comparison run.
    header = next(line for line in text.splitlines() if line.startswith("| | "))
    assert header.index("checkpoint configs") < header.index("class-default configs")
    assert "class-default configs (partial run: 2 architecture(s) of the list)" in text
    first_run = (
        text.split("### Every reading")[1].split("| architectures | share | reading |")[1].split("\n\n")[0]
    )
    readings = {}
    for line in first_run.splitlines()[2:]:
        count, _, label = (cell.strip().replace("&nbsp;", "") for cell in line.strip("|").split("|"))
        readings[label.split(" (beside")[0]] = int(count)
    assert readings["work compiled with nothing to report"] == 1  # llama
    assert readings["an op the device raises on, avoided by a measured one-line change"] == 1  # mistral
    assert readings["training recompiles that depend on the data"] == 1
    assert "(beside the blog's 89%)" in text and "generic NeuronTrainer" in text
    # What only a trn2 can show: the run's gaps and, per row, what to try first.
    assert "## What only a trn2 can show" in text and "1 row(s): `mistral`" in text
    assert "- Try first on a trn2: lowering of aten._grouped_mm on the bfloat16 path" in text
    assert (
        "- Config measured: the code-path values of mistralai/Mistral-7B-Instruct-v0.2: sliding_window=null"
        in text
    )
    assert "- Second measurement (generate): blame kept" in text and "ties broken (index_topk=64)" in text
    assert "- Training graph-break reason: `Dynamic shape operator | aten.nonzero`" in text
    assert 'experts_implementation="batched_mm") avoids it' in text  # the advice names the one-line change
    assert write_report([path], tmp_path / "r.csv", "csv") == 0
    table = pd.read_csv(tmp_path / "r.csv")
    assert {
        "config_source",
        "checkpoint",
        "avoided_by",
        "device_raising_ops",
        "train_content_compiles",
    } <= set(table.columns)


def test_both_formats_show_the_measured_tp_readiness(both, tmp_path):
    from migrator.tp_readiness import table

    measured = table()["architectures"]
    for fmt in ("md", "html"):
        output = tmp_path / f"compat.{fmt}"
        assert write_report(both, output, fmt) == 0
        section = output.read_text().partition("Tensor parallelism: which architectures shard")[2]
        assert f"transformers {table()['versions']['transformers']}" in section
        gpt2_row = next(
            line for line in section.splitlines() if "gpt2</code></td>" in line or "| `gpt2` |" in line
        )
        assert measured["gpt2"]["plan"] == "none" and "none" in gpt2_row
