"""`neuron-migrate try` installs a module its environment lacks (what the project declares for it, else the
distribution of its name; an sdist built in the sandbox), into the sandbox's layer only (try_run/packages.py).
No test reaches a registry: the "registry" is a folder of wheels and sdists built here (PIP_NO_INDEX,
PIP_FIND_LINKS, as a user's pip configuration would name one), or a port nothing listens on."""

from __future__ import annotations

import base64
import hashlib
import io
import os
import subprocess
import sys
import tarfile
import textwrap
import zipfile
from pathlib import Path

import pytest

from tests.compat_matrix.test_trial_runs import CLI, run_try, write

USES_IT = """
import nmtrydemo
print("value:", nmtrydemo.VALUE)
"""


def wheel(
    folder: Path,
    name: str,
    version: str,
    requires: tuple[str, ...] = (),
    modules: dict[str, str] | None = None,
    package: str | None = None,
) -> Path:
    """A pure-Python wheel of distribution `name` holding package `package` (default: `name`; VALUE = its
    version, and `modules`: file -> text), as a build backend writes one."""
    folder.mkdir(parents=True, exist_ok=True)
    info = f"{name}-{version}.dist-info"
    package = package or name
    files = {
        f"{package}/__init__.py": f"VALUE = {version!r}\n",
        **{f"{package}/{file}": text for file, text in (modules or {}).items()},
        f"{info}/METADATA": "Metadata-Version: 2.1\n"
        f"Name: {name}\nVersion: {version}\n" + "".join(f"Requires-Dist: {r}\n" for r in requires),
        f"{info}/WHEEL": "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    record = []
    for path, text in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=").decode()
        record.append(f"{path},sha256={digest},{len(text.encode())}")
    files[f"{info}/RECORD"] = "\n".join([*record, f"{info}/RECORD,,"]) + "\n"
    target = folder / f"{name}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(target, "w") as archive:
        for path, text in files.items():
            archive.writestr(path, text)
    return target


@pytest.fixture
def registry(tmp_path, monkeypatch):
    """A local folder pip reads instead of the registry, and a cache of the tool's own for this test."""
    folder = tmp_path / "registry"
    wheel(folder, "nmtrydemo", "1.2")
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.setenv("PIP_FIND_LINKS", str(folder))
    return folder


def tried(tmp_path: Path, *options: str) -> dict:
    code, document, errors = run_try(tmp_path, "use.py", *options, cache=tmp_path / "cache", timeout=300)
    assert document, errors
    return document["runs"][0]


def importable_here(module: str) -> bool:
    probe = f"import importlib.util, sys; sys.exit(importlib.util.find_spec({module!r}) is None)"
    return subprocess.run([sys.executable, "-c", probe]).returncode == 0


def test_a_declared_module_is_installed_for_the_run_only(tmp_path, registry):
    write(tmp_path, "use.py", USES_IT)
    write(tmp_path, "requirements.txt", "torch\nnmtrydemo>=1.0\n")
    run = tried(tmp_path)
    assert run["status"] == "ran", run["reason"] + run["output_tail"]
    assert "value: 1.2" in run["output_tail"]
    assert run["installs"] == [
        {
            "module": "nmtrydemo",
            "needed_by": "import nmtrydemo",
            "requirement": "nmtrydemo>=1.0",
            "declared_in": "requirements.txt:2",
            "outcome": "installed",
            "distributions": ["nmtrydemo==1.2"],
        }
    ]
    assert run["timings"]["installing_seconds"] > 0
    assert not importable_here("nmtrydemo")  # the environment is as it was
    wheels = tmp_path / "cache" / "packages" / "wheels"
    assert [path.name for path in wheels.iterdir()] == ["nmtrydemo-1.2-py3-none-any.whl"]
    # A second try installs from the cache with no registry at all.
    os.environ["PIP_INDEX_URL"] = "http://127.0.0.1:9/simple"
    try:
        again = tried(tmp_path)
    finally:
        del os.environ["PIP_INDEX_URL"]
    assert again["status"] == "ran", again["reason"]


def test_an_undeclared_module_is_installed_and_said(tmp_path, registry):
    write(tmp_path, "use.py", USES_IT)
    code, document, errors = run_try(tmp_path, "use.py", cache=tmp_path / "cache", timeout=300)
    run = document["runs"][0]
    assert run["status"] == "ran", run["reason"] + run["output_tail"]
    assert run["installs"] == [
        {
            "module": "nmtrydemo",
            "needed_by": "import nmtrydemo",
            "requirement": "nmtrydemo",
            "declared_in": None,
            "outcome": "installed",
            "distributions": ["nmtrydemo==1.2"],
        }
    ]
    assert not importable_here("nmtrydemo")
    text = subprocess.run(
        [*CLI, "try", "use.py", "-q"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env={**os.environ, "NEURON_MIGRATE_CACHE": str(tmp_path / "cache")},
    )
    assert (
        "install for `import nmtrydemo`: nmtrydemo (nmtrydemo==1.2), not declared by the project: installed"
        in text.stdout
    )


def test_optional_imports_the_repository_s_own_modules_and_absent_ones(tmp_path, registry):
    wheel(registry, "nmoptional", "1.0")
    wheel(registry, "nmlocal", "1.0")
    wheel(registry, "nmnamed", "1.0", package="nmother")  # a distribution of the import's name without it
    (tmp_path / "lib").mkdir()
    write(tmp_path / "lib", "nmlocal.py", "VALUE = 'own'\n")
    write(
        tmp_path,
        "use.py",
        """
        try:
            import nmoptional
        except ImportError:
            nmoptional = None
        import nmlocal
        import nmabsent
        import nmnamed
        """,
    )
    run = tried(tmp_path)
    # The run stops at the tree's own module, which is not a package to install: the script's own import.
    assert (
        run["status"] == "failed" and "`nmlocal` is a module of this tree (lib/nmlocal.py)" in run["reason"]
    )
    assert [(i["module"], i["declared_in"], i["outcome"]) for i in run["installs"]] == [
        ("nmabsent", None, "not installed: the package registry has no release of nmabsent"),
        (
            "nmnamed",
            None,
            "not installed: nmnamed==1.0, the distribution of that name, has no module nmnamed; declare "
            "the distribution that provides it",
        ),
    ]


def test_the_user_s_modules_imports_count_and_a_name_the_release_lacks_is_said(tmp_path, registry):
    wheel(registry, "nmsecond", "1.0")
    write(tmp_path, "helper.py", "import nmtrydemo\n")
    write(tmp_path, "use.py", "import helper\nfrom nmsecond import absent_name\n")
    run = tried(tmp_path)
    assert run["status"] == "failed"
    assert {(i["module"], i["outcome"]) for i in run["installs"]} == {
        ("nmsecond", "installed"),
        ("nmtrydemo", "installed"),
    }
    assert run["reason"] == (
        "ImportError: cannot import name 'absent_name' from 'nmsecond' at use.py:2; nmsecond==1.0 was installed "
        "for the try (nmsecond, not declared by the project) and has no absent_name: the code was written for "
        "another release; declare the one it needs"
    ), run["reason"]


def test_a_refused_upgrade_and_the_opt_outs_are_not_installed(tmp_path, registry):
    write(tmp_path, "use.py", USES_IT)
    # Its dependency would downgrade `packaging`, which the environment has: refused, with pip's reason.
    wheel(registry, "nmtrydemo", "2.0", requires=("packaging<1",))
    write(tmp_path, "requirements.txt", "nmtrydemo==2.0\n")
    run = tried(tmp_path)
    assert run["status"] == "not-run"
    assert (
        "nmtrydemo==2.0 (declared in requirements.txt:1) not installed: nmtrydemo==2.0 needs a version of a "
        "distribution" in (run["reason"])
    )
    assert "packaging<1" in run["reason"]
    write(tmp_path, "requirements.txt", "nmtrydemo==1.2\n")
    assert tried(tmp_path, "--no-install")["installs"] == []
    unisolated = tried(tmp_path, "--no-isolation")
    assert unisolated["installs"][0]["outcome"].startswith("not installed: the try is not isolated")
    assert not importable_here("nmtrydemo")


def sdist(folder: Path, name: str, version: str, files: dict[str, str]) -> Path:
    """An sdist (`NAME-VERSION.tar.gz`, its files in one top folder, with a PKG-INFO) as `python -m build`
    writes one."""
    folder.mkdir(parents=True, exist_ok=True)
    top = f"{name}-{version}"
    files = {"PKG-INFO": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n", **files}
    target = folder / f"{top}.tar.gz"
    with tarfile.open(target, "w:gz") as archive:
        for path, text in files.items():
            data = textwrap.dedent(text).lstrip().encode()
            member = tarfile.TarInfo(f"{top}/{path}")
            member.size = len(data)
            archive.addfile(member, io.BytesIO(data))
    return target


def test_a_distribution_with_only_an_sdist_is_built_in_the_sandbox(tmp_path, registry):
    sdist(
        registry,
        "nmtrysrc",
        "1.0",
        {
            "pyproject.toml": """
                [build-system]
                requires = ["setuptools>=40.8.0"]
                build-backend = "setuptools.build_meta"

                [project]
                name = "nmtrysrc"
                version = "1.0"
                dependencies = ["nmtrydemo>=1"]
                """,
            "nmtrysrc/__init__.py": "import nmtrydemo\nVALUE = 'built ' + nmtrydemo.VALUE\n",
        },
    )
    write(tmp_path, "use.py", "import nmtrysrc\nprint('value:', nmtrysrc.VALUE)\n")
    run = tried(tmp_path)
    assert run["status"] == "ran", run["reason"] + run["output_tail"]
    assert "value: built 1.2" in run["output_tail"]
    assert run["installs"][0]["distributions"] == ["nmtrysrc==1.0", "nmtrydemo==1.2"]
    packages = tmp_path / "cache" / "packages"
    assert (packages / "sdists" / "nmtrysrc-1.0.tar.gz").is_file()
    assert (packages / "wheels" / "nmtrysrc-1.0-py3-none-any.whl").is_file()
    assert not importable_here("nmtrysrc")


def test_an_sdist_whose_build_needs_what_the_registry_lacks_says_so(tmp_path, registry):
    sdist(
        registry,
        "nmtrybad",
        "1.0",
        {
            "setup.py": """
                from setuptools import setup
                setup(name="nmtrybad", version="1.0", packages=["nmtrybad"], setup_requires=["nmbuildtool"])
                """,
            "nmtrybad/__init__.py": "",
        },
    )
    write(tmp_path, "use.py", "import nmtrybad\n")
    run = tried(tmp_path)
    assert run["status"] == "not-run"
    outcome = run["installs"][0]["outcome"]
    assert outcome.startswith(
        "not installed: nmtrybad 1.0 has no wheel, and its sdist cannot be built offline in the sandbox: its "
        "build requirement nmbuildtool: pip could not fetch nmbuildtool: No matching distribution found for "
        "nmbuildtool"
    ), outcome


def test_a_registry_that_cannot_be_reached_is_said(tmp_path, monkeypatch):
    monkeypatch.setenv("PIP_INDEX_URL", "http://127.0.0.1:9/simple")  # nothing listens on port 9
    write(tmp_path, "use.py", USES_IT)
    write(tmp_path, "requirements.txt", "nmtrydemo\n")
    run = tried(tmp_path)
    assert run["status"] == "not-run"
    assert "not installed: the package registry could not be reached to fetch nmtrydemo" in run["reason"]


def test_a_notebook_s_pip_line_declares_what_it_installs(tmp_path, registry):
    import json

    cells = ["%pip install -U nmtrydemo -q", "import nmtrydemo\nprint('value:', nmtrydemo.VALUE)"]
    notebook = {
        "cells": [{"cell_type": "code", "source": cell, "metadata": {}, "outputs": []} for cell in cells],
        "metadata": {},
        "nbformat": 4,
        "nbformat_minor": 5,
    }
    (tmp_path / "use.ipynb").write_text(json.dumps(notebook))
    code, document, errors = run_try(tmp_path, "use.ipynb", cache=tmp_path / "cache", timeout=300)
    run = document["runs"][0]
    assert run["status"] == "ran", run["reason"] + run["output_tail"]
    assert run["installs"][0]["declared_in"] == "cell 1: pip install -U nmtrydemo -q"


# What botocore does for a call with no credentials (botocore/auth.py raises botocore.exceptions.NoCredentialsError).
AWS_CLIENT = {
    "exceptions.py": "class NoCredentialsError(Exception):\n    pass\n",
    "client.py": "from botocore.exceptions import NoCredentialsError\n\n\ndef call():\n"
    "    raise NoCredentialsError('Unable to locate credentials')\n",
}


def test_a_call_that_reaches_aws_needs_an_account_not_the_migration(tmp_path, registry):
    wheel(registry, "botocore", "1.0", modules=AWS_CLIENT)
    write(tmp_path, "use.py", "import botocore.client\n\nbotocore.client.call()\n")
    write(tmp_path, "requirements.txt", "botocore\n")
    run = tried(tmp_path)
    assert run["status"] == "not-run"
    assert run["reason"].startswith(
        "not run: needs an AWS account: NoCredentialsError: Unable to locate credentials at use.py:3 "
        "(raised in botocore); a try strips AWS credentials"
    )


def test_vllm_is_not_installed_and_says_why(tmp_path, registry):
    wheel(registry, "vllm", "1.0")
    write(tmp_path, "use.py", "import vllm\n")
    write(tmp_path, "requirements.txt", "vllm\n")
    run = tried(tmp_path)
    assert run["status"] == "not-run"
    assert run["installs"][0]["outcome"].startswith("not installed: vLLM's wheels are built for CUDA GPUs")
    assert "vLLM's wheels are built for CUDA GPUs" in run["reason"]


def test_a_declaration_at_the_repository_root_serves_a_script_below_it(tmp_path, registry):
    (tmp_path / ".git").mkdir()
    write(tmp_path, "requirements.txt", "nmtrydemo\n")
    (tmp_path / "examples").mkdir()
    write(tmp_path / "examples", "use.py", USES_IT)
    code, document, errors = run_try(tmp_path / "examples", "use.py", cache=tmp_path / "cache", timeout=300)
    run = document["runs"][0]
    assert run["status"] == "ran", run["reason"] + run["output_tail"]
    assert run["installs"][0]["declared_in"] == "requirements.txt:1"


REPORTS_TO = """
from transformers import TrainingArguments
from transformers.integrations.integration_utils import is_tensorboard_available

args = TrainingArguments(output_dir="out", report_to={report_to!r})
print("tensorboard available:", is_tensorboard_available())
"""


@pytest.mark.skipif(importable_here("tensorboard"), reason="the environment has tensorboard")
def test_the_integration_training_arguments_report_to_is_installed_for_the_run(tmp_path, registry):
    """report_to="tensorboard": the module Transformers checks for is installed as an undeclared import is (a
    stand-in tensorboard here: the registry is a folder)."""
    wheel(registry, "tensorboard", "2.99")
    write(tmp_path, "use.py", REPORTS_TO.format(report_to="tensorboard"))
    run = tried(tmp_path)
    assert run["status"] == "ran", run["reason"] + run["output_tail"]
    assert "tensorboard available: True" in run["output_tail"]
    assert run["installs"] == [
        {
            "module": "tensorboard",
            "needed_by": "report_to=tensorboard",
            "requirement": "tensorboard",
            "declared_in": None,
            "outcome": "installed",
            "distributions": ["tensorboard==2.99"],
        }
    ]
    assert not importable_here("tensorboard")


# Trainer's own way of building the callbacks of args.report_to.
BUILDS_CALLBACKS = """
from transformers import TrainingArguments
from transformers.integrations import get_reporting_integration_callbacks

args = TrainingArguments(output_dir="out", report_to=["mlflow"])
callbacks = [callback() for callback in get_reporting_integration_callbacks(args.report_to)]
"""


@pytest.mark.skipif(importable_here("mlflow"), reason="the environment has mlflow")
def test_an_integration_that_logs_to_a_service_is_not_installed_and_says_why(tmp_path, registry):
    wheel(registry, "mlflow", "1.0")
    write(tmp_path, "use.py", BUILDS_CALLBACKS)
    run = tried(tmp_path)
    not_installed = (
        "not installed: report_to=mlflow sends the run's logs to a service the try cannot reach (no network); "
        "a try installs only the integrations that log offline (tensorboard, wandb)"
    )
    assert run["installs"][0]["needed_by"] == "report_to=mlflow"
    assert run["installs"][0]["outcome"] == not_installed
    assert run["status"] == "not-run"
    assert run["reason"].startswith("not run: install mlflow in the environment that runs it")
    assert run["reason"].endswith(f"; mlflow (not declared by the project) {not_installed}")


def test_torchs_tensorboard_writer_needs_the_tensorboard_distribution():
    """`from torch.utils.tensorboard import SummaryWriter` imports `tensorboard`, which torch does not depend on:
    the try installs it as for an import of its own."""
    from try_run.packages import top_level_modules
    from usercode.python import python_imports

    imports = python_imports("from torch.utils.tensorboard import SummaryWriter\nimport torch.nn\n")
    assert top_level_modules(set(imports)) == {"torch", "tensorboard"}
    assert top_level_modules({"torch.utils.data"}) == {"torch"}
