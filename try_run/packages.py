"""What a try installs for the code it runs: a module the code imports that its environment lacks. The user who
runs the script has it installed; the try installs it into its own throw-away layer only. The distribution is
the one the project declares (`usercode.declarations`: dependency files, the `pip install` lines of the tried
launcher or notebook), else the one named for the import (IMPORT_NAMES, or the import's own name) when the import
is not optional (not in a `try:` that handles its failure) and not a module of the repository itself:

- outside the sandbox, pip resolves the requirement against the environment with every installed distribution
  pinned as a constraint (so nothing installed is upgraded, downgraded or shadowed: a requirement that needs
  that is refused, with pip's reason) and downloads the resolved wheels into the tool's cache (wheels only: no
  third-party build code runs outside the sandbox);
- a distribution with no wheel (only an sdist) is downloaded as its sdist, hash-checked, without running any of
  it (pip's own index finder: no metadata is prepared), and built into a wheel inside the sandbox (no network,
  `pip wheel --no-deps --no-build-isolation` with the environment's build back-end, or the build requirements
  the sdist's pyproject.toml names, installed there first); the wheel comes out through the try's folder into the
  cache, and the resolution goes on with it;
- inside the sandbox (no network), pip installs exactly those wheels with `--no-index --no-deps` into the
  environment's copy-on-write view, discarded with the try.

pip runs as the user's pip would (their pip configuration and PIP_* variables: a private index, a proxy), for
the interpreter that runs the code (`pip --python`).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import InvalidWheelFilename, canonicalize_name, parse_wheel_filename
from packaging.version import Version

from try_run.integrations import Integration
from usercode import declarations
from usercode.declarations import Declaration
from usercode.names import NEURON_SDK_MODULES

# Import names that are not their distribution's name: module -> the distributions that provide it. A
# declaration of one of these serves the import.
IMPORT_NAMES = {
    "sklearn": ("scikit-learn",),
    "skimage": ("scikit-image",),
    "PIL": ("pillow",),
    "yaml": ("pyyaml",),
    "cv2": ("opencv-python", "opencv-python-headless", "opencv-contrib-python"),
    "bs4": ("beautifulsoup4",),
    "dateutil": ("python-dateutil",),
    "dotenv": ("python-dotenv",),
    "chess": ("python-chess", "chess"),
    "google": ("protobuf",),
    "attr": ("attrs",),
    "fitz": ("pymupdf",),
    "git": ("gitpython",),
    "Crypto": ("pycryptodome",),
    "jwt": ("pyjwt",),
    "faiss": ("faiss-cpu",),
    "mpi4py": ("mpi4py",),
}
# Modules no install makes work in a try, and why.
CANNOT_INSTALL = {
    "vllm": (
        "vLLM's wheels are built for CUDA GPUs (on Trainium it is the Neuron SDK's vLLM build), and they pin "
        "their own torch: the try's environment cannot hold it; try the vLLM part on a Trainium instance"
    ),
    **{
        module.split(".")[0]: f"{module.split('.')[0]} is the Neuron SDK / PyTorch-XLA stack the migration "
        "replaces: its import is what is left to migrate"
        for module in NEURON_SDK_MODULES
    },
}
REGISTRY_UNREACHABLE = (
    "NewConnectionError",
    "Failed to establish a new connection",
    "Temporary failure in name resolution",
    "Name or service not known",
    "Network is unreachable",
    "ConnectTimeoutError",
    "Max retries exceeded",
    "ProxyError",
    "Connection refused",
)
INSTALLED = "installed"
# Each pip call outside the sandbox: a registry that does not answer fails it rather than waiting for pip's
# default timeout and retries (the try's own --timeout is for the run).
PIP_NETWORK_OPTIONS = ("--retries", "1", "--timeout", "20", "--disable-pip-version-check")
# A resolution pip cannot finish in this time (it backtracks through every release of a distribution when a
# pinned one rules them out) is given up, and said.
PIP_SECONDS = 60


@dataclass
class Install:
    """The outcome for one module the code imports and its environment lacks."""

    module: str
    requirement: str  # as the project declares it, else the distribution named for the import
    declared_in: str | None  # where the project declares it (usercode.declarations); None: it does not
    outcome: str = ""  # INSTALLED, or why not
    distributions: list[str] = field(default_factory=list)  # "name==version", the requested one first
    needed_by: str = ""  # what in the code needs it: its import, else this ("report_to=tensorboard")

    def as_report(self) -> dict:
        return {
            "module": self.module,
            "needed_by": self.needed_by or f"import {self.module}",
            "requirement": self.requirement,
            "declared_in": self.declared_in,
            "outcome": self.outcome,
            "distributions": self.distributions,
        }


def declared(declared_in: str | None) -> str:
    """Where an install's requirement comes from, said."""
    return f"declared in {declared_in}" if declared_in else "not declared by the project"


@dataclass
class Sandbox:
    """How the try's sandbox is reached: `run(argv) -> (exit code, standard error)` runs a command in it (the
    copy-on-write layer the code runs in), `shared` is a folder its writes reach outside through."""

    run: Callable[[list[str]], tuple[int, str]]
    shared: Path


@dataclass
class Environment:
    """What the interpreter that runs the code has: the modules it lacks of those asked, its distributions."""

    missing: set[str]
    distributions: dict[str, str]  # canonical name -> version


ENVIRONMENT_PROBE = """
import importlib.util, json, sys
sys.path[:0] = json.loads(sys.argv[1])
missing = [name for name in json.loads(sys.argv[2]) if importlib.util.find_spec(name) is None]
installed = {}
if missing:  # (what is installed matters only then: reading every distribution's metadata takes a second)
    import importlib.metadata
    installed = {d.metadata["Name"]: d.version for d in importlib.metadata.distributions() if d.metadata["Name"]}
print(json.dumps({"missing": missing, "installed": installed}))
"""


def environment(python: str, modules: set[str], folders: list[Path]) -> Environment:
    """Which of `modules` (top-level names) `python` cannot import with `folders` (the code's own) on its path."""
    probe = subprocess.run(
        [python, "-c", ENVIRONMENT_PROBE, json.dumps([str(f) for f in folders]), json.dumps(sorted(modules))],
        capture_output=True,
        text=True,
        timeout=60,
    )
    if probe.returncode != 0:
        return Environment(set(), {})
    found = json.loads(probe.stdout)
    return Environment(
        set(found["missing"]),
        {canonicalize_name(name): version for name, version in found["installed"].items()},
    )


# Modules whose import imports another top-level module that their own distribution does not depend on: torch's
# TensorBoard writer needs the `tensorboard` distribution.
IMPORTS_ALSO = {"torch.utils.tensorboard": "tensorboard"}


def top_level_modules(imports: set[str]) -> set[str]:
    also = {
        needed
        for name in imports
        for module, needed in IMPORTS_ALSO.items()
        if name == module or name.startswith(module + ".")
    }
    return ({name.split(".")[0] for name in imports} | also) - set(sys.stdlib_module_names)


def declaration_for(module: str, declarations: list[Declaration]) -> Declaration | None:
    """The first declaration (in the order given: nearest first) of a distribution that provides `module`."""
    names = {canonicalize_name(module), *IMPORT_NAMES.get(module, ())}
    return next((d for d in declarations if d.name in names), None)


def distribution_named_for(module: str) -> str:
    """The distribution an import names when nothing declares it: IMPORT_NAMES's first, else the module's name."""
    return IMPORT_NAMES.get(module, (module,))[0]


# Folders of a repository that hold no module of its own code.
NOT_CODE_FOLDERS = frozenset({"node_modules", "__pycache__", "site-packages", "venv", "env"})


def repository_modules(root: Path) -> set[str]:
    """The top-level names a repository's own code could import: each `NAME.py` and each folder holding Python,
    anywhere in it (a script may put any of its folders on sys.path): never installed from a registry."""
    names = set()
    for folder, subfolders, files in os.walk(root):
        subfolders[:] = [s for s in subfolders if not s.startswith(".") and s not in NOT_CODE_FOLDERS]
        python = [name for name in files if name.endswith(".py")]
        names |= {name.removesuffix(".py") for name in python}
        if python and Path(folder) != root:
            names.add(Path(folder).name)
    return names


def wheel_provides(wheel: Path, module: str) -> bool:
    """Whether a wheel installs the top-level module `module` (a package folder, a `.py`, an extension)."""
    with zipfile.ZipFile(wheel) as archive:
        tops = {
            re.sub(r"^[^/]+\.data/(purelib|platlib)/", "", name).split("/")[0] for name in archive.namelist()
        }
    return any(top.split(".")[0] == module for top in tops)


class PipFailed(Exception):
    """pip could not resolve or fetch: the message is the reason shown."""


class PipRefused(PipFailed):
    """The requirement cannot be installed beside what the environment has: lasting, so remembered."""


class PipTimedOut(PipRefused):
    """pip's resolution ran past PIP_SECONDS (backtracking through releases a pinned distribution rules out)."""


class NoWheel(PipFailed):
    """No wheel of `requirement` (a distribution pip's plan needs) is on the registry: its sdist may be built."""

    def __init__(self, message: str, requirement: str) -> None:
        super().__init__(message)
        self.requirement = requirement


# At most this many sdists are built for one requirement (the requested distribution and those it needs).
MAX_BUILDS = 3


def fetch(
    installs: list[Install], python: str, installed: dict[str, str], cache: Path, sandbox: Sandbox
) -> None:
    """Resolves each requirement against the environment and downloads its wheels into `cache` (building in
    `sandbox` those that have only an sdist); sets each install's distributions, or its outcome when it cannot
    be installed."""
    (cache / "wheels").mkdir(parents=True, exist_ok=True)
    with _locked(cache):
        for install in installs:
            try:
                install.distributions = _resolved_building(
                    install.requirement, python, installed, cache, sandbox
                )
                _download(install.distributions, python, cache)
            except PipFailed as error:
                install.outcome = f"not installed: {error}"


def _resolved_building(
    requirement: str, python: str, installed: dict[str, str], cache: Path, sandbox: Sandbox
) -> list[str]:
    """`_resolved`, with the wheel of each distribution of the plan that has only an sdist built first: the
    requested one's newest release (what the user's `pip install` takes, where the plan of wheels alone would
    take an older release that has one), and any the plan finds no wheel of."""
    if not _remembered(requirement, python, installed, cache).is_file():
        _build_newest(requirement, python, installed, cache, sandbox)
    for _ in range(MAX_BUILDS):
        try:
            return _resolved(requirement, python, installed, cache)
        except NoWheel as missing:
            if not _build_newest(missing.requirement, python, installed, cache, sandbox):
                raise
    return _resolved(requirement, python, installed, cache)


# pip's own index finder (its configuration, index, find-links, proxy and credentials), asked for the release
# of a requirement that pip would take; an sdist (no wheel for this interpreter) is downloaded and checked
# against the index's hash, and nothing of it runs (`pip download` would prepare its metadata: run its build).
NEWEST_PROBE = """
import hashlib, json, logging, sys
logging.basicConfig(level=logging.WARNING)  # (a registry that does not answer is only logged)
from pathlib import Path
from packaging.requirements import Requirement
from pip._internal.commands import create_command
requirement, folder = Requirement(sys.argv[1]), Path(sys.argv[2])
command = create_command("download")
options, _ = command.parse_args(["--no-deps", *sys.argv[3:]])
with command.main_context():
    session = command.get_default_session(options)
    finder = command._build_package_finder(options, session)
    best = finder.find_best_candidate(requirement.name, requirement.specifier).best_candidate
    if best is None or best.link.is_wheel:
        print(json.dumps({"version": best and str(best.version), "sdist": None}))
        sys.exit()
    target = folder / best.link.filename
    if not target.is_file():
        response = session.get(best.link.url_without_fragment)
        response.raise_for_status()
        if best.link.hash and hashlib.new(best.link.hash_name, response.content).hexdigest() != best.link.hash:
            sys.exit(f"{best.link.filename}: its {best.link.hash_name} is not the one the index gives")
        target.write_bytes(response.content)
    print(json.dumps({"version": str(best.version), "sdist": str(target)}))
"""
# The build requirements of an sdist with no pyproject.toml (or none in it), as pip takes them.
DEFAULT_BUILD_REQUIREMENTS = ("setuptools>=40.8.0",)


def _build_newest(
    requirement: str, python: str, installed: dict[str, str], cache: Path, sandbox: Sandbox
) -> bool:
    """Builds the wheel of `requirement`'s newest release in the sandbox, into the cache's wheels, when that
    release has only an sdist; whether it did (or had). Raises PipFailed when the registry has no release."""
    try:
        name = canonicalize_name(Requirement(requirement).name)
    except InvalidRequirement:
        return False
    newest = _newest(requirement, cache)
    if newest["version"] is None:
        raise PipFailed(f"the package registry has no release of {requirement}")
    if newest["sdist"] is None:
        return False
    version, sdist = newest["version"], Path(newest["sdist"])
    if f"{name}=={Version(version)}" in _cached_wheels(cache):
        return True
    cannot = f"{name} {version} has no wheel, and its sdist cannot be built offline in the sandbox"
    building = []  # the build requirements the environment lacks
    for needed in _build_requirements(sdist):
        try:
            building += _resolved(needed, python, installed, cache)
        except PipFailed as error:
            raise PipFailed(f"{cannot}: its build requirement {needed}: {error}") from None
    _download(building, python, cache)
    if building:
        code, errors = sandbox.run(install_argv(building, python, cache))
        if code != 0:
            raise PipFailed(f"{cannot}: installing its build requirements: {_last_error(errors)}")
    built = sandbox.shared / "built-wheels"
    built.mkdir(exist_ok=True)
    code, errors = sandbox.run(
        [
            *_pip(python),
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "--no-index",
            "--wheel-dir",
            str(built),
            "--disable-pip-version-check",
            "--quiet",
            str(sdist),
        ]
    )
    wheels = [w for w in built.glob("*.whl") if _wheel_name(w) == name]
    if code != 0 or not wheels:
        raise PipFailed(f"{cannot} (pip wheel, no network: {_last_error(errors) or 'no wheel written'})")
    made = parse_wheel_filename(wheels[0].name)[1]
    if made != Version(version):  # a build that needed what it could not have (setuptools_scm: 0.0.0)
        raise PipFailed(f"{cannot}: it built as version {made}, not {version}")
    shutil.copy2(wheels[0], cache / "wheels" / wheels[0].name)
    return True


def _newest(requirement: str, cache: Path) -> dict:
    """The release of `requirement` pip would take: {"version", "sdist": its file, downloaded, when it has no
    wheel for this interpreter}; version None when the registry has none."""
    folder = cache / "sdists"
    folder.mkdir(exist_ok=True)
    try:
        done = subprocess.run(
            [sys.executable, "-c", NEWEST_PROBE, requirement, str(folder), *PIP_NETWORK_OPTIONS],
            capture_output=True,
            text=True,
            timeout=PIP_SECONDS,
        )
    except subprocess.TimeoutExpired:
        raise PipFailed(
            f"the package registry did not answer for {requirement} within {PIP_SECONDS} s"
        ) from None
    unreachable = any(marker in done.stderr for marker in REGISTRY_UNREACHABLE)
    found = json.loads(done.stdout) if done.returncode == 0 else {}
    if unreachable and not found.get("version"):  # (pip's finder says it, and finds nothing)
        raise PipFailed(
            f"the package registry could not be reached to fetch {requirement} (pip: {_last_error(done.stderr)})"
        )
    if done.returncode != 0:
        raise PipFailed(f"pip could not look {requirement} up: {_last_error(done.stderr)}")
    return found


def _build_requirements(sdist: Path) -> list[str]:
    """What the sdist says its build needs, read from the archive (nothing of it runs): its pyproject.toml's
    build requirements (pip's default without one), and a setup.py's literal `setup_requires`."""
    pyproject, setup_py = _top_files(sdist, ("pyproject.toml", "setup.py"))
    try:
        requires = tomllib.loads(pyproject).get("build-system", {}).get("requires") if pyproject else None
    except tomllib.TOMLDecodeError:
        requires = None
    found = list(requires) if isinstance(requires, list) else list(DEFAULT_BUILD_REQUIREMENTS)
    return found + (declarations.setup_requires(setup_py) if setup_py else [])


def _top_files(sdist: Path, names: tuple[str, ...]) -> list[str | None]:
    """The text of each of `names` at the top of an sdist (its one top folder), None where it has none."""
    texts: dict[str, str] = {}
    try:
        if sdist.name.endswith(".zip"):
            with zipfile.ZipFile(sdist) as archive:
                for member in archive.namelist():
                    if member.count("/") == 1 and member.split("/")[1] in names:
                        texts[member.split("/")[1]] = archive.read(member).decode("utf-8", "replace")
        else:
            with tarfile.open(sdist) as archive:
                for member in archive.getmembers():
                    if member.isfile() and member.name.count("/") == 1 and member.name.split("/")[1] in names:
                        texts[member.name.split("/")[1]] = (
                            archive.extractfile(member).read().decode("utf-8", "replace")
                        )
    except (OSError, tarfile.TarError, zipfile.BadZipFile):
        pass
    return [texts.get(name) for name in names]


def _wheel_name(wheel: Path) -> str | None:
    try:
        return parse_wheel_filename(wheel.name)[0]
    except InvalidWheelFilename:
        return None


def install_argv(distributions: list[str], python: str, cache: Path) -> list[str]:
    """The pip command, run in the sandbox, that installs exactly the fetched wheels (name==version)."""
    return [
        *_pip(python),
        "install",
        "--no-index",
        "--no-deps",
        "--only-binary",
        ":all:",
        "--find-links",
        str(cache / "wheels"),
        "--disable-pip-version-check",
        "--no-warn-script-location",
        "--quiet",
        *distributions,
    ]


def _pip(python: str) -> list[str]:
    """The tool's own pip, for `python` (which may have no pip of its own)."""
    return [sys.executable, "-m", "pip", *(["--python", python] if python != sys.executable else [])]


def _resolved(requirement: str, python: str, installed: dict[str, str], cache: Path) -> list[str]:
    """The distributions (name==version) pip would add for `requirement` with every installed one pinned;
    remembered per requirement and environment (a refusal too), so a second try needs no registry."""
    pins = _pins(installed)
    remembered = _remembered(requirement, python, installed, cache)
    if remembered.is_file():
        answer = json.loads(remembered.read_text())
        if isinstance(answer, str):
            raise PipFailed(answer)
        return answer
    remembered.parent.mkdir(exist_ok=True)
    try:
        planned = _planned(requirement, python, pins, cache)
    except PipRefused as refused:
        if isinstance(refused, PipTimedOut):  # say what it would change, from the plan without the pins
            free = _planned(requirement, python, "", cache)
            changed = [
                f"{item['metadata']['name']} {item['metadata']['version']} (the environment has "
                f"{installed[canonicalize_name(item['metadata']['name'])]})"
                for item in free
                if canonicalize_name(item["metadata"]["name"]) in installed
            ]
            if changed:
                refused = PipRefused(
                    f"{requirement} needs {', '.join(changed)}; the try changes nothing the environment has"
                )
        remembered.write_text(json.dumps(str(refused)))
        raise refused from None
    requested = [item for item in planned if item.get("requested")]
    ordered = requested + [item for item in planned if not item.get("requested")]
    resolved = [f"{item['metadata']['name']}=={item['metadata']['version']}" for item in ordered]
    remembered.write_text(json.dumps(resolved))
    return resolved


def _pins(installed: dict[str, str]) -> str:
    return "\n".join(f"{name}=={version}" for name, version in sorted(installed.items()))


def _remembered(requirement: str, python: str, installed: dict[str, str], cache: Path) -> Path:
    """Where the resolution of `requirement` for this environment is remembered."""
    key = hashlib.sha256(f"{python}\n{requirement}\n{_pins(installed)}".encode()).hexdigest()[:24]
    return cache / "resolved" / f"{key}.json"


def _planned(requirement: str, python: str, pins: str, cache: Path) -> list[dict]:
    """pip's plan (its --report's `install` entries) for `requirement`, with `pins` as constraints and the
    wheels built from sdists (in the cache) beside the registry's."""
    with tempfile.TemporaryDirectory(prefix="neuron-migrate-try-pip-") as folder:
        constraints, report = Path(folder) / "installed.txt", Path(folder) / "report.json"
        constraints.write_text(pins + "\n")
        _run_pip(
            [
                *_pip(python),
                "install",
                "--dry-run",  # (not --quiet: it would hide the cause of a conflict)
                "--only-binary",
                ":all:",
                "--constraint",
                str(constraints),
                "--find-links",
                str(cache / "wheels"),
                "--report",
                str(report),
                *PIP_NETWORK_OPTIONS,
                requirement,
            ],
            requirement,
        )
        return json.loads(report.read_text())["install"]


def _download(distributions: list[str], python: str, cache: Path) -> None:
    have = _cached_wheels(cache)
    wanted = [d for d in distributions if _canonical_pin(d) not in have]
    if wanted:
        _run_pip(
            [
                *_pip(python),
                "download",
                "--no-deps",
                "--only-binary",
                ":all:",
                "--dest",
                str(cache / "wheels"),
                "--quiet",
                *PIP_NETWORK_OPTIONS,
                *wanted,
            ],
            " ".join(wanted),
        )


def _cached_wheels(cache: Path) -> dict[str, Path]:
    """The wheels in the cache, by their canonical `name==version`."""
    found = {}
    for wheel in (cache / "wheels").glob("*.whl"):
        with contextlib.suppress(InvalidWheelFilename):
            name, version, _, _ = parse_wheel_filename(wheel.name)
            found[f"{name}=={version}"] = wheel
    return found


def _canonical_pin(pin: str) -> str:
    name, _, version = pin.partition("==")
    return f"{canonicalize_name(name)}=={version}"


def _run_pip(argv: list[str], what: str) -> None:
    try:
        done = subprocess.run(
            argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=PIP_SECONDS
        )
    except subprocess.TimeoutExpired:
        raise PipTimedOut(
            f"pip did not resolve {what} against the environment within {PIP_SECONDS} s (it backtracks through "
            "releases when a distribution the environment has rules them out)"
        ) from None
    if done.returncode == 0:
        return
    errors = done.stdout
    no_wheel = re.search(r"No matching distribution found for (\S+)", errors)
    if no_wheel and not any(marker in errors for marker in REGISTRY_UNREACHABLE):
        raise NoWheel(f"pip could not fetch {what}: {_last_error(errors)}", no_wheel.group(1))
    if any(marker in errors for marker in REGISTRY_UNREACHABLE):
        raise PipFailed(
            f"the package registry could not be reached to fetch {what} (pip: {_last_error(errors)})"
        )
    if "ResolutionImpossible" in errors or "conflict is caused by" in errors:
        cause = _conflict(errors)
        raise PipRefused(
            f"{what} needs a version of a distribution other than the one the environment has ({cause}); "
            "the try changes nothing the environment has"
        )
    raise PipFailed(f"pip could not fetch {what}: {_last_error(errors)}")


def _conflict(errors: str) -> str:
    lines = [line.strip() for line in errors.splitlines()]
    start = next((i for i, line in enumerate(lines) if line.startswith("The conflict is caused by")), None)
    if start is None:
        return _last_error(errors)
    cause = []
    for line in lines[start + 1 :]:
        if not line:
            break
        cause.append(line.replace("The user requested (constraint)", "the environment has"))
    # One line per version pip tried: the newest, and what the environment has, say it.
    held = [line for line in cause if line.startswith("the environment has")]
    tried = [line for line in cause if line not in held]
    more = f" (and {len(tried) - 1} older versions alike)" if len(tried) > 1 else ""
    return "; ".join([*tried[:1], *held]) + more


def _last_error(errors: str) -> str:
    lines = [line.strip() for line in errors.splitlines() if line.strip()]
    chosen = next((line for line in reversed(lines) if line.startswith("ERROR:")), lines[-1] if lines else "")
    return chosen.removeprefix("ERROR: ")[:300]


@contextlib.contextmanager
def _locked(cache: Path):
    """One try at a time fetches into the cache (`try DIR -j N` runs tries in parallel)."""
    with open(cache / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def install_missing(
    imports: set[str],
    required: set[str],
    folders: list[Path],
    declarations: list[Declaration],
    repository: Path,
    python: str,
    cache: Path,
    sandbox: Sandbox | None,
    integrations: list[Integration] = (),
    launched_imports: dict[str, str] | None = None,
) -> list[Install]:
    """Installs, for a try, the modules the code imports (`imports`; `required`: those not optional) and
    `python` lacks: what `declarations` (nearest first) declare for them, else, for a required one that is not a
    module of `repository`, the distribution named for it; and the first module of each of `integrations` (what
    the training arguments report to) that `python` has none of, when it logs offline. `sandbox` is None when the
    try is not isolated (then nothing is installed: it would change the environment). `launched_imports`: the
    top-level modules that only scripts the tried file launches import -> the first of those scripts, said in
    the install's `needed_by`."""
    modules = top_level_modules(imports) | {
        module for integration in integrations for module in integration.modules
    }
    if not modules:
        return []
    found = environment(python, modules, folders)
    needed = top_level_modules(required)
    own: set[str] | None = None  # the repository's module names, read once if an undeclared module needs them
    installs = []
    launched_by = launched_imports or {}
    for module in sorted(found.missing):
        needed_by = f"import {module} in {launched_by[module]}" if module in launched_by else ""
        declaration = declaration_for(module, declarations)
        if declaration is not None:
            installs.append(Install(module, declaration.requirement, declaration.source, needed_by=needed_by))
            continue
        if module not in needed or module in CANNOT_INSTALL:  # (CANNOT_INSTALL: the run says why if it fails)
            continue
        own = repository_modules(repository) if own is None else own
        if module not in own:
            installs.append(Install(module, distribution_named_for(module), None, needed_by=needed_by))
    for integration in integrations:  # (Transformers' check passes with any one of its modules)
        module = integration.modules[0]
        if found.missing.issuperset(integration.modules) and all(i.module != module for i in installs):
            declaration = declaration_for(module, declarations)
            install = Install(
                module,
                declaration.requirement if declaration else distribution_named_for(module),
                declaration and declaration.source,
                needed_by=f"report_to={integration.name}",
            )
            install.outcome = "" if integration.offline else f"not installed: {integration.not_offline()}"
            installs.append(install)
    for install in installs:
        if install.module in CANNOT_INSTALL:
            install.outcome = f"not installed: {CANNOT_INSTALL[install.module]}"
        elif sandbox is None and not install.outcome:
            install.outcome = (
                "not installed: the try is not isolated (--no-isolation), so an install would be real"
            )
    wanted = [i for i in installs if not i.outcome]
    if not wanted:
        return installs
    fetch(wanted, python, found.distributions, cache, sandbox)
    for install in wanted:
        if install.declared_in is None and install.distributions and not install.outcome:
            wheel = _cached_wheels(cache).get(_canonical_pin(install.distributions[0]))
            if wheel is not None and not wheel_provides(wheel, install.module):
                install.outcome = (
                    f"not installed: {install.distributions[0]}, the distribution of that name, has no module "
                    f"{install.module}; declare the distribution that provides it"
                )
    ready = [i for i in wanted if not i.outcome]
    if ready:
        pins = list(dict.fromkeys(d for install in ready for d in install.distributions))
        code, errors = sandbox.run(install_argv(pins, python, cache))
        for install in ready:
            install.outcome = (
                INSTALLED if code == 0 else f"not installed: pip in the sandbox: {_last_error(errors)}"
            )
    return installs
