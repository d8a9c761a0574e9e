"""The artifact guard: a failure is blamed on Transformers or the device only when it survives a second
measurement.

A tiny model with random weights can fail for reasons no checkpoint has. deepseek_v32's sparse-attention
indexer keeps the top ``index_topk`` (8 in the tiny model) of up to 64 cached positions; with random weights
many indexer scores are exact ReLU zeros, they tie at the k-th score, and two correct cache implementations
keep different positions. So before a row blames anyone, the failing stage is measured again on another tiny
model: the second tiny size (``tiny.SECOND``: twice the width and heads), another seed, and ties broken where
top-k selection over positions can tie (``index_topk`` and its kin set to at least the cache length, so every
position is kept). The blame stays only when the second measurement fails the same way; the row records both
(``artifact_check``). A failure that passes the second time is dropped, and the row's compare figures are the
second measurement's; one that cannot be re-measured, or fails the second time for another reason, is not
measured (cause harness), never blamed.

Sliding windows are not widened: a window shorter than the cache is a real code path (every generation longer
than the window takes it), and gpt_neo's static-cache bug lives there.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from compat_matrix.errors import first_error_line
from compat_matrix.schema import Cause
from compat_matrix.tiny import PRIMARY, SECOND, TinySize
from standin import sim_backend

# Top-k selections over cached positions, where random weights tie; a value >= the cache length keeps every
# position. MoE top-k is not among them: it selects experts by router probabilities, which do not tie exactly.
POSITION_TOP_K_FIELDS = ("index_topk", "index_topk_blocks", "indexer_budget")
BLAMED = (Cause.TRANSFORMERS.value, Cause.DEVICE.value)
COMPARE_FIGURES = ("max_diff_static_vs_dynamic", "max_diff_compiled_vs_dynamic", "max_logit_diff",
                   "outputs_match", "tokens_match")  # fmt: skip
STAGE_KEYS = {"generate": "generate_failure", "train": "train_failure", "forward": "forward_failure"}
COMPARED_STAGES = ("generate", "forward")  # the stages whose row carries compare figures


def needs_guard(failure: dict | None) -> bool:
    """A measured failure that blames someone; not a device-rule finding (``by_rule``), which no tiny size
    makes appear: the code-path check of ``severity`` is its second measurement."""
    return bool(failure) and failure["cause"] in BLAMED and not failure.get("by_rule")


def tie_free_values(configs: list[Any], cache_length: int) -> dict[str, int]:
    """Position top-k fields below the cache length, raised to it."""
    values = {}
    for config in configs:
        for name in POSITION_TOP_K_FIELDS:
            value = getattr(config, name, None)
            if isinstance(value, int) and not isinstance(value, bool) and value < cache_length:
                values[name] = cache_length
    return values


def _size_text(size: TinySize, seed: int) -> str:
    return f"{size.name} tiny size (hidden {size.hidden}, {size.heads} heads), seed {seed}"


def _figures(stage: str, measured: dict) -> dict[str, Any]:
    failure = measured.get(STAGE_KEYS[stage])
    figures = {
        "failure": failure["reason"] if failure else None,
        "cause": failure["cause"] if failure else None,
    }
    if stage in COMPARED_STAGES:
        figures |= {name: measured.get(name) for name in COMPARE_FIGURES}
    return figures


def guard(
    row: dict,
    seed: int,
    remeasure: Callable[[str, TinySize, int, dict[str, int]], dict],
    second_configs: Callable[[], list[Any]],
    cache_length: int,
) -> None:
    """Re-measure every stage whose failure blames someone; keep, drop or unconfirm the blame in ``row``.
    ``remeasure(stage, size, seed, exact)`` measures one stage on a fresh model and returns its fields."""
    for stage, key in STAGE_KEYS.items():
        first = row.get(key)
        if not needs_guard(first):
            continue
        check: dict[str, Any] = {"first": {"size": _size_text(PRIMARY, seed), **_figures(stage, row)}}
        try:
            tie_free = tie_free_values(second_configs(), cache_length)
            with sim_backend.findings_apart():
                second = remeasure(stage, SECOND, seed + 1, tie_free)
            check["second"] = {"size": _size_text(SECOND, seed + 1), "ties_broken": tie_free,
                               **_figures(stage, second)}  # fmt: skip
            again = second.get(key)
        except Exception as error:  # noqa: BLE001  (a second measurement that could not be made is recorded)
            second, again = {}, None
            check["second"] = {"size": _size_text(SECOND, seed + 1), "error": first_error_line(error)}
        if "error" not in check["second"] and again is None:
            check["outcome"] = "dropped"
            row[key] = None
            if stage in COMPARED_STAGES:
                row.update({name: second.get(name) for name in COMPARE_FIGURES})
        elif again is not None and again["cause"] == first["cause"]:
            check["outcome"] = "kept"
            first["reason"] += f"; confirmed at the {_size_text(SECOND, seed + 1)}" + (
                f" with ties broken ({', '.join(f'{k}={v}' for k, v in tie_free.items())})"
                if tie_free
                else ""
            )
        else:
            check["outcome"] = "unconfirmed"
            second_said = check["second"].get("error") or (again or {}).get("reason")
            row[key] = dict(first, cause=Cause.HARNESS.value, unconfirmed=True,
                            reason=f"{first['reason']}; not confirmed at the {_size_text(SECOND, seed + 1)} "
                                   f"({second_said}): not blamed on anyone")  # fmt: skip
        row.setdefault("artifact_check", {})[stage] = check
    _first_failure_again(row)


def _first_failure_again(row: dict) -> None:
    """``stage`` / ``error`` name the first failure still standing."""
    standing = [row[key] for key in STAGE_KEYS.values() if row.get(key)]
    row["stage"] = standing[0]["stage"] if standing else None
    row["error"] = standing[0]["error"] if standing else None
    if not standing:
        row.pop("traceback_tail", None)


def dropped_note(row: dict, stage: str) -> str | None:
    """The line a stage's reason carries when the guard dropped its first failure as an artifact."""
    check = (row.get("artifact_check") or {}).get(stage)
    if not check or check.get("outcome") != "dropped":
        return None
    second = check["second"]
    broken = second.get("ties_broken") or {}
    how = f" with ties broken ({', '.join(f'{k}={v}' for k, v in broken.items())})" if broken else ""
    return (f"the first tiny size failed ({check['first']['failure']}), which did not survive a second "
            f"measurement at the {second['size']}{how}: an artifact of the tiny model, not blamed")  # fmt: skip
