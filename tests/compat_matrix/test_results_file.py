import json
import os

import pytest

from compat_matrix.results import ResultsFileError, append_row, check_writable, export_csv, read_rows
from compat_matrix.runner import empty_measurement, make_row


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
    row = a_row(settings)
    contract = ["model_type", "rank", "backend", "simulated", "verdict", "stage", "error", "compile_count",
                "recompile_count", "recompile_reasons", "graph_breaks", "graph_break_reasons", "unsupported_ops",
                "outputs_match", "train_compile_count", "seconds"]  # fmt: skip
    assert list(row)[: len(contract)] == contract
    assert set(row["env"]) == {"torch", "transformers", "python", "platform", "harness_version", "backend",
                               "simulated", "settings_id"}  # fmt: skip
    for extra in ("unique_graphs", "eager_new_op_signatures", "probe_seconds", "peak_rss_mb", "tokens_match",
                  "max_logit_diff", "train_padded_lengths", "optimum_neuron_inference", "optimum_neuron_training"):  # fmt: skip
        assert extra in row


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
