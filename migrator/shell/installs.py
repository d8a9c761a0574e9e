"""What an install of the optimum-neuron / PyTorch-XLA stack becomes on TorchNeuron, one requirement at a time.

Shared by `pip install` lines (shell, notebook `%pip`) and requirements files. Requirements are read with
`packaging` (the parser pip vendors): name, extras, specifier, marker, URL. Only what TorchNeuron replaces is
dropped; what an optimum-neuron extra pulled in is kept (`optimum-neuron[diffusers]` -> `diffusers`), markers
carry over to the replacement, and pins that cannot hold the versions migrated code needs are flagged.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from packaging.markers import Marker
from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import InvalidWheelFilename, canonicalize_name, parse_wheel_filename
from packaging.version import InvalidVersion, Version

from migrator import target_stack

# torch-neuronx is published on the Neuron pip repository, not on PyPI.
NEURON_INDEX = target_stack.component("torch-neuronx").index
# Distributions TorchNeuron replaces (canonical names), and the module each one provides.
REPLACED = {
    "optimum-neuron": "optimum.neuron",
    "torch-xla": "torch_xla",
    "neuronx-distributed": "neuronx_distributed",
    "neuronx-distributed-training": "neuronx_distributed_training",
    "libneuronxla": "libneuronxla",
    "transformers-neuronx": "transformers_neuronx",
}
# What migrated code needs, (distribution, specifier) in install order (migrator/target_stack.json).
TARGET = target_stack.INSTALL
# optimum-neuron extras: the packages each one pulled in that TorchNeuron code still uses (none: covered by
# the target set or by torch-neuronx). An extra not listed has no counterpart the codemod can name.
EXTRAS = {
    "diffusers": ("diffusers",),
    "sentence-transformers": ("sentence-transformers",),
    "training": (),
    "neuronx": (),
    "neuron": (),
    "neuronx-cc": (),
}


# A module -> the file (a path) of the code an install serves that still imports it once migrated, or None.
Importer = Callable[[str], str | None]


@dataclass(frozen=True)
class Parsed:
    name: str  # canonical
    extras: frozenset[str] = frozenset()
    specifier: SpecifierSet = field(default_factory=SpecifierSet)
    marker: Marker | None = None
    url: str | None = None


def parse(text: str) -> Parsed | None:
    """A requirement as pip reads it (`name[extras]spec; marker`, `name @ url`, or a bare VCS/archive URL
    named by its `#egg=` fragment or its last path segment); None when it is none of these."""
    try:
        requirement = Requirement(text)
    except InvalidRequirement:
        return _url(text)
    return Parsed(
        canonicalize_name(requirement.name),
        frozenset(canonicalize_name(extra) for extra in requirement.extras),
        requirement.specifier,
        requirement.marker,
        requirement.url,
    )


def _url(text: str) -> Parsed | None:
    if not text.startswith(("git+", "hg+", "https://", "http://", "file:")):
        return None
    parts = urlsplit(text.split("+", 1)[1] if text.startswith(("git+", "hg+")) else text)
    egg = dict(item.partition("=")[::2] for item in parts.fragment.split("&") if item).get("egg")
    last = parts.path.rstrip("/").rsplit("/", 1)[-1]
    if egg is None and last.endswith(".whl"):
        try:
            return Parsed(parse_wheel_filename(last)[0], url=text)
        except InvalidWheelFilename:
            return None
    name = egg or last.split("@", 1)[0].removesuffix(".git")
    return Parsed(canonicalize_name(name), url=text) if name else None


def stale(requirement: Parsed) -> bool:
    """A torch-neuronx pin from the XLA era (one no TorchNeuron version satisfies): it goes, the current one comes."""
    return requirement.name == "torch-neuronx" and (
        requirement.url is not None
        or not _admits(requirement.specifier, target_stack.component("torch-neuronx").requires)
    )


# Operators that hold the Neuron compiler to one release line: an exact version or an upper bound.
_HOLDING = frozenset({"==", "===", "<", "<=", "~="})


def unpinned_compiler(requirement: Parsed) -> str | None:
    """`neuronx-cc==2.14.213.0`: the compiler held to the release of an XLA-era Neuron SDK, which would hold
    the resolver to the torch-neuronx of that release. The requirement without its version (its marker kept):
    torch-neuronx requires the compiler it works with. None for any other requirement."""
    if requirement.name != "neuronx-cc" or requirement.url is not None:
        return None
    if not any(s.operator in _HOLDING and not s.version.endswith(".*") for s in requirement.specifier):
        return None
    return "neuronx-cc" + (f"; {requirement.marker}" if requirement.marker is not None else "")


def concerns_torchneuron(requirements: list[Parsed]) -> bool:
    """An install of the legacy stack, or of TorchNeuron (whose other pins must fit the migrated code)."""
    return any(replaced(r) or r.name == "torch-neuronx" for r in requirements)


def replaced(requirement: Parsed) -> bool:
    """TorchNeuron replaces it (`optimum[neuronx]` is optimum-neuron too)."""
    if requirement.name == "optimum":
        return any("neuron" in extra for extra in requirement.extras)
    return requirement.name in REPLACED


@dataclass
class Plan:
    """What the legacy requirements of one install become."""

    added: list[str]  # requirement texts to install instead (markers of the replaced lines carried over)
    kept: list[tuple[Parsed, str]]  # legacy requirements left in place, with why
    conflicts: list[tuple[Parsed, str]]  # other requirements whose pin conflicts with the target, with why

    def keeps(self, requirement: Parsed) -> bool:
        """Whether this very requirement is left in place (an equal one elsewhere in the install may go)."""
        return any(owner is requirement for owner, _ in self.kept)


def plan(
    requirements: list[Parsed],
    imported: frozenset[str] = frozenset(),
    beside: Importer | None = None,
) -> Plan:
    """`requirements`: every requirement of the install; `imported`: modules the same file still imports;
    `beside`: asked only when a legacy package would go, which file of the code the install serves still imports
    its module once migrated (see `migrator.still_imported`)."""
    legacy = [r for r in requirements if replaced(r)]
    present = {r.name for r in requirements}
    kept: list[tuple[Parsed, str]] = []
    unknown_extras: list[str] = []
    added_names: list[str] = []
    for requirement in legacy:
        module = REPLACED.get(requirement.name, "optimum.neuron")
        if any(name == module or name.startswith(module + ".") for name in imported):
            kept.append((requirement, f"`{module}` is still imported here"))
        elif beside is not None and (where := beside(module)) is not None:
            kept.append((requirement, f"`{module}` is still imported by `{where}`"))
        for extra in sorted(requirement.extras):
            if extra in EXTRAS:
                added_names += [name for name in EXTRAS[extra] if name not in present]
            elif requirement.name == "optimum-neuron":
                unknown_extras.append(extra)
    for extra in unknown_extras:
        owner = next(r for r in legacy if extra in r.extras)
        kept.append(
            (
                owner,
                f"its `[{extra}]` extra has no TorchNeuron counterpart the codemod can name"
                + (
                    " (serving moves to vLLM Neuron: install it as its documentation says)"
                    if extra == "vllm"
                    else ""
                ),
            )
        )
    markers = {str(r.marker) for r in legacy if r.marker is not None}
    marker = f"; {markers.pop()}" if len(markers) == 1 else ""
    added = [f"{name}{spec}{marker}" for name, spec in TARGET if name not in present]
    added += [f"{name}{marker}" for name in dict.fromkeys(added_names)]
    conflicts = []
    for requirement in requirements:
        needed = dict(TARGET).get(requirement.name)
        if needed and not _admits(requirement.specifier, SpecifierSet(needed)):
            conflicts.append(
                (
                    requirement,
                    f"it excludes `{requirement.name}{needed}`, which the migrated code needs",
                )
            )
    return Plan(added, kept, conflicts)


def _admits(pin: SpecifierSet, needed: SpecifierSet) -> bool:
    """Whether some version satisfies both (tried at every bound either names)."""
    if not pin:
        return True
    bounds = []
    for specifier in (*pin, *needed):
        try:
            bounds.append(Version(specifier.version.rstrip(".*")))
        except InvalidVersion:
            return True  # a pin the codemod cannot read is not called a conflict
    return any(pin.contains(v, prereleases=True) and needed.contains(v, prereleases=True) for v in bounds)
