"""``neuron-sim``: a registered TorchDynamo backend that applies the documented TorchNeuron rules on CPU.

It inspects every graph it is handed (Dynamo's FX graph for symbolic sizes, then the ATen graphs AOT autograd
produces, as TorchNeuron compiles after AOT autograd), rejects what the device rejects, records what the
device cannot run, and then runs the graph on CPU so outputs stay real. The rules are data
(``neuron_rules.json``), each with its documentation source.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

import torch
from torch._dynamo import register_backend
from torch._dynamo.backends.common import aot_autograd
from torch.fx.experimental.symbolic_shapes import free_symbols, free_unbacked_symbols

BACKEND_NAME = "neuron-sim"
RULES_PATH = Path(__file__).with_name("neuron_rules.json")


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
    findings: dict[str, set[str]] = field(default_factory=dict)

    def add(self, rule_id: str, detail: str) -> None:
        self.findings.setdefault(rule_id, set()).add(detail)

    def as_list(self) -> list[str]:
        return sorted(f"{rule}: {detail}" for rule, details in self.findings.items() for detail in details)


STATE = SimFindings()


def reset() -> None:
    global STATE
    STATE = SimFindings()


def _rules(kind: str) -> list[dict]:
    return [rule for rule in load_rules() if rule["kind"] == kind]


def _op_rule_index() -> dict[str, str]:
    return {op: rule["id"] for rule in _rules("op") for op in rule["ops"]}


def _dtype_rule_index() -> dict[str, str]:
    return {dtype: rule["id"] for rule in _rules("dtype") for dtype in rule["dtypes"]}


def _op_names(target: object) -> tuple[str, ...]:
    """``aten.nonzero.default`` -> ("aten.nonzero.default", "aten.nonzero")."""
    name = str(target)
    packet = name.rsplit(".", 1)[0] if name.count(".") >= 2 else name
    return (name, packet)


def check_op_and_dtypes(op: object, values: Iterable[object], where: str) -> None:
    """Apply the op and dtype rules to one ATen call (from a graph or from eager dispatch)."""
    op_rules, dtype_rules = _op_rule_index(), _dtype_rule_index()
    for name in _op_names(op):
        if name in op_rules:
            STATE.add(op_rules[name], f"{_op_names(op)[1]} ({where})")
            break
    for value in values:
        if isinstance(value, torch.Tensor) and str(value.dtype) in dtype_rules:
            STATE.add(dtype_rules[str(value.dtype)], f"{_op_names(op)[1]} {value.dtype} ({where})")


def _reject_symbolic_sizes(gm: torch.fx.GraphModule) -> None:
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
            value = node.meta.get("val")
            values = value if isinstance(value, list | tuple) else [value]
            check_op_and_dtypes(node.target, values, "compiled graph")
    return gm.forward


@register_backend(name=BACKEND_NAME)
def neuron_sim(gm: torch.fx.GraphModule, example_inputs: list) -> object:
    STATE.graphs += 1
    _reject_symbolic_sizes(gm)
    compile_with_aot = aot_autograd(fw_compiler=_inspect_aten_graph, bw_compiler=_inspect_aten_graph)
    return compile_with_aot(gm, example_inputs)
