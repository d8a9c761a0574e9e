"""NM461 (and NM462-NM464, NM466, NM467, each defined in its own module; NM222 of the training family for
`--gradient_checkpointing`): training flags on a Python launch, by the argument parser of the launched script."""

from __future__ import annotations

import re

from migrator.families.training.tp_compile import MEMORY, WHY
from migrator.families.training_args import INACTIVE_NOTE, REMOVED_OPTIMIZERS, SFT_CONFIG_ARGUMENTS
from migrator.rules import Finding, Rule, Severity, also_on
from migrator.shell import example
from migrator.shell.commands import _script_index, _truthy
from migrator.shell.edits import Context
from migrator.shell.scripts import ScriptParser
from migrator.transform import TODO_PREFIX
from usercode.launchers import is_launcher
from usercode.shell import Node, Word

FLAG_REMOVED = Rule(
    "NM461",
    Severity.INFO,
    "A training flag Transformers 5 / TRL 1.16 rejects (`--overwrite_output_dir`, `--zero_1`, `--async_save`...)",
    "Removed from the launcher line (HfArgumentParser raises on unknown flags).",
    examples=(
        example(
            "#!/bin/bash\n"
            "export HF_DEACTIVATE_ASYNC_LOAD=1\n"
            "torchrun --nproc_per_node=32 run_clm.py --zero_1 true --bf16\n",
            "#!/bin/bash\n"
            "export HF_DEACTIVATE_ASYNC_LOAD=1\n"
            "torchrun --nproc_per_node=32 run_clm.py --bf16\n",
        ),
    ),
)
RULES: tuple[Rule, ...] = (FLAG_REMOVED,)
# How NM463's TODO of a removed flag reads (a rerun finds the TODO, not the flag).
_REMOVED_MARK = " removed: "
# `--use_cpu True` (and the older `--no_cuda True`): on TorchNeuron they select the CPU.
_CPU_FLAGS = frozenset({"use_cpu", "no_cuda"})
# A launcher of the XLA flow: its variables, its compile-only runs, its packages.
_XLA_ERA = re.compile(
    rb"\b(?:PT_)?XLA_[A-Z_]+=|\bneuron_parallel_compile\b|\btorch[-_]xla\b|\boptimum[-_]neuron\b"
)


class FlagsMatcher:
    """Matcher of every Python launch (`torchrun`, `python`, `accelerate`, `trl`...)."""

    HOOKS = {"program": "launcher_command"}

    def launcher_command(
        self, ctx: Context, node: Node, words: list[Word], siblings: list[Word]
    ) -> bool | None:
        if not is_launcher(words[0].value):
            return None
        self.launcher(ctx, node, words, siblings)
        return True

    def launcher(self, ctx: Context, node: Node, words: list[Word], siblings: list[Word]) -> None:
        script = _script_index(words)
        if script is None:
            return
        if self.owner == 0:  # a compile-only run is not a run on TorchNeuron
            ctx.launchers.append((self.command_start, node.end_byte))
        self.deepspeed(ctx, node, words, script)
        parser = self.parser_of(words)
        arguments = words[script + 1 :]
        unknown: list[tuple[Word, str]] = []
        for position, item in enumerate(arguments):
            if not item.text.startswith("--"):
                continue
            name, equals, given = item.text[2:].partition("=")
            following = arguments[position + 1] if position + 1 < len(arguments) else None
            value = following if not equals and following and not following.text.startswith("--") else None
            flag = f"`--{name}`"
            offset = ctx.at(item.start)
            if (
                name in _CPU_FLAGS
                and name not in parser.own
                and _truthy(given if equals else value.value if value else "1")
            ):
                if parser.xla_era or _XLA_ERA.search(self.data):
                    # Under XLA it never moved training to the CPU (Accelerate takes the XLA device whenever
                    # torch_xla is importable); on TorchNeuron it would.
                    self.report(
                        offset,
                        "NM467",
                        f"{flag} removed: under XLA the run was on the XLA device whatever it said, and on "
                        "TorchNeuron it would train on the CPU.",
                    )
                    self.remove_word(ctx, item, siblings, through=value if not equals else None)
                    continue
                renamed = parser.action(name)
                if (
                    renamed is not None and renamed.kind == "rename"
                ):  # `--no_cuda` is gone from Transformers 5
                    self.report(offset, "NM462", f"{flag} renamed to `--{renamed.target}`.")
                    self.edit(ctx, item.start, item.start + 2 + len(name), f"--{renamed.target}")
                    flag = f"`--{renamed.target}`"
                self.todo(
                    ctx,
                    node,
                    "NM467",
                    f"{flag} made sense under XLA (the XLA device is not CUDA), but on TorchNeuron it makes the "
                    "Trainer run on the CPU instead of the neuron device: remove it",
                    at=item.start,
                )
                continue
            if (
                name == "gradient_checkpointing"
                and name not in parser.own
                and _compiled_tensor_parallel(parser, arguments)
                and _truthy(given if equals else value.value if value else "1")
            ):
                self.report(
                    offset,
                    "NM222",
                    f"{flag} set to false: `{parser.script}` as migrated compiles (torch_compile=True) and this "
                    f"launch loads it with tensor parallelism; {WHY}. The memory cost: {MEMORY}.",
                )
                end = value.end if value is not None and not equals else item.end
                self.edit(ctx, item.start, end, "--gradient_checkpointing false")
                continue
            if name == "optim" and self.optimizer(ctx, parser, offset, item, value if not equals else None):
                continue
            action = parser.action(name)
            if parser.table is None and name not in parser.own:
                legacy = SFT_CONFIG_ARGUMENTS.get(name)
                if legacy is not None and legacy.kind != "keep":
                    unknown.append((item, name))
                continue
            if action is None or action.kind == "keep":
                continue
            if action.kind == "drop" or (action.kind == "distributed" and action.target != "tp_size"):
                self.report(offset, FLAG_REMOVED, f"{flag} removed: {action.note}.")
                self.remove_word(ctx, item, siblings, through=value)
            elif action.kind == "rename":
                note = f": {action.note}" if action.note else ""
                self.report(offset, "NM462", f"{flag} renamed to `--{action.target}`{note}.")
                self.edit(ctx, item.start, item.start + 2 + len(name), f"--{action.target}")
            elif action.kind == "distributed" and parser.read and name not in parser.names:
                shown = f"--{name}{'=' + given if equals else ' ' + value.text if value else ''}"
                self.remove_word(ctx, item, siblings, through=value)
                self.todo(
                    ctx,
                    node,
                    "NM463",
                    f"`{shown}`{_REMOVED_MARK}`{parser.script}` never reads it (optimum-neuron's trainer did) and its "
                    "migrated parser rejects it; to keep that degree, pass distributed_config=DistributedConfig("
                    f"{action.target}=...) where the script loads the model (a trainer given a model id: "
                    "model_init_kwargs of its config), and torchrun --nproc_per_node must equal tp_size x fsdp_size",
                    at=item.start,
                )
            elif action.kind == "distributed":
                self.todo(
                    ctx,
                    node,
                    "NM463",
                    f"{flag} is kept as a script argument and now feeds DistributedConfig({action.target}=...); "
                    f"{action.note}, and torchrun --nproc_per_node must equal tp_size x fsdp_size",
                    at=item.start,
                )
            elif action.removes(given if equals else value.value if value else None):
                self.report(offset, FLAG_REMOVED, f"`--{name} {action.inactive}` removed: {INACTIVE_NOTE}.")
                self.remove_word(ctx, item, siblings, through=value)
            else:
                self.todo(ctx, node, "NM464", f"{flag} {action.note}", at=item.start)
        if unknown:
            self.unknown_parser(ctx, node, parser, unknown)
        # A flag NM463 removed is gone on a rerun; its TODO above the launch still stands for a manual finding.
        removed = f"{TODO_PREFIX} NM463 `--"
        for comment in self.comments_above(self.anchor(ctx, node)):
            if comment.startswith(removed) and _REMOVED_MARK in comment:
                self.report(
                    ctx.start + words[script].start,
                    "NM463",
                    comment[len(removed) - 3 :],
                    fixed=False,
                )

    def deepspeed(self, ctx: Context, node: Node, words: list[Word], script: int) -> None:
        """NM475's TODO on a launch that runs DeepSpeed."""
        runs = self.deepspeed_launch(words, script)
        if runs is not None:
            self.todo(
                ctx,
                node,
                "NM475",
                f"{runs} runs DeepSpeed, which has no accelerator for TorchNeuron's `neuron` device; shard with FSDP2 "
                "instead (an Accelerate config with `distributed_type: FSDP` and `fsdp_version: 2`, or "
                "`DistributedConfig(fsdp_size=...)` at the model load): the owner picks what replaces the ZeRO "
                "stage and offload it asks for",
            )

    def deepspeed_launch(self, words: list[Word], script: int) -> str | None:
        """How this launch runs DeepSpeed (NM475), in the TODO's words; None where it does not."""
        program = words[0].value.rsplit("/", 1)[-1]
        options = [word.value for word in words[1:script]]
        if program == "deepspeed":
            return "the `deepspeed` launcher"
        if program == "accelerate" and "--use_deepspeed" in options:
            return "`accelerate launch --use_deepspeed`"
        config = _flag_value(words[1:script], "config_file") if program == "accelerate" else None
        if config and self.directory is not None and _DEEPSPEED_CONFIG.search(_read(self.directory / config)):
            return f"`accelerate launch --config_file {config}` (its `distributed_type` is DEEPSPEED)"
        flags = [word.value.partition("=")[0] for word in words[script + 1 :]]
        if "--deepspeed" in flags:
            return "the Trainer's `--deepspeed` configuration"
        return None

    def optimizer(
        self, ctx: Context, parser: ScriptParser, offset: int, item: Word, value: Word | None
    ) -> bool:
        """`--optim adamw_hf` (or `--optim=...`) on a launch of a script whose TrainingArguments take it: the value
        Transformers removed, by its replacement (NM227). Whether the flag is handled."""
        optimizer = value.value if value is not None else item.text.partition("=")[2] or None
        if optimizer not in REMOVED_OPTIMIZERS or parser.table is None:
            return False
        if "optim" not in parser.own:  # the script's own `--optim` is not TrainingArguments'
            replacement, why = REMOVED_OPTIMIZERS[optimizer]
            self.report(offset, "NM227", f"`--optim {optimizer}` -> `--optim {replacement}`: {why}.")
            word = value or item
            self.edit(ctx, word.start, word.end, replacement if value else f"--optim={replacement}")
        return True

    def unknown_parser(
        self, ctx: Context, node: Node, parser: ScriptParser, flags: list[tuple[Word, str]]
    ) -> None:
        """Training flags on a script whose parser is not known: a finding each, one TODO for the launch."""
        how = (
            "builds no TrainingArguments/SFTConfig from its command line"
            if parser.read
            else "is neither in this tree nor a known Transformers/TRL example script"
        )
        # One decision (the launch's parser is unknown): one TODO, one finding at its first flag naming the others.
        changes = [_legacy_change(name) for _, name in flags]
        notes = [
            f"{change} ({SFT_CONFIG_ARGUMENTS[name].note})" if SFT_CONFIG_ARGUMENTS[name].note else change
            for change, (_, name) in zip(changes, flags, strict=True)
        ]
        (line, column), *others = [self.position(ctx.at(item.start)) for item, _ in flags]
        also = tuple(sorted({other for other, _ in others} - {line}))
        why = f"`{parser.script}` {how}, so its optimum-neuron training flags are left as they are"
        action = f"if they reach TrainingArguments/SFTConfig: {'; '.join(changes)}"
        finding = Finding(
            self.rules["NM466"],
            line,
            column,
            f"{why}{also_on(also)}; if they reach TrainingArguments/SFTConfig: {'; '.join(notes)}",
            False,
            why=why + also_on(also),
            action=action,
            also=also,
        )
        self.findings.append((finding, self.owner))
        text = f"{TODO_PREFIX} NM466 {why}; {action}"
        self.todos.append((self.anchor(ctx, node), text, self.owner))


# An Accelerate config (YAML or JSON) that runs DeepSpeed.
_DEEPSPEED_CONFIG = re.compile(r"""^\s*["']?distributed_type["']?\s*:\s*["']?DEEPSPEED\b""", re.MULTILINE)


def _read(path) -> str:
    """A small text file beside the launcher, or "" (absent, unreadable, not text)."""
    try:
        return path.read_text(encoding="utf-8")[:100_000]
    except (OSError, UnicodeDecodeError):
        return ""


def _compiled_tensor_parallel(parser: ScriptParser, arguments: list[Word]) -> bool:
    """Whether this launch trains a tensor-parallel model compiled (`ScriptParser.trains_compiled_tp`)."""
    degree, compiled = _flag_value(arguments, "tensor_parallel_size"), _flag_value(arguments, "torch_compile")
    return parser.trains_compiled_tp(degree, compiled)


def _flag_value(arguments: list[Word], name: str) -> str | None:
    """The value the last `--name` of a launch gives (`--name=V`, `--name V`; "1" when bare), None without one."""
    found = None
    for position, item in enumerate(arguments):
        flag, equals, given = item.text[2:].partition("=")
        if not item.text.startswith("--") or flag != name:
            continue
        following = arguments[position + 1].value if position + 1 < len(arguments) else "--"
        found = given if equals else "1" if following.startswith("--") else following
    return found


def _legacy_change(name: str) -> str:
    """What becomes of `--name` in a Transformers/TRL launch, in a few words (the table has the why)."""
    action = SFT_CONFIG_ARGUMENTS[name]
    if action.kind == "rename":
        return f"rename `--{name}` to `--{action.target}`"
    if action.kind == "drop" or (action.kind == "distributed" and action.target != "tp_size"):
        return f"remove `--{name}`"
    if action.kind == "distributed":
        return f"`--{name}` feeds DistributedConfig({action.target}=...) at the model load"
    return f"`--{name}`: {action.note}"


MATCHER = FlagsMatcher
