"""`neuron-migrate bench --baseline`'s page: ratios of like runs, and unlike runs shown as such."""

from __future__ import annotations

from reports.bench import comparison, write_page


def _result(device="neuron", median=0.05, dtype=("bfloat16",), status="measured") -> dict:
    return {
        "command": f"python train.py on {device}",
        "status": status,
        "reason": "" if status == "measured" else "not measured: exit code 1: boom",
        "device": device,
        "layout": {"processes": 1, "dtype": list(dtype), "batch": [8], "sequence": [512]},
        "steps": {"median_seconds": median, "p90_seconds": median * 1.1, "tokens_per_s": 8 * 512 / median},
        "compile": {"first_step_seconds": 30.0, "dynamo_compile_seconds": 20.0},
        "peak_memory": {"bytes": 2**30},
        "cost": {},
        "generation": [{"batch": 1, "first_token_median_seconds": 0.2, "per_token_median_seconds": 0.02}],
    }


def test_like_runs_are_compared_with_ratios(tmp_path):
    run, baseline = _result(median=0.05), _result(median=0.1)
    compared = comparison(run, baseline)
    assert compared["comparable"] and compared["differences"] == []
    rows = {row["figure"]: row for row in compared["rows"]}
    assert rows["median step seconds"]["ratio"] == 2.0  # twice as fast
    assert rows["tokens/s (no padding)"]["ratio"] == 2.0
    assert rows["USD per million tokens"]["ratio"] is None  # no price: not compared
    assert rows["batch 1 per-token seconds"]["ratio"] == 1.0
    page = tmp_path / "bench.md"
    write_page({"path": "train.py", "results": [run, baseline], "comparison": compared}, page)
    text = page.read_text()
    assert "same device, dtype, batch" in text and "| median step seconds | 0.05 | 0.1 | 2.0 |" in text


def test_unlike_runs_say_what_differs_in_both_formats(tmp_path):
    run, baseline = _result(), _result(device="cuda (NVIDIA H100)", dtype=("float32",), status="not-measured")
    compared = comparison(run, baseline)
    assert not compared["comparable"]
    assert compared["differences"] == [
        "device: neuron vs cuda (NVIDIA H100)",
        "dtype: bfloat16 vs float32",
    ]
    document = {"path": "train.py", "results": [run, baseline], "comparison": compared}
    write_page(document, tmp_path / "bench.html")
    html = (tmp_path / "bench.html").read_text()
    assert "Not a like-for-like comparison" in html and "<li>dtype: bfloat16 vs float32</li>" in html
    assert "not measured: exit code 1: boom" in html
    write_page(document, tmp_path / "bench.md")
    assert "- device: neuron vs cuda (NVIDIA H100)" in (tmp_path / "bench.md").read_text()
