"""Severity from the device's own rule.

``neuron_rules.json`` says which findings in a compiled graph make the device raise (``on_device: raises``):
an op outside aten/prims such as Transformers' ``transformers::grouped_mm_fallback``, a data-dependent op, a
complex or FNUZ float8 tensor. On the device such a graph fails to compile, and with
TORCH_NEURONX_DISABLE_FALLBACK_EXECUTION=1 (the default) the step raises. So a stage whose compiled graph holds
one fails on the device, even though the simulator ran it on CPU.

Unless the code path users take avoids it: Transformers takes ``grouped_mm_fallback`` only because it refuses
``grouped_mm`` under Dynamo for weights that are not bfloat16. Each alternative a user can switch to with one
line (``experts_implementation="batched_mm"``, bfloat16 weights) is measured: the stage is run again on a
fresh model on that path, and the row keeps what its graphs held. The first alternative whose graphs hold no
raising op and whose step runs is the row's ``avoided_by``; the stage is then a caveat, not a failure.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from compat_matrix.errors import first_error_line
from compat_matrix.schema import Cause
from standin import sim_backend

# Loss differences up to this much count as "the same loss" on an alternative path in the same dtype.
SAME_LOSS = 1e-5


@dataclass(frozen=True)
class CodePath:
    name: str
    change: str  # the one line a user changes
    dtype: str | None = None  # the dtype this path runs in (None: the run's)
    experts_implementation: str | None = None


EXPERTS_BATCHED_MM = CodePath(
    "experts_implementation=batched_mm",
    'AutoModelForCausalLM.from_pretrained(..., experts_implementation="batched_mm")',
    experts_implementation="batched_mm",
)
BFLOAT16 = CodePath(
    "bfloat16", "AutoModelForCausalLM.from_pretrained(..., dtype=torch.bfloat16)", dtype="bfloat16"
)


def applicable_code_paths(model: Any, dtype: str) -> list[CodePath]:
    """The alternatives worth measuring for this model, plain ATen first (batched_mm), then bfloat16."""
    paths = []
    experts = getattr(model, "get_experts_implementation", None)
    if callable(experts) and any(value not in (None, "batched_mm") for value in experts().values()):
        paths.append(EXPERTS_BATCHED_MM)
    if dtype != "bfloat16":
        paths.append(BFLOAT16)
    return paths


def measure_code_paths(paths: list[CodePath], run_stage: Callable[[CodePath], dict]) -> list[dict[str, Any]]:
    """Run the stage on each path, apart from the row's findings; ``run_stage`` returns extra figures (the
    first step's loss) and raises as the stage would."""
    results = []
    for path in paths:
        with sim_backend.findings_apart() as findings:
            try:
                figures, error = run_stage(path), None
            except Exception as failure:  # noqa: BLE001  (the outcome of this path, recorded)
                figures, error = {}, first_error_line(failure)
            results.append(
                {
                    "path": path.name,
                    "change": path.change,
                    "runs": error is None,
                    "error": error,
                    "raising_ops": sim_backend.raising_findings(findings.as_list()),
                    "lowering_unverified_ops": sim_backend.lowering_unverified(findings.compiled_ops),
                    **figures,
                }
            )
    return results


def avoiding_path(results: list[dict[str, Any]]) -> dict[str, Any] | None:
    return next((result for result in results if result["runs"] and not result["raising_ops"]), None)


def _ops(findings: list[str]) -> str:
    return ", ".join(sorted({finding.split(": ", 1)[1].split(" (")[0] for finding in findings}))


def _rules(findings: list[str]) -> str:
    return ", ".join(sorted({finding.split(":", 1)[0] for finding in findings}))


def describe_path(result: dict[str, Any]) -> str:
    """What a measured alternative showed, in a few words."""
    if not result["runs"]:
        return f"{result['change']}: fails ({result['error']})"
    parts = [f"still holds {_ops(result['raising_ops'])}" if result["raising_ops"] else "no op that raises"]
    difference = result.get("loss_difference")
    if difference is not None:
        parts.append("the same first-step loss" if difference <= SAME_LOSS else
                     f"first-step loss differs by {difference:.2g}")  # fmt: skip
    if result["lowering_unverified_ops"]:
        parts.append(f"lowering to check on a trn2: {', '.join(result['lowering_unverified_ops'])}")
    return f"{result['change']}: {'; '.join(parts)}"


def stage_judgement(
    stage: str, raising: list[str], results: list[dict[str, Any]], dtype: str
) -> dict[str, Any]:
    """The stage's outcome under the device rule: ``failure`` (a stage failure blamed on the device) or
    ``avoided_by`` and a caveat line."""
    where = f"compiled {({'train': 'training', 'forward': 'forward'}).get(stage, 'generation')} graph"
    held = (
        f"in {dtype} the {where} holds {_ops(raising)}, which the device raises on (rule {_rules(raising)})"
    )
    avoiding = avoiding_path(results)
    if avoiding is not None:
        return {"avoided_by": avoiding["change"],
                "caveat": f"{held}; measured on another code path: {describe_path(avoiding)}"}  # fmt: skip
    tried = "; ".join(describe_path(result) for result in results) or "no alternative code path applies"
    error = f"DeviceRuleRaises: the {where} holds {_ops(raising)} (rule {_rules(raising)})"
    reason = f"{held}, and no measured code path avoids it ({tried})"
    return {"failure": {"stage": stage, "error": error, "cause": Cause.DEVICE.value, "reason": reason,
                        "by_rule": sorted({finding.split(":", 1)[0] for finding in raising})}}  # fmt: skip
