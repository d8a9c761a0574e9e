"""The neuron stand-in (standin): the switch, the device and its modules, training and generation
through Transformers', TRL's and PEFT's own neuron paths, the neuron process group under torchrun, the real
`--backend neuron` path end to end against the stand-in's torch_neuronx, and its refusals.

The stand-in changes process-wide PyTorch state (PrivateUse1 renamed), so every check that switches it on runs
in a child process (the scripts in standin_scripts/), as a user's script would."""

import json
import os
import re
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest
from click.testing import CliRunner
from packaging.requirements import Requirement

import standin
from commands import neuron_compat as cli

ROOT = Path(__file__).resolve().parents[2]
SCRIPTS = Path(__file__).with_name("standin_scripts")


def run_python(args: list[str], env: dict[str, str] | None = None, timeout: int = 600):
    return subprocess.run([sys.executable, *args], env=env, capture_output=True, text=True, timeout=timeout,
                          cwd=ROOT)  # fmt: skip


def findings(args: list[str]) -> dict:
    result = run_python(args, env=standin.activation_env())
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_importing_the_project_never_switches_it_on():
    # A fresh interpreter: an in-process test (`--sim-device neuron`) may have switched it on in this one.
    code = (
        "import json, torch, compat_matrix.probes\n"
        "import standin\n"
        "standin.autoload()\n"  # NEURON_STANDIN is not set here
        "print(json.dumps([standin.is_active(), torch._C._get_privateuse1_backend_name(), hasattr(torch, 'neuron')]))"
    )
    env = {key: value for key, value in os.environ.items() if key != "NEURON_STANDIN"}
    result = run_python(["-c", code], env=env)
    assert result.returncode == 0, result.stderr[-3000:]
    assert json.loads(result.stdout.strip().splitlines()[-1]) == [False, "privateuseone", False]


def test_the_switch_is_torchs_device_backend_autoload_entry_point():
    from importlib.metadata import entry_points

    (entry,) = [e for e in entry_points(group="torch.backends") if e.value.startswith("standin")]
    assert entry.load() is standin.autoload


def test_the_simulators_backends_are_found_by_their_names_through_dynamos_entry_points():
    from importlib.metadata import entry_points

    from standin import sim_backend

    found = {entry.name: entry.load() for entry in entry_points(group="torch_dynamo_backends")}
    assert found[sim_backend.BACKEND_NAME] is sim_backend.neuron_sim
    assert found[sim_backend.STRIDE_AGNOSTIC_BACKEND_NAME] is sim_backend.neuron_sim_stride_agnostic


def test_dynamo_is_imported_by_the_first_compile_which_gets_the_devices_settings_and_backend_by_default():
    # The stand-in switched on by `import torch` leaves Dynamo unimported (a launcher, an eager script); the
    # first torch.compile, given no backend, compiles with `neuron`, as TorchNeuron auto-selects it.
    code = (
        "import json, sys, torch\n"
        "before = 'torch._dynamo' in sys.modules\n"
        "double = torch.compile(lambda x: x * 2)\n"
        "out = [double(torch.ones(n, device='neuron')).sum().item() for n in (2, 3)]\n"
        "import torch._dynamo.config as config\n"
        "print(json.dumps([before, torch.compiler.get_default_backend(), config.automatic_dynamic_shapes, out,\n"
        "                  len(torch.neuron.get_dynamo_metrics())]))"
    )
    result = run_python(["-c", code], env=standin.activation_env())
    assert result.returncode == 0, result.stderr[-3000:]
    assert json.loads(result.stdout.strip().splitlines()[-1]) == [False, "neuron", False, [4.0, 6.0], 2]


def test_activation_env_switches_it_on_for_children_and_keeps_the_hub_offline():
    env = standin.activation_env({"PYTHONPATH": "/elsewhere", "TORCH_DEVICE_BACKEND_AUTOLOAD": "0"})
    assert env["NEURON_STANDIN"] == "1"
    assert env["PYTHONPATH"].split(":") == [str(standin.SITE_DIR), "/elsewhere"]
    assert env["HF_HUB_OFFLINE"] == env["TRANSFORMERS_OFFLINE"] == "1"
    assert "TORCH_DEVICE_BACKEND_AUTOLOAD" not in env
    assert standin.activation_env(env)["PYTHONPATH"] == env["PYTHONPATH"]  # idempotent


def test_the_torch_interfaces_the_backend_uses_are_pinned_to_the_torch_versions_the_project_allows():
    """The C++ backend is built against PyTorch's PrivateUse1 interfaces, which change between releases: the
    stand-in supports exactly the torch releases pyproject.toml allows, and the pinned one is among them."""
    from importlib.metadata import requires

    (allowed,) = [r.specifier for r in map(Requirement, requires("neuron-migrate")) if r.name == "torch"]
    supported = {f"{major}.{minor}" for major, minor in standin.SUPPORTED_TORCH}
    assert {v for v in ("2.12", "2.13", "2.14", "2.15") if f"{v}.0" in allowed} == supported
    (pin,) = [
        line for line in (ROOT / "constraints.txt").read_text().splitlines() if line.startswith("torch==")
    ]
    assert ".".join(pin.removeprefix("torch==").split(".")[:2]) in supported


def test_the_backend_is_rebuilt_when_any_source_or_header_or_the_python_abi_changes(tmp_path, monkeypatch):
    from standin import native

    for path in native.source_files():
        copy = tmp_path / path.relative_to(native.CSRC)
        copy.parent.mkdir(parents=True, exist_ok=True)
        copy.write_bytes(path.read_bytes())
    monkeypatch.setattr(native, "CSRC", tmp_path)
    keys = [native.build_directory()]
    header = tmp_path / "runtime" / "device.h"
    header.write_text(header.read_text() + "\n")  # a header that no build step names
    keys.append(native.build_directory())
    header.rename(tmp_path / "runtime" / "devices.h")  # the same text under another name
    keys.append(native.build_directory())
    (tmp_path / "aten" / "extra.cpp").write_text("")
    keys.append(native.build_directory())
    monkeypatch.setattr(
        sysconfig, "get_config_var", lambda name: ".cpython-399-x86_64-linux-gnu.so"
    )  # another ABI
    keys.append(native.build_directory())
    assert len(set(keys)) == 5
    assert {path.suffix for path in native.source_files()} == {".cpp", ".h"}


def test_the_one_compiled_file_includes_every_other_source():
    """Only backend.cpp is compiled: a .cpp it does not include would be left out of the library."""
    from standin import native

    unit = native.CSRC / native.UNIT
    included = re.findall(r'^#include "(.+\.cpp)"$', unit.read_text(), re.MULTILINE)
    others = [path for path in native.source_files() if path.suffix == ".cpp" and path != unit]
    assert sorted(included) == sorted(path.relative_to(native.CSRC).as_posix() for path in others)


def test_the_backend_loads_in_a_process_that_has_not_imported_torch():
    """As set-up (`python -m standin.native`) and try's check of another interpreter load it: the build key reads
    torch's version from its files, and the library needs torch's own loaded first."""
    check = "import sys, standin.native\nassert 'torch' not in sys.modules\nstandin.native.load()\nprint('loaded')"
    result = run_python(["-c", check])
    assert result.stdout.split() == ["loaded"], result.stderr[-2000:]


@pytest.mark.parametrize(
    ("setup", "message"),
    [
        ("torch.__version__ = '2.12.1'", "supports torch 2.13, 2.14; this is torch 2.12.1"),
        ("torch._C._rename_privateuse1_backend('othernpu')", "already registered as 'othernpu'"),
    ],
)
def test_an_unsupported_torch_is_one_clear_error_and_exit_2(setup, message):
    script = f"import os, torch\n{setup}\nos.environ['NEURON_STANDIN'] = '1'\nimport standin\nstandin.autoload()"  # fmt: skip
    result = run_python(["-c", script])
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [result.stderr.strip()]  # one line, no traceback
    assert message in result.stderr


def test_a_backend_that_cannot_be_compiled_is_one_clear_error_and_exit_2(tmp_path):
    env = standin.activation_env(
        {**os.environ, "XDG_CACHE_HOME": str(tmp_path), "CXX": str(tmp_path / "no-g++")}
    )
    result = run_python(["-c", "import torch"], env=env)
    assert result.returncode == 2
    assert "could not compile the stand-in's C++ backend" in result.stderr
    assert "Traceback" not in result.stderr


def test_a_real_torch_neuronx_keeps_it_off_with_exit_2(tmp_path):
    (tmp_path / "torch_neuronx").mkdir()
    (tmp_path / "torch_neuronx" / "__init__.py").write_text("")
    env = standin.activation_env()
    env["PYTHONPATH"] = f"{tmp_path}:{env['PYTHONPATH']}"
    result = run_python(["-c", "import torch"], env=env)
    assert result.returncode == 2
    assert "a real torch_neuronx is installed" in result.stderr and "Traceback" not in result.stderr
    env.pop("NEURON_STANDIN")  # asked for by the harness instead
    output = tmp_path / "rows.jsonl"
    command = ["-c", "from commands.neuron_compat import main; main()", "run", "--backend", "neuron-sim",
               "--sim-device", "neuron", "--archs", "llama", "-o", str(output)]  # fmt: skip
    result = run_python(command, env=env)
    assert (
        result.returncode == 2 and "--sim-device neuron: a real torch_neuronx is installed" in result.stderr
    )
    assert not output.exists()


def test_cli_standin_prints_exports_and_runs_a_command(tmp_path):
    exports = CliRunner().invoke(cli.main, ["standin"])
    assert exports.exit_code == 0
    assert (
        "export NEURON_STANDIN=1" in exports.output
        and f"export PYTHONPATH={standin.SITE_DIR}" in exports.output
    )
    marker = tmp_path / "device.txt"
    code = f"import torch; open({str(marker)!r}, 'w').write(str(torch.ones(1, device='neuron').device))"
    result = subprocess.run([sys.executable, "-c", "from commands.neuron_compat import main; main()", "standin", "--",
                             sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert marker.read_text() == "neuron:0"
    missing = CliRunner().invoke(cli.main, ["standin", "--", str(tmp_path / "no-such-program")])
    assert missing.exit_code == 2 and "cannot run" in missing.output


@pytest.mark.slow
def test_device_tensors_torch_neuron_torch_neuronx_and_the_neuron_backend():
    found = findings([str(SCRIPTS / "device_checks.py")])
    assert found["accelerator"] == "neuron" and found["device_count"] == 4
    assert found["is_torch_neuron_available"] and found["torch_neuronx_version"].endswith("+standin")
    assert (found["tensor_device"], found["is_neuron"], found["ops_match_cpu"]) == ("neuron:0", True, True)
    assert found["repr"] == "tensor([1., 1.], device='neuron:0')"
    assert found["dtypes"] == ["torch.bfloat16", "torch.float16"] and found["second_device"] == "neuron:1"
    assert found["view_writes_through"]
    assert found["mixed_devices"].startswith("Expected all tensors to be on the same device")
    # Two NeuronCores in one op: refused, as on a device.
    assert "neuron:0 and neuron:1" in found["two_devices"]
    assert found["cpu_scalar_mixes"] == "neuron"
    assert found["pinned_batches"] == [[0.0, 1.0, 2.0, 3.0], [4.0, 5.0, 6.0, 7.0]]
    assert (found["current_device_after_set"], found["factory_device_after_set"]) == (1, "neuron:1")
    assert found["accelerator_device_index"] == [2, "neuron:3", 2]
    assert found["rng_reproducible"] and found["rng_state_restores"] and found["event_elapsed_ms"] >= 0
    assert found["memory_allocated_covers_a_4MiB_tensor"]
    assert found["fallback_ops"] == ["aten::nonzero"]
    assert found["attention_ops"] == [
        "aten::_scaled_dot_product_fused_attention_overrideable",
        "aten::_scaled_dot_product_fused_attention_overrideable_backward",
    ]
    assert found["attention_grad_equal_cpu"]
    assert found["conv_grads_equal_cpu"] and found["int_histc"] == [1, 2, 0, 1]
    assert found["conjugate_copies_to_cpu"]
    assert found["checkpoint_replays_dropout"] == [True, True] and found["dropout_on_device_generator"]
    assert found["generate_tokens_equal_cpu"] and found["generate_graphs"] == 1
    assert found["fullgraph_forward_tokens_equal_cpu"]
    assert found["dynamo_metrics"] and found["dynamo_metrics"][0].endswith("_forward_0")
    assert found["reloaded"] == ["neuron:0", True]
    assert found["torch_load_devices"] == ["neuron:0", "cpu"] and found["deepcopy_device"] == "neuron:0"
    assert found["moved_again"]
    assert found["saved_files_equal_cpu"] and found["saved_tensors_equal_on_cpu"]
    assert found["inference_mode_tokens_equal_cpu"] == [True, True]
    assert found["inference_mode_tensors"] == [False, True, True]
    assert found["dynamic_shape"] == "DynamicShapeRejected" and found["dynamic_rule"]
    assert found["vmap_grad_equal_cpu"]
    assert found["network_connections"] == 0


@pytest.mark.slow
def test_device_behaviours_as_torchneuron_documents_them():
    found = findings([str(SCRIPTS / "behaviour_checks.py")])
    # A stream of PyTorch's waits on torch.neuron's events (FSDP2's end of backward; main read garbage here).
    assert found["accelerator_stream_waits_on_neuron_event"] == found["unrecorded_event_wait"] == "no error"
    assert found["stream_context"] == [True, True] and found["elapsed_ms"] >= 0
    assert found["generator_device"] == "neuron:0" and found["generator_reproducible"]
    assert found["default_generators"] == [f"neuron:{index}" for index in range(4)]
    assert found["cpu_generator"] == "Expected a 'neuron' device type for generator but found 'cpu'"
    assert found["compiled_with_modes_and_options"] == [[2.0] * 3] * 3 and found["mode_warnings"] == 2
    assert found["graphs_for_three_shapes"] == 3  # dynamic=None: recompiled per shape, not rejected
    rule = f"[{found['static_shapes_rule']}]"
    assert rule in found["mark_dynamic"] and rule in found["dynamic_true"]
    assert found["LSTM_equal_cpu"] and found["GRU_equal_cpu"]
    assert found["cpu_attention_mask"].startswith("Expected all tensors to be on the same device")
    assert found["pickled"] == ["neuron:0", [0.0, 1.0, 2.0, 3.0]]
    assert found["queue"].startswith(
        "neuron stand-in: a device tensor cannot cross a torch.multiprocessing queue"
    )
    assert found["unchecked_indices"] == []
    products = ["mm", "mm out=", "addmm", "bmm", "conv2d", "conv2d backward"]
    assert found["rounded_once"] == products * 2  # bfloat16, then float16
    assert found["mixed_dtypes"].startswith("expected m1 and m2 to have the same dtype")


@pytest.mark.parametrize(
    "setting",
    ["NEURON_RT_NUM_CORES=abc", "NEURON_RT_NUM_CORES=0", "NEURON_RT_VISIBLE_CORES=0-x", "NEURON_RT_VISIBLE_CORES=3-1",
     "NEURON_RT_VISIBLE_CORES=0,,1"],
)  # fmt: skip
def test_a_malformed_core_count_is_one_message_and_exit_2(setting):
    name, _, value = setting.partition("=")
    env = standin.activation_env()
    env.pop("NEURON_RT_VISIBLE_CORES", None)
    env[name] = value
    result = run_python(["-c", "import torch"], env=env)
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        f"neuron stand-in: {name}={value!r} is not a NeuronCore set: NEURON_RT_VISIBLE_CORES takes core ids and "
        "ascending ranges (0-1, 2, 0,3), NEURON_RT_NUM_CORES a count of at least 1"
    ]


@pytest.mark.slow
def test_trainer_trl_and_peft_take_their_own_neuron_paths():
    found = findings([str(SCRIPTS / "train_checks.py")])
    assert (found["trainer_device"], found["trainer_backend"]) == ("neuron:0", "neuron")
    assert found["trainer_graphs"] == 2  # one forward and one backward graph for the one padded shape
    neuron_losses, cpu_losses = found["trainer_losses"]
    assert neuron_losses == pytest.approx(cpu_losses, abs=1e-5)
    assert {"model.safetensors", "optimizer.pt", "scheduler.pt", "rng_state.pth"} <= set(
        found["checkpoint_files"]
    )
    # resumed at step 3 for one step: 4 steps, the 3 logged losses of the checkpoint's trainer state and a new one
    assert found["checkpoint_equals_trained_weights"] and found["resumed_on_cpu"] == [4, 4]
    assert found["adapter_equal_on_cpu"]
    assert found["sft_pad_to_multiple_of"] == 128
    assert [shape[1] % 128 for shape in found["sft_batch_shapes"]] == [0, 0]
    assert (
        found["lora_device"] == "neuron:0" and found["lora_base_unchanged"] and found["lora_adapter_trained"]
    )


@pytest.mark.slow
def test_ddp_fsdp2_tensor_parallelism_and_collectives_on_the_neuron_process_group(tmp_path):
    from compat_matrix.tiny import build_tiny_model

    build_tiny_model("llama").save_pretrained(tmp_path / "checkpoint")
    output = tmp_path / "found.json"
    result = run_python(["-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
                         str(SCRIPTS / "distributed_checks.py"), str(output), str(tmp_path / "checkpoint")],
                        env=standin.activation_env())  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    found = json.loads(output.read_text())
    assert found["backend"] == "neuron" and found["tp_device"] == "neuron:0"
    assert found["first_devices"] == [0, 1]  # each torchrun worker starts on the core of its local rank
    assert found["tp_loss"] == pytest.approx(found["reference_loss"], abs=1e-5)
    assert found["tp_generate_device"] == "neuron:0" and found["tp_generate_equal_one_process"]
    assert found["ddp_grad_device"] == "neuron:0" and found["ddp_params"] == 21
    assert found["ddp_max_grad_diff"] < 1e-6
    assert found["fsdp_shard"] == ["DTensor", "neuron:0"] and found["fsdp_max_loss_diff"] < 1e-5
    # a prefetched layer that runs no backward: FSDP2's end of backward waits on its all-gather event
    assert found["fsdp_frozen_prefetch_losses"] == 2
    assert found["collectives"] == {
        "all_reduce": [3.0] * 4,
        "all_gather_into_tensor": [0.0] * 4 + [1.0] * 4,
        "all_gather_into_flat_tensor": [0.0, 0.0, 1.0, 1.0],
        "reduce_scatter_tensor": [0.0, 2.0],
        "all_to_all_single": [0.0, 1.0],
        "send_recv_broadcast": [7.0] * 3,
    }
    # TorchNeuron's generator state (16 bytes: seed, offset), which DTensor's random ops move shard by shard
    assert found["rng_state_bytes"] == 16 and found["dtensor_random_shards_differ"]


@pytest.mark.slow
def test_the_real_device_path_runs_end_to_end_against_the_standins_torch_neuronx(tmp_path):
    """`neuron-compat run --backend neuron -j 2`: spawned workers that import torch_neuronx, each with its own
    NEURON_RT_VISIBLE_CORES, compile metrics and fallback ops read from torch_neuronx; rows labelled simulated."""
    output = tmp_path / "rows.jsonl"
    result = run_python(["-c", "from commands.neuron_compat import main; main()", "run", "--backend", "neuron", "-j", "2",
                         "--archs", "llama,mpt", "-o", str(output)], env=standin.activation_env())  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    assert (
        "the neuron stand-in's torch_neuronx" in result.stderr
        and "NEURON_RT_VISIBLE_CORES 0, 1" in result.stderr
    )
    rows = {row["model_type"]: row for row in map(json.loads, output.read_text().splitlines())}
    assert sorted(row["neuron_visible_cores"] for row in rows.values()) == ["0", "1"]
    for row in rows.values():
        assert (row["backend"], row["simulated"], row["env"]["torch_neuronx"]) == (
            "neuron",
            True,
            "0.0.0+standin",
        )
        assert row["verdict"] in ("works", "works-eager", "works-with-caveats"), row["reason"]
        assert "aten::_local_scalar_dense" in row["cpu_fallback_ops"]
    assert rows["llama"]["verdict"] == "works" and rows["llama"]["graphs_compiled_by_backend"] >= 1
