"""The measurements of a plan (``planner``): the model at its full size under PyTorch's ``FakeTensorMode`` and
its tensor-parallel load under the fake process group. Imported only when a plan is not in the cache: it imports
torch and Transformers, which is most of a plan's time.
"""

from __future__ import annotations

import warnings

import torch
from torch._subclasses.fake_tensor import FakeTensorMode

from compat_matrix.meta_model import FullSizeConfig, MetaBuildError, build_config, one_line
from compat_matrix.tp_readiness import (
    DEGREES,
    FULL,
    LM_HEAD_ONLY,
    NO_PLAN,
    distribute,
    fake_world,
    shard_problems,
    sharded_parameters,
)

LORA_RANK = 8  # peft.LoraConfig's default r


def measure(full_size: FullSizeConfig, task: str, batch: int, seq_len: int, dtype: str) -> dict:
    """The fields of ``planner.ModelSizes``, measured now (builds the model twice: the TP load, the fake one)."""
    torch_dtype = getattr(torch, {"bf16": "bfloat16", "fp16": "float16", "fp32": "float32"}[dtype])
    config = build_config(full_size)
    tp_plan, replicated, clean = _tensor_parallel(config, torch_dtype)
    with FakeTensorMode():
        sizes = _measure_sizes(config, task, batch, seq_len, torch_dtype)
    tp_sharded = sizes["parameters"] - replicated if tp_plan != NO_PLAN else 0
    return {"tp_sharded": tp_sharded, "tp_plan": tp_plan, "clean_degrees": clean, **sizes}


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
