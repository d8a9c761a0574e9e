"""The verdict fields of a measured row (``decide_verdict``): what a row's measurements and attributed failures
mean for generation, training and the architecture, with the caveats that keep a stage from a clean ``works``.
"""

from __future__ import annotations

from typing import Any

import torch

from compat_matrix import artifacts
from compat_matrix.families import TEXT_GENERATION, judged_stages
from compat_matrix.schema import Cause, Stage, Verdict
from standin import sim_backend

# Dynamo's default, not the limit probes.configure_dynamo sets: what a user's process has on the device.
DYNAMO_DEFAULT_RECOMPILE_LIMIT = torch._dynamo.config._config["recompile_limit"].default


def generate_caveats(row: dict[str, Any]) -> list[str]:
    """Why a generation that matched the reference is not a clean ``works``."""
    found = []
    if row.get("recompiles_every_step"):
        after_limit = (
            f"with Dynamo's default recompile_limit ({DYNAMO_DEFAULT_RECOMPILE_LIMIT}), as on a device, the "
            f"decode step compiled {row['compile_count']} graphs and then ran eagerly"
            if row.get("recompile_limit_hit")
            else f"on a device with Dynamo's default recompile_limit ({DYNAMO_DEFAULT_RECOMPILE_LIMIT}) the "
            "decode step would stop compiling at that limit and run eagerly"
        )
        found.append(f"recompiles at every decode step (guard {row['recompile_guard']}): {after_limit}")
    elif row.get("recompile_count"):
        found.append(f"{row['recompile_count']} recompile(s) in generation")
    if row.get("graph_breaks"):
        found.append(f"{row['graph_breaks']} graph break(s) in generation")
    found += _op_caveats(row.get("generate_unsupported_ops") or [], row.get("generate_device_rule_caveat"),
                         "generation")  # fmt: skip
    return found


def _op_caveats(findings: list[str], device_rule_caveat: str | None, where: str) -> list[str]:
    """The device-rule line when a measured code path avoided the raising ops, then the other findings."""
    found = [device_rule_caveat] if device_rule_caveat else []
    rest = set(findings) - (set(sim_backend.raising_findings(findings)) if device_rule_caveat else set())
    if rest:
        found.append(f"{len(rest)} reported op/dtype finding(s) in {where}")
    return found


def train_caveats(row: dict[str, Any]) -> list[str]:
    found = []
    expected = row.get("train_expected_compile_count")
    if expected is not None and (row.get("train_compile_count") or 0) > expected:
        found.append(f"training compiled {row['train_compile_count']} graphs, expected {expected}")
    if row.get("train_graph_breaks"):
        found.append(f"{row['train_graph_breaks']} graph break(s) in training")
    if row.get("train_content_compiles"):
        lengths = row.get("train_padded_lengths") or ["the first"]
        found.append(f"training compiled {row['train_content_compiles']} more graph(s) for a batch of the same "
                     f"padded length ({lengths[0]} tokens) with other tokens: recompiles that depend on the data"
                     + (f" ({row['train_content_check']})" if row.get("train_content_check") else ""))  # fmt: skip
    found += _op_caveats(
        row.get("train_unsupported_ops") or [], row.get("train_device_rule_caveat"), "training"
    )
    return found


def forward_caveats(row: dict[str, Any]) -> list[str]:
    """Why a forward at a static shape that matched the reference is not a clean ``works``: a static shape
    compiles one graph, so a recompile for another batch of that shape, or a graph break, costs a device."""
    found = []
    if row.get("recompile_count"):
        again = "across the denoising steps or for another prompt" if row.get("denoise_steps") else (
            "for another batch of the same shape")  # fmt: skip
        found.append(f"{row['recompile_count']} recompile(s) {again}")
    if row.get("graph_breaks"):
        found.append(f"{row['graph_breaks']} graph break(s) in the forward")
    found += _op_caveats(
        row.get("forward_unsupported_ops") or [], row.get("forward_device_rule_caveat"), "the forward"
    )
    return found


def _guidance_note(row: dict[str, Any]) -> str | None:
    """A text-to-image row's graphs for the unguided batch: expected of a static shape, so said, not a caveat."""
    if not row.get("guidance_recompiles") or row.get("forward_failure"):
        return None
    return (f"turning classifier-free guidance off compiled {row['guidance_recompiles']} more graph(s): the "
            "denoiser's batch halves, a static shape of its own (another neuronx-cc compile on a device)")  # fmt: skip


def _stage_verdict(
    failure: dict | None, caveat_list: list[str], note: str | None
) -> tuple[Verdict, str | None]:
    """A stage's verdict and reason; ``note`` says why a failure of the first measurement was dropped."""
    if failure is not None:
        not_blamed = failure["cause"] in (Cause.SIMULATOR.value, Cause.HARNESS.value)
        return (Verdict.NOT_MEASURED if not_blamed else Verdict.FAILS), failure["reason"]
    text = "; ".join([*caveat_list, *([note] if note else [])]) or None
    return (Verdict.WORKS_WITH_CAVEATS if caveat_list else Verdict.WORKS), text


BLAMED_VERDICTS = (Verdict.FAILS, Verdict.NOT_MEASURED)  # a stage verdict whose failure names the cause


def decide_verdict(row: dict[str, Any]) -> dict[str, Any]:
    """The verdict fields of a measured row: ``verdict``, ``cause``, and each stage's verdict and one-line
    reason (``generate_verdict``, ``generate_reason``, ...); a harness error has one ``reason`` for the row.
    A build or eager-reference failure is the harness's (never the architecture's); otherwise the first failing stage decides, then a simulator limitation, then caveats,
    then uncompiled generation (``works-eager``). The stages judged are the task's (``families.judged_stages``):
    an encoder-decoder's row has generate only, a forward-only task's row its one stage, ``forward``."""
    stages = judged_stages(row.get("task") or TEXT_GENERATION)
    if row.get("stage") in (Stage.BUILD.value, Stage.EAGER.value):
        reason = (row.get(f"{stages[0]}_failure") or {}).get("reason") or (
            f"the tiny model cannot be built or run eagerly here: {row.get('error') or 'no error recorded'}"
        )
        return {"verdict": Verdict.HARNESS_ERROR, **{f"{stage}_verdict": Verdict.HARNESS_ERROR for stage in stages},
                "cause": Cause.HARNESS, "reason": reason}  # fmt: skip
    if stages == ("forward",):
        notes = [artifacts.dropped_note(row, "forward"), _guidance_note(row)]
        forward_verdict, forward_reason = _stage_verdict(
            row.get("forward_failure"), forward_caveats(row), "; ".join(filter(None, notes)) or None
        )
        cause = row["forward_failure"]["cause"] if forward_verdict in BLAMED_VERDICTS else None
        return {"verdict": forward_verdict, "forward_verdict": forward_verdict, "cause": cause and Cause(cause),
                "forward_reason": forward_reason}  # fmt: skip
    generate_failure = row.get("generate_failure")
    generate_verdict, generate_reason = _stage_verdict(
        generate_failure, generate_caveats(row), artifacts.dropped_note(row, "generate")
    )
    if generate_verdict is Verdict.WORKS and row.get("compiled_generation") is False:
        generate_verdict = Verdict.WORKS_EAGER
        generate_reason = f"generation is not compiled: {row.get('not_compiled_because')}"
    fields = {"generate_verdict": generate_verdict, "generate_reason": generate_reason}
    judged = [(generate_verdict, generate_failure)]
    if "train" in stages:
        train_failure = row.get("train_failure")
        train_verdict, train_reason = _stage_verdict(
            train_failure, train_caveats(row), artifacts.dropped_note(row, "train")
        )
        fields |= {"train_verdict": train_verdict, "train_reason": train_reason}
        judged.append((train_verdict, train_failure))
    cause = None
    for wanted in (Verdict.FAILS, Verdict.NOT_MEASURED, Verdict.WORKS_WITH_CAVEATS, Verdict.WORKS_EAGER):
        hits = [failure for verdict, failure in judged if verdict is wanted]
        if hits:
            verdict = wanted
            cause = Cause(hits[0]["cause"]) if hits[0] else None
            break
    else:
        verdict = Verdict.WORKS
    return {"verdict": verdict, "cause": cause, **fields}
