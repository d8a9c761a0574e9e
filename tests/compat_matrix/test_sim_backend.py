import json
import re

import pytest
import torch
from torch.utils.checkpoint import checkpoint

from compat_matrix.compile_stats import CompileStats, ops_named_in_graph_breaks
from compat_matrix.probes import configure_dynamo
from standin import sim_backend


@pytest.fixture(autouse=True)
def fresh_dynamo(settings):
    configure_dynamo(settings)


def test_every_rule_cites_a_documentation_source():
    rules = json.loads(sim_backend.RULES_PATH.read_text())["rules"]
    kinds = {
        "symbolic-shape",
        "dtype",
        "op",
        "signature",
        "operator-coverage",
        "lowering-unverified",
        "lowered-namespace",
    }
    assert {rule["kind"] for rule in rules} >= kinds
    for rule in rules:
        assert rule["sources"] and all(re.match(r"https://\S+", url) for url in rule["sources"]), rule["id"]
        assert rule["action"] in ("reject", "report", "count", "note", "lower"), rule["id"]
        assert rule.get("eager_action", "report") in ("report", "cpu-fallback"), rule["id"]
        # What the device does with it decides a row's severity: every rule says so.
        assert rule["on_device"] in ("raises", "caveat", "runs", "unknown"), rule["id"]


def test_only_compiled_graph_findings_of_raising_rules_raise():
    findings = [
        "operator-coverage: transformers.grouped_mm_fallback (compiled graph)",
        "data-dependent-shape: aten.nonzero (graph break)",  # runs eagerly between graphs
        "float64: aten.mul torch.float64 (compiled graph)",  # not documented either way: unknown
        "complex: aten.mul torch.complex64 (eager)",
    ]
    assert sim_backend.raising_findings(findings) == [findings[0]]
    assert sim_backend.lowering_unverified({"aten.topk", "aten.mm", "aten.roll"}) == [
        "aten.roll",
        "aten.topk",
    ]


def test_dynamic_shapes_are_rejected_like_on_neuron():
    compiled = torch.compile(lambda x: x * 2, backend=sim_backend.BACKEND_NAME, dynamic=True)
    with pytest.raises(Exception, match="static-shapes"):
        compiled(torch.randn(5))


def float64_and_complex(x):
    return (x.double() * 2).sum() + torch.view_as_complex(torch.stack([x, x], -1)).abs().sum()


def test_float64_is_reported_and_complex_is_decomposed_on_torch_2_13(monkeypatch):
    monkeypatch.delenv("TORCH_NEURONX_COMPLEX_DECOMPOSE", raising=False)
    x = torch.randn(4)
    out = torch.compile(float64_and_complex, backend=sim_backend.BACKEND_NAME, dynamic=False)(x)
    assert torch.allclose(out, float64_and_complex(x))  # outputs stay real
    findings = sim_backend.STATE.as_list()
    assert any(f.startswith("float64: ") for f in findings)
    # PyTorch >= 2.13: TorchNeuron decomposes complex ops by default, so they are information only.
    assert not any(f.startswith("complex: ") for f in findings)
    assert any(d.startswith("complex: ") for d in sim_backend.STATE.decomposed)


@pytest.mark.parametrize(
    ("torch_version", "env", "reported"),
    [("2.13.0+cpu", "0", True), ("2.13.0", "false", True), ("2.12.1", None, True), ("2.12.1", "1", False),
     ("2.14.0", None, False)],
)  # fmt: skip
def test_complex_is_reported_when_torchneuron_does_not_decompose_it(
    monkeypatch, torch_version, env, reported
):
    monkeypatch.setattr(torch, "__version__", torch_version)
    if env is None:
        monkeypatch.delenv("TORCH_NEURONX_COMPLEX_DECOMPOSE", raising=False)
    else:
        monkeypatch.setenv("TORCH_NEURONX_COMPLEX_DECOMPOSE", env)
    rule = next(rule for rule in sim_backend.load_rules() if rule["id"] == "complex")
    assert sim_backend.decomposed_by_torchneuron(rule) is not reported


def test_eager_data_dependent_ops_are_cpu_fallbacks_not_findings():
    from compat_matrix.compile_stats import EagerOpSignatures

    with EagerOpSignatures(set()):
        x = torch.tensor([0.0, 1.0, 2.0])
        x.nonzero()
        x.sum().item()
    assert sim_backend.STATE.cpu_fallbacks >= {"aten.nonzero", "aten._local_scalar_dense"}
    assert sim_backend.STATE.as_list() == []


def test_opaque_custom_ops_in_a_compiled_graph_are_reported():
    @torch.library.custom_op("neuron_compat_test::double", mutates_args=())
    def double(x: torch.Tensor) -> torch.Tensor:
        return x * 2

    double.register_fake(lambda x: torch.empty_like(x))
    out = torch.compile(lambda x: double(x) + 1, backend=sim_backend.BACKEND_NAME, dynamic=False)(
        torch.ones(3)
    )
    assert out.tolist() == [3.0, 3.0, 3.0]
    assert sim_backend.STATE.as_list() == ["operator-coverage: neuron_compat_test.double (compiled graph)"]


def test_functional_collectives_are_lowered_and_checkpointing_rng_ops_are_unverified(tmp_path):
    """The ops of a compiled TP step (TorchNeuron documents them as lowered) and of a checkpointed dropout (its
    RNG higher-order ops, documented neither way): none is an opaque custom op."""
    import torch.distributed as dist
    import torch.distributed._functional_collectives as funcol

    dist.init_process_group("gloo", init_method=f"file://{tmp_path}/store", rank=0, world_size=1)
    try:
        out = torch.compile(
            lambda x: funcol.all_reduce(x * 2, "sum", dist.group.WORLD) + 1,
            backend=sim_backend.BACKEND_NAME,
            dynamic=False,
        )(torch.ones(3))
    finally:
        dist.destroy_process_group()
    assert out.tolist() == [3.0, 3.0, 3.0]
    assert {"_c10d_functional.all_reduce", "_c10d_functional.wait_tensor"} <= sim_backend.STATE.compiled_ops
    assert sim_backend.STATE.as_list() == []

    linear = torch.nn.Linear(4, 4)
    checkpointed = torch.compile(
        lambda x: checkpoint(
            lambda y: torch.nn.functional.dropout(linear(y), 0.5), x, use_reentrant=False
        ).sum(),
        backend=sim_backend.BACKEND_NAME,
        dynamic=False,
    )
    checkpointed(torch.randn(2, 4, requires_grad=True)).backward()
    rng_ops = ["higher_order.run_and_save_rng_state", "higher_order.run_with_rng_state"]
    assert sim_backend.lowering_unverified(sim_backend.STATE.compiled_ops) == rng_ops
    assert sim_backend.STATE.as_list() == []


def view_graph() -> torch.fx.GraphModule:
    graph = torch.fx.Graph()
    x = graph.placeholder("x")
    graph.output(graph.call_function(torch.ops.aten.view.default, (x, [-1])))
    return torch.fx.GraphModule({}, graph)


def test_stride_agnostic_execution_runs_a_view_that_real_strides_refuse():
    """The simulator runs AOT graphs with real strides; a view of a transposed tensor raises there, while
    the Neuron compiler (StableHLO has no strides) would lower it as a reshape."""
    transposed = torch.arange(6.0).reshape(2, 3).t()
    strict = sim_backend._inspect_aten_graph(view_graph(), [transposed])
    with pytest.raises(RuntimeError, match="view size is not compatible"):
        strict(transposed)
    agnostic = sim_backend._inspect_stride_agnostic(view_graph(), [transposed])
    assert agnostic(transposed).tolist() == transposed.reshape(-1).tolist()


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


def test_a_vae_decoders_group_norm_runs_where_pytorchs_own_aot_path_refuses_its_input():
    """pytorch/pytorch#124181 in torch 2.13: AOT autograd hands native_group_norm a non-contiguous input that the
    CPU kernel refuses; a device lowers the graph without strides, so the simulator makes that input contiguous."""
    from diffusers import AutoencoderKL

    torch.manual_seed(0)
    vae = AutoencoderKL(down_block_types=("DownEncoderBlock2D",) * 2, up_block_types=("UpDecoderBlock2D",) * 2,
                        block_out_channels=(8, 8), norm_num_groups=4, latent_channels=4).eval()  # fmt: skip
    latents = torch.randn(1, 4, 8, 8)
    with torch.no_grad():
        reference = vae.decode(latents).sample
        with pytest.raises(Exception, match=r"is_contiguous\(memory_format\)"):  # gone once torch has #186414
            torch.compile(vae.decode, backend="aot_eager")(latents)
        torch._dynamo.reset()
        decoded = torch.compile(vae.decode, backend=sim_backend.BACKEND_NAME)(latents).sample
    assert torch.allclose(decoded, reference, atol=1e-5)
