"""Probe settings: everything that changes what a row measures. Their hash is the row's ``settings_id``."""

from __future__ import annotations

import dataclasses
import hashlib
import json

BACKENDS = ("auto", "neuron", "neuron-sim")
# The tiny models' vocabulary (tiny.py builds them; try's stand-in data draws ids below it): here, so that what
# reads it needs no Transformers import.
TINY_VOCAB = 256
DTYPES = ("float32", "bfloat16")
CONFIGS = ("checkpoint", "class-defaults")
# A cold Neuron compile cache compiles every graph with neuronx-cc (minutes each); the simulator needs seconds.
DEFAULT_TIMEOUT_S = {"neuron": 3600.0, "neuron-sim": 600.0}


@dataclasses.dataclass(frozen=True)
class ProbeSettings:
    backend: str = "neuron-sim"  # resolved: "neuron" or "neuron-sim", never "auto"
    dtype: str = "float32"  # model weights and activations, for every probe (reference included)
    # neuron-sim only: the native torch device the compiled probes run on ("cpu", "cuda", ...). A non-CPU
    # device takes Transformers' non-CPU code paths (MoE batched_mm decode) as the Neuron device does.
    sim_device: str = "cpu"
    # Which config values the tiny models are built from: "checkpoint" (the code-path fields of each
    # architecture's most-used checkpoint, where checkpoint_configs.json has them) or "class-defaults".
    config: str = "checkpoint"
    prompt_lengths: tuple[int, ...] = (5, 9)
    # Long enough that a guard failing at every decode step shows as a count growing with the steps, and that
    # Dynamo's default recompile limit (8) would be passed on a device.
    max_new_tokens: int = 32
    max_cache_len: int = 64  # fixed (longest prompt + new tokens fits), so no prompt needs a new cache shape
    train_lengths: tuple[int, ...] = (100, 200)  # raw token counts; padded to multiples of pad_multiple
    pad_multiple: int = 128  # TRL >= 1.16 pads batches to multiples of 128 tokens
    train_batch_size: int = 2
    # Teacher-forced logits, compared per step. float32: Transformers' own compiled-generate test allows 1e-5
    # (1e-3 for MoE, whose router near-ties amplify reordering noise); the static cache's padded, masked
    # buffer sums in another order, hence 1e-4. bfloat16 keeps 8 mantissa bits (relative step 2**-8), so
    # the same reordering moves logits by a few 1e-3.
    logit_tolerance: dict[str, float] = dataclasses.field(
        default_factory=lambda: {"float32": 1e-4, "bfloat16": 3e-2}
    )
    moe_logit_tolerance: dict[str, float] = dataclasses.field(
        default_factory=lambda: {"float32": 1e-3, "bfloat16": 1e-1}
    )
    # Dynamo's default, as a user's process on the device has it: a decode step whose guard fails at every
    # step compiles this many times and then runs eagerly, and the row records that it did.
    recompile_limit: int = 8
    seed: int = 0
    # What `tiny.py` builds is part of the measurement: bump when a change there alters any tiny model
    # (2: layer-index lists follow the kept layers; 3: attention as Transformers chooses it, not forced eager;
    # 4: top-1 routing stays top-1).
    tiny_models_revision: int = 4
    # Isolation limits: they decide timeout/crash verdicts but not what a finished probe measures.
    timeout_s: float = 600.0
    memory_mb: int = 6144
    # Test hook: signal the child sends itself before probing (exercises the real crash path).
    self_signal: int | None = None

    ISOLATION_FIELDS = ("timeout_s", "memory_mb", "self_signal")

    def __hash__(self) -> int:  # the tolerance dicts are not hashable; the settings id is
        return hash(self.settings_id())

    def tolerance(self, moe: bool) -> float:
        return (self.moe_logit_tolerance if moe else self.logit_tolerance)[self.dtype]

    def probe_fields(self) -> dict:
        return {k: v for k, v in dataclasses.asdict(self).items() if k not in self.ISOLATION_FIELDS}

    def settings_id(self) -> str:
        blob = json.dumps(self.probe_fields(), sort_keys=True)
        return hashlib.sha256(blob.encode()).hexdigest()[:12]
