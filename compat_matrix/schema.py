"""The one row schema of ``neuron-compat`` results, shared by the runner, results files, merge, the CLI and
``reports``.

A row is one architecture probed once under one environment. Version 2 adds the fields that say *what*
failed and *whom* to blame (``cause``, ``generate_verdict``, ``train_verdict``, ``reason``), whether
generation really compiled (``compiled_generation``), whether recompiles grow with decode steps
(``recompiles_every_step``), the code path measured (``attn_implementation``, ``dtype``, ``sim_device``),
the three-way compare figures and when the row was measured (``measured_at``). Version 3 adds what a
verdict rests on: the config measured (``config_source``, ``checkpoint``, ``checkpoint_values``), the
artifact guard's second measurement (``artifact_check``), the ops the device raises on and the code path that
avoids them (``device_raising_ops``, ``code_paths``, ``avoided_by``), the ops whose lowering only a device
shows (``lowering_unverified_ops``), and the training step's own evidence (``train_graph_break_reasons``,
``train_recompile_reasons``, ``train_content_compiles``). Rows written before version 2 have no
``schema_version``; ``Row.from_dict`` reads older rows with the newer fields unset (None), and
``upgraded_from`` records the version read so a report can say so.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

SCHEMA_VERSION = 3
# The fields each version added, for the note a report or merge prints about older rows.
FIELDS_ADDED = {
    2: ("cause", "generate_verdict", "train_verdict", "reason", "compiled_generation", "recompiles_every_step"),
    3: ("config_source", "artifact_check", "device_raising_ops", "code_paths", "lowering_unverified_ops",
        "train_graph_break_reasons", "train_content_compiles"),
}  # fmt: skip

# What a row was measured under. Rows with equal values are one run (one column of a report); `run --resume`
# skips an architecture already measured under them, and in `merge` a later such row replaces an earlier one.
# `simulated` tells the neuron stand-in's rows from a real device's (both are backend `neuron`).
ENVIRONMENT_KEY = ("backend", "simulated", "torch", "transformers", "settings_id")


def environment_key(env: dict) -> tuple[str, ...]:
    """A row's ``env`` (or ``run_env``'s) as its environment key; fields an older row lacks read as "None"."""
    return tuple(str(env.get(name)) for name in ENVIRONMENT_KEY)


class Verdict(str, Enum):
    """Overall verdict of a row, and the verdict of each stage (generate, train)."""

    WORKS = "works"  # compiled through the backend, outputs match eager, no caveat
    WORKS_EAGER = "works-eager"  # works, but Transformers does not compile this generation path
    WORKS_WITH_CAVEATS = "works-with-caveats"  # works, with recompiles, graph breaks or fallbacks
    FAILS = "fails"  # a measured failure; `cause` says whose (device or transformers)
    NOT_MEASURED = "not-measured"  # the harness could not measure it; `cause` says why (simulator)
    HARNESS_ERROR = "harness-error"  # the tiny model could not be built (cause: harness)
    TIMEOUT = "timeout"  # the worker ran past its time limit
    CRASH = "crash"  # the worker died (signal, out of memory)

    def __str__(self) -> str:
        return self.value


class Stage(str, Enum):
    """The probe stages, in the order they run; a failing row names the first that failed."""

    BUILD = "build"
    EAGER = "eager"
    GENERATE = "generate"
    COMPARE = "compare"
    TRAIN = "train"

    def __str__(self) -> str:
        return self.value


class Cause(str, Enum):
    """Whom a row that does not simply work blames."""

    # fails only on the compiled / device path, or its compiled graph holds an op a device rule says raises
    DEVICE = "device"
    TRANSFORMERS = "transformers"  # already fails or differs in uncompiled static-cache generation on CPU
    SIMULATOR = "simulator"  # fails only under the simulator's own graph execution
    HARNESS = "harness"  # the tiny model cannot be built

    def __str__(self) -> str:
        return self.value


class ConfigSource(str, Enum):
    """Which config values the tiny model was built from (shrunk to tiny sizes either way)."""

    CHECKPOINT = "checkpoint"  # the code-path fields of the architecture's most-used checkpoint
    CLASS_DEFAULTS = "class-defaults"  # the Transformers config class's own defaults

    def __str__(self) -> str:
        return self.value


OK_VERDICTS = frozenset({Verdict.WORKS, Verdict.WORKS_EAGER, Verdict.WORKS_WITH_CAVEATS})


# Figures of compiled generation: not measured (null) when generation was not compiled
# (`compiled_generation` false), since it can then neither recompile nor break a graph.
GENERATION_COMPILE_FIGURES = ("recompile_count", "graph_breaks", "recompile_reasons", "graph_break_reasons")


@dataclass
class Row:
    """One results line. Field order is the JSON key order."""

    model_type: str
    rank: int | None
    backend: str
    simulated: bool
    verdict: Verdict
    stage: Stage | None  # first failing stage, None when nothing failed
    error: str | None  # first line of the error, None when nothing failed
    env: dict[str, Any]  # torch, transformers, python, platform, harness_version, backend, settings_id, ...
    schema_version: int = SCHEMA_VERSION
    cause: Cause | None = None
    generate_verdict: Verdict | None = None
    train_verdict: Verdict | None = None
    reason: str | None = None  # one line: why this verdict (None for plain works)
    compiled_generation: bool | None = None  # generation went through torch.compile (compile_count > 0)
    recompiles_every_step: bool | None = None  # recompiles grow with the decode steps
    recompile_guard: str | None = None  # the guard that fails each step, when recompiles_every_step
    attn_implementation: str | None = None  # as Transformers chose it for the model
    dtype: str | None = None  # "float32" or "bfloat16"
    sim_device: str | None = None  # device the simulated compiled probes ran on ("cpu", "cuda")
    measured_at: str | None = None  # UTC ISO-8601 time the row was measured
    config_source: ConfigSource | None = None
    checkpoint: str | None = None  # Hub id whose config values were applied (config_source checkpoint)
    checkpoint_values: dict[str, Any] | None = (
        None  # the code-path fields applied, as the checkpoint writes them
    )
    # Per stage ("generate", "train"), for a failure that would blame Transformers or the device: the first
    # measurement, the second (another tiny size and seed, ties broken) and whether they agree.
    artifact_check: dict[str, Any] | None = None
    device_raising_ops: list[str] | None = None  # compiled-graph findings a device rule says raise
    code_paths: list[dict[str, Any]] | None = (
        None  # alternatives measured for them (bf16, experts_implementation)
    )
    avoided_by: str | None = None  # the one-line change a measured alternative showed to avoid them
    lowering_unverified_ops: list[str] | None = None  # compiled ATen ops whose lowering only a device shows
    compile_count: int | None = None
    recompile_count: int | None = None
    recompile_reasons: list[str] | None = None
    graph_breaks: int | None = None
    graph_break_reasons: list[str] | None = None
    unsupported_ops: list[str] | None = None
    cpu_fallback_ops: list[str] | None = None
    outputs_match: bool | None = None
    tokens_match: bool | None = None
    max_logit_diff: float | None = None
    max_diff_static_vs_dynamic: float | None = None  # eager static cache vs eager dynamic cache
    max_diff_compiled_vs_dynamic: float | None = None  # compiled static cache vs eager dynamic cache
    logit_tolerance: float | None = None
    train_compile_count: int | None = None
    train_graph_break_reasons: list[str] | None = None
    train_recompile_reasons: list[str] | None = None
    # Graphs compiled for one more batch of the first padded length with other content: > 0 means training
    # recompiles with the data (e.g. expert token counts), not only with the padded length.
    train_content_compiles: int | None = None
    seconds: float | None = None
    extra: dict[str, Any] = field(default_factory=dict)  # every other measured field, kept as read
    upgraded_from: int | None = None  # schema version of the line read, when older than SCHEMA_VERSION

    _ENUMS = {
        "verdict": Verdict,
        "stage": Stage,
        "cause": Cause,
        "generate_verdict": Verdict,
        "train_verdict": Verdict,
        "config_source": ConfigSource,
    }

    @classmethod
    def field_names(cls) -> tuple[str, ...]:
        return tuple(f.name for f in dataclasses.fields(cls) if f.name not in ("extra", "upgraded_from"))

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Row:
        """A row from its JSON object; older versions read with the new fields unset."""
        names = set(cls.field_names())
        values = {name: data[name] for name in names if name in data}
        for name, enum in cls._ENUMS.items():
            if values.get(name) is not None:
                values[name] = enum(values[name])
        version = data.get("schema_version", 1)
        values["schema_version"] = SCHEMA_VERSION
        row = cls(**values, extra={k: v for k, v in data.items() if k not in names})
        if version < SCHEMA_VERSION:
            row.upgraded_from = version
        return row

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {}
        for name in self.field_names():
            value = getattr(self, name)
            data[name] = value.value if isinstance(value, Enum) else value
        data.update(self.extra)
        return data
