import json
import re

import pytest
import torch

from compat_matrix import sim_backend
from compat_matrix.probes import CompileStats, configure_dynamo, ops_named_in_graph_breaks


@pytest.fixture(autouse=True)
def fresh_dynamo(settings):
    configure_dynamo(settings)


def test_every_rule_cites_a_documentation_source():
    rules = json.loads(sim_backend.RULES_PATH.read_text())["rules"]
    assert {rule["kind"] for rule in rules} >= {"symbolic-shape", "dtype", "op", "signature"}
    for rule in rules:
        assert rule["sources"] and all(re.match(r"https://\S+", url) for url in rule["sources"]), rule["id"]


def test_dynamic_shapes_are_rejected_like_on_neuron():
    compiled = torch.compile(lambda x: x * 2, backend=sim_backend.BACKEND_NAME, dynamic=True)
    with pytest.raises(Exception, match="static-shapes"):
        compiled(torch.randn(5))


def test_float64_and_complex_are_reported_and_outputs_stay_real():
    def fn(x):
        return (x.double() * 2).sum() + torch.view_as_complex(torch.stack([x, x], -1)).abs().sum()

    x = torch.randn(4)
    out = torch.compile(fn, backend=sim_backend.BACKEND_NAME, dynamic=False)(x)
    assert torch.allclose(out, fn(x))
    findings = sim_backend.STATE.as_list()
    assert any(f.startswith("float64: ") for f in findings)
    assert any(f.startswith("complex: ") for f in findings)


def test_each_new_input_shape_is_one_more_compilation():
    stats = CompileStats()
    compiled = torch.compile(lambda x: x + 1, backend=sim_backend.BACKEND_NAME, dynamic=False)
    for length in (3, 3, 5, 7):
        compiled(torch.randn(length))
    assert len(stats.compilations()) == 3
    assert len(stats.recompile_reasons()) == 2


def test_data_dependent_ops_break_the_graph_and_are_reported():
    stats = CompileStats()
    compiled = torch.compile(lambda x: (x * 2).nonzero(), backend=sim_backend.BACKEND_NAME, dynamic=False)
    assert compiled(torch.tensor([0.0, 1.0, 2.0])).tolist() == [[1], [2]]
    breaks = stats.graph_breaks()
    assert sum(breaks.values()) >= 1
    assert ops_named_in_graph_breaks(list(breaks)) == ["data-dependent-shape: aten.nonzero (graph break)"]
