"""What a project declares it needs (usercode/declarations.py): dependency files and pip install lines."""

from __future__ import annotations

from pathlib import Path

from usercode.declarations import in_files, pip_install, setup_requires


def pairs(found) -> list[tuple[str, str, str]]:
    return [(d.requirement, d.name, d.source) for d in found]


def test_requirements_files_with_includes_pyproject_and_setup_py(tmp_path: Path) -> None:
    (tmp_path / "requirements.txt").write_text(
        "# the stack\n-r base-requirements.txt\nEvaluate==0.3.0  # metrics\n--extra-index-url https://x\n"
        "-e git+https://example.com/repo.git#egg=thing\nhttps://example.com/a.whl\n"
    )
    (tmp_path / "base-requirements.txt").write_text("boto3>=1.28\n-r requirements.txt\n")
    (tmp_path / "pyproject.toml").write_text(
        '[project]\nname = "p"\ndependencies = ["seqeval"]\n[project.optional-dependencies]\nplot = ["matplotlib<4"]\n'
        '[tool.poetry.dependencies]\npython = "^3.10"\nsagemaker = "^2.200"\n'
    )
    (tmp_path / "setup.py").write_text(
        'from setuptools import setup\nsetup(name="p", install_requires=["scikit-learn"], '
        'extras_require={"aws": ["awscli"]})\n'
    )
    assert pairs(in_files(tmp_path, tmp_path)) == [
        ("boto3>=1.28", "boto3", "base-requirements.txt:1"),
        ("Evaluate==0.3.0", "evaluate", "requirements.txt:3"),
        ("seqeval", "seqeval", "pyproject.toml"),
        ("matplotlib<4", "matplotlib", "pyproject.toml"),
        ("sagemaker", "sagemaker", "pyproject.toml"),
        ("scikit-learn", "scikit-learn", "setup.py"),
        ("awscli", "awscli", "setup.py"),
    ]


def test_pip_install_lines_name_their_requirements_and_read_their_files(tmp_path: Path) -> None:
    (tmp_path / "requirements.txt").write_text("evaluate\n")
    line = 'pip install -U sagemaker "optimum-neuron[vllm]==0.3.0" -q --index-url https://x -r requirements.txt 2>&1 | grep -v warn'
    assert pairs(pip_install(line, tmp_path, "cell 1", tmp_path)) == [
        ("sagemaker", "sagemaker", "cell 1"),
        ("optimum-neuron[vllm]==0.3.0", "optimum-neuron", "cell 1"),
        ("evaluate", "evaluate", "requirements.txt:1"),
    ]
    assert pairs(pip_install("python3 -m pip install boto3", tmp_path, "run.sh:2", tmp_path)) == [
        ("boto3", "boto3", "run.sh:2")
    ]
    assert pip_install("aws s3 cp s3://b/x .", tmp_path, "run.sh:3", tmp_path) == []
    assert pip_install("pip download boto3", tmp_path, "run.sh:4", tmp_path) == []


def test_setup_requires_is_read_not_run():
    text = 'from setuptools import setup\nsetup(name="x", setup_requires=["setuptools_scm", "cython>=3"])\n'
    assert setup_requires(text) == ["setuptools_scm", "cython>=3"]
    assert setup_requires("setup(name='x')\n") == []
    assert setup_requires("not python (\n") == []
