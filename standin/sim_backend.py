"""``neuron-sim``: a registered TorchDynamo backend that applies the documented TorchNeuron rules on CPU (or on
the native device given by ``--sim-device``).

It inspects every graph it is handed (Dynamo's FX graph for symbolic sizes, then the ATen graphs AOT autograd
produces, as TorchNeuron compiles after AOT autograd), rejects what the device rejects, records what the
device cannot run, and then runs the graph as it is, so outputs stay real. The rules are data
(``neuron_rules.json``), each with the documentation page it encodes.

``neuron-sim-stride-agnostic`` is the same backend with every ``view`` in the AOT graphs run as ``reshape``:
the Neuron compiler lowers graphs to StableHLO, which has no strides, while the CPU executes AOT graphs with
real strides (a backward ``view`` of a non-contiguous tensor raises there, pytorch/pytorch#120035). A stage
that fails under ``neuron-sim`` and passes under this variant fails only in the simulator.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

import torch

BACKEND_NAME = "neuron-sim"
STRIDE_AGNOSTIC_BACKEND_NAME = "neuron-sim-stride-agnostic"
RULES_PATH = Path(__file__).with_name("neuron_rules.json")
# Namespaces whose ops the Neuron backend lowers (with those of the 'lowered-namespace' rules); anything else
# in a compiled graph is an opaque custom op.
LOWERED_NAMESPACES = frozenset({"aten", "prims"})
# ATen ops whose result depends on strides, and their stride-agnostic equivalents.
STRIDE_AGNOSTIC = {
    torch.ops.aten.view.default: torch.ops.aten.reshape.default,
    torch.ops.aten._unsafe_view.default: torch.ops.aten.reshape.default,
}


class DynamicShapeRejected(RuntimeError):
    """Raised, as TorchNeuron does, for a graph whose sizes are symbolic."""


@cache
def load_rules() -> list[dict]:
    return json.loads(RULES_PATH.read_text())["rules"]


@dataclass
class SimFindings:
    """What the backend saw since the last ``reset``: shared module state, because Transformers deep-copies
    its ``CompileConfig`` (a stateful callable backend would count into a copy)."""

    graphs: int = 0
    aten_graphs: int = 0
    findings: dict[str, set[str]] = field(default_factory=dict)  # reported: the row's unsupported_ops
    cpu_fallbacks: set[str] = field(default_factory=set)  # eager ops TorchNeuron runs on CPU (info)
    decomposed: set[str] = field(default_factory=set)  # ops TorchNeuron decomposes before lowering (info)
    compiled_ops: set[str] = field(default_factory=set)  # every op of the compiled (ATen) graphs

    def add(self, rule_id: str, detail: str) -> None:
        self.findings.setdefault(rule_id, set()).add(detail)

    def merge(self, other: SimFindings) -> None:
        """Fold the findings of another stretch of probing into these."""
        self.graphs += other.graphs
        self.aten_graphs += other.aten_graphs
        for rule_id, details in other.findings.items():
            self.findings.setdefault(rule_id, set()).update(details)
        self.cpu_fallbacks |= other.cpu_fallbacks
        self.decomposed |= other.decomposed
        self.compiled_ops |= other.compiled_ops

    def as_list(self) -> list[str]:
        return sorted(f"{rule}: {detail}" for rule, details in self.findings.items() for detail in details)


STATE = SimFindings()


def reset() -> None:
    global STATE
    STATE = SimFindings()


@contextmanager
def findings_apart() -> Iterator[SimFindings]:
    """Probe something whose findings must not reach the row (a confirmation, another code path, a second
    tiny size): fresh findings and a fresh Dynamo cache inside, the row's findings restored after."""
    global STATE
    saved = STATE
    STATE = SimFindings()
    torch._dynamo.reset()
    try:
        yield STATE
    finally:
        STATE = saved
        torch._dynamo.reset()


def _rules(kind: str) -> list[dict]:
    return [rule for rule in load_rules() if rule["kind"] == kind]


def raising_findings(findings: Iterable[str]) -> list[str]:
    """The findings (``rule-id: detail``) in a compiled graph whose rule says the device raises on them: with
    TORCH_NEURONX_DISABLE_FALLBACK_EXECUTION=1 (the default) a graph that fails to compile raises."""
    effects = {rule["id"]: rule.get("on_device") for rule in load_rules()}
    return sorted(
        finding
        for finding in findings
        if effects.get(finding.split(":", 1)[0]) == "raises" and finding.endswith("(compiled graph)")
    )


def lowering_unverified(ops: Iterable[str]) -> list[str]:
    """The compiled-graph ops whose lowering by neuronx-cc only a device shows (``lowering-unverified`` rule)."""
    listed = {op for rule in _rules("lowering-unverified") for op in rule["ops"]}
    return sorted(op for op in ops if op in listed)


def _op_rule_index() -> dict[str, dict]:
    return {op: rule for rule in _rules("op") for op in rule["ops"]}


def _dtype_rule_index() -> dict[str, dict]:
    return {dtype: rule for rule in _rules("dtype") for dtype in rule["dtypes"]}


def _version_tuple(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in version.split("+")[0].split(".")[:2] if part.isdigit())


def decomposed_by_torchneuron(rule: dict) -> bool:
    """True when the rule's ``decomposed_when`` holds: TorchNeuron then decomposes these ops before lowering
    (for complex: PyTorch >= 2.13 unless TORCH_NEURONX_COMPLEX_DECOMPOSE turns it off)."""
    condition = rule.get("decomposed_when")
    if not condition:
        return False
    if _version_tuple(torch.__version__) < _version_tuple(condition["torch_at_least"]):
        return os.environ.get(condition["env"], "").strip().lower() in ("1", "true")
    return os.environ.get(condition["env"], "1").strip().lower() not in ("0", "false")


def _op_names(target: object) -> tuple[str, ...]:
    """``aten.nonzero.default`` -> ("aten.nonzero.default", "aten.nonzero"); a higher-order op (which has no
    overload) -> ("higher_order.run_with_rng_state",) * 2."""
    if isinstance(target, torch._ops.HigherOrderOperator):
        name = f"{target.namespace}.{target.name()}"
        return (name, name)
    name = str(target)
    packet = name.rsplit(".", 1)[0] if name.count(".") >= 2 else name
    return (name, packet)


def check_op_and_dtypes(op: object, values: Iterable[object], where: str) -> None:
    """Apply the op and dtype rules to one ATen call (``where``: "eager" dispatch or a "compiled graph")."""
    op_rules, dtype_rules = _op_rule_index(), _dtype_rule_index()
    packet = _op_names(op)[1]
    for name in _op_names(op):
        if name in op_rules:
            rule = op_rules[name]
            action = rule.get("eager_action", rule["action"]) if where == "eager" else rule["action"]
            if action == "cpu-fallback":
                STATE.cpu_fallbacks.add(packet)
            else:
                STATE.add(rule["id"], f"{packet} ({where})")
            break
    for value in values:
        if isinstance(value, torch.Tensor) and str(value.dtype) in dtype_rules:
            rule = dtype_rules[str(value.dtype)]
            if decomposed_by_torchneuron(rule):
                STATE.decomposed.add(f"{rule['id']}: {packet}")
            else:
                STATE.add(rule["id"], f"{packet} {value.dtype} ({where})")


def check_operator_coverage(op: object) -> None:
    """An op outside the namespaces the backend lowers (a Python custom op such as Transformers'
    ``transformers::grouped_mm_fallback``) cannot be compiled for the device; the functional collectives are
    lowered, and a higher-order op listed as lowering-unverified is reported there, not here."""
    namespace = getattr(op, "namespace", None)
    lowered = LOWERED_NAMESPACES.union(*(rule["namespaces"] for rule in _rules("lowered-namespace")))
    if namespace is not None and namespace not in lowered and not lowering_unverified([_op_names(op)[1]]):
        rule = _rules("operator-coverage")[0]
        STATE.add(rule["id"], f"{_op_names(op)[1]} (compiled graph)")


def _reject_symbolic_sizes(gm: torch.fx.GraphModule) -> None:
    from torch.fx.experimental.symbolic_shapes import free_symbols, free_unbacked_symbols

    rule = _rules("symbolic-shape")[0]
    for node in gm.graph.nodes:
        value = node.meta.get("example_value", node.meta.get("val"))
        if not isinstance(value, torch.Tensor):
            continue
        backed = free_symbols(value) - free_unbacked_symbols(value)
        if backed:
            sizes = ", ".join(sorted(str(s) for s in backed))
            raise DynamicShapeRejected(
                f"neuron-sim [{rule['id']}]: {rule['message']} (node {node.name}: {sizes})"
            )


def _inspect_aten_graph(gm: torch.fx.GraphModule, example_inputs: list) -> object:
    STATE.aten_graphs += 1
    for node in gm.graph.nodes:
        if node.op == "call_function":
            STATE.compiled_ops.add(_op_names(node.target)[1])
            value = node.meta.get("val")
            values = value if isinstance(value, list | tuple) else [value]
            check_op_and_dtypes(node.target, values, "compiled graph")
            check_operator_coverage(node.target)
    _contiguous_group_norm_inputs(gm)
    return gm.forward


def _contiguous_group_norm_inputs(gm: torch.fx.GraphModule) -> None:
    """AOT autograd can hand ``native_group_norm`` a non-contiguous input, which PyTorch's CPU kernel refuses
    (``Expected X.is_contiguous(memory_format)``: every Diffusers VAE decoder, pytorch/pytorch#124181) and a device
    never sees (neuronx-cc lowers the graph without strides). The input is made contiguous first, as PyTorch's own
    fix does (pytorch/pytorch#186414, not in torch 2.13): the values are the same."""
    norms = [node for node in gm.graph.nodes if node.target is torch.ops.aten.native_group_norm.default]
    for node in norms:
        with gm.graph.inserting_before(node):
            contiguous = gm.graph.call_function(
                torch.ops.aten.clone.default, (node.args[0],), {"memory_format": torch.contiguous_format}
            )
        node.replace_input_with(node.args[0], contiguous)
    if norms:
        gm.recompile()


def _inspect_stride_agnostic(gm: torch.fx.GraphModule, example_inputs: list) -> object:
    for node in gm.graph.nodes:
        if node.op == "call_function" and node.target in STRIDE_AGNOSTIC:
            node.target = STRIDE_AGNOSTIC[node.target]
    gm.recompile()
    return _inspect_aten_graph(gm, example_inputs)


def _compile(gm: torch.fx.GraphModule, example_inputs: list, aten_compiler, bw_compiler=None) -> object:
    from torch._dynamo.backends.common import aot_autograd

    STATE.graphs += 1
    _reject_symbolic_sizes(gm)
    return aot_autograd(fw_compiler=aten_compiler, bw_compiler=bw_compiler or aten_compiler)(
        gm, example_inputs
    )


# Registered with Dynamo by name through the project's entry points (pyproject.toml, torch_dynamo_backends), as
# PyTorch documents for a backend in another package: loaded at the first torch.compile that names it, so that
# importing the rules (the stand-in device checks eager ops with them) does not import Dynamo.
def neuron_sim(gm: torch.fx.GraphModule, example_inputs: list) -> object:
    return _compile(gm, example_inputs, _inspect_aten_graph)


def neuron_sim_stride_agnostic(gm: torch.fx.GraphModule, example_inputs: list) -> object:
    return _compile(gm, example_inputs, _inspect_stride_agnostic)
