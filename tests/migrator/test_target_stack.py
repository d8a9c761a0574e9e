"""The target stack (migrator/target_stack.json) is written once: README.md and docs/ state its versions (the
CHANGELOG, which holds history, may name older ones), the checklist and the install rewrites read it, and
set-up and the harness's extra agree with it."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.version import Version

from migrator import target_stack
from migrator.shell import installs
from reports.checklist import _platform_items

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
V = r"(\d+\.\d+)"
# How the pages write a version of the stack; each pattern's group is the version it states.
STATEMENTS = {
    "Transformers": re.compile(rf"\btransformers\s*(?:>=|≥)\s*{V}", re.IGNORECASE),
    "TRL": re.compile(rf"\bTRL\s*(?:>=|≥)\s*{V}", re.IGNORECASE),
    "PEFT": re.compile(rf"\bPEFT\s*(?:>=|≥)\s*{V}", re.IGNORECASE),
    "Neuron SDK": re.compile(rf"\bNeuron\s+SDK\s*(?:>=\s*)?{V}"),
    "torch-neuronx": re.compile(rf"\btorch-neuronx`?\s*{V}"),
    "Python": re.compile(
        rf"\bPython\s+(?:\*\*)?{V}\+?(?:\*\*)?\s+(?:on\s+(?:a|the|every)\s+Trainium\s+host|for\s+the\s+torch-neuronx)"
        rf"|torch-neuronx[\w .-]*\s+wheels\s+need\s+(?:\*\*)?Python\s+{V}"
        rf"|{V}\+\s+on\s+(?:a|the)\s+Trainium\s+host"
    ),
}


def statements(text: str, name: str) -> list[str]:
    return [next(g for g in match.groups() if g) for match in STATEMENTS[name].finditer(text)]


@pytest.mark.parametrize("name", sorted(STATEMENTS))
def test_every_page_states_the_version_of_the_table(name: str) -> None:
    wanted = target_stack.component(name).version
    wrong = [
        f"{page.relative_to(ROOT)}: {name} {found}"
        for page in PAGES
        if page.is_file()
        for found in statements(page.read_text(encoding="utf-8"), name)
        if found != wanted
    ]
    assert not wrong, f"migrator/target_stack.json says {name} {wanted}; the pages say: {wrong}"


@pytest.mark.parametrize("name", sorted(STATEMENTS))
def test_the_readme_states_the_target_stack(name: str) -> None:
    assert statements((ROOT / "README.md").read_text(encoding="utf-8"), name), (
        f"README.md never states {name}"
    )


def test_the_checklist_lists_every_component_with_its_version() -> None:
    titles = [item.title for item in _platform_items({"trl", "peft"})]
    for component in target_stack.COMPONENTS:
        (title,) = [t for t in titles if t.startswith(f"Install {component.name} ")] or [
            t for t in titles if t == f"Install {component.name}"
        ]
        assert component.version in title
    assert not any("3.10" in title for title in titles)
    without = [item.title for item in _platform_items(set())]
    assert not any(t.startswith(("Install TRL", "Install PEFT")) for t in without)


def test_the_install_rewrite_adds_the_stack_of_the_table() -> None:
    plan = installs.plan([installs.parse("optimum-neuron==0.4.5")])
    assert plan.added == [
        f"{c.package}{c.requires if c.install == 'pinned' else ''}"
        for c in target_stack.COMPONENTS
        if c.package and c.install != "no"
    ]
    conflict = installs.plan([installs.parse("optimum-neuron"), installs.parse("transformers==4.52.3")])
    assert [why for _, why in conflict.conflicts] == [
        f"it excludes `{target_stack.requirement('transformers')}`, which the migrated code needs"
    ]
    below = Version(target_stack.component("torch-neuronx").version).release
    xla_era = f"torch-neuronx=={below[0]}.{below[1] - 1}.0"
    assert installs.stale(installs.parse(xla_era))
    assert not installs.stale(
        installs.parse(f"torch-neuronx=={target_stack.component('torch-neuronx').version}")
    )


def test_setup_refuses_a_python_older_than_the_table_on_a_trainium_host() -> None:
    setup = (ROOT / "scripts" / "setup.sh").read_text()
    (major, minor) = re.search(r"sys\.version_info < \((\d+), (\d+)\)", setup).groups()
    assert f"{major}.{minor}" == target_stack.component("Python").version


def test_the_harness_extra_admits_the_target_versions() -> None:
    extra = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]["compat"]
    pins = {
        r.name: r.specifier
        for r in map(Requirement, extra)
        if r.name in {"torch", "transformers", "trl", "peft"}
    }
    for name, specifier in pins.items():
        assert specifier.contains(target_stack.component(name).version + ".0"), (name, specifier)
