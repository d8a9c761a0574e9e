"""Probe settings: everything that changes what a row measures. Their hash is the row's ``settings_id``."""

from __future__ import annotations

import dataclasses
import hashlib
import json

BACKENDS = ("auto", "neuron", "neuron-sim")


@dataclasses.dataclass(frozen=True)
class ProbeSettings:
    backend: str = "neuron-sim"  # resolved: "neuron" or "neuron-sim", never "auto"
    prompt_lengths: tuple[int, ...] = (5, 9)
    max_new_tokens: int = 4
    max_cache_len: int = 32  # fixed, so a new prompt length needs no new cache shape
    train_lengths: tuple[int, ...] = (100, 200)  # raw token counts; padded to multiples of pad_multiple
    pad_multiple: int = 128  # TRL >= 1.16 pads batches to multiples of 128 tokens
    train_batch_size: int = 2
    # Transformers' own compiled-generate test allows 1e-5 (1e-3 for MoE, whose router near-ties amplify
    # reordering noise); the static cache's padded, masked buffer sums in another order, hence 1e-4 here.
    logit_tolerance: float = 1e-4
    moe_logit_tolerance: float = 1e-3
    recompile_limit: int = 64
    seed: int = 0
    # What `tiny.py` builds is part of the measurement: bump when a change there alters any tiny model
    # (2: layer-index lists follow the kept layers), so older rows are not resumed or merged as equal.
    tiny_models_revision: int = 2
    # Isolation limits: they decide timeout/crash verdicts but not what a finished probe measures.
    timeout_s: float = 600.0
    memory_mb: int = 6144
    # Test hook: signal the child sends itself before probing (exercises the real crash path).
    self_signal: int | None = None

    ISOLATION_FIELDS = ("timeout_s", "memory_mb", "self_signal")

    def probe_fields(self) -> dict:
        return {k: v for k, v in dataclasses.asdict(self).items() if k not in self.ISOLATION_FIELDS}

    def settings_id(self) -> str:
        blob = json.dumps(self.probe_fields(), sort_keys=True)
        return hashlib.sha256(blob.encode()).hexdigest()[:12]
