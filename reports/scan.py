"""Reads a user's scripts, notebooks and shell launchers for what the checklist needs beyond the migrator's
findings: which models they use, which instance types they target, and what will make TorchNeuron
recompile (every new input shape is a new compilation)."""

from __future__ import annotations

import ast
import dataclasses
import fnmatch
import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from compat_matrix.model_ids import looks_like_model_reference, table_entry
from migrator import risks
from migrator.families.environment.nm404_async_load import ASYNC_LOAD_VARIABLE
from migrator.rules import Rule
from migrator.sources import SKIP_DIRS

MODEL_KEYWORDS = {
    "model",
    "model_id",
    "model_name",
    "model_name_or_path",
    "pretrained_model_name_or_path",
    "model_path",
    "checkpoint",
}
LOADERS = {"from_pretrained", "export", "get_neuron_config", "pipeline", "SentenceTransformer"}
# Variables that hold a repo id without loading a model from it (TOKENIZER_ID = "mistralai/...").
NOT_A_MODEL = re.compile(r"tokeni[sz]er|processor|dataset|data_", re.IGNORECASE)
# Classes called with a model id that are not causal LMs (the id is their first argument).
TASK_LOADERS = {"SentenceTransformer", "CrossEncoder"}
TRAINERS = {
    "Trainer",
    "Seq2SeqTrainer",
    "NeuronTrainer",
    "SFTTrainer",
    "NeuronSFTTrainer",
    "DPOTrainer",
    "ORPOTrainer",
    "NeuronORPOTrainer",
    "GRPOTrainer",
}
# TRL trainers pad to a multiple of 128 on neuron themselves (TRL >= 1.16, pad_to_multiple_of="auto").
TRL_TRAINERS = {
    "SFTTrainer",
    "NeuronSFTTrainer",
    "DPOTrainer",
    "ORPOTrainer",
    "NeuronORPOTrainer",
    "GRPOTrainer",
}
TOKENIZER_METHODS = {"encode", "encode_plus", "batch_encode_plus", "apply_chat_template"}
# Instance families TorchNeuron does not support (it runs on trn2 and trn3 only).
UNSUPPORTED_TARGET = re.compile(r"(?<![\w-])(inf1|inf2|trn1n?)(?:\.(\d*x?large))?(?![\w-])", re.IGNORECASE)
SHELL_MODEL_FLAG = re.compile(
    r"--(?:model|model[_-]id|model[_-]name|model[_-]name[_-]or[_-]path|pretrained[_-]model[_-]name[_-]or[_-]path)"
    r"(?:=|\s+)([\"']?)([^\s\"'\\;|&]+)\1"
)
SHELL_MODEL_VARIABLE = re.compile(r"\b(?:export\s+)?(\w*MODEL\w*)=([\"']?)([^\s\"';|&]+)\2")
# ${MODEL:-default} and the positional model id of download / cache / serve commands.
SHELL_MODEL_DEFAULT = re.compile(r"\$\{(\w*MODEL\w*):-([^}\s\"']+)\}")
SHELL_MODEL_POSITIONAL = re.compile(
    r"(?:\b(?:huggingface-cli|hf)\s+download|\boptimum-cli\s+neuron\s+cache\s+lookup|\bvllm\s+serve)"
    r"\s+([\"']?)([^\s\"'\\;|&$]+)\1"
)
# optimum-cli's short flag (-m); `python -m` names a module, so only optimum-cli's counts.
OPTIMUM_CLI_SHORT_MODEL = re.compile(r"\boptimum-cli\b[^\n;|&]*?\s-m\s+([\"']?)([^\s\"'\\;|&$]+)\1")
SHELL_DYNAMIC = re.compile(r"--dynamic[-_]batch[-_]size\b")
# The coarse kind of each compile-risk rule (`Risk.kind`: what the scan called a risk before it had a code).
RISK_KINDS = {
    risks.UNPADDED_PROMPTS.code: "unpadded-prompts",
    risks.UNPADDED_TRAINING.code: "unpadded-training",
    risks.PADDING_FREE.code: "unpadded-training",
    risks.NO_PAD_MULTIPLE.code: "unpadded-training",
    risks.DYNAMIC_COMPILE.code: "dynamic-shapes",
    risks.MARK_DYNAMIC.code: "dynamic-shapes",
    risks.DYNAMIC_BATCH.code: "dynamic-shapes",
    risks.AUTOMATIC_DYNAMIC.code: "dynamic-shapes",
    risks.ASYNC_LOAD.code: "async-load",
}


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


@dataclass(frozen=True)
class Risk:
    rule: Rule  # the compile-risk rule (NM8xx) that describes it and names the codes that fix it
    location: Location
    detail: str

    @property
    def kind(self) -> str:  # unpadded-prompts | unpadded-training | dynamic-shapes | async-load
        return RISK_KINDS[self.rule.code]


@dataclass
class FileScan:
    path: Path
    display: str
    kind: str
    models: list[ModelReference] = field(default_factory=list)
    targets: list[tuple[str, Location]] = field(default_factory=list)
    risks: list[Risk] = field(default_factory=list)
    uses: set[str] = field(default_factory=set)
    sets_async_load: bool = False
    first_load: Location | None = None  # the first from_pretrained(), where async weight loading starts


def _callee(call: ast.Call) -> str:
    if isinstance(call.func, ast.Attribute):
        return call.func.attr
    if isinstance(call.func, ast.Name):
        return call.func.id
    return ""


def _text(node: ast.AST | None) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def _keyword(call: ast.Call, name: str) -> ast.expr | None:
    return next((keyword.value for keyword in call.keywords if keyword.arg == name), None)


def _is_constant(node: ast.expr | None, value) -> bool:
    return isinstance(node, ast.Constant) and node.value is value


def _target_names(node: ast.Assign | ast.AnnAssign) -> list[str]:
    targets = node.targets if isinstance(node, ast.Assign) else [node.target]
    names = []
    for target in targets:
        if isinstance(target, ast.Name):
            names.append(target.id)
        elif isinstance(target, ast.Attribute):
            names.append(target.attr)
    return names


class _PythonScanner:
    """Walks one module (a script or a notebook cell) and fills a FileScan."""

    def __init__(self, scan: FileScan, cell: int | None):
        self.scan = scan
        self.cell = cell
        self.calls: list[ast.Call] = []
        self.assigned: list[tuple[int, str]] = []  # (index in scan.models, variable) of assigned ids
        self.variable_tasks: dict[str, str] = {}  # variable -> task of the loader it was passed to

    def at(self, node: ast.AST) -> Location:
        return Location(self.scan.display, getattr(node, "lineno", 1), self.cell)

    def model(self, value: str | None, node: ast.AST, how: str, task: str | None = None) -> None:
        if value and looks_like_model_reference(value):
            self.scan.models.append(ModelReference(value, self.at(node), how, task))
            if how.startswith("assigned to "):
                self.assigned.append((len(self.scan.models) - 1, how.removeprefix("assigned to ")))

    def run(self, tree: ast.Module) -> None:
        for node in ast.walk(tree):
            if isinstance(node, ast.Call):
                self.calls.append(node)
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
        self.calls.sort(key=lambda call: (call.lineno, call.col_offset))
        self.compile_risks()

    def visit_import(self, node: ast.Import | ast.ImportFrom) -> None:
        modules = (
            [alias.name for alias in node.names] if isinstance(node, ast.Import) else [node.module or ""]
        )
        for module in modules:
            root = module.split(".")[0]
            if root in {"trl", "peft", "torch_xla"}:
                self.scan.uses.add(root)
            if module.startswith("optimum.neuron"):
                self.scan.uses.add("optimum-neuron")
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("optimum.neuron"):
            names = {alias.name for alias in node.names}
            if names & {"NeuronSFTTrainer", "NeuronSFTConfig", "NeuronORPOTrainer", "NeuronORPOConfig"}:
                self.scan.uses.add("trl")
            if names & {"NeuronPeftModel", "get_peft_model", "LoraConfig"}:
                self.scan.uses.add("peft")

    def visit_dict(self, node: ast.Dict) -> None:
        """Ids in dict values: under a key that names a model, or any id of the bundled table."""
        for key, value in zip(node.keys, node.values, strict=True):
            text, key_text = _text(value), _text(key) or ""
            if not text:
                continue
            if any(word in key_text.lower() for word in ("model", "checkpoint")):
                self.model(text, value, f"dict value {key_text!r}")
            elif "/" in text and table_entry(text) is not None:
                self.model(text, value, f"dict value {key_text!r}" if key_text else "dict value")

    def visit_call(self, call: ast.Call) -> None:
        name = _callee(call)
        task = _loader_task(call, name)
        if name in LOADERS | TASK_LOADERS and call.args:
            self.model(_text(call.args[0]), call, f"{name}() argument", task)
            if task and isinstance(call.args[0], ast.Name):
                self.variable_tasks[call.args[0].id] = task
        for keyword in call.keywords:
            if keyword.arg in MODEL_KEYWORDS:
                self.model(_text(keyword.value), call, f"{keyword.arg}= argument", task)
                if task and isinstance(keyword.value, ast.Name):
                    self.variable_tasks[keyword.value.id] = task
        if name == "add_argument" and any("model" in (_text(arg) or "").lower() for arg in call.args):
            self.model(_text(_keyword(call, "default")), call, "argparse default")
        if (
            name in {"get", "getenv"}
            and len(call.args) >= 2
            and "MODEL" in (_text(call.args[0]) or "").upper()
        ):
            self.model(_text(call.args[1]), call, "environment variable default")
        first = _text(call.args[0]) if call.args else None
        if name in {"setdefault", "putenv"} and first == ASYNC_LOAD_VARIABLE:
            self.scan.sets_async_load = True

    def visit_assignment(self, node: ast.Assign | ast.AnnAssign) -> None:
        names = [name for name in _target_names(node) if "model" in name.lower()]
        if names and node.value is not None:
            value = node.value
            if isinstance(value, ast.Call):  # dataclass field(default=...)
                self.model(_text(_keyword(value, "default")), node, "dataclass default")
            else:
                self.model(_text(value), node, f"assigned to {names[0]}")
        elif (
            _target_names(node)
            and not NOT_A_MODEL.search(_target_names(node)[0])
            and "/" in (_text(node.value) or "")
            and table_entry(_text(node.value))
        ):
            # Any other variable holding a Hub id of the bundled table (EMBEDDER = "Qwen/Qwen3-Embedding-8B").
            self.model(_text(node.value), node, f"assigned to {_target_names(node)[0]}")
        for target in node.targets if isinstance(node, ast.Assign) else [node.target]:
            if isinstance(target, ast.Subscript) and _text(target.slice) == ASYNC_LOAD_VARIABLE:
                self.scan.sets_async_load = True
        if "automatic_dynamic_shapes" in _target_names(node) and _is_constant(node.value, True):
            self.risk(risks.AUTOMATIC_DYNAMIC, node, "torch._dynamo automatic_dynamic_shapes is switched on")

    def risk(self, rule: Rule, node: ast.AST, detail: str) -> None:
        self.scan.risks.append(Risk(rule, self.at(node), detail))

    def compile_risks(self) -> None:
        names = [_callee(call) for call in self.calls]
        for call, name in zip(self.calls, names, strict=True):
            if name == "compile" and _is_constant(_keyword(call, "dynamic"), True):
                self.risk(
                    risks.DYNAMIC_COMPILE, call, "torch.compile(dynamic=True): the neuron backend rejects it"
                )
            elif name == "mark_dynamic":
                self.risk(risks.MARK_DYNAMIC, call, "mark_dynamic() asks for a dynamic dimension")
            elif _is_constant(_keyword(call, "dynamic_batch_size"), True):
                self.risk(risks.DYNAMIC_BATCH, call, "dynamic_batch_size=True")
            elif name.endswith("Config") and _is_constant(_keyword(call, "padding_free"), True):
                self.risk(
                    risks.PADDING_FREE,
                    call,
                    f"{name}(padding_free=True) flattens batches to varying lengths",
                )
            elif name.endswith("Config") and _is_constant(_keyword(call, "pad_to_multiple_of"), None):
                self.risk(
                    risks.NO_PAD_MULTIPLE, call, f"{name}(pad_to_multiple_of=None) turns off TRL's padding"
                )
        tokenizer_calls = [
            call for call, name in zip(self.calls, names, strict=True) if _is_tokenizer_call(call, name)
        ]
        unpadded = [call for call in tokenizer_calls if not _pads_to_fixed_length(call)]
        if "generate" in names and unpadded:
            self.risk(
                risks.UNPADDED_PROMPTS,
                unpadded[0],
                "prompts are tokenized without padding='max_length', then passed to generate()",
            )
        trainers = [call for call, name in zip(self.calls, names, strict=True) if name in TRAINERS]
        loop_steps = [call for call, name in zip(self.calls, names, strict=True) if name == "backward"]
        manual_padding = [
            call for call, name in zip(self.calls, names, strict=True) if name.startswith("DataCollator")
        ]
        fixed = any(_pads_to_fixed_length(call) for call in tokenizer_calls + manual_padding)
        needs_padding = [call for call in trainers if _callee(call) not in TRL_TRAINERS] + loop_steps
        if needs_padding and not fixed:
            where = next(
                (call for call in manual_padding if not _pads_to_fixed_length(call)), needs_padding[0]
            )
            self.risk(
                risks.UNPADDED_TRAINING,
                where,
                "training batches are padded to their longest row only: sequence lengths vary between steps",
            )
        # Model classes and TRL trainers given a model id load weights; tokenizers and configs do not.
        loads = [
            call
            for call, name in zip(self.calls, names, strict=True)
            if (name == "from_pretrained" and not _loads_no_weights(call))
            or (name in TRL_TRAINERS and isinstance(_keyword(call, "model"), (ast.Constant, ast.Attribute)))
        ]
        if loads and self.scan.first_load is None:
            self.scan.first_load = self.at(loads[0])


def _owner_name(call: ast.Call) -> str:
    owner = call.func.value if isinstance(call.func, ast.Attribute) else None
    return (
        owner.id if isinstance(owner, ast.Name) else (owner.attr if isinstance(owner, ast.Attribute) else "")
    )


def _loader_task(call: ast.Call, name: str) -> str | None:
    """The task a load names: Cls.from_pretrained(), a SentenceTransformer-like class, pipeline("task")."""
    if name == "pipeline":
        task = _text(call.args[0]) if call.args else _text(_keyword(call, "task"))
        return PIPELINE_TASKS.get(task or "")
    if name == "from_pretrained":
        return class_task(_owner_name(call))
    return class_task(name) if name in TASK_LOADERS else None


def _loads_no_weights(call: ast.Call) -> bool:
    owner = call.func.value if isinstance(call.func, ast.Attribute) else None
    name = (
        owner.id if isinstance(owner, ast.Name) else (owner.attr if isinstance(owner, ast.Attribute) else "")
    )
    return any(part in name.lower() for part in ("tokenizer", "processor", "config", "generationconfig"))


def _is_tokenizer_call(call: ast.Call, name: str) -> bool:
    if _is_constant(_keyword(call, "tokenize"), False):
        return False  # apply_chat_template(..., tokenize=False) returns text
    if name in TOKENIZER_METHODS:
        return True
    return isinstance(call.func, ast.Name) and ("tokenizer" in name.lower() or name in {"tok", "processor"})


def _pads_to_fixed_length(call: ast.Call) -> bool:
    padding = _keyword(call, "padding")
    multiple = _keyword(call, "pad_to_multiple_of")
    return _text(padding) == "max_length" or (multiple is not None and not _is_constant(multiple, None))


def _line_of(text: str, offset: int) -> int:
    return text.count("\n", 0, offset) + 1


def _scan_shell(scan: FileScan, text: str, cell: int | None = None, line_offset: int = 0) -> None:
    def at(offset: int) -> Location:
        return Location(scan.display, _line_of(text, offset) + line_offset, cell)

    for match in SHELL_MODEL_FLAG.finditer(text):
        value = match.group(2)
        if "$" not in value and looks_like_model_reference(value):
            scan.models.append(ModelReference(value, at(match.start()), "shell argument"))
    for match in SHELL_MODEL_VARIABLE.finditer(text):
        value = match.group(3)
        if "$" not in value and looks_like_model_reference(value):
            scan.models.append(ModelReference(value, at(match.start()), f"shell variable {match.group(1)}"))
    for match in SHELL_MODEL_DEFAULT.finditer(text):
        if looks_like_model_reference(match.group(2)):
            scan.models.append(
                ModelReference(match.group(2), at(match.start()), f"shell default of {match.group(1)}")
            )
    for pattern, how in (
        (SHELL_MODEL_POSITIONAL, "shell argument"),
        (OPTIMUM_CLI_SHORT_MODEL, "optimum-cli -m"),
    ):
        for match in pattern.finditer(text):
            if looks_like_model_reference(match.group(2)):
                scan.models.append(ModelReference(match.group(2), at(match.start()), how))
    for match in SHELL_DYNAMIC.finditer(text):
        scan.risks.append(Risk(risks.DYNAMIC_BATCH, at(match.start()), "--dynamic-batch-size"))
    if re.search(ASYNC_LOAD_VARIABLE + r"=[\"']?1", text):
        scan.sets_async_load = True
    if "optimum-cli" in text or "optimum-neuron" in text or "optimum[neuronx]" in text:
        scan.uses.add("optimum-neuron")
    if re.search(r"\btrl\b", text):
        scan.uses.add("trl")


def _scan_targets(scan: FileScan, text: str, cell: int | None = None) -> None:
    for match in UNSUPPORTED_TARGET.finditer(text):
        scan.targets.append(
            (match.group(0).lower(), Location(scan.display, _line_of(text, match.start()), cell))
        )


def _scan_python(scan: FileScan, code: str, cell: int | None = None) -> bool:
    try:
        _PythonScanner(scan, cell).run(ast.parse(code))
    except (SyntaxError, ValueError, RecursionError, MemoryError):  # what Python's parser refuses, too deep
        return False
    return True


def _scan_notebook(scan: FileScan, text: str) -> None:
    try:
        cells = json.loads(text).get("cells", [])
    except (ValueError, RecursionError, AttributeError):  # the migrator's error says what is wrong with it
        return
    if not isinstance(cells, list):
        return
    code_cells = [cell for cell in cells if isinstance(cell, dict) and cell.get("cell_type") == "code"]
    for index, cell in enumerate(code_cells, start=1):
        source = cell.get("source", "")
        source = "".join(source) if isinstance(source, list) else str(source)
        _scan_targets(scan, source, index)
        if source.lstrip().startswith(("%%bash", "%%sh")):
            _scan_shell(scan, source, index)
            continue
        python_lines = []
        for number, line in enumerate(source.splitlines()):
            stripped = line.lstrip()
            if stripped.startswith("!"):
                _scan_shell(scan, stripped[1:], index, line_offset=number)
            python_lines.append("" if stripped.startswith(("!", "%")) else line)
        _scan_python(scan, "\n".join(python_lines), index)


def scan_file(path: Path, display: str, kind: str) -> FileScan:
    """`kind` as the migrator reads the file (python, notebook, shell); any other kind is scanned for
    instance targets only, never parsed as code of another language."""
    scan = FileScan(path=path, display=display, kind=kind)
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:  # the migrator's error on the file says why (a link loop, a folder it cannot read)
        return scan
    if kind == "notebook":
        _scan_notebook(scan, text)
    else:
        _scan_targets(scan, text)
        if kind == "shell":
            _scan_shell(scan, text)
        elif kind == "python":
            _scan_python(scan, text)
    if scan.first_load is not None and not scan.sets_async_load:
        scan.risks.append(
            Risk(risks.ASYNC_LOAD, scan.first_load, "from_pretrained() loads weights with a thread pool")
        )
    scan.risks.sort(key=lambda risk: (risk.location.cell or 0, risk.location.line))
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
