"""The ``neuron`` Dynamo backend of the stand-in: the neuron-sim rules (``sim_backend``) on the AOT graphs of
stand-in tensors, with TorchNeuron's compile accounting.

Like TorchNeuron's backend (its torch.compile backend reference) it rejects symbolic sizes (``dynamic=True``,
``mark_dynamic``) and recompiles per shape where shapes vary between calls under the default ``dynamic=None``;
takes ``mode`` (only "default" applies: another logs a warning and compiles as the default) and ``options`` (a
dict or None); compiles after AOT autograd, counts each backend graph in ``counters["neuron"]["compiled_graphs"]``
(``graphs_with_collectives`` too) and records one ``NeuronCompilationMetrics`` per graph for
``get_dynamo_metrics()``. The graphs then run as they are, op by op on the device: no Neuron compiler runs, so
compile times are the stand-in's own.
"""

from __future__ import annotations

import itertools
import logging
import threading
import time
from dataclasses import dataclass

import torch

from standin import sim_backend

BACKEND_NAME = "neuron"
MODES = (None, "default")  # the modes that apply; others fall back to the default
_log = logging.getLogger(__name__)
_lock = threading.Lock()
_metrics: list[NeuronCompilationMetrics] = []
_graph_numbers = itertools.count()


@dataclass
class NeuronCompilationMetrics:
    """Per-graph compilation metrics, with the fields of torch_neuronx's own (times in microseconds)."""

    graph_id: str
    graph_name: str = ""
    model_name: str = ""
    has_collectives: bool = False
    graph_node_count: int = 0
    timestamp: str = ""
    torch_neuronx_fx_passes_us: int = 0
    torch_neuronx_lower_us: int = 0
    torch_neuronx_compile_us: int = 0


def get_dynamo_metrics() -> list[NeuronCompilationMetrics]:
    """Every backend graph compiled since the last reset, in compile order."""
    with _lock:
        return list(_metrics)


def reset_dynamo_metrics() -> None:
    from torch._dynamo.utils import counters

    with _lock:
        _metrics.clear()
        counters["neuron"].clear()


def _has_collectives(gm: torch.fx.GraphModule) -> bool:
    return any(
        node.op == "call_function" and getattr(node.target, "namespace", None) in ("_c10d_functional", "c10d")
        for node in gm.graph.nodes
    )


def _recording_compiler(model_name: str, graph_type: str):
    """The AOT forward or backward compiler: the neuron-sim checks, then the graph's metrics."""

    def compile_aten_graph(gm: torch.fx.GraphModule, example_inputs: list):
        from torch._dynamo.utils import counters

        start = time.perf_counter_ns()
        compiled = sim_backend._inspect_aten_graph(gm, example_inputs)
        elapsed_us = (time.perf_counter_ns() - start) // 1000
        nth = next(_graph_numbers)
        collectives = _has_collectives(gm)
        metrics = NeuronCompilationMetrics(
            graph_id=f"standin-{nth}",
            graph_name=f"{model_name}_{graph_type}_{nth}",
            model_name=model_name,
            has_collectives=collectives,
            graph_node_count=len(gm.graph.nodes),
            timestamp=str(nth),
            torch_neuronx_fx_passes_us=elapsed_us,
        )
        with _lock:
            _metrics.append(metrics)
            counters["neuron"]["compiled_graphs"] += 1
            if collectives:
                counters["neuron"]["graphs_with_collectives"] += 1
        return compiled

    return compile_aten_graph


def neuron(
    gm: torch.fx.GraphModule, example_inputs: list, mode: str | None = None, options: dict | None = None
):
    """``torch.compile(backend="neuron")`` on the stand-in (torch.compile hands it ``mode`` and ``options``)."""
    from torch._guards import CompileContext

    if mode not in MODES:
        _log.warning("torch.compile(backend=%r): mode %r has no effect; compiling with the default mode",
                     BACKEND_NAME, mode)  # fmt: skip
    if options is not None and not isinstance(options, dict):
        raise TypeError(
            f"torch.compile(backend={BACKEND_NAME!r}): options must be a dict or None, not {options!r}"
        )

    compile_id = CompileContext.current_compile_id()
    model_name = (
        f"{gm.__class__.__name__}_{compile_id}".replace("/", "_") if compile_id else gm.__class__.__name__
    )
    return sim_backend._compile(gm, example_inputs, _recording_compiler(model_name, "forward"),
                                _recording_compiler(model_name, "backward"))  # fmt: skip


def run_rng_state_ops_on_the_device() -> None:
    """A compiled graph that recomputes random ops (activation checkpointing under ``torch.compile``) holds
    PyTorch's ``run_and_save_rng_state`` / ``run_with_rng_state``, which pick the device's generator by device
    type and know only PyTorch's own devices. TorchNeuron runs such a graph compiled; the stand-in runs it op by
    op, so it gives the two ops the device's generator, as PyTorch does for CUDA."""
    from torch._C import DispatchKey
    from torch._prims import rng_prims

    save, replay = rng_prims.run_and_save_rng_state, rng_prims.run_with_rng_state
    save_elsewhere = save.py_kernels[DispatchKey.BackendSelect]
    replay_elsewhere = replay.py_kernels[DispatchKey.BackendSelect]

    def save_state(op, *args, **kwargs):
        if rng_prims.get_device(args, kwargs) != BACKEND_NAME:
            return save_elsewhere(op, *args, **kwargs)
        return torch.neuron.get_rng_state(), op(*args, **kwargs)

    def run_with_state(rng_state, op, *args, **kwargs):
        if rng_prims.get_device(args, kwargs) != BACKEND_NAME:
            return replay_elsewhere(rng_state, op, *args, **kwargs)
        current = torch.neuron.get_rng_state()
        torch.neuron.set_rng_state(rng_state.cpu())
        try:
            return op(*args, **kwargs)
        finally:
            torch.neuron.set_rng_state(current)

    for operator, kernel in ((save, save_state), (replay, run_with_state)):
        operator.py_kernels[DispatchKey.BackendSelect] = kernel
        operator._dispatch_cache.clear()


def register() -> None:
    """The device's compile settings: applied when Dynamo is imported (``standin.activate``), so a process that
    never compiles does not import it."""
    from torch._dynamo import config, register_backend, trace_rules
    from torch._dynamo.backends.registry import set_default_backend

    # Shapes that vary between calls under the default dynamic=None recompile per shape, as on TorchNeuron: Dynamo
    # would otherwise retrace them with symbolic sizes, which the backend rejects. dynamic=True and mark_dynamic
    # still make symbolic sizes.
    config.automatic_dynamic_shapes = False
    register_backend(neuron, name=BACKEND_NAME)
    # torch.compile without a backend compiles with this one: TorchNeuron auto-selects it on a Neuron device (its
    # torch.compile backend reference, "backend").
    set_default_backend(BACKEND_NAME)
    # The stand-in is the device, not user code: Dynamo never traces its frames (it would, for the dispatch
    # that runs eagerly between the graphs of a compiled function that breaks).
    trace_rules.add("standin")
