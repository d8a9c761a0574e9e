"""Every statement where legacy code survives carries its TODO (issue 32): a kept import names the uses it
waits for, a later use of a legacy name gets its own TODO, and `xm.mesh_reduce` is rewritten, not left."""

from __future__ import annotations

import torch

from migrator.engine import migrate_python
from migrator.families.leftovers.marking import legacy_statements, todos_above


def silent(code: str, original: str) -> list[int]:
    """1-based lines of the legacy statements of `code` with no TODO on them."""
    return [line + 1 for line in legacy_statements(code, original) if not todos_above(code, line)]


def test_an_import_kept_for_a_use_under_a_rule_todo_names_that_use_by_its_line_and_rule():
    source = "import torch_xla.core.xla_model as xm\n\ntotal = xm.all_gather(loss)\n"
    migrated, findings = migrate_python(source)
    lines = migrated.splitlines()
    assert lines[0].startswith(
        "# TODO(neuron-migrate): NM501 `torch_xla` stays imported only for line 5 (NM314), under its own TODO"
    )
    assert lines[0].endswith("remove this import once that statement is rewritten")
    assert lines[3].startswith("# TODO(neuron-migrate): NM314")
    assert lines[4].startswith("total = xm.all_gather")
    assert silent(migrated, source) == []
    assert migrate_python(migrated)[0] == migrated  # the line it names is where the rerun finds it
    # The owner adds code above the use: a rerun names its new line in the same TODO, not in a second one.
    moved = migrated.replace(
        "\n# TODO(neuron-migrate): NM314", "\nloss = loss.mean()\n# TODO(neuron-migrate): NM314"
    )
    again = migrate_python(moved)[0].splitlines()
    assert again[0].startswith(
        "# TODO(neuron-migrate): NM501 `torch_xla` stays imported only for line 6 (NM314)"
    )
    assert sum("stays imported" in line for line in again) == 1


def test_a_later_use_of_a_legacy_name_no_rule_marks_gets_its_own_todo():
    source = (
        "from torch_xla.distributed.fsdp import XlaFullyShardedDataParallel as FSDP\n\n\n"
        "def unwrap(model):\n"
        "    return model.module if isinstance(model, FSDP) else model\n\n\n"
        "def state(model):\n"
        "    if isinstance(model, FSDP):\n"
        "        return model.module.state_dict()\n"
        "    return model.state_dict()\n"
    )
    migrated, findings = migrate_python(source)
    use = "NM501 `FSDP` (`torch_xla.distributed.fsdp.XlaFullyShardedDataParallel`) is still used here"
    assert migrated.count(use) == 2
    assert silent(migrated, source) == []
    again, again_findings = migrate_python(migrated)
    assert again == migrated and len(again_findings) == len(findings)  # a rerun adds none and loses none


def test_a_use_of_a_name_whose_import_carries_a_rule_todo_says_it_is_the_same_decision():
    source = (
        "from optimum.neuron.utils import is_neuronx_available\n\n"
        "if is_neuronx_available():\n"
        "    print('on neuron')\n"
    )
    migrated, _ = migrate_python(source)
    use = migrated.splitlines()[migrated.splitlines().index("if is_neuronx_available():") - 1]
    assert use.startswith("# TODO(neuron-migrate): NM501 `is_neuronx_available`")
    assert "comes from an import that carries the NM901 TODO; the same decision" in use
    assert silent(migrated, source) == []


def test_a_local_variable_named_like_a_legacy_import_is_not_a_use():
    source = (
        "from neuronx_distributed.parallel_layers import layers\n\n\n"
        "def collect(model):\n"
        "    layers = []\n"
        "    layers.extend(model.modules())\n"
        "    return layers\n"
    )
    migrated, _ = migrate_python(source)
    assert migrated.count("TODO(neuron-migrate)") == 1  # the import only


def test_each_use_of_a_neuronx_distributed_layer_carries_the_todo_of_its_one_finding():
    source = (
        "from neuronx_distributed.parallel_layers import ColumnParallelLinear\n\n\n"
        "class Attention:\n"
        "    def __init__(self, hidden):\n"
        "        self.q = ColumnParallelLinear(hidden, hidden)\n"
        "        self.k = ColumnParallelLinear(hidden, hidden)\n\n\n"
        "class Head:\n"
        "    def __init__(self, hidden, vocab):\n"
        "        self.out = ColumnParallelLinear(hidden, vocab)\n"
    )
    migrated, findings = migrate_python(source)
    assert migrated.count("TODO(neuron-migrate): NM316") == 3
    (nm316,) = [f for f in findings if f.code == "NM316"]
    assert nm316.line == 6 and nm316.also == (7, 12)
    assert silent(migrated, source) == []


def test_neuronperf_is_flagged_with_what_replaces_it():
    source = "import neuronperf\n\nneuronperf.print_reports([])\n"
    migrated, findings = migrate_python(source)
    assert [f.code for f in findings] == ["NM501"]
    assert migrated.count("the Neuron SDK's benchmarking package") == 2
    assert "`neuron-migrate bench SCRIPT`" in migrated


def test_mesh_reduce_becomes_a_gather_of_every_process_value_then_the_reduction(tmp_path):
    source = (
        "import torch\n"
        "import torch_xla.core.xla_model as xm\n\n"
        "best = xm.mesh_reduce('accuracy', torch.tensor([0.5]), lambda values: max(v.item() for v in values))\n"
        "first = xm.mesh_reduce(tag='p', data={'ids': torch.arange(3)}, reduce_fn=lambda values: values[0])\n"
    )
    migrated, findings = migrate_python(source)
    assert "import torch_xla" not in migrated and "TODO" not in migrated
    assert [f.code for f in findings] == ["NM328", "NM328"]
    # One process: the list holds this process's value, copied to the CPU.
    namespace: dict = {}
    exec(compile(migrated, "migrated.py", "exec"), namespace)
    assert namespace["best"] == 0.5 and torch.equal(namespace["first"]["ids"], torch.arange(3))
    # A process group: every rank's value, gathered with all_gather_object.
    torch.distributed.init_process_group(
        "gloo", init_method=f"file://{tmp_path / 'store'}", rank=0, world_size=1
    )
    try:
        gathered = namespace["_mesh_reduce"](torch.tensor([2.0]), lambda values: values)
    finally:
        torch.distributed.destroy_process_group()
    assert len(gathered) == 1 and gathered[0].device.type == "cpu" and gathered[0].item() == 2.0


def test_mesh_reduce_with_unpacked_arguments_keeps_a_todo():
    source = "import torch_xla.core.xla_model as xm\n\nvalue = xm.mesh_reduce(*arguments)\n"
    migrated, findings = migrate_python(source)
    assert "# TODO(neuron-migrate): NM328 `xm.mesh_reduce` with unpacked or unknown arguments" in migrated
    assert silent(migrated, source) == []


def test_maybe_convert_to_cpu_copies_every_tensor_of_the_structure_to_the_cpu():
    source = (
        "import torch\n"
        "import torch_xla.core.xla_model as xm\n\n"
        "model = torch.nn.Linear(2, 3)\n"
        "state = {'model': model.state_dict(), 'steps': [torch.tensor(4), 5], 'name': 'ner'}\n"
        "cpu_state = xm._maybe_convert_to_cpu(state)\n"
    )
    migrated, findings = migrate_python(source)
    assert "import torch_xla" not in migrated and "TODO" not in migrated
    assert [f.code for f in findings] == ["NM329"]
    namespace: dict = {}
    exec(compile(migrated, "migrated.py", "exec"), namespace)
    cpu_state, model = namespace["cpu_state"], namespace["model"]
    assert cpu_state["model"].keys() == model.state_dict().keys()
    assert all(t.device.type == "cpu" for t in cpu_state["model"].values())
    assert torch.equal(cpu_state["model"]["weight"], model.weight.detach())
    assert torch.equal(cpu_state["steps"][0], torch.tensor(4)) and cpu_state["steps"][1:] == [5]
    assert cpu_state["name"] == "ner"


def test_maybe_convert_to_cpu_that_only_syncs_keeps_a_todo():
    source = (
        "import torch_xla.core.xla_model as xm\n\nstate = xm._maybe_convert_to_cpu(state, convert=False)\n"
    )
    migrated, findings = migrate_python(source)
    assert "# TODO(neuron-migrate): NM329" in migrated
