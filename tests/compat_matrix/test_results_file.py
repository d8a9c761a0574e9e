import json
import os

import pytest

from compat_matrix.results_file import ResultsFileError, append_row, check_writable, export_csv, read_rows
from compat_matrix.runner import empty_measurement, make_row
from compat_matrix.schema import SCHEMA_VERSION


def a_row(settings, model_type="llama", verdict="works"):
    return make_row(model_type, settings, empty_measurement(), verdict, 1.5, 100.0)


def test_rows_round_trip_one_line_each(tmp_path, settings):
    path = tmp_path / "results.jsonl"
    append_row(path, a_row(settings))
    append_row(path, a_row(settings, "gpt2", "crash"))
    lines = path.read_text().splitlines()
    assert len(lines) == 2 and all(json.loads(line) for line in lines)
    rows = read_rows(path)
    assert [r["model_type"] for r in rows] == ["llama", "gpt2"]
    assert rows[0]["rank"] == 1 and rows[0]["env"]["simulated"] is True
    assert rows[0]["optimum_neuron_inference"] is True and rows[1]["optimum_neuron_training"] is None


def test_row_has_the_contract_fields_in_order(settings):
    from compat_matrix.schema import Row

    row = a_row(settings)
    assert list(row)[: len(Row.field_names())] == list(Row.field_names())
    assert row["schema_version"] == SCHEMA_VERSION
    # Every version-2 field is filled, also on a row the probes did not finish.
    crashed = a_row(settings, "gpt2", "crash")
    for name in ("generate_verdict", "train_verdict", "dtype", "sim_device", "measured_at"):
        assert crashed[name] is not None, name
    assert (crashed["generate_verdict"], crashed["dtype"], crashed["sim_device"]) == (
        "crash",
        "float32",
        "cpu",
    )
    assert set(row["env"]) == {"torch", "transformers", "python", "platform", "harness_version", "backend",
                               "simulated", "settings_id", "config"}  # fmt: skip
    # Every row says which config values it measured, a crash row too: llama has a checkpoint entry, gpt2 none.
    assert (row["config_source"], crashed["config_source"]) == ("checkpoint", "class-defaults")
    assert a_row(settings, "llama", "crash")["config_source"] == "checkpoint"
    assert row["checkpoint"] and row["checkpoint_values"]
    # Every key is a declared field of the schema: nothing beside it.
    assert list(row) == list(Row.field_names()) and row["recompile_limit"] == settings.recompile_limit


def test_rows_written_before_schema_2_are_still_read_with_a_note(tmp_path, settings):
    from compat_matrix.results_file import older_schema_note

    old = {
        k: v for k, v in a_row(settings).items() if k not in ("schema_version", "cause", "generate_verdict")
    }
    path = tmp_path / "old.jsonl"
    path.write_text(json.dumps(old) + "\n")
    rows = read_rows(path)
    assert rows[0]["model_type"] == "llama"
    assert (
        f"1 row(s) written before schema version {SCHEMA_VERSION} (no cause, generate_verdict"
        in older_schema_note(rows)
    )
    assert older_schema_note([a_row(settings)]) is None


def test_rows_of_schema_2_are_read_with_the_version_3_fields_unset(tmp_path, settings):
    from compat_matrix.results_file import older_schema_note
    from compat_matrix.schema import Row

    version_3_only = ("config_source", "checkpoint", "checkpoint_values", "artifact_check", "device_raising_ops",
                      "code_paths", "avoided_by", "lowering_unverified_ops", "train_graph_break_reasons",
                      "train_recompile_reasons", "train_content_compiles")  # fmt: skip
    version_2 = {k: v for k, v in a_row(settings).items() if k not in version_3_only} | {"schema_version": 2}
    path = tmp_path / "v2.jsonl"
    path.write_text(json.dumps(version_2) + "\n")
    rows = read_rows(path)
    row = Row.from_dict(rows[0])
    assert row.upgraded_from == 2 and row.config_source is None and row.artifact_check is None
    note = older_schema_note(rows)
    assert (
        f"before schema version {SCHEMA_VERSION} (no config_source, artifact_check" in note
        and "cause" not in note
    )


@pytest.mark.parametrize(
    ("verdict", "reason", "expected"),
    [
        ("fails", "generate: a (x; y); confirmed; train: b", (None, "a (x; y); confirmed", "b")),
        ("works-with-caveats", "train: 1 graph break(s) in training", (None, None, "1 graph break(s) in training")),
        ("harness-error", "the tiny model cannot be built: E: x", ("the tiny model cannot be built: E: x", None, None)),
        ("works", None, (None, None, None)),
    ],
)  # fmt: skip
def test_rows_of_schema_3_have_their_joined_reason_split_per_stage(verdict, reason, expected):
    from compat_matrix.schema import Row

    row = Row.from_dict({"model_type": "llama", "rank": 1, "backend": "neuron-sim", "simulated": True,
                         "verdict": verdict, "stage": None, "error": None, "env": {}, "schema_version": 3,
                         "reason": reason, "peak_rss_mb": 900.0})  # fmt: skip
    assert (row.reason, row.generate_reason, row.train_reason) == expected
    # Measured with the only limit rows before version 4 had; their undeclared fields are fields now.
    assert (row.recompile_limit, row.peak_rss_mb, row.extra, row.upgraded_from) == (8, 900.0, {}, 3)


def test_rows_from_a_newer_schema_are_refused(tmp_path, settings):
    path = tmp_path / "new.jsonl"
    path.write_text(json.dumps(a_row(settings) | {"schema_version": 99}) + "\n")
    with pytest.raises(ResultsFileError, match="newer than this neuron-compat reads"):
        read_rows(path)


@pytest.mark.parametrize(
    ("content", "message"),
    [("{not json\n", "not a JSON line"), ('{"name": "something else"}\n', "not a neuron-compat result row")],
)
def test_corrupt_or_foreign_files_are_refused(tmp_path, content, message):
    path = tmp_path / "results.jsonl"
    path.write_text(content)
    with pytest.raises(ResultsFileError, match=message):
        read_rows(path)


def test_unwritable_locations_are_detected(tmp_path):
    with pytest.raises(ResultsFileError, match="does not exist"):
        check_writable(tmp_path / "missing" / "results.jsonl")
    with pytest.raises(ResultsFileError, match="is a directory"):
        check_writable(tmp_path)
    locked = tmp_path / "locked"
    locked.mkdir()
    os.chmod(locked, 0o500)
    try:
        if os.access(locked, os.W_OK):
            pytest.skip("running as a user that ignores permissions")
        with pytest.raises(ResultsFileError, match="permission denied"):
            check_writable(locked / "results.jsonl")
    finally:
        os.chmod(locked, 0o700)


def test_csv_twin_flattens_lists_and_env(tmp_path, settings):
    import pandas as pd

    row = a_row(settings)
    row["recompile_reasons"] = ["a", "b"]
    export_csv([row], tmp_path / "results.csv")
    frame = pd.read_csv(tmp_path / "results.csv")
    assert frame.loc[0, "recompile_reasons"] == "a; b"
    assert frame.loc[0, "env_backend"] == "neuron-sim"
