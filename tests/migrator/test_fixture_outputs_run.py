"""Proof by running: every migrated fixture output and every bundled example is run with `neuron-migrate try`
on the stand-in neuron device, as its user runs it, with tiny models and local data in place of the Hub. A
rewrite that parses but fails at run time (a wrong keyword, a DDP wrapper at the wrong place, a missing import,
a launcher flag the migrated script rejects) fails here.

- A program that trains must run its optimizer steps with a finite loss: STEPS where it has a loop of its own
  (the code after its first step runs once), TRAINER_STEPS where a library's trainer runs the loop (`train()` ends
  at `max_steps`, its end of training included); a launcher or a notebook the most that the scripts it runs need
  (STEPS where they are not read here); one that
  generates must call generate(); anything else (a module of definitions, a script that loads and saves) must run through
  (a try of a module runs what importing it runs).
- An output is not complete here, and not run, when it needs what this environment cannot have: a module
  left for manual work (`optimum.neuron` kept with a TODO, `torch_xla`), an import left with a TODO, a
  package the fixture's user has and the test stack does not (sagemaker; not one the try installs for the run,
  `TRY_INSTALLS`: torchvision), a local module or a
  launched script the fixture does not ship. That is read from the output itself (`incomplete`), so an output
  a later rule completes is run from then on.
- A fixture's user brings their own local data (a tokenized dataset saved to disk, a JSON Lines file): the
  tiny ones of the same layout are written beside the output before its try (`LOCAL_DATA`); the command line
  its user gives it is `ARGUMENTS`.
- What still does not run is listed in KNOWN_FAILURES with its kind and what the try measured; those are
  strict xfails: one that starts to run fails the suite until it leaves the list.
- Each try runs with Dynamo's recompile_limit at RECOMPILE_LIMIT (`try --recompile-limit`): a frame compiles
  for its first shapes (a recompile included), then runs eagerly. The graphs a longer run would add differ
  from those compiled only in their sizes; at Dynamo's own limit (8) the training tries spent most of their
  time compiling them (training/cpu_arguments: 34 s -> 17 s).
- A script that a launcher output of its repository (a shell script, a notebook) or of the bundled examples
  runs is tried through that launcher, as its user runs it, not a second time alone (`TRIED_BY_LAUNCHER`): the
  launcher's test asserts that its runs name the script and show what the script alone would (its optimizer
  steps with a finite loss, or a generate call).
- Every output is tried, the known failures included (`make test`, what CI runs). A try costs 5-60 s:
  NEURON_MIGRATE_TRY_QUICK=1 tries only QUICK_TRIED, one of each kind, for a developer's quick run.
"""

from __future__ import annotations

import ast
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from try_run import TryOptions, try_path

REPO = Path(__file__).resolve().parents[2]
FIXTURES = REPO / "fixtures" / "migrator"
EXAMPLES = REPO / "fixtures" / "examples"
CLI = [sys.executable, "-c", "from commands.neuron_migrate import main; main()"]
QUICK = os.environ.get("NEURON_MIGRATE_TRY_QUICK") == "1"
STEPS = 2
TRAINER_STEPS = 1
OWN_LOOP = re.compile(r"\.backward\(|optimizer\.step\(")
RECOMPILE_LIMIT = 2
TODO_PREFIX = "# TODO(neuron-migrate):"
STANDIN_MODULES = frozenset({"torch_neuronx"})  # what the stand-in device provides in a try
# Imported by a fixture, absent from the test environment, and installed by the try for the run from the registry
# as for a user's program (try_run/packages.py): torchvision, whose registry wheel is not built for this torch
# (kept out of the environment: Transformers would import it and fail at its missing operators).
TRY_INSTALLS = frozenset({"torchvision", "timm"})
TRAINS = re.compile(r"\.train\(\)|\.backward\(|optimizer\.step\(")
GENERATES = re.compile(r"\.generate\(|\bpipeline\(")
SCRIPT_WORD = re.compile(r"[\w./-]+\.py\b")
LIMIT = "try limit"
MANUAL = "manual work left by the migrator (its TODO says what)"
FIXTURE = "the fixture's own code fails, on any device"
UNSURE = "not yet attributed"
NOT_QUICK = "NEURON_MIGRATE_TRY_QUICK=1 tries only QUICK_TRIED (unset it to try every output)"

# What a quick run tries: one of each kind of program that runs today (a hand-written loop, generation, a
# notebook; the Trainer example is tried by the demo's test, tests/reports/test_demo_script.py).
QUICK_TRIED = frozenset(
    {
        "inference/chat_template_prompts.expected.py",
        "xla/parallel_loader_dict_batches.expected.py",
        "notebook/compile_cell_before_training.expected.ipynb",
    }
)

# output (relative to fixtures/migrator, or examples/NAME) -> (kind, what happens), as the tries found it
KNOWN_FAILURES: dict[str, tuple[str, str]] = {
    "xla/env_block_before_torch_import.expected.py": (
        LIMIT,
        "torchvision's Food101 download: no stand-in (the try writes MNIST-family and CIFAR files only; "
        "without network: URLError)",
    ),
    "xla/neuronx_traced_serving.expected.py": (
        MANUAL,
        "NM322: `torch_neuronx.analyze(model, example)`, left under its TODO (remove it), after the pretrained "
        "ResNet-50 the try stands in for",
    ),
    "inference/push_saved_folder.expected.py": (
        MANUAL,
        "NM501: its first push_to_hub is recorded, not sent, and the run goes on to the pipeline's "
        "`push_to_hub(save_dir, repository_id=..., revision=...)`, optimum-neuron's exported-model upload, left "
        "under its TODO (Diffusers' push_to_hub takes the repo id first: TypeError on repository_id)",
    ),
    "examples/chat_smollm3.ipynb": (
        MANUAL,
        "NM103: DistributedConfig(tp_size=2) in a one-process notebook kernel (the TODO's decision: a script run "
        "with torchrun, or one NeuronCore)",
    ),
    "inference/llm_export_then_serve.expected.py": (
        LIMIT,
        "serve() reads the folder its export step (`python serve.py export`) writes; a try runs it once, without "
        "arguments",
    ),
    "inference/llm_legacy_n_positions.expected.py": (
        LIMIT,
        "summarises each JSON line of standard input, which a try leaves empty: no generate call",
    ),
    "inference/sd_turbo_core_pinned.expected.py": (
        LIMIT,
        "stabilityai/sd-turbo: a Diffusers pipeline with no tiny stand-in (its checkpoint values are not in "
        "compat_matrix/data/pipelines.json)",
    ),
    "environment/launcher_env_dicts.expected.py": (
        LIMIT,
        "a launcher helper its user runs as `launcher_env_dicts.py SCRIPT NPROC`; the script it launches is not "
        "part of the fixture",
    ),
    "leftovers/launch_string_prefixes.expected.py": (
        LIMIT,
        "its stages launch Transformers' example run_clm.py, which the fixture does not ship",
    ),
    "leftovers/glue_tasks_env_prefix.expected.py": (
        LIMIT,
        "its jobs launch Transformers' example run_glue.py, which the fixture does not ship",
    ),
    "inference/unchanged_commented_out_compile_block.py": (
        LIMIT,
        "snapshot_download of a private compiled repository: the try serves only models it can stand in for",
    ),
    "inference/vision_audio_models.expected.py": (
        LIMIT,
        "opens cat.png, which the fixture does not ship (the ViT image processor and model are stood in for)",
    ),
    "leftovers/precompiled_repo_download.expected.py": (
        MANUAL,
        "NM501: downloads a Hub repository of optimum-neuron compiled models (not in the try's offline cache)",
    ),
    "leftovers/launcher_fstring_precompile.expected.py": (
        MANUAL,
        "NM503: the f-string still runs neuron_parallel_compile (the TODO: delete the compile-only run)",
    ),
    "notebook/tensor_parallel_cells.expected.ipynb": (
        MANUAL,
        "NM204: DistributedConfig(tp_size=8) in a one-process notebook kernel (its degree over WORLD_SIZE is 0; "
        "the TODO's decision: a script run with torchrun, or one NeuronCore)",
    ),
    "repositories/qwen3_sft_repo/notebooks/ec2/sft/scripts/sft_qwen3.expected.py": (
        LIMIT,
        "dataset tengomucho/simple_recipes is not in the data table and the script names none of its columns",
    ),
    "repositories/qwen3_sft_repo/notebooks/ec2/sft/scripts/run_sft_qwen3.expected.sh": (
        LIMIT,
        "it launches sft_qwen3.py (from the repository root), whose dataset tengomucho/simple_recipes is not in "
        "the data table and whose code names none of its columns",
    ),
    "training/alias_imports.expected.py": (
        LIMIT,
        "the stand-in tokenizer is character-level: half the sst2 rows pass the collator's max_length=128, "
        "which padding='max_length' does not truncate (a real BERT tokenizer keeps sst2 rows under 128)",
    ),
    "training/sft_config_from_training_args.expected.py": (
        FIXTURE,
        "TRL reads a `prompt` column as prompt-completion data: no_robots' real columns (prompt, messages) raise "
        "KeyError 'completion' in TRL 1.16, as in TRL 0.24.0, which optimum-neuron 0.4.5 pins (its sft_trainer.py's "
        'tokenize_fn: `if "prompt" in example`, read, not run): the dataset, not the migration',
    ),
    "training/sft_lora_llama_tp_zero1.expected.py": (
        FIXTURE,
        "TRL reads a `prompt` column as prompt-completion data: no_robots' real columns (prompt, messages) raise "
        "KeyError 'completion' in TRL 1.16, as in TRL 0.24.0, which optimum-neuron 0.4.5 pins (its sft_trainer.py's "
        'tokenize_fn: `if "prompt" in example`, read, not run): the dataset, not the migration',
    ),
    "training/vit_feature_extractor_eval.expected.py": (
        LIMIT,
        "evaluates a folder of images given as its required `folder` argument, which the fixture does not ship",
    ),
    "training/logging_dir_beside_todo.expected.py": (FIXTURE, "hands untokenized sst2 rows to the Trainer"),
    "training/unchanged_plain_transformers.py": (FIXTURE, "hands untokenized wikitext rows to the Trainer"),
    "xla/backend_probe_and_helper_test.expected.py": (
        MANUAL,
        "NM320: device_type stays 'xla' where a helper compares it (the TODO: rewrite value and tests together)",
    ),
    "xla/mlp_downcast_bf16.expected.py": (
        MANUAL,
        "NM218: the model moves as bf16 for XLA_DOWNCAST_BF16, the loop's float inputs are still float32 (the "
        "TODO: cast them where the loop moves them)",
    ),
    "xla/unchanged_torchneuron_ddp.py": (
        FIXTURE,
        "fails on the CPU too (gloo, eager backend): Dynamo cannot trace a DistributedDataParallel forward "
        "with fullgraph=True (Logger.set_runtime_stats_and_log)",
    ),
    "xla/unchanged_torchneuron_device_module.py": (
        UNSURE,
        "moving a TorchScript module to the device: Module.to raises 'param must be a Parameter', as PyTorch does "
        "for any PrivateUse1 device (TensorImpl::has_compatible_shallow_copy_type counts CPU, CUDA, MPS, HIP, XPU, "
        "HPU and MTIA as dense, not PrivateUse1); whether TorchNeuron works around it is not measured",
    ),
}

# outputs whose program runs through without training or generating, though their code can: why
RUNS_THROUGH: dict[str, str] = {
    "xla/device_probe_fallback.expected.py": "its __main__ picks the device and prints; train_step is not called",
    "notebook/writefile_scripts.expected.ipynb": "the train.py it writes and runs calls backward, with no optimizer",
}


# -- which outputs there are, and which are complete here ---------------------------------------------------
def fixture_outputs() -> list[str]:
    """Every migrated output of the fixtures: `*.expected.*` scripts, launchers and notebooks, and the
    `unchanged_*` cases (their output is their input)."""
    found = set()
    for path in FIXTURES.rglob("*"):
        if path.suffix not in (".py", ".sh", ".sbatch", ".ipynb") or not path.is_file():
            continue
        if ".expected." in path.name or (path.name.startswith("unchanged_") and path.suffix == ".py"):
            found.add(path.relative_to(FIXTURES).as_posix())
    return sorted(found)


def example_outputs() -> list[str]:
    return [
        f"examples/{path.name}"
        for path in sorted(EXAMPLES.iterdir())
        if path.suffix in (".py", ".sh", ".ipynb")
    ]


def python_source(path: Path) -> str:
    """The Python a script or a notebook's code cells run (IPython syntax turned into calls)."""
    if path.suffix != ".ipynb":
        return path.read_text(encoding="utf-8")
    from IPython.core.inputtransformer2 import TransformerManager

    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    sources = ["".join(cell["source"]) for cell in cells if cell["cell_type"] == "code"]
    python = [TransformerManager().transform_cell(source) for source in sources]
    for number, cell in enumerate(python, start=1):
        ast.parse(cell, filename=f"code cell {number}")  # a cell that does not parse cannot run either
    return "\n".join(python)


def _imports(tree: ast.Module, lines: list[str]) -> tuple[set[str], list[str]]:
    """Top-level modules imported at module level (outside a `try`, whose `except` may stand in), and the
    lines of imports left with a TODO."""
    pending, names, todo = list(tree.body), set(), []
    while pending:
        node = pending.pop()
        if isinstance(node, ast.Import | ast.ImportFrom):
            if node.lineno > 1 and lines[node.lineno - 2].strip().startswith(TODO_PREFIX):
                todo.append(f"line {node.lineno}")
            if isinstance(node, ast.Import):
                names |= {alias.name.partition(".")[0] for alias in node.names}
            elif not node.level:
                names.add((node.module or "").partition(".")[0])
        elif isinstance(node, ast.If):
            pending += [*node.body, *node.orelse]
    return names, todo


def incomplete(tree_root: Path, path: Path) -> str | None:
    """Why the output at `path` (in its migrated tree rooted at `tree_root`) cannot run here, or None."""
    if path.suffix in (".sh", ".sbatch"):
        text = path.read_text(encoding="utf-8")
        scripts = sorted(set(SCRIPT_WORD.findall(text)))
        if not scripts:
            return "launches no Python script of its own"
        missing = [s for s in scripts if not (path.parent / s).is_file() and not (tree_root / s).is_file()]
        if missing:
            return f"launches {', '.join(missing)}, which the fixture does not ship"
        found = [path.parent / s if (path.parent / s).is_file() else tree_root / s for s in scripts]
        reasons = [incomplete(tree_root, script) for script in found]
        return (
            "; ".join(f"{script}: {why}" for script, why in zip(scripts, reasons, strict=True) if why) or None
        )
    if (
        path.suffix == ".ipynb"
    ):  # the scripts its `!` / `%%bash` lines launch that no `%%writefile` cell writes
        missing = [
            s
            for s in _notebook_scripts(path)
            if not (path.parent / s).is_file() and not (tree_root / s).is_file()
        ]
        if missing:
            return f"launches {', '.join(missing)}, which the fixture does not ship"
    if path.name.split(".")[0] == "setup" and path.suffix == ".py":
        return "a package's build script (pip runs it to install the package), not a program"
    try:
        text = python_source(path)
    except SyntaxError as error:
        return f"{error.filename} does not parse ({error.msg})"
    lines = text.splitlines()
    names, todo = _imports(ast.parse(text), lines)
    if "run_line_magic('matplotlib'" in text:  # a notebook's %matplotlib needs the package
        names.add("matplotlib")
    missing = sorted(
        name
        for name in names
        if name not in STANDIN_MODULES | TRY_INSTALLS
        and importlib.util.find_spec(name) is None
        and not (path.parent / f"{name}.py").exists()
        and not (path.parent / name).is_dir()
    )
    reasons = []
    if missing:
        reasons.append(f"imports {', '.join(missing)}, which this environment does not have")
    if todo:
        reasons.append(f"an import left with a TODO ({', '.join(todo)})")
    return "; ".join(reasons) or None


def _notebook_scripts(path: Path) -> list[str]:
    """The scripts a notebook's shell lines (`!torchrun x.py`, a `%%bash` cell) name and no `%%writefile` cell
    or `!cp` of it writes."""
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    sources = ["".join(cell["source"]) for cell in cells if cell["cell_type"] == "code"]
    written = {
        source.partition("\n")[0].split()[-1] for source in sources if source.startswith("%%writefile")
    }
    shell = [
        line
        for source in sources
        for line in (
            source.splitlines()[1:] if source.startswith(("%%bash", "%%sh")) else source.splitlines()
        )
        if source.startswith(("%%bash", "%%sh")) or line.lstrip().startswith("!")
    ]
    copied = {line.split()[-1] for line in shell if line.lstrip("! ").startswith("cp ")}  # `!cp SRC DST`
    named = {word for line in shell for word in SCRIPT_WORD.findall(line) if "//" not in word}  # not a URL's
    return sorted(named - written - copied)


def _runs_something(text: str) -> bool:
    """A program, not a module of functions: a `__main__` block, or top-level code that calls one of its
    functions or trains or generates itself."""
    tree = ast.parse(text)
    defined = {node.name for node in tree.body if isinstance(node, ast.FunctionDef | ast.ClassDef)}
    for node in tree.body:
        if isinstance(node, ast.If) and "__main__" in ast.unparse(node.test):
            return True
        if isinstance(node, ast.FunctionDef | ast.ClassDef | ast.Import | ast.ImportFrom):
            continue
        for call in (child for child in ast.walk(node) if isinstance(child, ast.Call)):
            function = call.func
            if isinstance(function, ast.Name) and function.id in defined | {"pipeline"}:
                return True
            if isinstance(function, ast.Attribute) and function.attr in (
                "train",
                "generate",
                "backward",
                "step",
            ):
                return True
    return False


# -- the migrated trees ---------------------------------------------------------------------------------
def _case_root(name: str) -> tuple[Path, Path]:
    """(the folder copied for the try, the output's path in it): a repository's output runs in its
    repository, a family's output alone in a folder (with the local data its user has)."""
    relative = Path(name)
    family = FIXTURES / relative.parts[0]
    if len(relative.parts) > 2:
        return family / relative.parts[1], Path(*relative.parts[2:])
    return family, Path(relative.name)


def _migrated_name(path: Path) -> Path:
    return path.with_name(path.name.replace(".expected.", "."))


def migrated_tree(name: str, into: Path) -> Path:
    """The migrated output `name` as its user has it: for a repository, the whole repository with every
    output in place of its input; the path of the output in that tree."""
    root, inside = _case_root(name)
    if len(Path(name).parts) > 2:
        for source in root.rglob("*"):
            if source.is_dir() or source.suffix == ".findings":
                continue
            relative = source.relative_to(root)
            if ".expected." not in source.name and _has_expected(source):
                continue  # the input: its output takes its place
            target = into / _migrated_name(relative)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(source, target)
    else:
        shutil.copyfile(root / inside, into / _migrated_name(inside))
    return into / _migrated_name(inside)


def _has_expected(source: Path) -> bool:
    return source.with_name(f"{source.stem}.expected{source.suffix}").is_file()


# -- the local data the fixtures' users have ---------------------------------------------------------------
def _token_rows(count: int, length: int, label: Callable[[int, list[int]], object]) -> list[dict]:
    """Tokenized rows of one length (grouped into blocks, as run_clm's group_texts makes them); ids stay
    below the tiny models' vocabularies."""
    rows = []
    for row in range(count):
        ids = [4 + (row * 7 + i * 3) % 90 for i in range(length)]
        rows.append({"input_ids": ids, "attention_mask": [1] * length, "labels": label(row, ids)})
    return rows


def _causal_blocks(count: int = 32) -> list[dict]:
    return _token_rows(count, 64, lambda row, ids: list(ids))


def _classes(count: int = 32) -> list[dict]:
    return _token_rows(count, 32, lambda row, ids: row % 2)


def _save_to_disk(rows: list[dict], folder: Path) -> None:
    from datasets import Dataset

    Dataset.from_list(rows).save_to_disk(str(folder))


def _jsonl(rows: list[dict], path: Path) -> None:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")


def _batches(rows: list[dict], path: Path) -> None:
    import torch

    batches = [
        {key: torch.tensor([row[key] for row in rows[i : i + 4]]) for key in rows[0]} for i in range(0, 16, 4)
    ]
    torch.save(batches, path)


def _sentences(count: int = 16) -> list[dict]:
    return [{"text": f"Step {row} of the job ran on the device."} for row in range(count)]


def _tickets(count: int = 3) -> list[dict]:
    return [{"id": row, "body": f"My job number {row} stops at step 2. Why?"} for row in range(count)]


def _lora_checkpoint(rows: list[dict], folder: Path) -> None:
    """A LoRA run's checkpoint as the migrated training writes it (PEFT's layout: the adapter's files at the
    top, with the tokenizer), its base model a tiny one saved beside it."""
    from peft import LoraConfig, get_peft_model
    from transformers import LlamaConfig, LlamaForCausalLM

    from try_run.hub import build_tokenizer

    config = LlamaConfig(vocab_size=160, hidden_size=32, intermediate_size=64, num_hidden_layers=2)
    config.num_attention_heads = config.num_key_value_heads = 4
    base = folder.parent / "base"
    LlamaForCausalLM(config).save_pretrained(base)
    model = get_peft_model(LlamaForCausalLM.from_pretrained(base), LoraConfig(r=4, target_modules=["q_proj"]))
    model.save_pretrained(folder)
    build_tokenizer().save_pretrained(folder)


def _compiled_record(rows: list[dict], folder: Path) -> None:
    """The record `optimum-cli export neuron` writes beside a compiled decoder (optimum-neuron 0.4.x's
    neuron_config.json; the compiled graphs themselves are not read on TorchNeuron)."""
    folder.mkdir()
    record = {"checkpoint_id": "meta-llama/Llama-3.2-1B", "checkpoint_revision": None, "batch_size": 2}
    record.update({"sequence_length": 128, "tp_degree": 2, "torch_dtype": "bfloat16", "target": "trn1"})
    (folder / "neuron_config.json").write_text(json.dumps(record), encoding="utf-8")


def _no_rows() -> list[dict]:
    return []


# output -> (the path its code reads, how to write it, rows)
LOCAL_DATA: dict[str, tuple[str, Callable[[list[dict], Path], None], Callable[[], list[dict]]]] = {
    "inference/tp_load_in_helper.expected.py": ("tickets.jsonl", _jsonl, _tickets),
    "training/consolidate_checkpoints.expected.py": ("data", _save_to_disk, _causal_blocks),
    "training/consolidate_then_merge_adapter.expected.py": ("checkpoint", _lora_checkpoint, _no_rows),
    "inference/llm_compiled_record.expected.py": ("llama-neuron", _compiled_record, _no_rows),
    "inference/llm_compiled_batch_size.expected.py": ("llama-neuron", _compiled_record, _no_rows),
    "training/flags_from_a_flow.expected.py": ("data/tokenized", _save_to_disk, _causal_blocks),
    "training/keeps_comments_and_layout.expected.py": ("smol-data", _save_to_disk, _causal_blocks),
    "training/legacy_trainium_trainer.expected.py": ("lm_dataset", _save_to_disk, _classes),
    "training/lazy_load_for_parallelism.expected.py": ("train.jsonl", _jsonl, _causal_blocks),
    "training/sft_lazy_load_trl_parser.expected.py": ("sft.jsonl", _jsonl, _sentences),
    "xla/spawn_master_print.expected.py": ("train_batches.pt", _batches, _classes),
    "training/training_neuron_config_qwen3.expected.py": ("qwen3-data", _save_to_disk, _causal_blocks),
}


# output -> the command line its user gives it (the examples' Trainer batches kept small: the proof is that it
# runs, not how fast)
ARGUMENTS: dict[str, list[str]] = {
    "examples/sft_llama.py": ["--per_device_train_batch_size", "1"],
    # The flags a workflow passes (metaflow-trainium's, by shape): optimum-neuron's, which the migration cannot
    # see: the no-op ones must parse, the tensor-parallel degree must shard with checkpointing asked for (NM222).
    "training/flags_from_a_flow.expected.py": [
        *("--model_id", "meta-llama/Llama-3.2-1B", "--output_dir", "out", "--bf16", "True"),
        *("--overwrite_output_dir", "True", "--skip_cache_push", "True", "--tensor_parallel_size", "2"),
        *("--gradient_checkpointing", "True", "--per_device_train_batch_size", "1"),
    ],
    "inference/tp_load_in_helper.expected.py": ["tickets.jsonl"],
    # the path the migration changed (the CPU and CUDA paths are the script's own, left as they were)
    "xla/ddp_on_the_device_path.expected.py": ["--device", "xla"],
    "training/consolidate_then_merge_adapter.expected.py": [
        "--checkpoint",
        "checkpoint",
        "--merged",
        "merged",
    ],
    "leftovers/reference_in_except_block.expected.py": ["bert-base-cased"],
    "training/sft_lazy_load_trl_parser.expected.py": [
        *("--model_id", "Qwen/Qwen3-0.6B", "--dataset_path", "sft.jsonl", "--output_dir", "out"),
    ],
    # its owner's local checkpoint is what this Hub id saves
    "training/sft_batched_formatting_func.expected.py": ["--model_path", "meta-llama/Llama-3.2-1B"],
    "training/zero1_flag_read_at_run_time.expected.py": [
        "--model_id",
        "bert-base-uncased",
        "--zero_1",
        "True",
    ],
}


# -- scripts their launcher runs ---------------------------------------------------------------------------
def _output_source(name: str) -> Path:
    """The committed file of output `name` (a fixture's expected output, or a bundled example)."""
    return EXAMPLES / name.split("/", 1)[1] if name.startswith("examples/") else FIXTURES / name


def _output_name(script: Path) -> str | None:
    """The output name of the script at `script` (an input path), or None where it is not an output."""
    expected = script.with_name(f"{script.stem}.expected{script.suffix}")
    for path in (expected, script):
        if path.is_file() and path.is_relative_to(EXAMPLES):
            return f"examples/{path.relative_to(EXAMPLES).as_posix()}"
        if path.is_file() and (path == expected or path.name.startswith("unchanged_")):
            return path.relative_to(FIXTURES).as_posix()
    return None


def launched_scripts(launcher: str) -> list[str]:
    """The script outputs a launcher output (a shell script or a notebook of a repository, or a bundled example)
    runs: named by its command lines, found beside it or at its repository's root."""
    source = _output_source(launcher)
    if launcher.startswith("examples/"):
        root = EXAMPLES
    elif len(Path(launcher).parts) > 2:
        root = FIXTURES / Path(launcher).parts[0] / Path(launcher).parts[1]
    else:
        return []  # a family's output is tried alone in its folder: the scripts it names are not there
    if source.suffix in (".sh", ".sbatch"):
        words = SCRIPT_WORD.findall(source.read_text(encoding="utf-8"))
    elif source.suffix == ".ipynb":
        words = _notebook_scripts(source)
    else:
        return []
    found = []
    for word in dict.fromkeys(words):
        for folder in (source.parent, root):
            name = _output_name(_migrated_name(folder / word))
            if name is not None:
                found.append(name)
                break
    return found


def tried_by_launcher() -> dict[str, str]:
    """Script output -> the launcher output whose try runs it, as its user runs it (with the launcher's flags):
    the script is not tried a second time alone. Known failures neither cover nor are covered."""
    outputs = example_outputs() + fixture_outputs()
    covered = {}
    for launcher in outputs:
        if launcher in KNOWN_FAILURES:
            continue
        for script in launched_scripts(launcher):
            if script in outputs and script not in KNOWN_FAILURES:
                covered.setdefault(script, launcher)
    return covered


TRIED_BY_LAUNCHER = tried_by_launcher()
LAUNCHES: dict[str, list[str]] = {}
for _script, _launcher in TRIED_BY_LAUNCHER.items():
    LAUNCHES.setdefault(_launcher, []).append(_script)


# -- the cases ------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def migrated_examples(tmp_path_factory) -> Path:
    """The bundled examples as `neuron-migrate --output-dir` writes them, with the local checkpoint the XLA
    loop reads (its config, and random weights for it: the example ships the config only)."""
    out = tmp_path_factory.mktemp("migrated")
    subprocess.run([*CLI, "--output-dir", str(out), str(EXAMPLES)], capture_output=True, check=False)
    checkpoint = out / "checkpoints" / "tiny-mistral"
    # --output-dir copies the examples' whole tree, the checkpoint's config included
    shutil.copytree(EXAMPLES / "checkpoints" / "tiny-mistral", checkpoint, dirs_exist_ok=True)
    from transformers import AutoConfig, AutoModelForCausalLM

    AutoModelForCausalLM.from_config(AutoConfig.from_pretrained(checkpoint)).save_pretrained(checkpoint)
    return out


def cases() -> list:
    params = []
    for name in example_outputs() + fixture_outputs():
        marks = []
        known = KNOWN_FAILURES.get(name)
        if QUICK and name not in QUICK_TRIED:
            marks.append(pytest.mark.skip(reason=NOT_QUICK))
        elif known:
            marks.append(pytest.mark.xfail(reason=f"{known[0]}: {known[1]}", strict=True))
        params.append(pytest.param(name, marks=marks, id=name))
    return params


@pytest.mark.slow
@pytest.mark.parametrize("name", cases())
def test_migrated_output_runs_on_the_stand_in(name, tmp_path, tmp_path_factory, request):
    if name.startswith("examples/"):
        path = request.getfixturevalue("migrated_examples") / name.split("/", 1)[1]
    else:
        path = migrated_tree(name, tmp_path)
    reason = incomplete(tmp_path, path)
    if reason:
        pytest.skip(f"not complete here: {reason}")
    launcher = TRIED_BY_LAUNCHER.get(name)
    if launcher is not None and incomplete(tmp_path, _in_tree(launcher, path, name)) is None:
        pytest.skip(f"tried by {launcher}'s try, which runs it as its user does, with the launcher's flags")
    if name in LOCAL_DATA:
        relative, write, rows = LOCAL_DATA[name]
        write(rows(), path.parent / relative)
    text = python_source(path) if path.suffix in (".py", ".ipynb") else ""
    # A launcher's (or a notebook's) steps are those of the scripts it runs, where they are read here.
    programs = [text] if text else []
    programs += [python_source(_in_tree(script, path, name)) for script in launched_scripts(name)]
    steps = max(map(_steps, programs), default=STEPS)
    options = TryOptions(
        steps=steps,
        recompile_limit=RECOMPILE_LIMIT,
        show_output=False,
        cache_root=tmp_path_factory.getbasetemp().parent / "try-cache",
    )
    runs = try_path(path, ARGUMENTS.get(name, []), options)
    assert runs, name
    program = (path.suffix != ".py" or _runs_something(text)) and name not in RUNS_THROUGH
    for run in runs:
        assert run.status == "ran", f"{run.command}: {run.reason}\n{run.output_tail[-3000:]}"
        if path.suffix in (".sh", ".sbatch") or (program and TRAINS.search(text)):
            assert run.steps >= steps and run.loss_finite is True, run.as_dict()
        elif program and GENERATES.search(text):
            assert run.generate_calls >= 1, run.as_dict()
    for script in LAUNCHES.get(name, []):  # what the scripts it runs would show if tried alone
        script_text = python_source(_in_tree(script, path, name))
        if path.suffix in (".sh", ".sbatch"):
            assert any(_migrated_name(Path(script)).name in run.command for run in runs), script
        if TRAINS.search(script_text):
            assert any(r.steps >= _steps(script_text) and r.loss_finite for r in runs), script
        elif GENERATES.search(script_text):
            assert any(run.generate_calls >= 1 for run in runs), script


def _steps(text: str) -> int:
    """The optimizer steps a try of this program runs."""
    return STEPS if OWN_LOOP.search(text) else TRAINER_STEPS


def _in_tree(other: str, path: Path, name: str) -> Path:
    """Where output `other`, of the same repository (or the bundled examples) as output `name`, is in the migrated
    tree that holds `name` at `path`."""
    root = path.parents[len(_tree_parts(name)) - 1]
    return root / _migrated_name(Path(*_tree_parts(other)))


def _tree_parts(name: str) -> tuple[str, ...]:
    """The parts of output `name`'s path inside its migrated tree (the examples' folder, or its repository)."""
    return Path(name).parts[1 if name.startswith("examples/") else 2 :]


def test_every_known_failure_is_complete_here_so_its_try_runs(tmp_path, request) -> None:
    """A known failure skipped as not complete here never runs, so its strict xfail could never fail the suite."""
    skipped = []
    for name in KNOWN_FAILURES:
        if name.startswith("examples/"):
            root = request.getfixturevalue("migrated_examples")
            path = root / name.split("/", 1)[1]
        else:
            root = tmp_path / name
            root.mkdir(parents=True)
            path = migrated_tree(name, root)
        reason = incomplete(root, path)
        if reason:
            skipped.append(f"{name}: {reason}")
    assert not skipped, f"not complete here, so never tried: leave them out of KNOWN_FAILURES: {skipped}"


def test_an_import_left_for_manual_work_makes_an_output_incomplete(tmp_path: Path) -> None:
    script = tmp_path / "train.py"
    script.write_text(
        "import os\ntry:\n    import torch_neuronx\nexcept ImportError:\n    pass\nimport optimum.neuron\n"
        "# TODO(neuron-migrate): NM219 `transformers.AdamW` is not in the migrated stack\n"
        "from transformers import AdamW\n"
    )
    assert incomplete(tmp_path, script) == (
        "imports optimum, which this environment does not have; an import left with a TODO (line 8)"
    )
    launcher = tmp_path / "run.sh"
    launcher.write_text("torchrun --nproc_per_node=2 run_clm.py --bf16\n")
    assert incomplete(tmp_path, launcher) == "launches run_clm.py, which the fixture does not ship"
