"""The logging integrations a run's training arguments report to (`report_to="tensorboard"`), and the modules
each needs, as Transformers itself checks for them: read from the source of the environment's
`transformers/integrations/integration_utils.py` (its `INTEGRATION_TO_CALLBACK` table, the `is_*_available`
checks each callback makes, the `importlib.util.find_spec` names those ask for), nothing of it imported.

A try installs (packages.py) the package of an integration only when its callback runs without a network
(OFFLINE); any other sends its logs to a service the try cannot reach, and is not installed.
"""

from __future__ import annotations

import ast
import subprocess
from dataclasses import dataclass
from pathlib import Path

from usercode.python import callee, string

# report_to values that name no integration: "none", and "all" (Transformers reports then to the integrations
# installed, so it needs none).
NO_INTEGRATION = frozenset({"none", "all"})
# The integrations whose callback runs in a try with no network, and how.
OFFLINE = {
    "tensorboard": "writes event files in the run's folder",
    "wandb": "the try sets WANDB_MODE=disabled: wandb's calls run and send nothing",
}

INTEGRATION_UTILS_PROBE = """
import importlib.util, sys
spec = importlib.util.find_spec("transformers")
print(spec.submodule_search_locations[0] if spec and spec.submodule_search_locations else "")
"""


@dataclass
class Integration:
    name: str  # as report_to names it
    modules: tuple[str, ...]  # those Transformers checks for, in its order: the first found serves

    @property
    def offline(self) -> str | None:
        """How its callback runs without a network, None when it needs one."""
        return OFFLINE.get(self.name)

    def not_offline(self) -> str:
        return (
            f"report_to={self.name} sends the run's logs to a service the try cannot reach (no network); a try "
            f"installs only the integrations that log offline ({', '.join(sorted(OFFLINE))})"
        )


def reported(names: set[str], python: str) -> list[Integration]:
    """The integrations of `names` (report_to values) and the modules `python`'s Transformers checks for each;
    those it names no module for (an unknown name, a Transformers without integration_utils) are left out."""
    names = names - NO_INTEGRATION
    if not names:
        return []
    source = _integration_utils(python)
    modules = checked_modules(source) if source else {}
    return [Integration(name, modules[name]) for name in sorted(names) if modules.get(name)]


def _integration_utils(python: str) -> str | None:
    try:
        found = subprocess.run(
            [python, "-c", INTEGRATION_UTILS_PROBE], capture_output=True, text=True, timeout=60
        ).stdout.strip()
        return (Path(found) / "integrations" / "integration_utils.py").read_text(encoding="utf-8")
    except (OSError, subprocess.SubprocessError):
        return None


def checked_modules(source: str) -> dict[str, tuple[str, ...]]:
    """integration -> the top-level modules its callback's `is_*_available` checks ask `find_spec` for (through
    the checks and module-level flags they call or read), from integration_utils.py's source."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return {}
    definitions: dict[str, ast.AST] = {}
    table: dict[str, str] = {}
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.ClassDef):
            definitions[node.name] = node
        elif (
            isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)
        ):
            definitions[node.targets[0].id] = node.value
            if node.targets[0].id == "INTEGRATION_TO_CALLBACK" and isinstance(node.value, ast.Dict):
                table = {
                    string(key): value.id
                    for key, value in zip(node.value.keys, node.value.values, strict=True)
                    if string(key) and isinstance(value, ast.Name)
                }

    def modules(node: ast.AST, seen: set[str]) -> list[str]:
        found = []
        for inner in ast.walk(node):
            name = callee(inner) if isinstance(inner, ast.Call) else None
            if name == "find_spec" and inner.args and (module := string(inner.args[0])):
                found.append(module.split(".")[0])
            followed = name if name and name.startswith("is_") and name.endswith("_available") else None
            if isinstance(inner, ast.Name) and isinstance(inner.ctx, ast.Load) and inner.id.startswith("_"):
                followed = inner.id  # a module-level flag (`_has_neptune = find_spec("neptune") is not None`)
            if followed in definitions and followed not in seen:
                seen.add(followed)
                found += modules(definitions[followed], seen)
        return found

    checked = {}
    for integration, callback in table.items():
        init = next(
            (
                node
                for node in getattr(definitions.get(callback), "body", [])
                if isinstance(node, ast.FunctionDef) and node.name == "__init__"
            ),
            None,
        )
        found = modules(init, set()) if init is not None else []
        checked[integration] = tuple(m for m in dict.fromkeys(found) if m.isidentifier())
    return checked
