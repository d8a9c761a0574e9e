"""benchmarks/run_rate.py: each failed try gets the cause class and the evidence its migrated code shows."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("run_rate", ROOT / "benchmarks" / "run_rate.py")
run_rate = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(run_rate)


def result(path: str, status: str, reason: str, error: dict | None = None) -> dict:
    return {
        "path": path,
        "status": status,
        "reason": reason,
        "runs": [{"status": status, "reason": reason, "error": error}],
    }


def error(migrated: Path, file: str, line: int, kind: str, message: str, cell: int | None = None) -> dict:
    return {
        "type": kind,
        "message": message,
        "file": str(migrated / file) if cell is None else "notebook",
        "line": line,
        "cell": cell,
    }


def test_a_failure_at_a_todo_is_manual_work_with_its_code(tmp_path):
    (tmp_path / "train.py").write_text(
        "import torch\n# TODO(neuron-migrate): NM208 tensor_parallel_size arrives as a flag; add the field\n"
        "model = load(args.tensor_parallel_size)\n"
    )
    row = run_rate.classify(
        result("train.py", "failed", "x", error(tmp_path, "train.py", 3, "AttributeError", "no attribute")),
        tmp_path,
    )
    assert row["class"] == run_rate.MANUAL
    assert row["evidence"] == "train.py:3: AttributeError: no attribute"
    assert row["fix"].startswith("NM208 at train.py:3: tensor_parallel_size arrives as a flag")


def test_a_kept_sdk_import_is_manual_when_a_later_use_has_a_todo_and_a_migrator_failure_when_none_does(
    tmp_path,
):
    (tmp_path / "a.py").write_text(
        "import torch_xla.core.xla_model as xm\n\nx = 1\n# TODO(neuron-migrate): NM314 mesh_reduce\nxm.mesh_reduce()\n"
    )
    (tmp_path / "b.py").write_text("import torch_xla.core.xla_model as xm\n")
    missing = "No module named 'torch_xla'"
    a = run_rate.classify(
        result("a.py", "failed", "x", error(tmp_path, "a.py", 1, "ModuleNotFoundError", missing)), tmp_path
    )
    b = run_rate.classify(
        result("b.py", "failed", "x", error(tmp_path, "b.py", 1, "ModuleNotFoundError", missing)), tmp_path
    )
    assert a["class"] == run_rate.MANUAL and a["fix"].startswith(
        "NM314 (line 4); the import of torch_xla at a.py:1"
    )
    assert b["class"] == run_rate.FAILS and "kept with no TODO" in b["fix"]


def test_a_missing_package_a_timeout_a_stand_in_and_a_plain_error(tmp_path):
    (tmp_path / "c.py").write_text("import evaluate\n")
    (tmp_path / "nb.ipynb").write_text(
        json.dumps({"cells": [{"cell_type": "code", "source": ["x = 1\n", "y()\n"]}]})
    )
    package = run_rate.classify(
        result(
            "c.py",
            "failed",
            "x",
            error(tmp_path, "c.py", 1, "ModuleNotFoundError", "No module named 'evaluate'"),
        ),
        tmp_path,
    )
    assert (
        package["class"] == run_rate.STAND_IN
        and package["fix"]
        == "try: package evaluate is not in the try environment, and the repository declares none for it"
    )
    timeout = run_rate.classify(
        result("c.py", "failed", "ran over the --timeout of 300 s and was stopped"), tmp_path
    )
    assert timeout["class"] == run_rate.TIME
    model = run_rate.classify(
        result("c.py", "failed", "model org/x: its tiny llama stand-in could not be built"), tmp_path
    )
    assert model["class"] == run_rate.STAND_IN
    plain = run_rate.classify(
        result("nb.ipynb", "failed", "x", error(tmp_path, "", 2, "TypeError", "bad keyword", cell=1)),
        tmp_path,
    )
    assert plain["class"] == run_rate.FAILS and plain["evidence"] == "cell 1:2: TypeError: bad keyword"


def test_a_notebook_import_kept_for_a_todo_in_a_later_cell_is_manual_work(tmp_path):
    cells = [
        {"cell_type": "code", "source": "from optimum.neuron import NeuronStableDiffusionPipeline\n"},
        {"cell_type": "markdown", "source": "text"},
        {
            "cell_type": "code",
            "source": "# TODO(neuron-migrate): NM501 use diffusers\npipe = NeuronStableDiffusionPipeline()\n",
        },
    ]
    (tmp_path / "sd.ipynb").write_text(json.dumps({"cells": cells}))
    missing = error(tmp_path, "", 1, "ModuleNotFoundError", "No module named 'optimum'", cell=1)
    row = run_rate.classify(result("sd.ipynb", "failed", "x", missing), tmp_path)
    assert row["class"] == run_rate.MANUAL and row["fix"].startswith(
        "NM501 (cell 2:1); the import of optimum"
    )


def test_a_child_traceback_in_the_output_names_the_line_in_the_tried_folder(tmp_path):
    (tmp_path / "scripts").mkdir()
    (tmp_path / "scripts" / "train.py").write_text("import torch\nfrom optimum.neuron import X\n")
    tail = (
        "Traceback (most recent call last):\n"
        '  File "/tmp/neuron-migrate-try-ab12/run/train.py", line 2, in <module>\n'
        "ModuleNotFoundError: No module named 'optimum'\n"
        "E1206 torch.distributed.elastic.multiprocessing.api: failed (exitcode: 1)"
    )
    failed = result("scripts/run.sh", "failed", "exit code 1: ====")
    failed["runs"][0]["output_tail"] = tail
    row = run_rate.classify(failed, tmp_path)
    assert row["evidence"] == "scripts/train.py:2: ModuleNotFoundError: No module named 'optimum'"
    assert row["class"] == run_rate.FAILS and "kept with no TODO" in row["fix"]


def test_a_module_of_the_tree_outside_the_tried_folder_is_the_try_s_limit_not_a_package(tmp_path):
    (tmp_path / "examples" / "distributed").mkdir(parents=True)
    (tmp_path / "examples" / "distributed" / "ddp.py").write_text("from examples.common import x\n")
    missing = error(
        tmp_path, "examples/distributed/ddp.py", 1, "ModuleNotFoundError", "No module named 'examples'"
    )
    row = run_rate.classify(result("examples/distributed/ddp.py", "failed", "x", missing), tmp_path)
    assert row["class"] == run_rate.STAND_IN and "the tree's own package" in row["fix"]


def test_a_launcher_naming_its_script_from_the_repository_root_is_the_try_s_limit(tmp_path):
    failed = result("scripts/sft.sh", "failed", "exit code 1: ====")
    failed["runs"][0]["output_tail"] = (
        "python: can't open file '/tmp/neuron-migrate-try-x1/run/notebooks/scripts/sft.py': [Errno 2] No such file"
    )
    row = run_rate.classify(failed, tmp_path)
    assert row["class"] == run_rate.STAND_IN and row["fix"].startswith(
        "try: notebooks/scripts/sft.py is named from"
    )


def test_a_kept_sdk_import_try_reports_as_not_run_is_still_manual_work(tmp_path):
    """try ends a run whose import is missing as "not run: install X"; for a Neuron SDK module kept behind a
    TODO that is the migrator's manual work, not a package the try lacks."""
    (tmp_path / "gen.py").write_text(
        "# TODO(neuron-migrate): NM501 optimum.neuron has no TorchNeuron target here\n"
        "from optimum.neuron import NeuronModelForCausalLM\n"
    )
    missing = "No module named 'optimum'"
    row = run_rate.classify(
        result(
            "gen.py",
            "not-run",
            "not run: install optimum in the environment that runs it",
            error(tmp_path, "gen.py", 2, "ModuleNotFoundError", missing),
        ),
        tmp_path,
    )
    assert row["class"] == run_rate.MANUAL and row["fix"].startswith("NM501 at gen.py:2")


def test_a_run_that_reached_aws_needs_private_data_and_a_refused_install_says_why(tmp_path):
    (tmp_path / "s.py").write_text("import sagemaker\n")
    aws = run_rate.classify(
        result(
            "s.py",
            "not-run",
            "not run: needs an AWS account: NoCredentialsError: Unable to locate credentials at s.py:4 "
            "(raised in botocore); a try strips AWS credentials and has no network, so a call that reaches AWS ends here",
        ),
        tmp_path,
    )
    assert aws["class"] == run_rate.PRIVATE and aws["evidence"].startswith(
        "not run: needs an AWS account: NoCredentialsError"
    )
    refused = result(
        "s.py",
        "not-run",
        "x",
        error(tmp_path, "s.py", 1, "ModuleNotFoundError", "No module named 'sagemaker'"),
    )
    refused["runs"][0]["installs"] = [
        {
            "module": "sagemaker",
            "requirement": "sagemaker",
            "declared_in": "cell 1: pip install sagemaker",
            "outcome": "not installed: sagemaker needs a version of a distribution other than the one the environment has",
            "distributions": [],
        }
    ]
    row = run_rate.classify(refused, tmp_path)
    assert row["class"] == run_rate.STAND_IN
    assert row["fix"].startswith(
        "try: sagemaker (declared in cell 1: pip install sagemaker) not installed: sagemaker needs"
    )


def test_a_name_the_installed_release_lacks_is_not_the_migrated_code_s_failure(tmp_path):
    (tmp_path / "s.py").write_text("from sagemaker import get_execution_role\n")
    reason = (
        "ImportError: cannot import name 'get_execution_role' from 'sagemaker' at s.py:1; sagemaker==3.27.0 was "
        "installed for the try (sagemaker, declared in cell 1: pip install -U sagemaker) and has no "
        "get_execution_role: the code was written for another release; declare the one it needs"
    )
    failed = error(
        tmp_path, "s.py", 1, "ImportError", "cannot import name 'get_execution_role' from 'sagemaker'"
    )
    row = run_rate.classify(result("s.py", "failed", reason, failed), tmp_path)
    assert row["class"] == run_rate.STAND_IN
    assert row["fix"].startswith("try: ImportError: cannot import name 'get_execution_role' from 'sagemaker'")
    assert "sagemaker==3.27.0 was installed for the try" in row["fix"]


def test_a_dataset_the_try_did_not_serve_is_the_try_s_limit(tmp_path):
    (tmp_path / "t.py").write_text("from datasets import load_dataset\nload_dataset('yelp_review_full')\n")
    message = "Couldn't reach 'yelp_review_full' on the Hub (OfflineModeIsEnabled)"
    row = run_rate.classify(
        result("t.py", "failed", "x", error(tmp_path, "t.py", 2, "ConnectionError", message)), tmp_path
    )
    assert row["class"] == run_rate.STAND_IN and "dataset yelp_review_full" in row["fix"]


def test_a_hub_upload_the_sandbox_refuses_is_told_apart_from_a_download_it_does_not_serve(tmp_path):
    upload = run_rate.classify(
        result(
            "nb.ipynb",
            "failed",
            "x",
            error(
                tmp_path,
                "",
                3,
                "OfflineModeIsEnabled",
                "Cannot reach https://huggingface.co/api/repos/create: offline mode is enabled.",
                cell=4,
            ),
        ),
        tmp_path,
    )
    download = run_rate.classify(
        result(
            "nb.ipynb",
            "failed",
            "x",
            error(
                tmp_path,
                "",
                3,
                "OfflineModeIsEnabled",
                "Cannot reach https://huggingface.co/api/models/org/x/revision/main: offline mode is enabled.",
                cell=4,
            ),
        ),
        tmp_path,
    )
    assert upload["class"] == download["class"] == run_rate.STAND_IN
    assert upload["fix"].startswith("try: a Hub upload") and download["fix"].startswith("try: a Hub download")


def _failed_cell(cell: int, command: str, output: str, skipped: list[dict] = ()) -> dict:
    message = f"Command 'b'{command}'' returned non-zero exit status 2."
    failed = result(
        "nb.ipynb",
        "failed",
        f"CalledProcessError: {message} at cell {cell}:1; the command's output ends: {output}",
        {"type": "CalledProcessError", "message": message, "file": "notebook", "line": 1, "cell": cell},
    )
    failed["runs"][0]["skipped"] = list(skipped)
    return failed


def test_a_failed_shell_command_is_read_from_what_it_printed(tmp_path):
    """A %%bash cell's command that failed with no traceback: its output, which the try's reason quotes, says
    what failed; an argument its script refuses is the migrated launch's, and whose (the original beside)."""
    migrated, original = tmp_path / "migrated", tmp_path / "src"
    for tree, launch in ((migrated, "torchrun run.py --bf16"), (original, "torchrun run.py")):
        tree.mkdir()
        (tree / "nb.ipynb").write_text(json.dumps({"cells": [{"cell_type": "code", "source": launch}]}))
    refused = "usage: run.py [-h] | run.py: error: argument --bf16: expected one argument | torchrun: FAILED"
    row = run_rate.classify(_failed_cell(1, "torchrun run.py --bf16", refused), migrated)
    assert row["class"] == run_rate.FAILS
    assert row["evidence"] == f"cell 1:1: the command exited with 2: {refused}"
    assert row["fix"] == (
        "run.py's parser refuses an argument the launch at cell 1:1 passes (added by the migration): "
        "argument --bf16: expected one argument"
    )
    docker = "docker: Cannot connect to the Docker daemon"
    set_up = {"command": "docker run tgi", "reason": "pulls or runs a container image", "cell": 1}
    row = run_rate.classify(
        _failed_cell(1, "docker run tgi", docker, [set_up | {"outcome": "ran in the sandbox"}]), migrated
    )
    assert row["class"] == run_rate.STAND_IN
    assert (
        row["fix"]
        == "try: a set-up command (pulls or runs a container image: docker run tgi) failed in the sandbox"
    )
    row = run_rate.classify(_failed_cell(1, "make", "make: *** [all] Error 2"), migrated)
    assert (
        row["class"] == run_rate.FAILS and row["fix"] == "the command at cell 1:1 fails on the migrated code"
    )


def test_a_launch_of_a_script_a_download_was_to_fetch_follows_that_download(tmp_path):
    """`!wget .../scripts/train.py` (under the migrator's TODO: it fetches the unmigrated script) then
    `!torchrun train.py`: the sandbox has no network, the launch cannot open train.py, and the row is the
    download's TODO; with no TODO there, the try's limit."""
    url = "https://raw.githubusercontent.com/o/r/main/scripts/train.py"
    todo = "# TODO(neuron-migrate): NM501 the script is downloaded as it is there: migrate it once\n"
    cells = [
        {"cell_type": "code", "source": f"{todo}!wget {url}"},
        {"cell_type": "code", "source": "!torchrun train.py"},
    ]
    (tmp_path / "nb.ipynb").write_text(json.dumps({"cells": cells}))
    cannot = (
        "python: can't open file '/tmp/x/nb/train.py': [Errno 2] No such file or directory | torchrun: FAILED"
    )
    download = {
        "command": f"wget {url}",
        "reason": "downloads",
        "cell": 1,
        "outcome": "ran in the sandbox: exit 4",
    }
    row = run_rate.classify(_failed_cell(2, "torchrun train.py", cannot, [download]), tmp_path)
    assert row["class"] == run_rate.MANUAL
    assert row["fix"].startswith("NM501 at cell 1:2, the download of train.py: the script is downloaded")
    cells[0]["source"] = f"!wget {url}"
    (tmp_path / "nb.ipynb").write_text(json.dumps({"cells": cells}))
    row = run_rate.classify(_failed_cell(2, "torchrun train.py", cannot, [download]), tmp_path)
    assert row["class"] == run_rate.STAND_IN and "comes from a download (cell 1)" in row["fix"]


def test_a_launcher_stopped_at_a_command_under_a_todo_is_manual_work(tmp_path):
    """try's plan names the launcher's own line where bash stopped before any launch (`optimum-cli export neuron`
    kept under NM452's TODO); that is the migrator's manual work, not a command the try could not stand in."""
    (tmp_path / "export.sh").write_text(
        "#!/bin/sh\nset -e\n# TODO(neuron-migrate): NM452 the export writes $out, which a later command uses\n"
        "optimum-cli export neuron -m gpt2 \\\n    $out\npython infer.py --model $out\n"
    )
    launcher = tmp_path / "export.sh"
    reason = f"{launcher}: bash stopped before any launch: {launcher}: line 4: optimum-cli: command not found"
    row = run_rate.classify(result("export.sh", "not-run", reason), tmp_path)
    assert row["class"] == run_rate.MANUAL
    assert row["evidence"] == "export.sh:4: optimum-cli: command not found"
    assert row["fix"].startswith("NM452 at export.sh:4: the export writes")


def test_a_download_the_try_does_not_serve_is_the_try_s_limit(tmp_path):
    """CIFAR10(download=True) reaches the network, which a try does not have: not a failure of the migration."""
    (tmp_path / "cifar.py").write_text(
        "from torchvision import datasets\ndata = datasets.CIFAR10('d', download=True)\n"
    )
    row = run_rate.classify(
        result(
            "cifar.py",
            "failed",
            "URLError: <urlopen error [Errno -3] Temporary failure in name resolution> at cifar.py:2",
            error(
                tmp_path,
                "cifar.py",
                2,
                "URLError",
                "<urlopen error [Errno -3] Temporary failure in name resolution>",
            ),
        ),
        tmp_path,
    )
    assert row["class"] == run_rate.STAND_IN and row["fix"].startswith("try: a download from the network")


def test_a_launch_that_fails_before_the_user_s_code_under_a_todo_on_its_command_is_manual_work(tmp_path):
    """Accelerate stops at `import deepspeed` (its DeepSpeed config): no frame of the user's code, and the launch
    command carries NM475's TODO."""
    (tmp_path / "run.sh").write_text(
        "#!/bin/bash\nMODEL=x\n# TODO(neuron-migrate): NM475 `accelerate launch --config_file ds.yaml` runs DeepSpeed\n"
        "accelerate launch \\\n  --config_file ds.yaml \\\n  train.py --bf16\n"
    )
    reason = "exit code 1: ImportError: DeepSpeed is not installed"
    failed = result(
        "run.sh", "failed", reason, {"type": "ImportError", "message": "DeepSpeed is not installed"}
    )
    failed["runs"][0]["command"] = "accelerate launch --config_file ds.yaml train.py --bf16"
    row = run_rate.classify(failed, tmp_path)
    assert (row["class"], row["fix"][:17]) == (run_rate.MANUAL, "NM475 at run.sh:4")
    (tmp_path / "run.sh").write_text("#!/bin/bash\naccelerate launch --config_file ds.yaml train.py --bf16\n")
    assert run_rate.classify(failed, tmp_path)["class"] == run_rate.FAILS
