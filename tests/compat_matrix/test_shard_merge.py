"""`--shard I/N` selection and `neuron-compat merge` of results files (synthetic rows; no model runs)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from compat_matrix.merge import MergeError, Shard, merge_results, summary_lines, write_rows_atomically
from compat_matrix.results_file import resume_key
from compat_matrix.schema import SCHEMA_VERSION

SIM_ENV = {
    "torch": "2.13.0+cpu",
    "transformers": "5.23.0",
    "python": "3.11.2",
    "platform": "Linux-x86_64",
    "harness_version": "0.1.0",
    "backend": "neuron-sim",
    "simulated": True,
    "settings_id": "s-1",
}


def result_row(
    model_type: str, rank: int | None, verdict: str = "works", env: dict | None = None, **fields
) -> dict:
    env = env or SIM_ENV
    row = {
        "model_type": model_type,
        "rank": rank,
        "backend": env["backend"],
        "simulated": env["simulated"],
        "verdict": verdict,
        "stage": None if verdict == "works" else "eager",
        "error": None if verdict == "works" else "boom",
        "compile_count": 2,
        "recompile_count": 0,
        "recompile_reasons": [],
        "graph_breaks": 0,
        "graph_break_reasons": [],
        "unsupported_ops": [],
        "outputs_match": verdict == "works",
        "train_compile_count": 1,
        "seconds": 3.5,
        "env": env,
    }
    row.update(fields)
    return row


def write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return path


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


# --- shards ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"), [("1/1", Shard(1, 1)), ("2/4", Shard(2, 4)), (" 3 / 3 ", Shard(3, 3))]
)
def test_shard_parses_i_of_n(text, expected):
    assert Shard.parse(text) == expected
    assert str(expected) == f"{expected.index}/{expected.count}"


@pytest.mark.parametrize("text", ["0/2", "3/2", "1/0", "1", "a/b", "-1/2", "1/2/3", ""])
def test_shard_rejects_bad_specs(text):
    with pytest.raises(ValueError, match="I/N|1 <= I <= N"):
        Shard.parse(text)


@pytest.mark.parametrize("count", [1, 2, 3, 7, 12])
def test_shards_partition_the_ranked_list(count):
    ranked = [f"arch{rank}" for rank in range(1, 11)]
    shares = [Shard(index, count).select(ranked) for index in range(1, count + 1)]
    assert sorted(sum(shares, [])) == sorted(ranked)
    assert sum(len(share) for share in shares) == len(ranked)
    # Round-robin: shard sizes differ by at most one, and each share keeps rank order.
    assert max(map(len, shares)) - min(map(len, shares)) <= 1
    assert all(share == sorted(share, key=ranked.index) for share in shares)


def test_shard_selection_is_deterministic():
    ranked = ["llama", "qwen2", "mistral", "gemma", "phi3"]
    assert Shard(2, 2).select(ranked) == ["qwen2", "gemma"]
    assert Shard(2, 2).select(list(ranked)) == Shard(2, 2).select(ranked)


# --- merge ----------------------------------------------------------------------------------------------


def test_merge_combines_shards_in_rank_order(tmp_path):
    first = write_jsonl(tmp_path / "a.jsonl", [result_row("llama", 1), result_row("mistral", 3)])
    second = write_jsonl(tmp_path / "b.jsonl", [result_row("qwen2", 2), result_row("gpt2", None)])
    result = merge_results([first, second])
    assert [row["model_type"] for row in result.rows] == ["llama", "qwen2", "mistral", "gpt2"]
    assert len(result.groups) == 1 and result.groups[0].sources == [first, second]
    assert result.replacements == [] and result.identical_duplicates == 0


def test_rows_from_different_environments_stay_separate(tmp_path):
    newer_transformers = {**SIM_ENV, "transformers": "5.24.0"}
    hardware = {**SIM_ENV, "backend": "neuron", "simulated": False}
    path = write_jsonl(
        tmp_path / "mixed.jsonl",
        [
            result_row("llama", 1),
            result_row("llama", 1, "fails", env=newer_transformers),
            result_row("llama", 1, "crash", env=hardware),
            result_row("qwen2", 2, env=hardware),
        ],
    )
    result = merge_results([path])
    assert [len(group.rows) for group in result.groups] == [1, 1, 2]
    assert [row["verdict"] for row in result.rows] == ["works", "fails", "crash", "works"]
    assert result.replacements == []
    summary = "\n".join(summary_lines(result))
    assert "3 different environments" in summary and "kept apart" in summary
    assert "transformers 5.24.0" in summary and "neuron, torch" in summary


def test_only_env_key_fields_separate_runs(tmp_path):
    """python/platform/harness_version do not define the measurement: same key, so the later row wins."""
    other_host = {**SIM_ENV, "platform": "Linux-aarch64", "python": "3.12.1"}
    path = write_jsonl(tmp_path / "r.jsonl", [result_row("llama", 1), result_row("llama", 1, env=other_host)])
    result = merge_results([path])
    assert len(result.groups) == 1
    assert result.rows[0]["env"]["platform"] == "Linux-aarch64"
    assert result.identical_duplicates == 1


def test_the_stand_in_and_a_real_device_are_two_environments(tmp_path):
    """Both say backend `neuron`; `simulated` (part of the one environment key) keeps them apart, in merge and
    in `run --resume`."""
    device = {**SIM_ENV, "backend": "neuron", "simulated": False}
    standin = {**device, "simulated": True}
    path = write_jsonl(
        tmp_path / "r.jsonl", [result_row("llama", 1, env=device), result_row("llama", 1, env=standin)]
    )
    result = merge_results([path])
    assert len(result.groups) == 2 and result.replacements == []
    assert resume_key({"model_type": "llama", "env": device}) != resume_key(
        {"model_type": "llama", "env": standin}
    )


def test_later_rerun_wins_and_is_reported(tmp_path):
    first = write_jsonl(tmp_path / "a.jsonl", [result_row("llama", 1, "timeout"), result_row("qwen2", 2)])
    second = write_jsonl(tmp_path / "b.jsonl", [result_row("llama", 1, "works", seconds=9.0)])
    result = merge_results([first, second])
    assert [row["verdict"] for row in result.rows] == ["works", "works"]
    [replaced] = result.replacements
    assert replaced.model_type == "llama"
    assert replaced.kept.where == f"{second} row 1" and replaced.dropped.where == f"{first} row 1"
    assert replaced.differing_fields == [
        "error",
        "outputs_match",
        "stage",
        "verdict",
    ]  # seconds is a timing, not an outcome
    summary = "\n".join(summary_lines(result))
    assert f"kept works from {second} row 1 over timeout from {first} row 1" in summary


def test_file_order_decides_which_rerun_wins(tmp_path):
    first = write_jsonl(tmp_path / "a.jsonl", [result_row("llama", 1, "timeout")])
    second = write_jsonl(tmp_path / "b.jsonl", [result_row("llama", 1, "works")])
    assert merge_results([second, first]).rows[0]["verdict"] == "timeout"


def test_identical_duplicates_are_dropped_quietly(tmp_path):
    path = write_jsonl(tmp_path / "a.jsonl", [result_row("llama", 1), result_row("llama", 1, seconds=7.1)])
    result = merge_results([path, path])
    assert len(result.rows) == 1 and result.identical_duplicates == 3 and result.replacements == []


def test_corrupt_files_are_refused_with_their_line(tmp_path):
    good = json.dumps(result_row("llama", 1))
    cases = {
        "truncated.jsonl": (good + "\n" + good[:40], r"truncated.jsonl:2: not a JSON line"),
        "foreign.jsonl": (
            '{"model_type": "llama", "verdict": "works"}\n',
            r"foreign.jsonl:1: not a neuron-compat",
        ),
        "no-env.jsonl": (
            json.dumps(result_row("llama", 1) | {"env": {}}) + "\n",
            r"no-env.jsonl row 1: its env",
        ),
    }
    for name, (content, message) in cases.items():
        path = tmp_path / name
        path.write_text(content, encoding="utf-8")
        with pytest.raises(MergeError, match=message):
            merge_results([path])


def test_missing_file_and_no_file_are_refused(tmp_path):
    with pytest.raises(MergeError, match="no such results file"):
        merge_results([tmp_path / "absent.jsonl"])
    with pytest.raises(MergeError, match="no results file given"):
        merge_results([])


def test_atomic_write_round_trips_and_leaves_no_temporary(tmp_path):
    rows = [result_row("llama", 1), result_row("qwen2", 2, "fails")]
    out = tmp_path / "sub" / "merged.jsonl"
    write_rows_atomically(out, rows)
    assert read_jsonl(out) == rows
    assert [path.name for path in out.parent.iterdir()] == ["merged.jsonl"]


def test_atomic_write_keeps_the_old_file_when_a_row_cannot_be_written(tmp_path):
    out = write_jsonl(tmp_path / "merged.jsonl", [result_row("llama", 1)])
    before = out.read_text()
    with pytest.raises(TypeError):
        write_rows_atomically(out, [result_row("qwen2", 2, extra=object())])
    assert out.read_text() == before
    assert [path.name for path in tmp_path.iterdir()] == ["merged.jsonl"]


# --- the CLI: run --shard, merge --------------------------------------------------------------------------

FIVE = ["llama", "qwen2", "qwen3", "mistral", "gpt2"]  # ranks 1..5 of the top-100 list


def run_cli(*arguments):
    from click.testing import CliRunner

    from commands.neuron_compat import main

    return CliRunner().invoke(main, [str(argument) for argument in arguments])


@pytest.mark.parametrize("spec", ["0/3", "4/3", "2", "x/y"])
def test_bad_shard_exits_2_before_any_work(tmp_path, spec):
    output = tmp_path / "results.jsonl"
    result = run_cli(
        "run", "--archs", ",".join(FIVE), "--backend", "neuron-sim", "--shard", spec, "-o", output
    )
    assert result.exit_code == 2 and "Invalid value for '--shard'" in result.output
    assert not output.exists()


def test_sharded_runs_merge_into_the_whole_matrix(tmp_path):
    """Real local runs, kept fast by a timeout no probe can meet: every row is a real `timeout` row."""
    shards = []
    for index in (1, 2):
        shard = tmp_path / f"shard{index}.jsonl"
        common = ["--archs", ",".join(FIVE), "--backend", "neuron-sim", "--timeout", "0.2", "-j", "2"]
        result = run_cli("run", *common, "--shard", f"{index}/2", "-o", shard)
        assert result.exit_code == 0, result.output
        assert f"shard {index}/2" in result.output
        shards.append(shard)
    assert sorted(row["model_type"] for row in read_jsonl(shards[0])) == sorted(["llama", "qwen3", "gpt2"])
    assert sorted(row["model_type"] for row in read_jsonl(shards[1])) == sorted(["qwen2", "mistral"])

    merged = tmp_path / "merged.jsonl"
    result = run_cli("merge", *shards, "-o", merged)
    assert result.exit_code == 0, result.output
    rows = read_jsonl(merged)
    assert [row["model_type"] for row in rows] == FIVE  # rank order
    assert {row["verdict"] for row in rows} == {"timeout"}
    assert merged.with_suffix(".csv").is_file()
    assert "5 architectures measured on neuron-sim (simulated)" in result.output

    # The merged file is a complete matrix for the unsharded run: --resume has nothing left to do.
    result = run_cli("run", "--archs", ",".join(FIVE), "--backend", "neuron-sim", "--resume", "-o", merged)
    assert result.exit_code == 0, result.output
    assert "5 architecture(s) already in" in result.output and read_jsonl(merged) == rows


def test_merge_cli_lists_reruns_and_can_merge_into_an_input(tmp_path):
    base = write_jsonl(tmp_path / "base.jsonl", [result_row("llama", 1, "timeout"), result_row("qwen2", 2)])
    rerun = write_jsonl(tmp_path / "rerun.jsonl", [result_row("llama", 1)])
    result = run_cli("merge", base, rerun, "-o", base)
    assert result.exit_code == 0, result.output
    assert "rerun: llama" in result.output and "kept works" in result.output
    assert [row["verdict"] for row in read_jsonl(base)] == ["works", "works"]


def test_merge_cli_refuses_to_overwrite_an_unrelated_file_or_read_a_corrupt_one(tmp_path):
    source = write_jsonl(tmp_path / "a.jsonl", [result_row("llama", 1)])
    unrelated = tmp_path / "notes.jsonl"
    unrelated.write_text("keep me\n")
    result = run_cli("merge", source, "-o", unrelated)
    assert result.exit_code == 2 and "is not one of the inputs" in result.output
    assert unrelated.read_text() == "keep me\n"

    corrupt = tmp_path / "corrupt.jsonl"
    corrupt.write_text("{not json\n")
    output = tmp_path / "merged.jsonl"
    result = run_cli("merge", source, corrupt, "-o", output)
    assert result.exit_code == 2 and "corrupt.jsonl:1" in result.output
    assert not output.exists()


def test_merge_reads_rows_from_before_schema_2_and_says_so(tmp_path):
    """These synthetic rows have no schema_version: the layout of every results file before version 2."""
    old = write_jsonl(tmp_path / "old.jsonl", [result_row("llama", 1), result_row("qwen2", 2)])
    new = write_jsonl(
        tmp_path / "new.jsonl", [result_row("gpt2", 3, schema_version=SCHEMA_VERSION, cause=None)]
    )
    merged = merge_results([old, new])
    assert [row["model_type"] for row in merged.rows] == ["llama", "qwen2", "gpt2"]
    assert any(
        f"2 row(s) written before schema version {SCHEMA_VERSION}" in line for line in summary_lines(merged)
    )


def test_merge_needs_the_environment_key_but_not_the_stand_ins_later_field(tmp_path):
    """Rows from before the stand-in have no `simulated`; a row without `settings_id` cannot be placed in a run."""
    rows = [result_row("llama", 1, env=dict(SIM_ENV))]
    del rows[0]["env"]["simulated"]
    assert [row["model_type"] for row in merge_results([write_jsonl(tmp_path / "a.jsonl", rows)]).rows] == [
        "llama"
    ]
    unplaced = result_row("qwen2", 2, env=dict(SIM_ENV))
    del unplaced["env"]["settings_id"]
    with pytest.raises(
        MergeError, match="b.jsonl row 1: its env lacks backend/torch/transformers/settings_id"
    ):
        merge_results([write_jsonl(tmp_path / "b.jsonl", [unplaced])])
