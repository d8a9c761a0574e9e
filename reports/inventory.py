"""What the checklist reads from a user's scripts, notebooks and shell launchers beyond the migrator's
findings: which models they use, which instance types they target, which packages they use, and the compile
risks (`migrator.risks`). The code is read with the migrator's parsers (`usercode.reading`: Python's `ast`,
IPython's input transformer for notebook cells, tree-sitter's bash grammar for shell)."""

from __future__ import annotations

import ast
import dataclasses
import fnmatch
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from compat_matrix.model_ids import looks_like_model_reference, table_entry
from migrator.registry import find_risks
from migrator.risks.base import Risk
from migrator.shell.installs import parse as parse_requirement
from usercode.names import MODEL_ARGUMENTS, MODEL_OPTIONS, NOT_A_MODEL_NAME_PARTS
from usercode.python import PythonModule, callee, keyword, owner, string, target_names
from usercode.reading import Code, ShellCommand, read_code
from usercode.sources import SKIP_DIRS

LOADERS = {"from_pretrained", "export", "get_neuron_config", "pipeline", "SentenceTransformer"}
# Classes called with a model id that are not causal LMs (the id is their first argument).
TASK_LOADERS = {"SentenceTransformer", "CrossEncoder"}
# Instance families TorchNeuron does not support (it runs on trn2 and trn3 only), named anywhere in a file's
# text: a comment saying where a script runs names its target too.
UNSUPPORTED_TARGET = re.compile(r"(?<![\w-])(inf1|inf2|trn1n?)(?:\.(\d*x?large))?(?![\w-])", re.IGNORECASE)
# Commands whose next word is a model id.
SHELL_MODEL_COMMANDS = (
    ("huggingface-cli", "download"),
    ("hf", "download"),
    ("optimum-cli", "neuron", "cache", "lookup"),
    ("vllm", "serve"),
)
# What a file uses, from the modules it imports (their top-level package) and the packages a launcher installs.
USED_MODULES = {"trl": "trl", "peft": "peft", "torch_xla": "torch_xla"}
USED_PACKAGES = {"optimum-neuron": "optimum-neuron", "trl": "trl", "peft": "peft", "torch-xla": "torch_xla"}
# Names optimum-neuron exports for the TRL / PEFT code it wraps.
OPTIMUM_TRL = {"NeuronSFTTrainer", "NeuronSFTConfig", "NeuronORPOTrainer", "NeuronORPOConfig"}
OPTIMUM_PEFT = {"NeuronPeftModel", "get_peft_model", "LoraConfig"}


@dataclass(frozen=True)
class Location:
    path: str
    line: int
    cell: int | None = None  # notebooks: 1-based number among the code cells, as the migrator counts them

    def __str__(self) -> str:
        if self.cell is not None:
            return f"{self.path} (cell {self.cell}, line {self.line})"
        return f"{self.path}:{self.line}"


@dataclass(frozen=True)
class ModelReference:
    value: str
    location: Location
    how: str
    task: str | None = None  # embedding / classification / diffusion when the code loads it as one


# What a loader class or pipeline task says the model is, when it is not a causal LM.
PIPELINE_TASKS = {
    "feature-extraction": "embedding",
    "sentence-similarity": "embedding",
    "text-classification": "classification",
    "sentiment-analysis": "classification",
    "zero-shot-classification": "classification",
    "token-classification": "classification",
    "ner": "classification",
    "text-to-image": "diffusion",
    "image-to-image": "diffusion",
}


# Diffusers pipeline classes (Transformers' own *Pipeline classes are text pipelines, not these).
DIFFUSERS_PIPELINE = re.compile(
    r"^(?:Neuron)?(?:\w*Diffusion\w*|Flux\w*|PixArt\w*|Sana\w*|Kandinsky\w*|QwenImage\w*|LTX\w*|CogVideoX\w*)"
    r"Pipeline$"
)


def class_task(name: str) -> str | None:
    """embedding / classification / diffusion from a loader class name; None for anything else."""
    if "SentenceTransformer" in name or "FeatureExtraction" in name or name in {"AutoModel", "NeuronModel"}:
        return "embedding"
    if "Classification" in name or name == "CrossEncoder":
        return "classification"
    if DIFFUSERS_PIPELINE.match(name):
        return "diffusion"
    return None


@dataclass
class FileScan:
    path: Path
    display: str
    kind: str
    models: list[ModelReference] = field(default_factory=list)
    targets: list[tuple[str, Location]] = field(default_factory=list)
    risks: list[Risk] = field(default_factory=list)  # the compile risks (NM8xx) found in the file
    uses: set[str] = field(default_factory=set)
    lines: dict[int | None, list[str]] = field(default_factory=dict)  # the file's lines, or each code cell's

    def at(self, line: int, cell: int | None = None) -> Location:
        return Location(self.display, line, cell)


class _PythonScanner:
    """Reads one module (a script or a notebook cell) for models and the packages it uses."""

    def __init__(self, scan: FileScan, module: PythonModule):
        self.scan = scan
        self.module = module
        self.assigned: list[tuple[int, str]] = []  # (index in scan.models, variable) of assigned ids
        self.variable_tasks: dict[str, str] = {}  # variable -> task of the loader it was passed to

    def model(self, value: str | None, node: ast.AST, how: str, task: str | None = None) -> None:
        if value and looks_like_model_reference(value):
            location = self.scan.at(self.module.line(node), self.module.cell)
            self.scan.models.append(ModelReference(value, location, how, task))
            if how.startswith("assigned to "):
                self.assigned.append((len(self.scan.models) - 1, how.removeprefix("assigned to ")))

    def run(self) -> None:
        for node in self.module.nodes:
            if isinstance(node, ast.Call):
                self.visit_call(node)
            elif isinstance(node, (ast.Assign, ast.AnnAssign)):
                self.visit_assignment(node)
            elif isinstance(node, (ast.Import, ast.ImportFrom)):
                self.visit_import(node)
            elif isinstance(node, ast.Dict):
                self.visit_dict(node)
        # An id assigned to a variable takes the task of the loader the variable is passed to.
        for index, variable in self.assigned:
            if variable in self.variable_tasks:
                reference = self.scan.models[index]
                self.scan.models[index] = dataclasses.replace(reference, task=self.variable_tasks[variable])

    def visit_import(self, node: ast.Import | ast.ImportFrom) -> None:
        modules = (
            [alias.name for alias in node.names] if isinstance(node, ast.Import) else [node.module or ""]
        )
        for module in modules:
            if module.split(".")[0] in USED_MODULES:
                self.scan.uses.add(USED_MODULES[module.split(".")[0]])
            if module.startswith("optimum.neuron"):
                self.scan.uses.add("optimum-neuron")
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("optimum.neuron"):
            names = {alias.name for alias in node.names}
            if names & OPTIMUM_TRL:
                self.scan.uses.add("trl")
            if names & OPTIMUM_PEFT:
                self.scan.uses.add("peft")

    def visit_dict(self, node: ast.Dict) -> None:
        """Ids in dict values: under a key that names a model, or any id of the bundled table."""
        for key, value in zip(node.keys, node.values, strict=True):
            text, key_text = string(value), string(key) or ""
            if not text:
                continue
            if any(word in key_text.lower() for word in ("model", "checkpoint")):
                self.model(text, value, f"dict value {key_text!r}")
            elif "/" in text and table_entry(text) is not None:
                self.model(text, value, f"dict value {key_text!r}" if key_text else "dict value")

    def visit_call(self, call: ast.Call) -> None:
        name = callee(call)
        task = _loader_task(call, name)
        if name in LOADERS | TASK_LOADERS and call.args:
            self.model(string(call.args[0]), call, f"{name}() argument", task)
            if task and isinstance(call.args[0], ast.Name):
                self.variable_tasks[call.args[0].id] = task
        for argument in call.keywords:
            if argument.arg in MODEL_ARGUMENTS:
                self.model(string(argument.value), call, f"{argument.arg}= argument", task)
                if task and isinstance(argument.value, ast.Name):
                    self.variable_tasks[argument.value.id] = task
        if name == "add_argument" and any("model" in (string(arg) or "").lower() for arg in call.args):
            self.model(string(keyword(call, "default")), call, "argparse default")
        if (
            name in {"get", "getenv"}
            and len(call.args) >= 2
            and "MODEL" in (string(call.args[0]) or "").upper()
        ):
            self.model(string(call.args[1]), call, "environment variable default")

    def visit_assignment(self, node: ast.Assign | ast.AnnAssign) -> None:
        targets = target_names(node)
        names = [name for name in targets if "model" in name.lower()]
        if names and node.value is not None:
            value = node.value
            if isinstance(value, ast.Call):  # dataclass field(default=...)
                self.model(string(keyword(value, "default")), node, "dataclass default")
            else:
                self.model(string(value), node, f"assigned to {names[0]}")
        elif (
            targets
            and not any(part in targets[0].lower() for part in NOT_A_MODEL_NAME_PARTS)
            and "/" in (string(node.value) or "")
            and table_entry(string(node.value))
        ):
            # Any other variable holding a Hub id of the bundled table (EMBEDDER = "Qwen/Qwen3-Embedding-8B").
            self.model(string(node.value), node, f"assigned to {targets[0]}")


def _loader_task(call: ast.Call, name: str) -> str | None:
    """The task a load names: Cls.from_pretrained(), a SentenceTransformer-like class, pipeline("task")."""
    if name == "pipeline":
        task = string(call.args[0]) if call.args else string(keyword(call, "task"))
        return PIPELINE_TASKS.get(task or "")
    if name == "from_pretrained":
        return class_task(owner(call))
    return class_task(name) if name in TASK_LOADERS else None


def _scan_shell(scan: FileScan, code: Code) -> None:
    """Models named on command lines, in `*MODEL*` variables and their `${MODEL:-default}`; what launchers
    run and install."""

    def model(value: str, line: int, cell: int | None, how: str) -> None:
        if "$" not in value and looks_like_model_reference(value):
            scan.models.append(ModelReference(value, scan.at(line, cell), how))

    for command in code.commands:
        words, lines = command.words, command.lines
        for index, word in enumerate(words):
            option, equals, value = word.partition("=")
            if option.startswith("--") and option[2:].replace("-", "_") in MODEL_OPTIONS:
                value = value if equals else (words[index + 1] if index + 1 < len(words) else "")
                model(value, lines[index], command.cell, "shell argument")
            elif word == "-m" and words[0] == "optimum-cli" and index + 1 < len(words):
                model(words[index + 1], lines[index], command.cell, "optimum-cli -m")
        for prefix in SHELL_MODEL_COMMANDS:
            if words[: len(prefix)] == prefix and len(words) > len(prefix):
                model(words[len(prefix)], lines[len(prefix)], command.cell, "shell argument")
        scan.uses |= _shell_uses(command)
    for assignment in code.assignments:
        if "MODEL" in assignment.name:
            model(assignment.value, assignment.line, assignment.cell, f"shell variable {assignment.name}")
    for default in code.defaults:
        if "MODEL" in default.name:
            model(default.value, default.line, default.cell, f"shell default of {default.name}")


def _shell_uses(command: ShellCommand) -> set[str]:
    """What a command runs (`optimum-cli`, `trl sft`, `python -m trl...`) or installs (`pip install trl`)."""
    words = command.words
    uses = {"optimum-neuron"} if words[0] == "optimum-cli" else set()
    if any(word == "trl" or word.startswith(("trl.", "trl/")) for word in words):
        uses.add("trl")
    pip = words[0] in ("pip", "pip3") or list(words[1:3]) == ["-m", "pip"]
    if pip and "install" in words:
        for word in words[words.index("install") + 1 :]:
            requirement = None if word.startswith("-") else parse_requirement(word)
            if requirement is None:
                continue
            if requirement.name in USED_PACKAGES:
                uses.add(USED_PACKAGES[requirement.name])
            elif requirement.name == "optimum" and requirement.extras & {"neuron", "neuronx"}:
                uses.add("optimum-neuron")
    return uses


def scan_file(path: Path, display: str, kind: str) -> FileScan:
    """`kind` as the migrator reads the file (python, notebook, shell); any other kind is scanned for
    instance targets only, never parsed as code of another language."""
    scan = FileScan(path=path, display=display, kind=kind)
    code = read_code(path, kind)
    for cell, text in code.texts:
        scan.lines[cell] = text.splitlines()
        for match in UNSUPPORTED_TARGET.finditer(text):
            scan.targets.append(
                (match.group(0).lower(), scan.at(text.count("\n", 0, match.start()) + 1, cell))
            )
    for module in code.python:
        _PythonScanner(scan, module).run()
    _scan_shell(scan, code)
    scan.risks = find_risks(code)
    return scan


def find_configs(paths: list[Path], exclude: tuple[str, ...]) -> list[Path]:
    """Local model directories' config.json files under the given paths."""
    found: list[Path] = []
    for root in paths:
        if root.is_file():
            if root.name == "config.json":
                found.append(root)
            continue
        for directory, subdirs, files in os.walk(root):
            subdirs[:] = sorted(name for name in subdirs if name not in SKIP_DIRS)
            for name in files:
                path = Path(directory) / name
                relative = path.relative_to(root).as_posix()
                if name == "config.json" and not any(
                    fnmatch.fnmatch(relative, pattern) or fnmatch.fnmatch(name, pattern)
                    for pattern in exclude
                ):
                    found.append(path)
    return sorted(set(found))
