from types import SimpleNamespace

import pytest
import torch

from compat_matrix.probes import compare_outputs, decide_verdict, first_error_line, graph_break_reason


def finished(**changes):
    row = {"stage": None, "recompile_count": 0, "graph_breaks": 0, "unsupported_ops": [],
           "train_compile_count": 2, "train_expected_compile_count": 2}  # fmt: skip
    return row | changes


@pytest.mark.parametrize(
    ("row", "verdict"),
    [
        (finished(), "works"),
        (finished(recompile_count=2), "works-with-caveats"),
        (finished(graph_breaks=1), "works-with-caveats"),
        (finished(unsupported_ops=["float64: aten.mul torch.float64 (eager)"]), "works-with-caveats"),
        (finished(train_compile_count=3), "works-with-caveats"),
        (finished(stage="build"), "harness-error"),
        (finished(stage="eager"), "harness-error"),
        (finished(stage="generate"), "fails"),
        (finished(stage="compare"), "fails"),
        (finished(stage="train"), "fails"),
    ],
)
def test_verdict_rules(row, verdict):
    assert decide_verdict(row) == verdict


def generation(tokens, logits):
    return SimpleNamespace(sequences=torch.tensor([tokens]), logits=[torch.tensor([logits])])


def test_compare_flags_different_tokens_and_logits(settings):
    row = {}
    compare_outputs(
        [generation([1, 2], [0.0, 1.0])], [generation([1, 2], [0.0, 1.0 + 1e-6])], False, settings, row
    )
    assert row["outputs_match"] and row["tokens_match"]
    with pytest.raises(ValueError, match="greedy tokens differ"):
        compare_outputs(
            [generation([1, 2], [0.0, 1.0])], [generation([1, 3], [0.0, 1.0])], False, settings, row
        )
    with pytest.raises(ValueError, match="max logit diff"):
        compare_outputs(
            [generation([1, 2], [0.0, 1.0])], [generation([1, 2], [0.0, 1.5])], False, settings, row
        )
    assert row["outputs_match"] is False and row["max_logit_diff"] == pytest.approx(0.5)


def test_error_lines_unwrap_backend_failures():
    wrapped = RuntimeError(
        "backend='neuron-sim' raised:\nDynamicShapeRejected: neuron-sim [static-shapes]: x\n\nmore"
    )
    assert first_error_line(wrapped) == "RuntimeError: DynamicShapeRejected: neuron-sim [static-shapes]: x"


def test_graph_break_reason_keeps_type_explanation_and_link():
    message = (
        "Dynamic shape operator\n  Explanation: Operator `aten.nonzero.default`'s output shape depends on data.\n"
        "  Hint: ...\n For more details, visit: https://meta-pytorch.github.io/compile-graph-break-site/gb/gb0036.html"
    )
    assert graph_break_reason(message) == (
        "Dynamic shape operator | Operator `aten.nonzero.default`'s output shape depends on data. | "
        "https://meta-pytorch.github.io/compile-graph-break-site/gb/gb0036.html"
    )
