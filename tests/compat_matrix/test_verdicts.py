"""Verdict, cause and compare rules on hand-made rows and tensors (no model)."""

from types import SimpleNamespace

import pytest
import torch

from compat_matrix.attribution import attribute_failure
from compat_matrix.compile_stats import graph_break_reason, recompile_guard
from compat_matrix.errors import first_error_line
from compat_matrix.generation_runs import (
    OutputsDiffer,
    TeacherForcing,
    check_match,
    greedy_tokens_agree,
    max_logit_diff,
)
from compat_matrix.schema import Cause, Verdict
from compat_matrix.verdict import decide_verdict
from standin import sim_backend

COVERAGE = "operator-coverage: transformers.grouped_mm_fallback (compiled graph)"


def finished(**changes):
    row = {"stage": None, "recompile_count": 0, "graph_breaks": 0, "unsupported_ops": [],
           "generate_unsupported_ops": [], "compiled_generation": True, "train_compile_count": 2,
           "train_expected_compile_count": 2, "generate_failure": None, "train_failure": None}  # fmt: skip
    return row | changes


def failure(stage, cause):
    return {"stage": stage, "error": "E: x", "cause": cause, "reason": f"{cause} reason"}


@pytest.mark.parametrize(
    ("row", "verdict", "generate", "train", "cause"),
    [
        (finished(), "works", "works", "works", None),
        (finished(compiled_generation=False, not_compiled_because="llama4"), "works-eager", "works-eager",
         "works", None),
        (finished(recompile_count=2), "works-with-caveats", "works-with-caveats", "works", None),
        (finished(graph_breaks=1), "works-with-caveats", "works-with-caveats", "works", None),
        (finished(unsupported_ops=["float64: aten.mul torch.float64 (eager)"],
                  generate_unsupported_ops=["float64: aten.mul torch.float64 (eager)"]),
         "works-with-caveats", "works-with-caveats", "works", None),
        (finished(unsupported_ops=["float64: aten.mul torch.float64 (compiled graph)"],
                  train_unsupported_ops=["float64: aten.mul torch.float64 (compiled graph)"]),
         "works-with-caveats", "works", "works-with-caveats", None),
        (finished(train_content_compiles=7), "works-with-caveats", "works", "works-with-caveats", None),
        # An op the device raises on, avoided by a measured code path: a caveat, not a failure.
        (finished(train_unsupported_ops=[COVERAGE], train_device_rule_caveat="avoided by batched_mm"),
         "works-with-caveats", "works", "works-with-caveats", None),
        (finished(stage="train", train_failure=failure("train", "device") | {"by_rule": ["operator-coverage"]}),
         "fails", "works", "fails", "device"),
        # A failure the artifact guard could not confirm is not blamed on anyone.
        (finished(stage="compare", generate_failure=failure("compare", "harness") | {"unconfirmed": True}),
         "not-measured", "not-measured", "works", "harness"),
        (finished(train_compile_count=3), "works-with-caveats", "works", "works-with-caveats", None),
        (finished(stage="build", generate_failure=failure("build", "harness")), "harness-error",
         "harness-error", "harness-error", "harness"),
        (finished(stage="eager"), "harness-error", "harness-error", "harness-error", "harness"),
        (finished(stage="generate", generate_failure=failure("generate", "transformers")), "fails", "fails",
         "works", "transformers"),
        (finished(stage="compare", generate_failure=failure("compare", "device")), "fails", "fails", "works",
         "device"),
        (finished(stage="train", train_failure=failure("train", "simulator")), "not-measured", "works",
         "not-measured", "simulator"),
        # A measured failure outranks a simulator limitation, and its cause is the row's.
        (finished(stage="compare", generate_failure=failure("compare", "transformers"),
                  train_failure=failure("train", "simulator")), "fails", "fails", "not-measured", "transformers"),
    ],
)  # fmt: skip
def test_verdict_rules(row, verdict, generate, train, cause):
    fields = decide_verdict(row)
    assert (fields["verdict"], fields["generate_verdict"], fields["train_verdict"]) == (
        verdict,
        generate,
        train,
    )
    assert fields["cause"] == (Cause(cause) if cause else None)
    # One line per judged stage, none for a plain works; a harness error has one for the row.
    if verdict == "harness-error":
        assert fields["reason"] and "\n" not in fields["reason"]
    for stage, stage_verdict in (("generate", generate), ("train", train)):
        reason = fields.get(f"{stage}_reason")
        assert (reason is None) == (stage_verdict in ("works", "harness-error")) and "\n" not in (
            reason or ""
        )


def test_uncompiled_generation_is_never_plain_works():
    fields = decide_verdict(finished(compiled_generation=False, not_compiled_because="no static cache"))
    assert fields["verdict"] is Verdict.WORKS_EAGER and "no static cache" in fields["generate_reason"]


def test_every_step_recompiles_say_what_the_default_limit_does():
    row = finished(recompile_count=7, compile_count=8, recompiles_every_step=True, recompile_limit_hit=True,
                   recompile_guard="wrapper: cumulative_length == N")  # fmt: skip
    reason = decide_verdict(row)["generate_reason"]
    assert "every decode step" in reason and "recompile_limit (8)" in reason and "ran eagerly" in reason


def outputs(*steps):
    return SimpleNamespace(logits=[torch.tensor([step]) for step in steps])


def test_three_way_compare_keeps_each_difference_and_ignores_near_ties():
    reference = [outputs([0.0, 1.0], [2.0, 2.0 + 1e-6])]
    near_tie = [outputs([0.0, 1.0], [2.0 + 2e-6, 2.0])]  # argmax flips, logits within tolerance
    assert max_logit_diff(reference, near_tie) == pytest.approx(2e-6, abs=1e-7)
    assert not greedy_tokens_agree(reference, near_tie)
    check_match(max_logit_diff(reference, near_tie), 1e-4, "compiled")  # a near-tie does not fail
    with pytest.raises(OutputsDiffer, match=r"max diff 0\.5 > 0\.0001"):
        check_match(max_logit_diff(reference, [outputs([0.0, 1.5], [2.0, 2.0])]), 1e-4, "compiled")
    with pytest.raises(OutputsDiffer):
        check_match(max_logit_diff(reference, [outputs([0.0, float("nan")], [2.0, 2.0])]), 1e-4, "compiled")


def test_teacher_forcing_picks_the_reference_token_at_each_step():
    forcing = TeacherForcing(torch.tensor([[5, 6, 7, 3]]))
    scores = torch.tensor([[0.0, 9.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0]])
    assert forcing(torch.tensor([[5, 6]]), scores).argmax(-1).item() == 7
    assert forcing(torch.tensor([[5, 6, 7]]), scores).argmax(-1).item() == 3


def test_teacher_forcing_picks_each_rows_own_reference_token():
    # An encoder-decoder generates for a batch of two: each row is forced to its own reference.
    forcing = TeacherForcing(torch.tensor([[0, 4, 2], [0, 6, 1]]))
    scores = torch.zeros(2, 8)
    assert forcing(torch.tensor([[0], [0]]), scores).argmax(-1).tolist() == [4, 6]


def test_recompile_guard_generalises_numbers_and_whitespace():
    reasons = ["wrapper: 0/1: len == 5  # x", "wrapper: 0/2: len == 6  # x", "other: 1/1: ___stack0[0] == 3"]
    assert recompile_guard(reasons) == "wrapper: N/N: len == N # x"
    assert recompile_guard([]) is None


def rerun_outcomes(**fails):
    """A rerun that raises for the backends named (eager, stride, aot, uncompiled; host, host-stride, host-aot:
    compiled, run stride-agnostically, and under aot_eager, on CPU tensors)."""
    calls = []

    def rerun(backend, on_host=False):
        names = {"eager": "eager", None: "uncompiled", sim_backend.STRIDE_AGNOSTIC_BACKEND_NAME: "stride",
                 "aot_eager": "aot"}  # fmt: skip
        host_names = {"stride": "host-stride", "aot": "host-aot", "uncompiled": "host-uncompiled"}
        name = host_names.get(names.get(backend), "host") if on_host else names[backend]
        calls.append(name)
        if fails.get(name):
            raise RuntimeError(f"{name} failed")

    return rerun, calls


@pytest.mark.parametrize(
    ("fails", "cause", "calls"),
    [
        ({}, Cause.SIMULATOR, ["eager", "stride"]),
        ({"stride": True}, Cause.DEVICE, ["eager", "stride", "aot"]),
        # PyTorch's own AOT path fails on CPU too: its CPU kernels, not the device (a VAE decoder's group norm).
        ({"stride": True, "aot": True}, Cause.SIMULATOR, ["eager", "stride", "aot"]),
        ({"eager": True}, Cause.DEVICE, ["eager", "uncompiled"]),
        ({"eager": True, "uncompiled": True}, Cause.TRANSFORMERS, ["eager", "uncompiled"]),
    ],
)
def test_failures_are_attributed_by_rerunning_the_stage(fails, cause, calls):
    rerun, seen = rerun_outcomes(**fails)
    found, reason = attribute_failure(RuntimeError("view size is not compatible"), rerun)
    assert (found, seen) == (cause, calls)
    assert reason and "\n" not in reason


@pytest.mark.parametrize(
    ("fails", "cause", "calls"),
    [
        ({}, Cause.SIMULATOR, ["eager", "host"]),
        ({"host": True}, Cause.SIMULATOR, ["eager", "host", "host-stride"]),
        ({"host": True, "host-stride": True}, Cause.DEVICE, ["eager", "host", "host-stride", "host-aot"]),
        (
            {"host": True, "host-stride": True, "host-aot": True},
            Cause.SIMULATOR,
            ["eager", "host", "host-stride", "host-aot"],
        ),  # fmt: skip
    ],
)
def test_on_the_standin_a_stage_that_compiles_on_cpu_tensors_blames_the_standin(fails, cause, calls):
    rerun, seen = rerun_outcomes(**fails)
    found, reason = attribute_failure(RuntimeError("isFunctionalTensor INTERNAL ASSERT"), rerun, standin=True)
    assert (found, seen) == (cause, calls)
    # Never a rerun compiled over the stand-in's own tensors: its AOT failure would repeat (or abort the process).
    assert "stride" not in seen
    assert found is not Cause.SIMULATOR or ("a stand-in limit" in reason) == ("host" not in fails)


def test_the_reason_names_where_the_uncompiled_rerun_ran():
    rerun, _ = rerun_outcomes(eager=True, uncompiled=True)
    assert "already fails uncompiled on CPU (" in attribute_failure(RuntimeError("x"), rerun)[1]
    rerun, _ = rerun_outcomes(eager=True, uncompiled=True, **{"host-uncompiled": True})
    reason = attribute_failure(RuntimeError("x"), rerun, uncompiled_on="neuron (stand-in)")[1]
    assert "already fails uncompiled on neuron (stand-in) (" in reason


def test_a_failure_uncompiled_on_the_standin_alone_blames_neither_the_libraries_nor_the_device():
    """PixArt's latents differ uncompiled on the stand-in and not on CPU: the stand-in's, not measured."""
    rerun, seen = rerun_outcomes(eager=True, uncompiled=True)
    found, reason = attribute_failure(
        RuntimeError("x"), rerun, uncompiled_on="neuron (stand-in)", standin=True
    )
    assert (found, seen) == (Cause.SIMULATOR, ["eager", "uncompiled", "host-uncompiled"])
    assert "passes uncompiled on CPU" in reason
    rerun, _ = rerun_outcomes(eager=True, uncompiled=True)
    assert (
        attribute_failure(RuntimeError("x"), rerun, simulated=False, uncompiled_on="neuron")[0]
        is Cause.DEVICE
    )


def test_on_the_real_device_nothing_is_blamed_on_the_simulator():
    rerun, seen = rerun_outcomes()
    assert attribute_failure(RuntimeError("x"), rerun, simulated=False)[0] is Cause.DEVICE
    assert seen == ["eager"]


def test_a_rule_rejection_blames_the_device_without_reruns():
    rerun, seen = rerun_outcomes()
    error = RuntimeError("backend raised")
    error.__cause__ = sim_backend.DynamicShapeRejected("neuron-sim [static-shapes]: symbolic sizes")
    assert attribute_failure(error, rerun)[0] is Cause.DEVICE and seen == []


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
