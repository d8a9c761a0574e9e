"""Will a job fit: per-rank memory of a model's training, LoRA fine-tuning or generation on a Trainium instance,
and the smallest (tp, fsdp) grid that fits with headroom.

Every size is read from the model at its full size under PyTorch's ``FakeTensorMode`` (no memory; unlike meta
tensors, fake tensors run Transformers' data-dependent checks), not from a formula of the config. Attention
keeps its scores (eager attention): that is what the stand-in's SDPA saves for backward (measured, docs/using/planning.md);
a fused attention kernel on the device would keep less, so the activations are an upper bound there:
parameters are its ``numel``; activations are the bytes autograd saves for backward in a forward at the job's
batch and sequence length (``saved_tensors_hooks``), per decoder layer, so checkpointing is that minus all but
one layer's saved bytes plus each layer's input; the static KV cache is Transformers' ``StaticCache`` after one
step; which parameters tensor parallelism shards is what ``DistributedConfig(tp_size=2)`` shards
(``tp_readiness``).

A measurement is kept in the cache (``sizes_for``), keyed by the config, the job's shape, the installed torch and
Transformers and this harness's source: planning the same model again (another instance, another headroom, the
checklist and ``try`` asking for the models a script loads) reads it back without importing torch.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field
from functools import cache
from importlib import metadata
from pathlib import Path

from compat_matrix.environment import cache_home
from compat_matrix.meta_model import FullSizeConfig, MetaBuildError

INSTANCES_PATH = Path(__file__).with_name("data") / "instances.json"
TASKS = ("train", "sft-lora", "generate")
DTYPE_BYTES = {"bf16": 2, "fp16": 2, "fp32": 4}
# The code whose change changes a measurement: a cached one measured by another version is not read.
_MEASURING_CODE = ("plan_measure.py", "meta_model.py", "tp_readiness.py")
GIB = 1024**3
# The job a plan assumes where none is given (the plan command's defaults; the checklist's and try's plans).
DEFAULT_SEQ_LEN, DEFAULT_BATCH, DEFAULT_DTYPE = 2048, 1, "bf16"
DEFAULT_INSTANCE, DEFAULT_HEADROOM = "trn2.48xlarge", 0.15
ADAM_STATES = 2  # torch.optim.AdamW keeps exp_avg and exp_avg_sq, each in the parameter's dtype


@dataclass(frozen=True)
class Instance:
    name: str
    chips: int
    ranks_per_chip: int
    hbm_gib_per_chip: float

    @property
    def ranks(self) -> int:
        return self.chips * self.ranks_per_chip

    @property
    def hbm_per_rank(self) -> float:
        return self.hbm_gib_per_chip * GIB / self.ranks_per_chip


@cache
def instances() -> dict[str, Instance]:
    data = json.loads(INSTANCES_PATH.read_text())["instances"]
    return {
        name: Instance(name, entry["chips"], entry["ranks_per_chip"], entry["hbm_gib_per_chip"])
        for name, entry in data.items()
    }


@dataclass
class ModelSizes:
    """What a plan needs from the meta model, measured once per model, task, batch and sequence length."""

    parameters: int
    tp_sharded: (
        int  # parameters DistributedConfig(tp_size=2) splits (the rest is replicated on every TP rank)
    )
    tp_plan: str
    clean_degrees: list[int]
    trainable: int  # parameters with gradients and optimizer state (LoRA adapters for sft-lora)
    activations: int  # bytes saved for backward, no checkpointing (0 for generate)
    activations_checkpointed: int  # with activation checkpointing on every decoder layer
    kv_cache: int  # bytes of the static cache (generate only)


def measure_sizes(full_size: FullSizeConfig, task: str, batch: int, seq_len: int, dtype: str) -> ModelSizes:
    """Measured now: imports torch and Transformers (``plan_measure``); ``sizes_for`` reads the cache first."""
    from compat_matrix.plan_measure import measure

    return ModelSizes(**measure(full_size, task, batch, seq_len, dtype))


def _cache_key(full_size: FullSizeConfig, task: str, batch: int, seq_len: int, dtype: str) -> str:
    here = Path(__file__).parent
    decided_by = {
        "model_type": full_size.model_type,
        "values": full_size.values,
        "job": [task, batch, seq_len, dtype],
        "versions": [metadata.version("torch"), metadata.version("transformers"), metadata.version("peft")],
        "code": [hashlib.sha256((here / name).read_bytes()).hexdigest() for name in _MEASURING_CODE],
    }
    return hashlib.sha256(json.dumps(decided_by, sort_keys=True, default=str).encode()).hexdigest()[:32]


def sizes_for(full_size: FullSizeConfig, task: str, batch: int, seq_len: int, dtype: str) -> ModelSizes:
    """``measure_sizes``, read from the cache (``$NEURON_MIGRATE_CACHE/plan-sizes``) where this config was
    measured for this job by the same torch, Transformers, PEFT and harness code; measured and kept otherwise."""
    path = cache_home() / "plan-sizes" / f"{_cache_key(full_size, task, batch, seq_len, dtype)}.json"
    try:
        return ModelSizes(**json.loads(path.read_text(encoding="utf-8")))
    except (OSError, ValueError, TypeError):  # not cached yet, or a file cut short: measured again
        pass
    sizes = measure_sizes(full_size, task, batch, seq_len, dtype)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_suffix(".partial")
        partial.write_text(json.dumps(asdict(sizes)), encoding="utf-8")
        partial.replace(path)  # whole or absent: another process may read it at the same time
    except OSError:  # a read-only cache: the plan is still right, only not kept
        pass
    return sizes


@dataclass
class RankBytes:
    tp: int
    fsdp: int
    checkpointing: bool
    weights: float
    gradients: float
    optimizer: float
    activations: float
    kv_cache: float

    @property
    def total(self) -> float:
        return self.weights + self.gradients + self.optimizer + self.activations + self.kv_cache


def per_rank(sizes: ModelSizes, task: str, dtype: str, tp: int, fsdp: int, checkpointing: bool) -> RankBytes:
    width = DTYPE_BYTES[dtype]
    replicated = sizes.parameters - sizes.tp_sharded
    weights = (sizes.tp_sharded / tp + replicated) / fsdp * width
    trainable_share = sizes.trainable / sizes.parameters if sizes.parameters else 0.0
    trained = 0.0 if task == "generate" else weights * trainable_share
    activations = sizes.activations_checkpointed if checkpointing else sizes.activations
    return RankBytes(
        tp, fsdp, checkpointing, weights, trained, trained * ADAM_STATES, activations, sizes.kv_cache / tp
    )


@dataclass
class Plan:
    model: str
    task: str
    instance: Instance
    sizes: ModelSizes
    headroom: float
    fits: RankBytes | None  # the smallest grid that fits
    alternatives: dict[str, RankBytes] = field(default_factory=dict)  # instance -> its smallest fitting grid


def _grids(sizes: ModelSizes, task: str, instance: Instance) -> list[tuple[int, int]]:
    """(tp, fsdp) candidates, fewest ranks first, then least TP. TP stays within a chip for training (the best
    practices: 'Keep TP4 within a chip'); generation has no FSDP and may use any whole TP degree."""
    tps = [1] + (sizes.clean_degrees if sizes.tp_plan == "full" else [])
    if task == "generate":
        return [(tp, 1) for tp in tps if tp <= instance.ranks]
    fsdps = [2**k for k in range(0, 12) if 2**k <= instance.ranks]
    grids = [
        (tp, f) for tp in tps if tp <= instance.ranks_per_chip for f in fsdps if tp * f <= instance.ranks
    ]
    return sorted(grids, key=lambda grid: (grid[0] * grid[1], grid[0]))


def smallest_fit(sizes: ModelSizes, task: str, dtype: str, instance: Instance, headroom: float):
    budget = instance.hbm_per_rank * (1 - headroom)
    for tp, fsdp in _grids(sizes, task, instance):
        for checkpointing in (False, True) if task != "generate" else (False,):
            rank = per_rank(sizes, task, dtype, tp, fsdp, checkpointing)
            if rank.total <= budget:
                return rank
    return None


def make_plan(
    model: str, sizes: ModelSizes, task: str, dtype: str, instance: Instance, headroom: float
) -> Plan:
    fits = smallest_fit(sizes, task, dtype, instance, headroom)
    plan = Plan(model, task, instance, sizes, headroom, fits)
    if fits is None:
        for other in sorted(instances().values(), key=lambda i: i.ranks * i.hbm_per_rank):
            found = smallest_fit(sizes, task, dtype, other, headroom)
            if found is not None:
                plan.alternatives[other.name] = found
                break
    return plan


class UnknownModel(ValueError):
    """A model reference the planner has no sizes for; the message says what to pass instead."""


def resolve_model(reference: str, config_path: Path | None) -> FullSizeConfig:
    """A config.json (given, or the reference is one or a directory holding one), else a recorded checkpoint.
    Nothing downloads."""
    from compat_matrix.meta_model import checkpoint_full_size, config_from_file
    from usercode.model_ids import table_entry

    local = Path(reference).expanduser()
    for candidate in (config_path, local if local.is_file() else local / "config.json"):
        if candidate is not None and candidate.is_file():
            return config_from_file(candidate)
    if config_path is not None:
        raise UnknownModel(f"{config_path}: no such file")
    recorded = checkpoint_full_size(reference)
    if recorded is not None:
        return recorded
    entry = table_entry(reference)
    advice = (
        "pass its config.json with --config PATH (the file on the model's Hub page; nothing downloads here)"
    )
    if entry is not None and entry.model_type:
        raise UnknownModel(
            f"{reference} is a {entry.model_type} checkpoint whose sizes are not recorded: {advice}"
        )
    raise UnknownModel(
        f"{reference}: not a config.json, a model directory or a recorded checkpoint: {advice}"
    )


def _gib(value: float) -> str:
    return f"{value / GIB:.1f} GiB"


def _launch_lines(rank: RankBytes, task: str) -> list[str]:
    ranks = rank.tp * rank.fsdp
    grid = f"tp_size={rank.tp}" + (f", fsdp_size={rank.fsdp}" if task != "generate" else "")
    lines = [f"DistributedConfig({grid})"]
    if rank.checkpointing:
        lines.append("gradient_checkpointing=True (TrainingArguments / SFTConfig)")
    lines.append(
        f"torchrun --nproc_per_node {ranks} your_script.py" if ranks > 1 else "python your_script.py"
    )
    return lines


def describe(plan: Plan, full_size: FullSizeConfig, dtype_name: str, batch: int, seq_len: int) -> list[str]:
    sizes, instance = plan.sizes, plan.instance
    lines = [
        f"{plan.model}: {sizes.parameters / 1e9:.2f}B parameters ({sizes.parameters:,}; sizes from "
        f"{full_size.described_as})",
        f"task {plan.task}, {dtype_name}, batch {batch} per rank, sequence {seq_len}; TP plan: {sizes.tp_plan}"
        + (f", whole shards at tp {sizes.clean_degrees}" if sizes.clean_degrees else ""),
        f"{instance.name}: {instance.ranks} ranks of {_gib(instance.hbm_per_rank)} HBM; a plan uses at most "
        f"{1 - plan.headroom:.0%} of it",
    ]
    if plan.task == "generate":
        lines.append(f"static KV cache: {_gib(sizes.kv_cache)} for the whole batch (split by TP)")
    else:
        lines.append(
            f"activations saved for backward: {_gib(sizes.activations)} per rank without checkpointing, "
            f"{_gib(sizes.activations_checkpointed)} with"
        )
    fits = plan.fits
    if fits is None:
        lines.append(f"does not fit on {instance.name}")
        for name, rank in plan.alternatives.items():
            lines.append(f"smallest instance that fits: {name}, tp {rank.tp} x fsdp {rank.fsdp}")
            lines += _rank_lines(rank, plan.task)
        if not plan.alternatives:
            lines.append("no instance in the table fits it: shorten the sequence or the batch")
        return lines
    lines.append(f"fits: tp {fits.tp} x fsdp {fits.fsdp} = {fits.tp * fits.fsdp} rank(s)")
    return lines + _rank_lines(fits, plan.task)


def _rank_lines(rank: RankBytes, task: str) -> list[str]:
    parts = [("weights", rank.weights), ("gradients", rank.gradients), ("optimizer", rank.optimizer),
             ("activations", rank.activations), ("KV cache", rank.kv_cache)]  # fmt: skip
    shown = ", ".join(f"{name} {_gib(value)}" for name, value in parts if value)
    return [f"per rank: {shown} = {_gib(rank.total)}", *("  " + line for line in _launch_lines(rank, task))]


def plan_in_one_line(reference: str, config_path: Path | None, task: str) -> str:
    """The plan of ``reference`` (a Hub id, a model directory) for ``task`` at the default job on the default
    instance, in one line, or why there is none: what the checklist and ``try`` show beside a model."""
    try:
        full_size = resolve_model(reference, config_path)
        sizes = sizes_for(full_size, task, DEFAULT_BATCH, DEFAULT_SEQ_LEN, DEFAULT_DTYPE)
    except (UnknownModel, MetaBuildError) as error:
        return f"no real-size plan (`neuron-compat plan`): {error}"
    instance = instances()[DEFAULT_INSTANCE]
    plan = make_plan(reference, sizes, task, DEFAULT_DTYPE, instance, DEFAULT_HEADROOM)
    head = (
        f"{task}, {DEFAULT_DTYPE}, batch {DEFAULT_BATCH} x sequence {DEFAULT_SEQ_LEN}: "
        f"{sizes.parameters / 1e9:.2f}B parameters, TP plan {sizes.tp_plan}"
    )
    fits, on = plan.fits, instance.name
    if fits is None:
        if not plan.alternatives:
            return f"{head}; fits no instance of the table: shorten the sequence or the batch"
        on, fits = next(iter(plan.alternatives.items()))
        head += f"; does not fit {instance.name}"
    hbm = instances()[on].hbm_per_rank
    checkpointing = ", activation checkpointing" if fits.checkpointing else ""
    return (
        f"{head}; fits {on} at tp {fits.tp} x fsdp {fits.fsdp}{checkpointing} ({_gib(fits.total)} of "
        f"{_gib(hbm)} per rank): {_launch_lines(fits, task)[0]}"
    )
