"""TP readiness per architecture, measured: each architecture's model at its full size on the meta device is
loaded the way ``from_pretrained(..., distributed_config=DistributedConfig(tp_size=N))`` distributes it (its
``prepare_distribute_model`` and ``maybe_distribute_model``), under PyTorch's fake process group of world size N
in this one process, and its parameters are read back: which ones the plan sharded, and whether each shard is
whole (every sharded dimension divisible by N, every attention shard a whole number of heads).

The table is written where the migrator reads it (``migrator/tp_readiness.json``: the migrator may not import
this package, so the table is the interface).
"""

from __future__ import annotations

import json
import re
import time
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch

from compat_matrix.meta_model import (
    FullSizeConfig,
    MetaBuildError,
    architecture_full_size,
    build_config,
    build_meta_model,
    checkpoint_full_size,
    checkpoint_sizes,
)

DEGREES = (2, 4, 8, 16, 32, 64)
TABLE_PATH = Path(__file__).resolve().parents[1] / "migrator" / "tp_readiness.json"
NO_PLAN, LM_HEAD_ONLY, FULL = "none", "lm_head only", "full"


@dataclass
class Readiness:
    model_type: str
    plan: str | None  # NO_PLAN, LM_HEAD_ONLY, FULL; None: the model could not be built
    sizes: str  # where the full-size config came from
    clean_degrees: list[int] = field(default_factory=list)
    problems: dict[str, list[str]] = field(default_factory=dict)  # degree -> why it does not shard cleanly
    error: str = ""  # why the model could not be built or loaded


@contextmanager
def fake_world(world_size: int) -> Iterator[None]:
    """A process group of ``world_size`` ranks in this process (rank 0), whose collectives do nothing."""
    import torch.distributed as dist
    from torch.testing._internal.distributed.fake_pg import FakeStore

    dist.init_process_group("fake", rank=0, world_size=world_size, store=FakeStore())
    try:
        yield
    finally:
        dist.destroy_process_group()


def distribute(config, tp_size: int) -> torch.nn.Module:
    """The meta model of ``config`` as ``from_pretrained`` distributes it for ``DistributedConfig(tp_size)``."""
    from transformers.distributed import DistributedConfig

    model = build_meta_model(config)
    cls = type(model)
    distributed_config, _, mesh = cls.prepare_distribute_model(DistributedConfig(tp_size=tp_size))
    return cls.maybe_distribute_model(model, distributed_config, mesh)


def sharded_parameters(model: torch.nn.Module) -> dict[str, tuple[int, int, int]]:
    """name -> (sharded dim, global size, local size) of every parameter the plan split."""
    from torch.distributed.tensor import DTensor, Shard

    found = {}
    for name, parameter in model.named_parameters():
        if isinstance(parameter, DTensor):
            for placement in parameter.placements:
                if isinstance(placement, Shard):
                    dim = placement.dim
                    found[name] = (dim, parameter.shape[dim], parameter.to_local().shape[dim])
    return found


def _head_dims(model: torch.nn.Module) -> dict[str, int]:
    """module name -> head_dim, for the attention modules (those that carry a head_dim)."""
    return {
        name: module.head_dim
        for name, module in model.named_modules()
        if isinstance(getattr(module, "head_dim", None), int) and module.head_dim > 0
    }


def _pattern(name: str) -> str:
    return re.sub(r"\.\d+\.", ".*.", name)


def shard_problems(model: torch.nn.Module, tp_size: int) -> list[str]:
    """Why the dimensions the plan split in ``model`` do not split whole at degree ``tp_size``: a dimension not
    divisible by it, or an attention shard that splits a head. ``model`` may be distributed at another degree
    (the plan splits the same dimensions at every degree). Layer numbers are folded into ``*``."""
    head_dims = _head_dims(model)
    problems = set()
    for name, (dim, size, _) in sharded_parameters(model).items():
        if size % tp_size:
            problems.add(f"{_pattern(name)}: dim {dim} of {size} is not divisible by {tp_size}")
            continue
        owner = max((m for m in head_dims if name.startswith(m + ".")), key=len, default=None)
        if owner is not None and (size // tp_size) % head_dims[owner]:
            problems.add(
                f"{_pattern(name)}: {size // tp_size} of {size} per rank is not a whole number of heads "
                f"(head_dim {head_dims[owner]})"
            )
    return sorted(problems)


def measure(model_type: str) -> Readiness:
    """The architecture at its full size: its recorded checkpoint's sizes, else its class defaults."""
    return measure_config(architecture_full_size(model_type))


def measure_config(full_size: FullSizeConfig) -> Readiness:
    model_type = full_size.model_type
    try:
        config = build_config(full_size)
        build_meta_model(config)
    except MetaBuildError as error:
        return Readiness(model_type, None, full_size.described_as, error=str(error))
    result = Readiness(model_type, None, full_size.described_as)
    for degree in DEGREES:
        with fake_world(degree), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                model = distribute(config, degree)
            except ValueError as error:
                if "has no `tp_plan`" in str(error):
                    result.plan = NO_PLAN
                    return result
                result.problems[str(degree)] = [
                    f"loading raises {type(error).__name__}: {error}".splitlines()[0]
                ]
                continue
            except Exception as error:  # a model's own TP code failing at this degree: recorded, not fatal
                result.problems[str(degree)] = [
                    f"loading raises {type(error).__name__}: {error}".splitlines()[0]
                ]
                continue
            if result.plan is None:
                sharded = sharded_parameters(model)
                only_head = bool(sharded) and all(name.startswith("lm_head.") for name in sharded)
                result.plan = LM_HEAD_ONLY if only_head else FULL
            problems = shard_problems(model, degree)
        if problems:
            result.problems[str(degree)] = problems
        else:
            result.clean_degrees.append(degree)
    return result


def environment() -> dict[str, str]:
    import transformers

    return {"transformers": transformers.__version__, "torch": torch.__version__}


def recorded_checkpoints() -> list[str]:
    """The Hub ids whose sizes are recorded (``data/checkpoint_sizes.json``): measured at their own sizes too."""
    return list(checkpoint_sizes())


def measure_all(model_types: list[str], progress: Callable[[str], None], checkpoints: list[str] = ()) -> dict:
    """Each architecture at its full size, then each recorded checkpoint at its own sizes (the degrees that shard
    a checkpoint depend on its heads and sizes, not only on its architecture)."""
    started = time.monotonic()
    total = len(model_types) + len(checkpoints)
    measured: dict[str, dict] = {}
    for index, name in enumerate([*model_types, *checkpoints], 1):
        is_checkpoint = index > len(model_types)
        row = measure_config(checkpoint_full_size(name)) if is_checkpoint else measure(name)
        progress(f"[{index}/{total}] {name}: {_outcome(row)}")
        # An architecture's row is keyed by its model_type; a checkpoint's keeps it.
        measured[name] = {k: v for k, v in asdict(row).items() if is_checkpoint or k != "model_type"}
    return {
        "about": "TP readiness per causal-LM architecture, measured by `neuron-compat tp-readiness` "
        "(compat_matrix/tp_readiness.py): the plan Transformers resolves for DistributedConfig(tp_size=N) and "
        f"the degrees of {list(DEGREES)} whose shards are whole, for the model at its full size on the meta "
        "device under a fake process group of N ranks; `checkpoints`: the same for each recorded checkpoint at "
        "its own sizes.",
        "versions": environment(),
        "seconds": round(time.monotonic() - started, 1),
        "architectures": {name: measured[name] for name in model_types},
        "checkpoints": {name: measured[name] for name in checkpoints},
    }


def _outcome(row: Readiness) -> str:
    return row.error or f"plan {row.plan}, clean at {row.clean_degrees or 'no degree'}"


def write_table(table: dict, path: Path = TABLE_PATH) -> None:
    path.write_text(json.dumps(table, indent=1, sort_keys=False) + "\n", encoding="utf-8")


class StaleTable(ValueError):
    """Rows measured now cannot join a table measured with other versions."""


def updated(table: dict, existing: dict) -> dict:
    """``existing`` with the rows of ``table`` measured again in place (new ones appended), for re-measuring a few
    architectures after a harness change; only with the same Transformers and torch. ``seconds`` stays that of
    the run that measured every row (``updated_seconds`` is this run's)."""
    if existing.get("versions") != table["versions"]:
        raise StaleTable(
            f"the table was measured with {existing.get('versions')}, these rows with {table['versions']}: "
            "measure every architecture again (without --update)"
        )
    return {
        **existing,
        "updated_seconds": table["seconds"],
        "architectures": {**existing["architectures"], **table["architectures"]},
        "checkpoints": {**existing.get("checkpoints", {}), **table["checkpoints"]},
    }
