"""What a reader should do about a non-green result, derived from the evidence in the row."""

from __future__ import annotations

from compat_matrix.schema import Cause, Stage, Verdict

STAGE_MEANINGS = {stage.value: stage.meaning for stage in Stage}

STAGE_ADVICE = {
    "build": "Transformers could not build this architecture from its config on this stack: check that the "
    "installed Transformers version supports it and that its optional dependencies are installed.",
    "eager": "The eager reference run on CPU failed, before the neuron backend was involved: check that the "
    "architecture runs on CPU with this Transformers version.",
    "generate": "Compiled generation failed: generate with cache_implementation='static' and a fixed "
    "max_cache_len, or generate eagerly (no torch.compile) until the failing op is supported.",
    "compare": "The outputs differ from the CPU reference: compare in float32 with "
    "attn_implementation='sdpa' before trusting results from this architecture.",
    "train": "The compiled training step failed: train eagerly (no --torch_compile) or pad every batch "
    "to a fixed length so that one graph serves all steps.",
}


def advice(row: dict) -> list[str]:
    """Ordered, concrete steps for one result row (a record of `tables.long_frame`)."""
    verdict = row.get("verdict")
    steps: list[str] = []
    if verdict == Verdict.HARNESS_ERROR:
        steps.append(
            "The harness failed before it could judge this architecture: this is not a verdict on "
            "TorchNeuron. Rerun this architecture alone and report the error against the harness."
        )
    elif verdict == Verdict.TIMEOUT:
        steps.append(
            "The run hit the harness time limit: rerun with a longer limit before drawing conclusions; "
            "a very long compile is itself worth reporting."
        )
    elif verdict == Verdict.NOT_MEASURED:
        steps.append(
            "The harness could not measure this architecture here (see the cause): this is not a verdict on "
            "TorchNeuron. Measure it on a trn2 instance before deciding."
        )
    elif verdict == Verdict.WORKS_EAGER:
        steps.append(
            "Transformers does not compile generation for this architecture: generate() runs eagerly on the "
            "device, which works but is slower. Benchmark eager generation before committing to it."
        )
    elif verdict == Verdict.CRASH:
        peak = row.get("peak_rss_mb")
        memory = f" (peak memory {peak:.0f} MB)" if isinstance(peak, (int, float)) else ""
        steps.append(
            f"The process running the model died{memory}: check for out-of-memory first, then rerun to "
            "capture the native stack trace."
        )
    stage = row.get("stage")
    if verdict == Verdict.FAILS and row.get("cause") == Cause.TRANSFORMERS:
        steps.append(
            "This fails in Transformers itself (uncompiled static-cache generation on CPU already fails or "
            "differs): it is not a TorchNeuron problem, and it would fail on any backend. Check for a newer "
            "Transformers release or report it there."
        )
    elif verdict == Verdict.FAILS and row.get("failure_by_rule"):
        steps.append(
            "The compiled graph holds an op TorchNeuron cannot lower, so on the device the compile fails and, with "
            "TORCH_NEURONX_DISABLE_FALLBACK_EXECUTION=1 (the default), the step raises; no measured one-line "
            "change avoids it. Run that stage eagerly, or try TORCH_NEURONX_DISABLE_FALLBACK_EXECUTION=0 on a "
            "trn2 (the failing graph then runs eagerly)."
        )
    elif verdict in (Verdict.FAILS, Verdict.CRASH, Verdict.HARNESS_ERROR) and stage in STAGE_ADVICE:
        steps.append(STAGE_ADVICE[stage])
    if row.get("avoided_by"):
        steps.append(
            f"The default code path's compiled graph holds an op the device raises on; {row['avoided_by']} avoids "
            "it (measured here: no such op in its graphs, the step runs). Make that change before running on a trn2."
        )
    if row.get("tokens_match") is False or row.get("outputs_match") is False:
        diff = row.get("max_logit_diff")
        detail = f" (max logit difference {diff:.3g})" if isinstance(diff, (int, float)) else ""
        if stage != "compare":
            steps.append(f"Outputs differ from the CPU reference{detail}: {STAGE_ADVICE['compare']}")
    recompiles = row.get("recompile_count") or 0
    limit = row.get("recompile_limit")
    if row.get("recompiles_every_step"):
        guard = row.get("recompile_guard")
        steps.append(
            "Recompiles at every decode step"
            + (f" (the guard that fails: {guard})" if guard else "")
            + f": with Dynamo's default recompile_limit ({limit}), as on a device, the decode step compiles "
            f"{limit} times and then runs eagerly for the rest of the generation. Padding the inputs does not "
            f"remove it; expect eager decode speed after {limit} tokens until the cache is compile-friendly in "
            "Transformers."
        )
    elif recompiles:
        steps += _recompile_advice(recompiles, row.get("recompile_reasons") or [], limit)
    breaks = row.get("graph_breaks") or 0
    if breaks:
        steps.append(
            f"{breaks} graph break(s): each piece compiles separately and runs slower. Keep the default "
            "fullgraph=False for this architecture, or run it eagerly; the reasons name the construct "
            "at fault."
        )
    if row.get("train_content_compiles"):
        steps.append(
            f"Training compiled {row['train_content_compiles']} more graph(s) when only the batch content changed "
            "(same padded length): the graphs follow the data (expert token counts, a data-dependent branch), "
            f"so padding does not remove them; past Dynamo's recompile_limit ({limit}) those frames run eagerly."
        )
    ops = [op for op in row.get("unsupported_ops") or [] if op not in (row.get("device_raising_ops") or [])]
    if ops:
        steps.append(
            f"{len(ops)} op(s) without a Neuron kernel run on CPU or fail: watch for them in profiles and "
            "report them to the torch-neuronx project."
        )
    return steps


def _recompile_advice(recompiles: int, reasons: list[str], limit: int | None) -> list[str]:
    """Which guard failed decides the cure: input shapes are the user's to fix, cache state is not."""
    on_cache = [reason for reason in reasons if "past_key_values" in reason or "cache" in reason.lower()]
    on_inputs = [reason for reason in reasons if reason not in on_cache]
    steps = []
    if on_inputs or not reasons:
        steps.append(
            f"{recompiles} recompile(s) after warm-up: every new input shape compiles again. Pad prompts "
            "to a fixed length (padding='max_length'), keep the batch size fixed, and use a static cache."
        )
    if on_cache:
        steps.append(
            f"{len(on_cache)} recompile(s) guard on the KV cache's own state (past_key_values), which changes "
            "at every decode step: padding the inputs does not remove them. Past Dynamo's recompile_limit "
            f"({limit} by default) the decode step runs eagerly, until the cache is compile-friendly in "
            "Transformers."
        )
    return steps
