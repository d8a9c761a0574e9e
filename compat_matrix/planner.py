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
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

import torch

from compat_matrix.meta_model import FullSizeConfig, MetaBuildError, build_config, one_line
from compat_matrix.tp_readiness import (
    DEGREES,
    NO_PLAN,
    distribute,
    fake_world,
    shard_problems,
    sharded_parameters,
)

INSTANCES_PATH = Path(__file__).with_name("data") / "instances.json"
TASKS = ("train", "sft-lora", "generate")
DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}
GIB = 1024**3
ADAM_STATES = 2  # torch.optim.AdamW keeps exp_avg and exp_avg_sq, each in the parameter's dtype
LORA_RANK = 8  # peft.LoraConfig's default r


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


def _decoder_layers(model: torch.nn.Module) -> torch.nn.ModuleList | None:
    lists = [m for m in model.modules() if isinstance(m, torch.nn.ModuleList)]
    return max(lists, key=len, default=None)


def _base(tensor: torch.Tensor) -> torch.Tensor:
    """The tensor a view was taken of (autograd saves weights as transposed views)."""
    return tensor._base if tensor._base is not None else tensor


def measure_activations(model: torch.nn.Module, batch: int, seq_len: int) -> tuple[int, int]:
    """(saved bytes without checkpointing, with checkpointing) of one training forward with labels."""
    parameters = {id(p) for p in model.parameters()}
    layers = _decoder_layers(model)
    per_layer: dict[int, dict[int, int]] = {}
    current = [-1]  # the decoder layer running, -1 outside the layers
    inputs: list[int] = []
    kept: list[torch.Tensor] = []

    def enter(index: int):
        def hook(module, args, kwargs):
            current[0] = index
            hidden = args[0] if args else next(iter(kwargs.values()))
            inputs.append(hidden.numel() * hidden.element_size())

        return hook

    def leave(module, args, output):
        current[0] = -1

    def pack(tensor: torch.Tensor):
        base = _base(tensor)
        if id(base) not in parameters:
            per_layer.setdefault(current[0], {})[id(base)] = base.untyped_storage().nbytes()
            kept.append(base)  # alive until counted, so no id is reused
        return tensor

    handles = []
    for index, layer in enumerate(layers or []):
        handles.append(layer.register_forward_pre_hook(enter(index), with_kwargs=True))
        handles.append(layer.register_forward_hook(leave))
    ids = torch.zeros(batch, seq_len, dtype=torch.long)
    model.train()
    try:
        with torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor):
            model(input_ids=ids, labels=ids, use_cache=False)
    finally:
        for handle in handles:
            handle.remove()
    seen: dict[int, int] = {}
    layer_bytes = []
    for index, saved in sorted(per_layer.items()):
        fresh = {key: nbytes for key, nbytes in saved.items() if key not in seen}
        seen |= fresh
        if index >= 0:
            layer_bytes.append(sum(fresh.values()))
    total = sum(seen.values())
    if not layer_bytes:
        return total, total
    # Checkpointed: each layer keeps only its input; one layer's activations are rebuilt at a time in backward.
    checkpointed = total - sum(layer_bytes) + sum(inputs) + max(layer_bytes)
    return total, checkpointed


def measure_kv_cache(model: torch.nn.Module, config, batch: int, seq_len: int) -> int:
    """Bytes of the StaticCache of ``seq_len`` positions for ``batch`` sequences, as generate allocates it."""
    from transformers import StaticCache

    cache_ = StaticCache(config=config, max_cache_len=seq_len)
    ids = torch.zeros(batch, 1, dtype=torch.long)
    model.eval()
    with torch.no_grad():
        model(input_ids=ids, past_key_values=cache_, use_cache=True)
    return sum(
        value.numel() * value.element_size()
        for layer in cache_.layers
        for value in vars(layer).values()
        if isinstance(value, torch.Tensor)
    )


def lora_parameters(model: torch.nn.Module, model_type: str) -> int:
    """Parameters of PEFT's default LoRA (r=8 on the model type's default target modules)."""
    from peft.utils.constants import TRANSFORMERS_MODELS_TO_LORA_TARGET_MODULES_MAPPING

    targets = TRANSFORMERS_MODELS_TO_LORA_TARGET_MODULES_MAPPING.get(model_type, ["q_proj", "v_proj"])
    return sum(
        LORA_RANK * (module.in_features + module.out_features)
        for name, module in model.named_modules()
        if isinstance(module, torch.nn.Linear) and name.rpartition(".")[2] in targets
    )


def measure_sizes(
    full_size: FullSizeConfig, task: str, batch: int, seq_len: int, dtype: torch.dtype
) -> ModelSizes:
    from torch._subclasses.fake_tensor import FakeTensorMode

    config = build_config(full_size)
    tp_plan, replicated, clean = _tensor_parallel(config, dtype)
    with FakeTensorMode():
        sizes = _measure_sizes(config, task, batch, seq_len, dtype)
    tp_sharded = sizes["parameters"] - replicated if tp_plan != NO_PLAN else 0
    return ModelSizes(tp_sharded=tp_sharded, tp_plan=tp_plan, clean_degrees=clean, **sizes)


def _measure_sizes(config, task: str, batch: int, seq_len: int, dtype: torch.dtype) -> dict[str, int]:
    from transformers import AutoModelForCausalLM

    try:
        model = AutoModelForCausalLM.from_config(config, dtype=dtype, attn_implementation="eager")
    except Exception as error:  # any failure of a model's constructor: one line naming it
        raise MetaBuildError(
            f"{config.model_type}: Transformers cannot build it: {one_line(error)}"
        ) from None
    parameters = sum(p.numel() for p in model.parameters())
    trainable = lora_parameters(model, config.model_type) if task == "sft-lora" else parameters
    activations = checkpointed = kv_cache = 0
    try:
        if task == "generate":
            kv_cache = measure_kv_cache(model, config, batch, seq_len)
        else:
            activations, checkpointed = measure_activations(model, batch, seq_len)
    except Exception as error:  # a model whose forward does not run on meta tensors: one line naming it
        raise MetaBuildError(
            f"{config.model_type}: its forward does not run on fake tensors: {one_line(error)}"
        ) from None
    return {"parameters": parameters, "trainable": trainable, "activations": activations,
            "activations_checkpointed": checkpointed, "kv_cache": kv_cache}  # fmt: skip


def _tensor_parallel(config, dtype: torch.dtype) -> tuple[str, int, list[int]]:
    """(plan, parameters it leaves whole on every TP rank, degrees whose shards are whole), from one load at
    tp_size=2 (the plan names the same dimensions at every degree; ``tp-readiness`` loads each degree)."""
    import warnings

    from compat_matrix.tp_readiness import FULL, LM_HEAD_ONLY

    with fake_world(2), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            model = distribute(config, 2)
        except Exception:  # no plan, or the load fails: no degree to offer
            return NO_PLAN, 0, []
        sharded = sharded_parameters(model)
        # Counted on the untied model as it is distributed: what stays whole on every TP rank.
        replicated = sum(p.numel() for name, p in model.named_parameters() if name not in sharded)
        plan = LM_HEAD_ONLY if all(name.startswith("lm_head.") for name in sharded) else FULL
        clean = [degree for degree in DEGREES if not shard_problems(model, degree)]
    return plan, replicated, clean


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


def per_rank(
    sizes: ModelSizes, task: str, dtype: torch.dtype, tp: int, fsdp: int, checkpointing: bool
) -> RankBytes:
    width = torch.empty((), dtype=dtype).element_size()
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


def smallest_fit(sizes: ModelSizes, task: str, dtype: torch.dtype, instance: Instance, headroom: float):
    budget = instance.hbm_per_rank * (1 - headroom)
    for tp, fsdp in _grids(sizes, task, instance):
        for checkpointing in (False, True) if task != "generate" else (False,):
            rank = per_rank(sizes, task, dtype, tp, fsdp, checkpointing)
            if rank.total <= budget:
                return rank
    return None


def make_plan(
    model: str, sizes: ModelSizes, task: str, dtype: torch.dtype, instance: Instance, headroom: float
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
