"""`evaluate.load(NAME)` in a try (try_run/metrics.py): the common metrics are served from the try's modules
cache and computed by scikit-learn; another name is not run, with the Hub named as what it needs."""

from __future__ import annotations

import pytest

from tests.compat_matrix.test_trial_runs import run_try, write
from try_run.metrics import loaded

METRICS = """
import evaluate
import torch

metric = evaluate.load("accuracy")
for _ in range(2):
    metric.add_batch(
        predictions=torch.tensor([1, 0, 1, 1], device="neuron"), references=torch.tensor([1, 0, 0, 1], device="neuron")
    )
print("accuracy:", metric.compute()["accuracy"])
print("f1:", evaluate.load("f1").compute(predictions=[1, 0], references=[1, 1])["f1"])
print("mrpc:", evaluate.load("glue", "mrpc").compute(predictions=[1, 0, 1, 1], references=[1, 0, 0, 1]))
print("cola:", evaluate.load("glue", "cola").compute(predictions=[1, 0, 1, 0], references=[1, 0, 1, 0]))
evaluate.load("bleu")
"""


def test_names_the_code_loads_by_a_literal():
    sources = [
        'import evaluate, torch\nm = evaluate.load("accuracy")\ntorch.load("model.pt")\nevaluate.load(name)',
        'from evaluate import load\nload("f1")\nload("org/custom")\nfrom datasets import load_metric\nload_metric("glue")',
    ]
    assert loaded(sources) == ["accuracy", "f1", "glue"]


def test_common_metrics_are_served_and_another_needs_the_hub(tmp_path, try_cache):
    pytest.importorskip("evaluate")  # the test extra installs it
    write(tmp_path, "metrics.py", METRICS)
    code, document, errors = run_try(tmp_path, "metrics.py", cache=try_cache, timeout=300)
    run = document["runs"][0]
    assert "accuracy: 0.75" in run["output_tail"]
    assert "f1: 0.6666" in run["output_tail"]
    assert "mrpc: {'accuracy': 0.75, 'f1': 0.8}" in run["output_tail"]
    assert "cola: {'matthews_correlation': 1.0}" in run["output_tail"]
    assert run["status"] == "not-run"
    assert run["reason"].startswith("not run: evaluate.load('bleu') needs the Hub")
    assert run["metrics"] == [
        {"name": "accuracy", "source": "stand-in: scikit-learn's accuracy_score"},
        {"name": "f1", "source": "stand-in: scikit-learn's f1_score"},
        {"name": "glue", "source": "stand-in: GLUE's per-task scores (scikit-learn, SciPy)"},
        {"name": "bleu", "source": "not served: the Hub's evaluate-metric/bleu"},
    ]
