from __future__ import annotations

import json

import pandas as pd
import pytest

from compat_matrix.schema import SCHEMA_VERSION
from reports.results import ResultsError, load_runs, load_top100
from reports.tables import buckets_by_band, headline, long_frame, recompile_histogram, verdict_matrix
from reports.vocabulary import NOT_RUN, bucket_of, change_between
from tests.reports.conftest import measured, write_jsonl


def test_rows_with_different_environments_are_different_runs(data, rows):
    runs = load_runs([data / "results-sim.jsonl", data / "results-hw.jsonl"])
    assert [run.backend for run in runs] == ["neuron-sim", "neuron"]
    assert runs[0].simulated and not runs[1].simulated
    assert set(runs[0].rows) == {row["model_type"] for row in rows["results-sim"]}
    # Labels name the file, the backend and what else differs: here the transformers version.
    assert runs[0].label == "results-sim.jsonl · neuron-sim (simulated) · transformers 5.23.0"
    assert runs[1].label == "results-hw.jsonl · neuron · transformers 5.24.0"


def test_one_file_with_two_environments_gives_two_runs(tmp_path, rows):
    mixed = rows["results-sim"][:2] + rows["results-hw"][:1]
    runs = load_runs([write_jsonl(tmp_path / "mixed.jsonl", mixed)])
    assert [len(run.rows) for run in runs] == [2, 1]


def test_files_of_the_same_environment_stay_separate_runs(tmp_path, rows):
    first = write_jsonl(tmp_path / "a.jsonl", rows["results-sim"][:3])
    second = write_jsonl(tmp_path / "b.jsonl", [dict(rows["results-sim"][2], verdict="works")])
    runs = load_runs([first, second])
    assert [run.sources for run in runs] == [[first], [second]]
    assert [len(run.rows) for run in runs] == [3, 1]
    assert runs[0].label.startswith("a.jsonl · ") and runs[1].label.startswith("b.jsonl · ")
    assert runs[0].replaced == runs[1].replaced == []


def test_merge_folds_same_environment_files_and_lists_replaced_rows(tmp_path, rows):
    first = write_jsonl(tmp_path / "a.jsonl", rows["results-sim"][:3])
    rerun = dict(rows["results-sim"][2], verdict="works", recompile_count=0)
    second = write_jsonl(tmp_path / "b.jsonl", [rerun])
    (run,) = load_runs([first, second], merge=True)
    assert run.rows["qwen3"]["verdict"] == "works"
    assert run.sources == [first, second]
    assert run.label.startswith("a.jsonl + b.jsonl · ")
    (replaced,) = run.replaced
    assert (replaced.model_type, replaced.earlier_verdict, replaced.earlier_at) == (
        "qwen3",
        rows["results-sim"][2]["verdict"],
        "a.jsonl:3",
    )
    assert (replaced.later_verdict, replaced.later_at) == ("works", "b.jsonl:1")


def test_rows_replaced_within_one_file_are_listed(data):
    (run,) = load_runs([data / "results-v2-sim.jsonl"])
    (replaced,) = run.replaced
    assert replaced.model_type == "opt" and replaced.earlier_verdict == "works"
    assert run.rows["opt"]["verdict"] == "fails" and run.origins["opt"] == replaced.later_at


def test_measured_time_range_comes_from_the_rows(data, tmp_path):
    (run,) = load_runs([data / "results-v2-sim.jsonl"])
    assert run.measured_range == ("2026-11-29T18:00:05Z", "2026-11-29T18:40:00Z")
    assert run.measured_text == "2026-11-29 18:00 UTC to 2026-11-29 18:40 UTC"
    # Older rows carry no time: the report says so instead of showing the file's time.
    (older,) = load_runs([data / "results-sim.jsonl"])
    assert older.measured_range is None and older.measured_text.startswith("not recorded")


def test_minimal_rows_and_unknown_fields_are_accepted(tmp_path):
    path = write_jsonl(
        tmp_path / "min.jsonl",
        [{"model_type": "llama", "verdict": "fails", "brand_new_field": [1, 2]}],
    )
    runs = load_runs([path])
    frame = long_frame(runs, [])
    record = frame.iloc[0]
    assert record["verdict"] == "fails"
    # Unmeasured is not zero: absent figures stay missing.
    assert pd.isna(record["recompile_count"]) and record["unsupported_ops"] is None
    assert record["older_schema"] and record["bucket"] == "fails-unattributed"
    assert runs[0].backend == "unknown"
    assert runs[0].rows["llama"]["brand_new_field"] == [1, 2]


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ('{"model_type": "llama", "verdict": "works"}\n{not json\n', "results.jsonl:2: not a JSON line"),
        ('{"verdict": "works"}\n', "results.jsonl:1: expected a JSON object with a 'model_type'"),
        ('{"model_type": "llama", "verdict": "great"}\n', "unknown verdict 'great'"),
        ('{"model_type": "llama", "verdict": "fails", "cause": "gremlins"}\n', "unknown cause 'gremlins'"),
        (
            '{"model_type": "llama", "verdict": "works", "train_verdict": "ok"}\n',
            "unknown train_verdict 'ok'",
        ),
        ("\n\n", "the results file is empty"),
        # Hostile or damaged files: each is refused with its line, never a traceback or a row shown wrong.
        (
            b'{"model_type": "llama", "verdict": "works"}\n\xff\xfe\x00binary\n',
            "results.jsonl:2: not UTF-8 text",
        ),
        (
            '{"model_type": "llama", "verdict": "works", "env": [1]}\n',
            "env of llama is \\[1\\], not an object",
        ),
        (
            '{"model_type": "llama", "verdict": "works", "rank": ' + "9" * 5000 + "}\n",
            "not a results row \\(Exceeds",
        ),
        (
            '{"model_type": "llama", "env": ' + "[" * 100_000 + "]" * 100_000 + "}\n",
            "not a results row \\(nested",
        ),
        ('{"model_type": "llama", "verdict": "works", "seconds": NaN}\n', "NaN is not a JSON number"),
        (
            '{"model_type": "llama", "verdict": "works", "seconds": Infinity}\n',
            "Infinity is not a JSON number",
        ),
        (
            '{"model_type": "llama", "verdict": "works", "recompile_count": "3"}\n',
            'recompile_count of llama is "3"',
        ),
        (
            '{"model_type": "llama", "verdict": "works", "graph_breaks": true}\n',
            "graph_breaks of llama is true",
        ),
        (
            json.dumps({"model_type": "llama", "verdict": "works", "schema_version": SCHEMA_VERSION + 1})
            + "\n",
            f"row schema version {SCHEMA_VERSION + 1}; this report",
        ),
    ],
)
def test_bad_results_give_a_clear_error(tmp_path, content, message):
    path = tmp_path / "results.jsonl"
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content)
    with pytest.raises(ResultsError, match=message):
        load_runs([path])


def test_missing_file_is_reported(tmp_path):
    with pytest.raises(ResultsError, match="no such results file"):
        load_runs([tmp_path / "nope.jsonl"])


def test_headline_counts_against_the_ranked_list(data, rows):
    paths = [data / "results-sim.jsonl"]
    top100 = load_top100(paths)
    assert len(top100) == 14 and top100[0].model_type == "llama"
    frame = long_frame(load_runs(paths), top100)
    figures = headline(frame, 0, top100)
    listed = {entry.model_type for entry in top100}
    measured = [row for row in rows["results-sim"] if row["model_type"] in listed]
    expected_works = sum(row["verdict"] == "works" for row in measured)
    expected_fails = sum(row["verdict"] in ("fails", "crash") for row in measured)
    assert figures.counts["works"] == expected_works
    # Older rows carry no cause: their failures are counted apart, blamed on neither device nor Transformers.
    assert figures.counts["fails-unattributed"] == expected_fails
    assert figures.counts["fails-device"] == figures.counts["fails-transformers"] == 0
    assert sum(figures.counts.values()) == figures.total == 14
    assert sorted(figures.not_measured_names) == ["gemma3", "gpt_neox", "qwen3_5"]
    # optimum-neuron columns: "yes..." counts as documented support, "generic ... only" does not.
    assert figures.documented_inference == 5 and figures.documented_training == 2


def test_headline_without_a_list_uses_ranks_from_the_rows(tmp_path, rows):
    path = write_jsonl(tmp_path / "results.jsonl", rows["results-sim"])
    frame = long_frame(load_runs([path]), [])
    figures = headline(frame, 0, [])
    ranked = [row for row in rows["results-sim"] if row["rank"] is not None]
    assert figures.total == 100
    assert figures.counts["not-measured"] == 100 - len(ranked) + sum(
        row["verdict"] == "timeout" for row in ranked
    )
    assert (
        figures.counts["not-measured-harness"] == sum(row["verdict"] == "harness-error" for row in ranked) > 0
    )
    assert figures.documented_inference == sum(row["optimum_neuron_inference"] is True for row in ranked)


@pytest.mark.parametrize(
    ("before", "after", "change"),
    [
        ("fails", "works", "fixed"),
        ("crash", "works-with-caveats", "fixed"),
        ("works", "fails", "regressed"),
        ("works-with-caveats", "works", "changed"),
        ("fails", "timeout", "changed"),
        ("timeout", "works", "changed"),
        ("works", "not-measured", "changed"),
        ("works-eager", "works", "changed"),
        ("fails", "works-eager", "fixed"),
        ("works", "works", "same"),
        (None, "works", "new"),
        ("works", None, "missing"),
    ],
)
def test_change_between_runs(before, after, change):
    assert change_between(before, after) == change


def test_matrix_histogram_and_bands(data, rows):
    paths = [data / "results-sim.jsonl", data / "results-hw.jsonl"]
    runs = load_runs(paths)
    frame = long_frame(runs, load_top100(paths))
    wide = verdict_matrix(frame, runs)
    by_model = wide.set_index("model_type")
    assert by_model.loc["gpt2", "change_1"] == "fixed"
    assert by_model.loc["mistral", "change_1"] == "regressed"
    assert by_model.loc["falcon", "verdict_0"] is None and by_model.loc["falcon", "change_1"] == "new"
    counted = [row for row in rows["results-sim"] if row.get("recompile_count") is not None]
    histogram = dict(recompile_histogram(frame, 0))
    assert sum(histogram.values()) == len(counted)
    assert histogram[">10"] == sum(row["recompile_count"] > 10 for row in counted)
    assert histogram["3-5"] == sum(3 <= row["recompile_count"] <= 5 for row in counted)
    bands = buckets_by_band(frame, 0, load_top100(paths))
    assert int(bands.loc["1-10"].drop(NOT_RUN).sum()) == sum(
        1 <= (row["rank"] or 0) <= 10 for row in rows["results-sim"]
    )
    assert int(bands.loc["1-10", NOT_RUN]) == 1  # gemma3 (rank 9) is listed but has no row
    assert int(bands.loc["unranked"].sum()) == sum(row["rank"] is None for row in rows["results-sim"])


def test_nulls_stay_unmeasured_in_every_table(data, rows):
    """Rows with null figures: nothing counts them as 0, and the chart, filters and headline agree."""
    paths = [data / "results-v2-sim.jsonl"]
    runs = load_runs(paths)
    top100 = load_top100(paths)
    frame = long_frame(runs, top100).set_index("model_type")
    kept = {row["model_type"]: row for row in rows["results-v2-sim"]}  # later rows win
    for model_type, row in kept.items():
        for name in ("compile_count", "recompile_count", "graph_breaks", "train_compile_count"):
            shown = frame.loc[model_type, name]
            figure = measured(row, name)
            assert pd.isna(shown) if figure is None else shown == figure, (model_type, name)
    histogram = dict(recompile_histogram(frame.reset_index(), 0))
    counted = [row for row in kept.values() if measured(row, "recompile_count") is not None]
    assert sum(histogram.values()) == len(counted) < len(kept)
    assert histogram["0"] == sum(row["recompile_count"] == 0 for row in counted)
    figures = headline(frame.reset_index(), 0, top100)
    listed = {entry.model_type for entry in top100}
    for bucket in figures.counts:
        expected = sum(
            bucket_of(row["verdict"], row["cause"]) == bucket
            for row in kept.values()
            if row["model_type"] in listed
        )
        if bucket == "not-measured":
            expected += len(listed - set(kept))
        assert figures.counts[bucket] == expected, bucket
    bands = buckets_by_band(frame.reset_index(), 0, top100)
    ranked = bands.drop(index="unranked", errors="ignore")
    assert int(ranked["fails-device"].sum()) == figures.counts["fails-device"]
    assert int(ranked["not-measured"].sum() + ranked[NOT_RUN].sum()) == figures.counts["not-measured"]


@pytest.mark.parametrize(
    ("verdict", "cause", "bucket"),
    [
        ("works", None, "works"),
        ("works-eager", None, "works-eager"),
        ("works-with-caveats", None, "works-with-caveats"),
        ("fails", "device", "fails-device"),
        ("crash", "device", "fails-device"),
        ("fails", "transformers", "fails-transformers"),
        ("not-measured", "simulator", "not-measured-simulator"),
        ("harness-error", "harness", "not-measured-harness"),
        ("harness-error", None, "not-measured-harness"),  # older rows carry no cause
        ("timeout", None, "not-measured"),
        ("fails", None, "fails-unattributed"),
    ],
)
def test_headline_buckets_follow_the_cause(verdict, cause, bucket):
    assert bucket_of(verdict, cause) == bucket


def test_env_date_is_used_when_the_harness_records_one(tmp_path):
    record = {"model_type": "llama", "verdict": "works", "env": {"backend": "neuron", "date": "2026-11-02"}}
    (run,) = load_runs([write_jsonl(tmp_path / "r.jsonl", [record])])
    assert run.measured_text.startswith("2026-11-02 (run date from the environment")


def test_optimum_neuron_support_from_the_separate_table(tmp_path, rows):
    (tmp_path / "top100.csv").write_text("rank,model_type\n1,llama\n2,qwen2\n3,mistral\n")
    (tmp_path / "optimum_neuron_0.4.5.csv").write_text(
        "model_type,inference,training,note\nllama,true,true,\nqwen2,true,,\nmistral,false,,\n"
    )
    path = write_jsonl(
        tmp_path / "results.jsonl", [dict(rows["results-sim"][0], optimum_neuron_inference=None)]
    )
    top100 = load_top100([path])
    assert [(e.model_type, e.optimum_neuron_inference, e.optimum_neuron_training) for e in top100] == [
        ("llama", True, True),
        ("qwen2", True, None),
        ("mistral", False, None),
    ]
    figures = headline(long_frame(load_runs([path]), top100), 0, top100)
    assert (figures.documented_inference, figures.documented_training) == (2, 1)


def test_every_verdict_cause_and_stage_carries_its_meaning():
    from compat_matrix.schema import Cause, ConfigSource, Stage, Verdict

    for enum in (Verdict, Cause, Stage, ConfigSource):
        assert all(member.meaning and member.meaning != member.value for member in enum), enum


def test_the_committed_schema_3_reference_reads_with_the_verdicts_and_reasons_it_was_written_with():
    """Rows of schema 3 joined their stage reasons into one; read now, each stage has its own, and the
    report shows the same text per row and the same verdict counts."""
    from collections import Counter

    from reports.compat_report import reason_parts
    from reports.results import REFERENCE_RESULTS

    written = [json.loads(line) for line in REFERENCE_RESULTS.read_text().splitlines() if line.strip()]
    assert {row["schema_version"] for row in written} == {3}
    by_key = {(row["env"]["config"], row["model_type"]): row for row in written}  # a later row replaces
    runs = load_runs([REFERENCE_RESULTS])
    for run in runs:
        assert Counter(row["verdict"] for row in run.rows.values()) == Counter(
            row["verdict"] for (config, _), row in by_key.items() if config == run.config
        )
        for model_type, row in run.rows.items():
            old = by_key[(run.config, model_type)]
            assert "; ".join(reason_parts(row)) == (old["reason"] or ""), model_type
            assert (row["upgraded_from"], row["recompile_limit"]) == (3, 8)
    staged = [
        row for run in runs for row in run.rows.values() if row["generate_reason"] and row["train_reason"]
    ]
    assert staged and not any(row["reason"] for row in staged)


def test_generation_that_was_not_compiled_has_no_recompile_or_graph_break_figures(tmp_path):
    """The harness writes 0 recompiles / graph breaks for generation Transformers never compiled; the report
    reads them as not measured (a 0 there would count in the chart's and the filter's "none")."""
    common = {"backend": "neuron-sim", "simulated": True, "schema_version": 2, "compile_count": 0}
    rows = [
        {**common, "model_type": "mpt", "verdict": "works-eager", "compiled_generation": False,
         "recompile_count": 0, "graph_breaks": 0, "recompile_reasons": [], "graph_break_reasons": []},
        {**common, "model_type": "llama", "verdict": "works", "compiled_generation": True,
         "compile_count": 1, "recompile_count": 0, "graph_breaks": 0},
    ]  # fmt: skip
    frame = long_frame(load_runs([write_jsonl(tmp_path / "results.jsonl", rows)]), []).set_index("model_type")
    assert frame.loc["mpt", "compile_count"] == 0  # measured: nothing compiled
    for name in ("recompile_count", "graph_breaks", "recompile_reasons", "graph_break_reasons"):
        assert frame.loc["mpt", name] is None or pd.isna(frame.loc["mpt", name]), name
    assert frame.loc["llama", "recompile_count"] == 0 and frame.loc["llama", "graph_breaks"] == 0
    assert dict(recompile_histogram(frame.reset_index(), 0))["0"] == 1
