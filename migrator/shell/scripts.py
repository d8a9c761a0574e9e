"""What parses the command line of a Python script a launcher runs: which training-flag table applies.

A flag is renamed or removed only when the script's parser is known: a script in the same tree is read
(with Python's `ast`), otherwise the script must be one of the Transformers / TRL example scripts by name.
A script's own arguments (`add_argument("--name")`, fields of its own dataclasses) are never touched: on
`run_glue.py`, `--max_seq_length` is the script's own field, not TRL's renamed one.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from migrator.families.training_args import SFT_CONFIG_ARGUMENTS, TRAINING_ARGUMENTS, ArgAction
from migrator.shell.commands import _truthy
from usercode.python import ast_nodes

# Transformers' `examples/pytorch/*/run_*.py` (and optimum-neuron's copies of them): HfArgumentParser over
# their own ModelArguments / DataTrainingArguments and `TrainingArguments` / `Seq2SeqTrainingArguments`.
_TRANSFORMERS_EXAMPLES = frozenset(
    {
        "run_clm.py",
        "run_mlm.py",
        "run_plm.py",
        "run_fim.py",
        "run_glue.py",
        "run_xnli.py",
        "run_classification.py",
        "run_ner.py",
        "run_qa.py",
        "run_seq2seq_qa.py",
        "run_swag.py",
        "run_summarization.py",
        "run_translation.py",
        "run_image_classification.py",
        "run_audio_classification.py",
        "run_speech_recognition_ctc.py",
        "run_speech_recognition_seq2seq.py",
        "run_semantic_segmentation.py",
        "run_object_detection.py",
    }
)
# TRL's `trl/scripts/*.py` (`examples/scripts/` in older releases), parsed by TrlParser into their config.
_TRL_EXAMPLES = {
    "sft.py": SFT_CONFIG_ARGUMENTS,
    "dpo.py": TRAINING_ARGUMENTS,
    "orpo.py": TRAINING_ARGUMENTS,
    "kto.py": TRAINING_ARGUMENTS,
    "grpo.py": TRAINING_ARGUMENTS,
    "reward_modeling.py": TRAINING_ARGUMENTS,
}
_SFT_CONFIGS = frozenset({"SFTConfig", "NeuronSFTConfig"})
_TRAINING_CONFIGS = frozenset(
    {
        "TrainingArguments",
        "Seq2SeqTrainingArguments",
        "NeuronTrainingArguments",
        "Seq2SeqNeuronTrainingArguments",
        "DPOConfig",
        "ORPOConfig",
        "KTOConfig",
        "GRPOConfig",
        "RewardConfig",
    }
)
# TRL's configs declare `bf16: bool | None` (TRL 1.16), which HfArgumentParser reads only with a value:
# `--bf16 true` (a bare `--bf16` is "expected one argument"); TrainingArguments' `bf16: bool` takes either.
_TRL_CONFIGS = frozenset(
    {"SFTConfig", "NeuronSFTConfig", "DPOConfig", "ORPOConfig", "KTOConfig", "GRPOConfig"}
)
_TRL_CONFIGS |= {"RewardConfig"}
_PARSERS = frozenset({"HfArgumentParser", "NeuronHfArgumentParser", "TrlParser"})
_NEURON_ARGUMENTS = frozenset(
    name for name in _TRAINING_CONFIGS if name.startswith(("Neuron", "Seq2SeqNeuron"))
)
_XLA_ERA_MODULES = ("torch_xla", "optimum.neuron", "neuronx_distributed", "torch_neuronx")


@dataclass(frozen=True)
class ScriptParser:
    """How a script reads its flags. `table` is None when it is not known to build training arguments."""

    script: str
    table: dict[str, ArgAction] | None
    own: frozenset[str] = frozenset()  # flags the script declares itself
    read: bool = False  # True when the script's source was read, not recognised by its name
    names: frozenset[str] = frozenset()  # names and attributes its source uses (when read)
    xla_era: bool = False  # it imports torch_xla / optimum-neuron / NxD: its training ran on the XLA device
    compiles: bool = False  # it sets `torch_compile=True` (a config keyword, `parser.set_defaults`)
    trl_config: bool = False  # it parses one of TRL's configs, whose `--bf16` needs a value

    def trains_compiled_tp(self, degree: str | None, compiled: str | None) -> bool:
        """Whether a launch that gives these `tensor_parallel_size` / `torch_compile` values (None: not given)
        trains a tensor-parallel model compiled: the migrated script loads the model with `DistributedConfig`
        and sets torch_compile=True, the degree is not 1 and compilation is not turned off."""
        return (
            self.read
            and self.compiles
            and "DistributedConfig" in self.names
            and degree not in (None, "1")
            and (compiled is None or _truthy(compiled))
        )

    def action(self, flag: str) -> ArgAction | None:
        """What becomes of `--flag`: None when it is the script's own or the table keeps it."""
        if self.table is None or flag in self.own:
            return None
        return self.table.get(flag)


def script_parser(
    script: str,
    directory: Path | None,
    written: Mapping[str, str] | None = None,
    root: Path | None = None,
    migrate: Callable[[str], str] | None = None,
) -> ScriptParser:
    """The parser of `script` (a launcher's word) for a launcher in `directory` (None: not on disk).
    `written`: scripts the same notebook writes (`%%writefile PATH` cells), by PATH: read first. `root`: the
    top of the tree being migrated, an ancestor of `directory` (see `_find`). `migrate`: the script's text once
    migrated; the flags it declares and the names it reads are those of the migrated script, which the
    launcher runs (the migration adds fields: a parsed tensor-parallel degree)."""
    name = script.rsplit("/", 1)[-1]
    text = next((body for path, body in (written or {}).items() if path.rsplit("/", 1)[-1] == name), None)
    source = _find(script, directory, root) if text is None else None
    if source is not None:
        try:
            text = source.read_bytes()
        except OSError:
            text = None
    if text is not None:
        try:
            original = ast.parse(text)
            migrated = original
            if migrate is not None:
                code = text.decode() if isinstance(text, bytes) else text
                migrated = ast.parse(migrate(code))
            return _read(script, migrated, read=True, xla_era=_imports_xla_era(original))
        except (SyntaxError, ValueError, UnicodeDecodeError):
            pass
    if name in _TRANSFORMERS_EXAMPLES:
        return ScriptParser(script, TRAINING_ARGUMENTS)
    return ScriptParser(script, _TRL_EXAMPLES.get(name), trl_config=name in _TRL_EXAMPLES)


def _find(script: str, directory: Path | None, root: Path | None = None) -> Path | None:
    """The script's file: relative to the launcher's directory or one of its ancestors, nearest first, up to
    three levels or up to `root` when that is higher (a launcher is often run from the repository root:
    `torchrun notebooks/ec2/sft/train.py` in `notebooks/ec2/sft/run.sh`). A path with an expansion is looked
    up by name."""
    if directory is None:
        return None
    relative = Path(script if "$" not in script else script.rsplit("/", 1)[-1])
    if relative.is_absolute():
        return None
    parents = list(directory.parents)
    levels = parents.index(root) + 1 if root in parents else 0
    for base in (directory, *parents[: max(3, levels)]):
        candidate = base / relative
        if candidate.is_file():
            return candidate
    return None


def _imports_xla_era(tree: ast.Module) -> bool:
    """Whether the script imports torch_xla / optimum-neuron / NxD: its training ran on the XLA device."""
    for node in ast_nodes(tree):
        modules = [alias.name for alias in node.names] if isinstance(node, ast.Import) else []
        modules += [node.module] if isinstance(node, ast.ImportFrom) and node.module else []
        if any(module.startswith(_XLA_ERA_MODULES) for module in modules):
            return True
    return False


def _read(script: str, tree: ast.Module, read: bool, xla_era: bool) -> ScriptParser:
    names: set[str] = set()
    own: set[str] = set()
    compiles = False
    for node in ast_nodes(tree):
        if isinstance(node, ast.Name):
            names.add(node.id)
        elif isinstance(node, ast.Attribute):
            names.add(node.attr)
        elif isinstance(node, ast.alias):
            names.add(node.asname or node.name.rsplit(".", 1)[-1])
        elif isinstance(node, ast.keyword) and node.arg == "torch_compile":
            compiles = compiles or (isinstance(node.value, ast.Constant) and node.value.value is True)
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "add_argument"
        ):
            own.update(
                arg.value.lstrip("-").replace("-", "_")
                for arg in node.args
                if isinstance(arg, ast.Constant) and isinstance(arg.value, str) and arg.value.startswith("--")
            )
        if isinstance(node, ast.ClassDef) and _is_dataclass(node):
            own.update(
                item.target.id
                for item in node.body
                if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name)
            )
    table = None
    if names & _PARSERS:
        table = (
            SFT_CONFIG_ARGUMENTS
            if names & _SFT_CONFIGS
            else TRAINING_ARGUMENTS
            if names & _TRAINING_CONFIGS
            else None
        )
    return ScriptParser(
        script,
        table,
        frozenset(own),
        read=read,
        names=frozenset(names),
        xla_era=xla_era,
        compiles=compiles,
        trl_config=table is not None and bool(names & _TRL_CONFIGS),
    )


def _is_dataclass(node: ast.ClassDef) -> bool:
    """Decorated `@dataclass` / `@dataclasses.dataclass(...)`: its fields are the script's own flags."""
    for decorator in node.decorator_list:
        target = decorator.func if isinstance(decorator, ast.Call) else decorator
        if (isinstance(target, ast.Name) and target.id == "dataclass") or (
            isinstance(target, ast.Attribute) and target.attr == "dataclass"
        ):
            return True
    return False
