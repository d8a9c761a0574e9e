"""Whom a failing compiled stage blames (``attribute_failure``).

``transformers`` when uncompiled CPU code already fails, ``simulator`` when the stage passes under Dynamo's plain
``eager`` backend and with the AOT graphs run stride-agnostically (on the neuron stand-in: compiled on CPU tensors,
then stride-agnostically on CPU tensors), or fails under PyTorch's own ``aot_eager`` on CPU too (PyTorch's CPU
kernels on the AOT graph, which a device compiles instead), ``device`` otherwise; a TorchNeuron rule's rejection is the device's at once. The confirmation reruns keep their findings and compiled code out of the row.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from compat_matrix.errors import first_error_line
from compat_matrix.schema import Cause
from standin import sim_backend


def _root_error(error: BaseException) -> BaseException:
    while error.__cause__ is not None and error.__cause__ is not error:
        error = error.__cause__
    return error


def _passes(fn: Callable[[], Any]) -> tuple[bool, str | None]:
    """Run a confirmation probe; its findings and compiled code never reach the row."""
    with sim_backend.findings_apart():
        try:
            fn()
            return True, None
        except Exception as error:
            return False, first_error_line(error)


def attribute_failure(
    error: BaseException,
    rerun: Callable[[str | None], None],
    simulated: bool = True,
    uncompiled_on: str = "CPU",
    standin: bool = False,
) -> tuple[Cause, str]:
    """Whom a failing compiled stage blames. ``rerun(backend, on_host=False)`` repeats the stage on a fresh tiny
    model with that Dynamo backend (None: uncompiled, on ``uncompiled_on``; ``on_host``: on CPU tensors) and
    raises as the stage did. On the real device (``simulated`` false) there is no simulator to blame. On the
    neuron ``standin``, a stage that passes eagerly there and compiled on CPU tensors failed only where the
    stand-in's device differs from a trn2's: not blamed on the device."""
    root = _root_error(error)
    if isinstance(root, sim_backend.DynamicShapeRejected):
        return Cause.DEVICE, f"rejected by a TorchNeuron rule: {first_error_line(root)}"
    eager_ok, eager_error = _passes(lambda: rerun("eager"))
    if not eager_ok:
        uncompiled_ok, uncompiled_error = _passes(lambda: rerun(None))
        # Uncompiled on a device: the libraries are blamed only where CPU fails too.
        if not uncompiled_ok and uncompiled_on != "CPU" and _passes(lambda: rerun(None, on_host=True))[0]:
            if standin:
                return Cause.SIMULATOR, (
                    f"already fails uncompiled on {uncompiled_on} ({uncompiled_error}) and passes uncompiled on "
                    "CPU: the stand-in's own kernels or a neuron code path of the libraries, not measured"
                )
            return Cause.DEVICE, f"fails uncompiled on {uncompiled_on} ({uncompiled_error}), passes on CPU"
        if not uncompiled_ok:
            return Cause.TRANSFORMERS, f"already fails uncompiled on {uncompiled_on} ({uncompiled_error})"
        return Cause.DEVICE, f"{first_error_line(error)} (also under Dynamo's eager backend: {eager_error})"
    if standin and _passes(lambda: rerun(sim_backend.BACKEND_NAME, on_host=True))[0]:
        return Cause.SIMULATOR, (
            f"{first_error_line(error)}: passes under Dynamo's eager backend on the stand-in and compiled on CPU "
            "tensors, so only AOT autograd over the stand-in's device tensors fails (a stand-in limit)"
        )
    # On the stand-in the strided-execution check runs on CPU tensors: over the stand-in's tensors it would
    # repeat a failure of the stand-in's own.
    stride_ok = (
        simulated and _passes(lambda: rerun(sim_backend.STRIDE_AGNOSTIC_BACKEND_NAME, on_host=standin))[0]
    )
    if stride_ok:
        return Cause.SIMULATOR, (
            f"{first_error_line(error)}: passes under Dynamo's eager backend and with the AOT graphs run "
            "stride-agnostically, so only the simulator's strided CPU execution fails"
        )
    # PyTorch's own AOT path on CPU: where it fails too, the AOT graph fails under PyTorch's CPU kernels, which
    # the simulator runs it with and a device does not (neuronx-cc compiles the graph).
    if simulated and not _passes(lambda: rerun("aot_eager", on_host=standin))[0]:
        return Cause.SIMULATOR, (
            f"{first_error_line(error)}: fails under PyTorch's own aot_eager backend on CPU too (Dynamo's eager "
            "backend passes), so PyTorch's CPU kernels fail on the AOT graph, as the simulator runs it; a device "
            "compiles that graph instead: not measured"
        )
    return Cause.DEVICE, f"{first_error_line(error)} (after AOT autograd; Dynamo's eager backend passes)"
