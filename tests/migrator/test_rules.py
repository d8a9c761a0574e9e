"""The rule table is the single source of the docs, and every rule is exercised by a fixture."""

from __future__ import annotations

import re
from pathlib import Path

from migrator import rules_doc
from migrator.registry import RULES
from migrator.rules import FAMILIES

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "migrator"


def test_docs_are_generated_from_the_rule_table() -> None:
    assert rules_doc.DOC.read_text() == rules_doc.render(), "run `python -m migrator.rules_doc`"


def test_every_rule_is_reported_by_some_fixture() -> None:
    reported = {
        line.split()[1] for path in FIXTURES.rglob("*.findings") for line in path.read_text().splitlines()
    }
    # Compile risks (NM8xx) are found by their own `find`, tested on their examples in test_risk_rules.py.
    rewrites = {code for code, rule in RULES.items() if rule.family != "risk"}
    assert sorted(rewrites - reported) == []


def test_rules_are_documented() -> None:
    for rule in RULES.values():
        assert rule.title and rule.action


def test_every_family_has_a_rule_and_every_rule_a_family() -> None:
    """`rules.FAMILIES` is the one list of families (docs/reference/rules.md, the reports and the checklist read it)."""
    names = [family.name for family in FAMILIES]
    assert len(set(names)) == len(names) and len({family.prefix for family in FAMILIES}) == len(FAMILIES)
    assert {rule.family for rule in RULES.values()} == set(names)
    for rule in RULES.values():
        assert rule.code.startswith(next(f.prefix for f in FAMILIES if f.name == rule.family)), rule.code


def test_the_json_report_doc_names_the_families_in_order() -> None:
    doc = FIXTURES.parents[1] / "docs" / "using" / "json-report.md"
    row = next(line for line in doc.read_text().splitlines() if line.startswith("| `family` |"))
    assert re.findall(r"`(\w+)`", row.split("|")[3]) == [family.name for family in FAMILIES]


def test_each_dropped_static_shape_is_named_with_its_value():
    """Two shapes dropped through one `**kwargs` are two findings that say which is which."""
    from migrator.engine import migrate_python

    source = (
        "from optimum.neuron import NeuronModelForSequenceClassification\n\n"
        'export_kwargs = {"batch_size": 1, "sequence_length": 128}\n'
        'model = NeuronModelForSequenceClassification.from_pretrained("distilbert-base-uncased", export=True, '
        "**export_kwargs)\n"
    )
    _, findings = migrate_python(source)
    shapes = [(f.subject, f.message.split(" dropped")[0]) for f in findings if f.code == "NM104"]
    assert shapes == [("batch_size", "`batch_size=1`"), ("sequence_length", "`sequence_length=128`")]


def test_a_spawn_of_an_xla_function_is_left_with_a_todo_and_stays_stable():
    """`torch_xla.launch(xm.xla_device)` called directly would be XLA code that its own rules mark again."""
    from migrator.engine import migrate_python

    source = (
        "import torch_xla\nimport torch_xla.core.xla_model as xm\n\n\n"
        "def spawn_error():\n    torch_xla.launch(xm.xla_device)\n"
    )
    migrated, findings = migrate_python(source)
    assert "torch_xla.launch(xm.xla_device)" in migrated
    assert ("NM308", False) in [(f.code, f.fixed) for f in findings]
    again, again_findings = migrate_python(migrated)
    assert again == migrated and not [f for f in again_findings if f.fixed]


def test_a_removed_switch_becomes_its_replacement_field_for_every_kind_of_value(tmp_path):
    """`group_by_length` / `include_inputs_for_metrics`: a literal False goes (the old default), an expression
    becomes `on if x else off` with `x` parenthesized where it must be, and a call that also sets the replacement
    field is left with a TODO; the result builds Transformers' TrainingArguments with the same settings."""
    from transformers import TrainingArguments

    from migrator.engine import migrate_python

    source = (
        "from optimum.neuron import NeuronTrainingArguments\n\n"
        "def build(a, b, out):\n"
        "    off = NeuronTrainingArguments(output_dir=out, group_by_length=False, include_inputs_for_metrics=False)\n"
        "    on = NeuronTrainingArguments(output_dir=out, group_by_length=a if b else False,\n"
        "                                 include_inputs_for_metrics=not a)\n"
        "    return off, on\n\n"
        "def both(out):\n"
        '    return NeuronTrainingArguments(output_dir=out, group_by_length=True, train_sampling_strategy="random")\n'
    )
    migrated, findings = migrate_python(source)
    assert 'train_sampling_strategy="group_by_length" if (a if b else False) else "random"' in migrated
    assert 'include_for_metrics=["inputs"] if not a else []' in migrated
    # NM501: the import of optimum.neuron stays for the statement NM205 leaves, with a TODO that says so.
    assert [(f.code, f.subject) for f in findings if not f.fixed] == [
        ("NM501", "optimum.neuron"),
        ("NM205", "group_by_length"),
    ]
    assert migrate_python(migrated)[0] == migrated
    build = migrated[migrated.index("def build") : migrated.index("def both")]
    namespace = {"TrainingArguments": TrainingArguments}
    exec(build, namespace)  # the migrated function, run against Transformers itself
    off, on = namespace["build"](True, True, str(tmp_path))
    assert (off.train_sampling_strategy, off.include_for_metrics) == ("random", [])
    assert (on.train_sampling_strategy, on.include_for_metrics) == ("group_by_length", [])


def test_consolidation_read_afterwards_becomes_a_copy_and_the_adapter_folder_the_checkpoint_top():
    """NM212: the folder a consolidation writes, read afterwards, is a copy of the standard checkpoint; the
    default adapter's files are named at the checkpoint's top (os.path.join's component dropped, a path's
    prefix cut); any other mention of optimum-neuron's adapter folder keeps a TODO; a second run changes nothing."""
    from migrator.engine import migrate_python

    source = (
        "import os\nfrom pathlib import Path\n"
        "from optimum.neuron.distributed import consolidate_model_parallel_checkpoints_to_unified_checkpoint\n"
        "consolidate_model_parallel_checkpoints_to_unified_checkpoint(ckpt, out)\n"
        'config = os.path.join(ckpt, "adapter_default", "adapter_config.json")\n'
        'weights = os.path.join(ckpt, "adapter_default/adapter_model.safetensors")\n'
        'folder = Path(ckpt) / "adapter_default"\n'
        "print(out)\n"
    )
    output, findings = migrate_python(source)
    assert "shutil.copytree(ckpt, out, dirs_exist_ok=True)" in output and "import shutil" in output
    assert 'config = os.path.join(ckpt, "adapter_config.json")' in output
    assert 'weights = os.path.join(ckpt, "adapter_model.safetensors")' in output
    assert [(f.code, f.line) for f in findings if not f.fixed] == [("NM212", 7)]
    assert "optimum" not in output.split("TODO")[0]
    assert migrate_python(output)[0] == output


def test_ddp_wraps_the_model_only_on_the_device_path_whose_optimizer_step_synced(tmp_path):
    """NM319: `xm.optimizer_step` ran under `if device_name == "xla":` beside a plain `optimizer.step()`: the
    process group and DDP are added under the same test, the bare model read through `getattr(model, "module",
    model)`, so the script's CPU path still runs as a single process (no torchrun, no process group)."""
    import subprocess
    import sys

    from migrator.engine import migrate_python

    source = (FIXTURES / "xla" / "ddp_on_the_device_path.py").read_text()
    output, _ = migrate_python(source)
    assert '    if device_name == "xla":\n        _init_process_group()\n' in output
    assert 'getattr(model, "module", model).state_dict()' in output
    script = tmp_path / "train.py"
    script.write_text(output)
    ran = subprocess.run(
        [sys.executable, str(script), "--device", "cpu"], cwd=tmp_path, capture_output=True, text=True
    )
    assert ran.returncode == 0, ran.stderr[-2000:]
    # The sync call on the path the test excludes (`else:`): the wrap cannot repeat it, so a helper averages the
    # optimizer's gradients there as torch_xla did.
    synced = '        if device_name == "xla":\n            xm.optimizer_step(optimizer)\n        else:\n            optimizer.step()\n'
    assert synced in source
    inverted = source.replace(
        synced,
        '        if device_name != "xla":\n            optimizer.step()\n        else:\n            xm.optimizer_step(optimizer)\n',
    )
    output, findings = migrate_python(inverted)
    assert "model = torch.nn.parallel.DistributedDataParallel" not in output
    assert "        else:\n            _optimizer_step(optimizer)\n" in output
    assert [f.fixed for f in findings if f.code == "NM319"] == [True]


SYNC_WITHOUT_A_MODEL = """\
import torch
import torch_xla.core.xla_model as xm
import torch_xla.runtime as xr


def make_optimizer(module):
    return torch.optim.SGD(list(module.parameters()), lr=1.0)


def step(optimizer, loss):
    loss.backward()
    xm.optimizer_step(optimizer)


def main():
    torch.manual_seed(0)
    layer = torch.nn.Linear(2, 1, bias=False).to(xm.xla_device())
    torch.nn.init.zeros_(layer.weight)
    optimizer = make_optimizer(layer)
    rank = xr.global_ordinal()
    inputs = torch.full((1, 2), float(rank + 1)).to(xm.xla_device())
    step(optimizer, layer(inputs).sum())
    expected = -(1 + xr.world_size()) / 2  # the mean of each process's gradient (rank + 1), as torch_xla took it
    assert torch.allclose(layer.weight.cpu(), torch.full((1, 2), expected)), layer.weight
    print(f"rank {rank}: weight {layer.weight.cpu().tolist()}")
    ranks = torch.tensor([float(rank)]).to(xm.xla_device())
    mean = xm.all_reduce(xm.REDUCE_SUM, ranks, scale=1.0 / xr.world_size())
    highest = [torch.tensor([float(rank)]).to(xm.xla_device())]
    xm.all_reduce("max", highest)
    print(f"rank {rank}: mean rank {mean.item()}, highest {highest[0].item()}, own {ranks.item()}")


if __name__ == "__main__":
    main()
"""


def test_syncs_and_all_reduces_without_ddp_reduce_over_the_processes(tmp_path, tmp_path_factory):
    """NM319: the model whose parameters the optimizer steps cannot be read off it (a helper builds it), so no
    DDP wrap can be placed: the helper averages the gradients over torchrun's processes as xm.optimizer_step
    did; NM331: xm.all_reduce returns a reduced copy of a tensor (times scale) and reduces a list in place.
    Measured on the stand-in with 2 processes and with 1."""
    from migrator.engine import migrate_python
    from try_run import TryOptions, try_path

    output, findings = migrate_python(SYNC_WITHOUT_A_MODEL)
    assert "    _optimizer_step(optimizer)\n" in output and "import torch_xla" not in output
    assert [f.fixed for f in findings if f.code == "NM319"] == [True]
    assert [f.fixed for f in findings if f.code == "NM331"] == [True, True]
    (tmp_path / "train.py").write_text(output)
    (tmp_path / "run.sh").write_text("torchrun --nproc_per_node 2 train.py\npython train.py\n")
    options = TryOptions(show_output=False, cache_root=tmp_path_factory.getbasetemp().parent / "try-cache")
    runs = try_path(tmp_path / "run.sh", [], options)
    assert [run.status for run in runs] == ["ran", "ran"], [run.output_tail[-2000:] for run in runs]
    assert "rank 1: weight [[-1.5, -1.5]]" in runs[0].output_tail
    assert "rank 0: weight [[-1.0, -1.0]]" in runs[1].output_tail
    assert "rank 1: mean rank 0.5, highest 1.0, own 1.0" in runs[0].output_tail
    assert "rank 0: mean rank 0.0, highest 0.0, own 0.0" in runs[1].output_tail
