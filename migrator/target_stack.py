"""The stack migrated code runs on (TorchNeuron's public beta), read from `target_stack.json`: the one place
its versions are written. The install rewrites, the rule texts that name a version and the checklist read it."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from packaging.specifiers import SpecifierSet


@dataclass(frozen=True)
class Component:
    name: str  # as people write it: "Transformers", "Neuron SDK"
    package: str | None  # the pip distribution; None for what pip does not install (the SDK, Python)
    requires: SpecifierSet
    install: str  # what an install rewrite writes: "pinned" (name and specifier), "name", "no" (nothing)
    needed_when: str  # "always", or the module whose import makes it needed
    why: str
    index: str | None = None  # the pip index that serves it, where it is not PyPI

    @property
    def version(self) -> str:
        """The version the specifier names ("5.23" for ">=5.23", "2.14" for "==2.14.*"); "" for any."""
        return next((s.version.removesuffix(".*") for s in self.requires), "")

    @property
    def wanted(self) -> str:
        """The version in words: "5.23 or later", "2.14" (any 2.14.x), "" for any."""
        (specifier,) = self.requires or (None,)
        if specifier is None:
            return ""
        return f"{self.version} or later" if specifier.operator == ">=" else self.version

    @property
    def requirement(self) -> str:
        """As pip takes it: "transformers>=5.23"."""
        return f"{self.package}{self.requires}"


def _load() -> tuple[tuple[str, ...], tuple[str, ...], tuple[Component, ...]]:
    data = json.loads((Path(__file__).with_name("target_stack.json")).read_text(encoding="utf-8"))
    components = tuple(
        Component(
            c["name"],
            c["package"],
            SpecifierSet(c["requires"]),
            c["install"],
            c["needed_when"],
            c["why"],
            c.get("index"),
        )
        for c in data["components"]
    )
    return tuple(data["instances"]), tuple(data["not_on"]), components


INSTANCES, NOT_ON, COMPONENTS = _load()
_BY_PACKAGE = {c.package: c for c in COMPONENTS if c.package}
_BY_NAME = {c.name: c for c in COMPONENTS}


def component(name: str) -> Component:
    """By pip distribution ("trl") or by name ("Neuron SDK")."""
    return _BY_PACKAGE.get(name) or _BY_NAME[name]


def requirement(package: str) -> str:
    """What the migrated code needs of a package, as pip takes it: "transformers>=5.23"."""
    return component(package).requirement


# What an install rewrite adds, in this order: (distribution, the specifier it writes, "" for none).
INSTALL = tuple(
    (c.package, str(c.requires) if c.install == "pinned" else "")
    for c in COMPONENTS
    if c.package and c.install != "no"
)
# The pins migrated code cannot run without, as pip takes them: "transformers>=5.23", "trl>=1.16".
PINS = tuple(f"{package}{specifier}" for package, specifier in INSTALL if specifier)
# The install as a pip command line writes it: torch-neuronx "transformers>=5.23" ... accelerate.
PIP_ARGUMENTS = " ".join(
    f'"{package}{specifier}"' if specifier else package for package, specifier in INSTALL
)
