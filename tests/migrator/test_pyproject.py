"""`pyproject.toml` dependencies are migrated as a requirements file is, keeping the file byte for byte outside the
edited strings (checked by reading it again with tomllib)."""

from __future__ import annotations

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

from migrator.engine import migrate_pyproject

PROJECT = """\
[project]
name = "serve"  # the service
dependencies = ["optimum-neuron==0.0.25", "fastapi>=0.100", 'torch-xla==2.1.2']

[project.optional-dependencies]
test = [
    "pytest",
]
"""


def test_a_one_line_list_takes_the_package_set_in_place_and_the_rest_stays_byte_for_byte() -> None:
    migrated, findings = migrate_pyproject(PROJECT)
    data = tomllib.loads(migrated)
    dependencies = data["project"]["dependencies"]
    assert dependencies[0] == "torch-neuronx" and "fastapi>=0.100" in dependencies
    assert not any("optimum" in d or "xla" in d for d in dependencies)
    assert 'name = "serve"  # the service\n' in migrated and migrated.endswith(PROJECT.split("\n\n")[1])
    assert [(f.code, f.fixed) for f in findings] == [("NM460", True)]
    assert "--extra-index-url https://pip.repos.neuron.amazonaws.com" in findings[0].message
    assert migrate_pyproject(migrated) == (migrated, [])


def test_a_package_the_code_beside_still_imports_stays_with_a_todo(tmp_path) -> None:
    (tmp_path / "app.py").write_text("from optimum.neuron import NeuronModelForCausalLM\n")
    migrated, findings = migrate_pyproject(PROJECT, tmp_path)
    assert '"optimum-neuron==0.0.25"' in migrated
    assert [(f.code, f.fixed) for f in findings if not f.fixed] == [("NM473", False)]
    assert migrated.splitlines()[2].startswith("# TODO(neuron-migrate): NM473 `optimum-neuron==0.0.25` left")
    tomllib.loads(migrated)


def test_files_without_legacy_dependencies_or_that_do_not_parse_are_left_alone() -> None:
    plain = '[project]\nname = "x"\ndependencies = ["transformers==4.41.0"]\n'
    assert migrate_pyproject(plain) == (plain, [])
    broken = '[project]\ndependencies = ["optimum-neuron"\n'
    assert migrate_pyproject(broken) == (broken, [])


POETRY = """\
[tool.poetry.dependencies]
python = "^3.11"
optimum-neuron = "0.0.25"
requests = "^2.31"

[tool.poetry.group.neuron.dependencies]
torch-xla = { version = "2.1.2", markers = "platform_machine == 'x86_64'" }
"""


def test_a_poetry_table_takes_one_line_per_package_and_its_constraints_are_read_as_ranges() -> None:
    migrated, findings = migrate_pyproject(POETRY)
    data = tomllib.loads(migrated)
    main = data["tool"]["poetry"]["dependencies"]
    assert main["torch-neuronx"] == "*" and main["transformers"] == ">=5.23" and main["requests"] == "^2.31"
    assert "optimum-neuron" not in main
    assert "torch-xla" not in data["tool"]["poetry"]["group"]["neuron"]["dependencies"]
    assert "poetry source add --priority=supplemental neuron" in findings[0].message
    assert migrate_pyproject(migrated) == (migrated, [])


def test_poetry_constraints_as_pep_440_ranges() -> None:
    from migrator.shell.pyproject import _poetry_specifier

    assert _poetry_specifier("^4.41") == ">=4.41,<5"
    assert _poetry_specifier("^0.0.25") == ">=0.0.25,<0.1"
    assert _poetry_specifier("~1.2.3") == ">=1.2.3,<1.3"
    assert _poetry_specifier("4.41.0") == "==4.41.0"
    assert _poetry_specifier(">=1,<2") == ">=1,<2"
    assert _poetry_specifier("*") == ""


def test_a_setup_py_declares_the_package_set_and_a_list_built_in_code_stays() -> None:
    from migrator.engine import migrate_setup_py

    literal = (
        'from setuptools import setup\n\nsetup(name="x", install_requires=["optimum-neuron", "numpy"])\n'
    )
    migrated, findings = migrate_setup_py(literal)
    assert (
        'install_requires=["torch-neuronx", "transformers>=5.23", "trl>=1.16", "peft", "accelerate", "numpy"]'
        in (migrated)
    )
    assert [(f.code, f.fixed) for f in findings] == [("NM460", True)]
    assert migrate_setup_py(migrated) == (migrated, [])
    computed = (
        'from setuptools import setup\n\nREQUIRES = ["numpy"]\nsetup(name="x", install_requires=REQUIRES)\n'
    )
    assert migrate_setup_py(computed) == (computed, [])
