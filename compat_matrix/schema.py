"""The one row schema of ``neuron-compat`` results, shared by the runner, results files, merge, the CLI and
``reports``: every field a row carries is a field of ``Row``, with its meaning; the enums carry theirs.

A row is one architecture probed once under one environment. Version 2 adds the fields that say *what*
failed and *whom* to blame (``cause``, ``generate_verdict``, ``train_verdict``, ``reason``), whether
generation really compiled (``compiled_generation``), whether recompiles grow with decode steps
(``recompiles_every_step``), the code path measured (``attn_implementation``, ``dtype``, ``sim_device``),
the three-way compare figures and when the row was measured (``measured_at``). Version 3 adds what a
verdict rests on: the config measured (``config_source``, ``checkpoint``, ``checkpoint_values``), the
artifact guard's second measurement (``artifact_check``), the ops the device raises on and the code path that
avoids them (``device_raising_ops``, ``code_paths``, ``avoided_by``), the ops whose lowering only a device
shows (``lowering_unverified_ops``), and the training step's own evidence (``train_graph_break_reasons``,
``train_recompile_reasons``, ``train_content_compiles``). Version 4 declares every field the probes wrote
beside the schema, gives each judged stage its own reason (``generate_reason``, ``train_reason``; ``reason`` is
left to rows whose stages were not judged apart) and records the ``recompile_limit`` measured with. Version 5
adds the ``task`` a row's probe measured (``text-generation`` for the causal-LM probe; ``feature-extraction``
and ``text-classification`` for the encoders' forward probe, the vision tasks', ``text2text-generation`` and
``automatic-speech-recognition`` for the seq2seq family's encoder-decoders, whose one stage is ``generate``:
``families``) and the forward probe's stage: ``forward`` (``forward_verdict``, ``forward_reason``,
``forward_failure``, ...).

Rows written before version 2 have no ``schema_version``. ``Row.from_dict`` reads older rows with the newer
fields unset (None), except what it can say of them exactly (``_upgraded``: the stage reasons a version 2 or
3 row joined, the recompile limit, the task: every row before version 5 was a causal LM's text generation), and ``upgraded_from`` records the version read so a report can say so.
"""

from __future__ import annotations

import dataclasses
import re
import types
import typing
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

SCHEMA_VERSION = 6
# The fields each version added, for the note a report or merge prints about older rows. Version 4's other
# fields were written before it, undeclared, and are read as they were written.
FIELDS_ADDED = {
    2: ("cause", "generate_verdict", "train_verdict", "reason", "compiled_generation", "recompiles_every_step"),
    3: ("config_source", "artifact_check", "device_raising_ops", "code_paths", "lowering_unverified_ops",
        "train_graph_break_reasons", "train_content_compiles"),
    4: ("generate_reason", "train_reason", "recompile_limit"),
    5: ("task", "forward_verdict", "forward_reason", "forward_failure"),
    6: ("denoise_steps", "guidance_recompiles"),
}  # fmt: skip

# What a row was measured under. Rows with equal values are one run (one column of a report); `run --resume`
# skips an architecture already measured under them, and in `merge` a later such row replaces an earlier one.
# `simulated` tells the neuron stand-in's rows from a real device's (both are backend `neuron`).
ENVIRONMENT_KEY = ("backend", "simulated", "torch", "transformers", "settings_id")
NEWER_ENVIRONMENT_FIELDS = ("simulated",)  # absent from rows written before the stand-in existed


def environment_key(env: dict) -> tuple[str, ...]:
    """A row's ``env`` (or ``run_env``'s) as its environment key; fields an older row lacks read as "None"."""
    return tuple(str(env.get(name)) for name in ENVIRONMENT_KEY)


class _Meaningful(str, Enum):
    """A string enum whose members carry their meaning: ``NAME = ("value", "meaning")``."""

    meaning: str

    def __new__(cls, value: str, meaning: str):
        member = str.__new__(cls, value)
        member._value_ = value
        member.meaning = meaning
        return member

    def __str__(self) -> str:
        return self.value


class Verdict(_Meaningful):
    """Overall verdict of a row, and the verdict of each stage (generate, train); in the report's order."""

    WORKS = (
        "works",
        "every stage passed (eager reference, compiled generation with a static cache, comparison "
        "with the CPU reference, a compiled training step) with no caveat",
    )
    WORKS_EAGER = (
        "works-eager",
        "works, but Transformers does not compile this architecture's generation path: "
        "generation runs eagerly (slower), training compiled",
    )
    WORKS_WITH_CAVEATS = (
        "works-with-caveats",
        "every stage passed, but with recompiles, graph breaks, CPU "
        "fallbacks or more training graphs than expected",
    )
    FAILS = (
        "fails",
        "a stage failed; the cause says whose failure it is (the device path, or Transformers "
        "itself, which already fails on CPU with a static cache)",
    )
    CRASH = ("crash", "the process running the model died (native crash or out of memory)")
    TIMEOUT = ("timeout", "the run exceeded the harness time limit: not a verdict on the architecture")
    NOT_MEASURED = (
        "not-measured",
        "the harness could not measure this (the cause says why, e.g. the "
        "simulator's own limits): not a verdict on the architecture",
    )
    HARNESS_ERROR = (
        "harness-error",
        "the harness could not build the tiny model or run it eagerly on CPU: not a "
        "verdict on the architecture",
    )


class Stage(_Meaningful):
    """The probe stages, in the order they run; a failing row names the first that failed."""

    BUILD = ("build", "building the model from its Transformers config")
    EAGER = ("eager", "the eager reference run on CPU, before the neuron backend is involved")
    GENERATE = ("generate", "generate() with a static KV cache (compiled)")
    FORWARD = ("forward", "a forward at a padded fixed shape (compiled), for a task without generation")
    COMPARE = ("compare", "comparing outputs with the CPU reference")
    TRAIN = ("train", "a compiled training step")


class Cause(_Meaningful):
    """Whom a row that does not simply work blames."""

    DEVICE = (
        "device",
        "fails only on the compiled / device path, or its compiled graph holds an op the device's "
        "own rule says raises and no measured code path avoids it",
    )
    TRANSFORMERS = (
        "transformers",
        "already fails or differs in uncompiled static-cache generation on CPU: a Transformers bug",
    )
    SIMULATOR = (
        "simulator",
        "fails only under the simulator's own graph execution: not measured on the device",
    )
    HARNESS = (
        "harness",
        "the tiny model could not be built, or a failure could not be confirmed at a second tiny size",
    )


class ConfigSource(_Meaningful):
    """Which config values the tiny model was built from (shrunk to tiny sizes either way)."""

    CHECKPOINT = ("checkpoint", "the code-path fields of the architecture's most-used checkpoint")
    CLASS_DEFAULTS = ("class-defaults", "the Transformers config class's own defaults")


# The stages judged apart, each with its own verdict and reason fields (``generate_verdict``, ``train_reason``).
JUDGED_STAGES = (Stage.GENERATE, Stage.TRAIN, Stage.FORWARD)


OK_VERDICTS = frozenset({Verdict.WORKS, Verdict.WORKS_EAGER, Verdict.WORKS_WITH_CAVEATS})


# Figures of compiled generation: not measured (null) when generation was not compiled
# (`compiled_generation` false), since it can then neither recompile nor break a graph.
GENERATION_COMPILE_FIGURES = ("recompile_count", "graph_breaks", "recompile_reasons", "graph_break_reasons")


# Rows older than version 4 do not record their recompile limit; every one was measured with this one
# (``ProbeSettings.recompile_limit``'s value since the first harness).
RECOMPILE_LIMIT_BEFORE_4 = 8
# How rows older than version 4 joined their stage reasons into ``reason`` ("generate: ...; train: ...").
_JOINED_STAGE_REASONS = re.compile(r";\s+(?=(?:build|eager|generate|compare|train):\s)")


@dataclass
class Row:
    """One results line: every field a row carries. Field order is the JSON key order. Lists and figures are
    None when not measured (never 0 in their place)."""

    # What was measured, where, and the outcome.
    model_type: str
    rank: int | None  # in the top-100 ranking, None for an architecture outside it
    task: str  # what the probe measured: "text-generation", "feature-extraction", "text2text-generation", ...
    backend: str  # "neuron" or "neuron-sim"
    simulated: bool  # measured by the simulator (on CPU or the neuron stand-in), not a real device
    verdict: Verdict
    stage: Stage | None  # first failing stage, None when nothing failed
    error: str | None  # first line of the error, None when nothing failed
    env: dict[str, Any]  # torch, transformers, python, platform, harness_version, backend, settings_id, ...
    schema_version: int = SCHEMA_VERSION
    cause: Cause | None = None
    generate_verdict: Verdict | None = None
    train_verdict: Verdict | None = None
    forward_verdict: Verdict | None = None  # a forward-only task's one stage (None for text generation)
    generate_reason: str | None = None  # one line: why generation's verdict (None for plain works)
    train_reason: str | None = None  # one line: why training's verdict (None for plain works)
    forward_reason: str | None = None  # one line: why the forward's verdict (None for plain works)
    # Why the row's verdict when its stages were not judged apart (a harness error, a timeout, a crash).
    reason: str | None = None
    compiled_generation: bool | None = None  # generation went through torch.compile (compile_count > 0)
    recompiles_every_step: bool | None = None  # recompiles grow with the decode steps
    recompile_guard: str | None = None  # the guard that fails each step, when recompiles_every_step
    recompile_limit: int | None = None  # Dynamo's recompile_limit the row was measured with
    attn_implementation: str | None = None  # as Transformers chose it for the model
    experts_implementation: str | None = None  # MoE models: as Transformers chose it
    dtype: str | None = None  # "float32" or "bfloat16"
    sim_device: str | None = None  # device the simulated compiled probes ran on ("cpu", "cuda", "neuron")
    measured_at: str | None = None  # UTC ISO-8601 time the row was measured
    # What the verdict rests on: the config measured, its second measurement, the device rules' findings.
    config_source: ConfigSource | None = None
    checkpoint: str | None = None  # Hub id whose config values were applied (config_source checkpoint)
    checkpoint_values: dict[str, Any] | None = (
        None  # the code-path fields applied, as the checkpoint writes them
    )
    checkpoint_not_found: list[str] | None = None  # code-path fields the checkpoint sets that the class lacks
    # Per stage ("generate", "train"), for a failure that would blame Transformers or the device: the first
    # measurement, the second (another tiny size and seed, ties broken) and whether they agree.
    artifact_check: dict[str, Any] | None = None
    device_raising_ops: list[str] | None = None  # compiled-graph findings a device rule says raise
    code_paths: list[dict[str, Any]] | None = (
        None  # alternatives measured for them (bf16, experts_implementation)
    )
    avoided_by: str | None = None  # the one-line change a measured alternative showed to avoid them
    lowering_unverified_ops: list[str] | None = None  # compiled ATen ops whose lowering only a device shows
    # Each judged stage's attributed failure (stage, error, cause, reason; by_rule: a device rule's, unconfirmed:
    # the artifact guard could not confirm it), None when the stage passed.
    generate_failure: dict[str, Any] | None = None
    train_failure: dict[str, Any] | None = None
    forward_failure: dict[str, Any] | None = None
    # The caveat a stage carries when a measured code path avoids the ops a device rule says raise.
    generate_device_rule_caveat: str | None = None
    train_device_rule_caveat: str | None = None
    forward_device_rule_caveat: str | None = None
    traceback_tail: str | None = None  # the end of the first failure's traceback
    # Compiled generation.
    compile_count: int | None = None  # graphs compiled (after the first, recompiles)
    recompile_count: int | None = None
    recompile_reasons: list[str] | None = None  # per recompile: frame and the guard that failed
    recompile_limit_hit: bool | None = None  # a frame reached recompile_limit and ran eagerly after it
    graph_breaks: int | None = None
    graph_break_reasons: list[str] | None = None
    unique_graphs: int | None = None  # Dynamo's count of distinct graphs
    graphs_compiled_by_backend: int | None = None  # backend graphs after AOT autograd
    generation_cache: str | None = None  # the cache class generate kept ("StaticCache", "NoneType", ...)
    not_compiled_because: str | None = None  # why Transformers did not compile generation (works-eager)
    # The uncompiled prefill, which TorchNeuron runs in eager mode: op signatures it compiles and caches.
    eager_op_signatures: int | None = None  # of the first prompt
    eager_new_op_signatures: int | None = None  # new in the last prompt (another length)
    generate_unsupported_ops: list[str] | None = None  # device-rule findings of generation
    # Ops and dtypes, over all stages.
    unsupported_ops: list[str] | None = None  # device-rule findings (op or dtype, graph breaks on such ops)
    cpu_fallback_ops: list[str] | None = None  # ops the device ran through its CPU fallback
    decomposed_ops: list[str] | None = None  # ops the simulator ran as their decompositions
    # The three-way compare of teacher-forced logits.
    outputs_match: bool | None = None  # compiled logits within logit_tolerance of the reference
    tokens_match: bool | None = None  # the compiled run would have picked every reference token itself
    max_logit_diff: float | None = None
    max_diff_static_vs_dynamic: float | None = None  # eager static cache vs eager dynamic cache
    max_diff_compiled_vs_dynamic: float | None = None  # compiled static cache vs eager dynamic cache
    logit_tolerance: float | None = None
    # The compiled training steps, one per padded length.
    train_compile_count: int | None = None
    train_expected_compile_count: int | None = None  # the first step's graphs once per distinct padded length
    train_compiles_per_length: dict[str, int] | None = None  # padded length -> graphs its step compiled
    train_padded_lengths: list[int] | None = None
    train_lengths_started: int | None = None  # steps started (the last one failed when the stage failed)
    train_losses: list[float] | None = None
    train_recompile_limit_hit: bool | None = None
    train_graph_breaks: int | None = None
    train_graph_break_reasons: list[str] | None = None
    train_recompile_reasons: list[str] | None = None
    train_unsupported_ops: list[str] | None = None  # device-rule findings of training
    # The forward of a task without generation (its compile figures are compile_count, recompile_count, ...).
    # The static shape of every batch of a forward, or of an encoder-decoder's encoder input: (batch, padded
    # length), (batch, channels, height, width), or (batch, mel bins, frames).
    padded_shape: list[int] | None = None
    forward_unsupported_ops: list[str] | None = None  # device-rule findings of the forward
    # A text-to-image row: the scheduler steps of each request, and the graphs compiled when classifier-free
    # guidance turns off (the denoiser's batch halves: a static shape of its own, not counted as a recompile).
    denoise_steps: int | None = None
    guidance_recompiles: int | None = None
    # Graphs compiled for one more batch of the first padded length with other content: > 0 means training
    # recompiles with the data (e.g. expert token counts), not only with the padded length.
    train_content_compiles: int | None = None
    train_content_check: str | None = None  # how train_content_compiles was measured, when not as usual
    train_content_error: str | None = None  # that batch failed (evidence only: the measured steps passed)
    # The model, the worker and optimum-neuron.
    parameters: int | None = None  # of the tiny model
    can_compile_fullgraph: bool | None = None  # the model class's _can_compile_fullgraph
    optimum_neuron_inference: bool | None = None  # optimum-neuron 0.4.5 documents inference support
    optimum_neuron_training: bool | None = None  # optimum-neuron 0.4.5 documents training support
    neuron_visible_cores: str | None = None  # the NeuronCores of the worker (neuron backend)
    seconds: float | None = None  # the worker's wall time
    probe_seconds: dict[str, float] | None = None  # wall time per probe
    peak_rss_mb: float | None = None  # the worker's peak resident memory
    extra: dict[str, Any] = field(default_factory=dict)  # keys a row read from a file has beyond these
    upgraded_from: int | None = None  # schema version of the line read, when older than SCHEMA_VERSION

    @classmethod
    def field_names(cls) -> tuple[str, ...]:
        return tuple(f.name for f in dataclasses.fields(cls) if f.name not in ("extra", "upgraded_from"))

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Row:
        """A row from its JSON object; older versions read with the new fields unset (see ``_upgraded``)."""
        version = data.get("schema_version", 1)
        if version < 4:
            data = _upgraded(data)
        if version < 5:
            data = dict(data, task="text-generation")
        names = set(cls.field_names())
        values = {name: data[name] for name in names if name in data}
        for name, enum in ENUM_FIELDS.items():
            if values.get(name) is not None:
                values[name] = enum(values[name])
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


def _declared_types() -> dict[str, type]:
    """Each field's declared type without its None: an enum, or int, float, bool, str, list, dict."""
    found = {}
    for name, hint in typing.get_type_hints(Row).items():
        if name in Row.field_names():
            if isinstance(hint, types.UnionType):  # X | None
                hint = next(arg for arg in typing.get_args(hint) if arg is not type(None))
            found[name] = typing.get_origin(hint) or hint
    return found


# The fields whose values are an enum's, and each field's JSON type when it is set (an enum's is a string).
ENUM_FIELDS = {name: kind for name, kind in _declared_types().items() if issubclass(kind, Enum)}
JSON_TYPES = {name: str if name in ENUM_FIELDS else kind for name, kind in _declared_types().items()}


def _upgraded(data: dict[str, Any]) -> dict[str, Any]:
    """A row older than version 4 as version 4 has it: the recompile limit it was measured with, and its
    reason, which joined the stages' ("generate: ...; train: ..."), split into the stages' reason fields (a
    reason that names no stage, a harness error's, a timeout's, a crash's, stays the row's)."""
    data = dict(data, recompile_limit=data.get("recompile_limit", RECOMPILE_LIMIT_BEFORE_4))
    parts = [part.partition(": ") for part in _JOINED_STAGE_REASONS.split(data.get("reason") or "")]
    if parts[0][0] in {stage.value for stage in JUDGED_STAGES}:
        data["reason"] = None
        data |= {f"{stage}_reason": text for stage, _, text in parts}
    return data
