"""NM456 (and NM457, NM468, NM469, each defined in its own module): environment variables in launchers
(`export`, `unset`, `VAR=1 cmd`): XLA-only ones go, compiler/cache ones get a TODO, `XLA_USE_BF16=1` becomes
`--bf16` on the launches it reached."""

from __future__ import annotations

from migrator.families.environment import MANUAL_VARIABLES, PRECOMPILE_VARIABLES, dropped_reason
from migrator.rules import Rule, Severity
from migrator.shell import example
from migrator.shell.commands import (
    _falsy,
    _script_index,
    _truthy,
    python_launches,
    unsets,
)
from migrator.shell.edits import Context
from usercode.shell import Node, Word, word

DROPPED_VARIABLE = Rule(
    "NM456",
    Severity.INFO,
    "An XLA/NxD-only environment variable in a launcher (`export XLA_USE_BF16=1`, `NEURON_FUSE_SOFTMAX=1 cmd`)",
    "Removed: nothing reads it on TorchNeuron.",
    examples=(
        example(
            "#!/bin/bash\n"
            "export HF_DEACTIVATE_ASYNC_LOAD=1\n"
            "export NEURON_FUSE_SOFTMAX=1\n"
            "torchrun --nproc_per_node=2 train.py\n",
            "#!/bin/bash\nexport HF_DEACTIVATE_ASYNC_LOAD=1\ntorchrun --nproc_per_node=2 train.py\n",
        ),
    ),
)
RULES: tuple[Rule, ...] = (DROPPED_VARIABLE,)
BF16_VARIABLES = frozenset({"XLA_USE_BF16", "XLA_DOWNCAST_BF16"})


class VariablesMatcher:
    """Matcher of assignments, `export`/`unset` and env prefixes."""

    HOOKS = {"start": "start_variables", "assignments": "variables", "declaration": "declaration"}

    def start_variables(self) -> None:
        self.bf16_added: set[int] = set()
        self.bf16_kept: set[str] = (
            set()
        )  # bf16 variables whose setting stays (NM469): their `unset` stays too

    def variables(
        self,
        ctx: Context,
        node: Node,
        words: list[Word],
        data: bytes,
        whole: bool,
        span: list[Node] | None = None,
        siblings: list[Word] | None = None,
        unset: bool = False,
        launch: list[Word] | None = None,
    ) -> None:
        """Drop XLA-only variables, flag the ones that need a person. `whole`: the words are the statement;
        `launch`: the words of the program the variables prefix (else they reach every later command)."""
        dropped = []
        for item in words:
            name = item.assignment or (item.text if unset else None)
            if name is None:
                continue
            if name in BF16_VARIABLES and not unset and _truthy(item.value.partition("=")[2]):
                if self.keep_precision(ctx, node, item, launch):
                    dropped.append(item)
                elif launch is None:  # exported: it stays set for what follows
                    self.bf16_kept.add(name)
                continue
            if unset and name in self.bf16_kept:
                continue  # ends the bf16 an `export` above keeps (with its TODO) for the launches between
            value = item.text.partition("=")[2]
            held = next((v for v in sorted(BF16_VARIABLES) if f"{v}=" in value), None)
            # `ENV_OPTS="XLA_USE_BF16=1 ..."`, expanded into a command later.
            if held is not None and not unset:
                self.todo(
                    ctx,
                    node,
                    "NM469",
                    f"`{name}` holds `{held}`, which trained in bf16 under XLA and which nothing reads on "
                    "TorchNeuron: remove it from this string and pass --bf16 to the Trainer/TRL launch (or load the "
                    "model with dtype=torch.bfloat16)",
                    at=item.start,
                )
            if name in PRECOMPILE_VARIABLES and not unset:
                # Whatever this runs reads it as "compile only" (a Slurm compile job exports it before
                # running the training script): without it the job would become a second real run. Set to
                # 0 (the training job of the same pipeline) it picks the real run, which stays as it is:
                # the launched script may still test the variable.
                self.todo(
                    ctx,
                    node,
                    "NM459",
                    f"`{name}={value}` selects the real run of what runs next (its compile-only branch off); "
                    "TorchNeuron has no compile-only run: remove it once the scripts it reaches no longer read it"
                    if _falsy(value)
                    else f"`{name}` is set here so that what runs next only compiles (as under "
                    "neuron_parallel_compile); TorchNeuron has no compile-only run and dropping the variable would "
                    "make this a second real run: delete this compile step by hand",
                    at=item.start,
                )
                continue
            reason = dropped_reason(name, self.text)
            if reason is not None:
                self.report(ctx.at(item.start), DROPPED_VARIABLE, f"`{name}` removed: {reason}.")
                dropped.append(item)
            elif name in MANUAL_VARIABLES:
                self.todo(ctx, node, "NM457", f"`{name}` holds {MANUAL_VARIABLES[name]}", at=item.start)
        if not dropped:
            return
        if whole and len(dropped) == len(words):
            if span is not None:  # a statement tree-sitter merged into the next one: its own lines
                self.remove_lines(ctx, span[0].start_byte, span[-1].end_byte, data)
            elif self.remove_statement(ctx, node):
                return
            else:
                self.edit(ctx, node.start_byte, node.end_byte, ":")
            return
        # Adjacent dropped words go as one range (`PT_XLA_DEBUG=1 PT_XLA_DEBUG_FILE=x cmd`): removed one by
        # one, the first would take the blank after it and the second the blank before it.
        line = siblings or words
        position = {w.start: i for i, w in enumerate(line)}
        runs: list[list[Word]] = []
        for item in dropped:
            if runs and position[item.start] == position[runs[-1][-1].start] + 1:
                runs[-1].append(item)
            else:
                runs.append([item])
        for run in runs:
            self.remove_word(ctx, run[0], line, through=run[-1])

    def keep_precision(self, ctx: Context, node: Node, item: Word, launch: list[Word] | None) -> bool:
        """`XLA_USE_BF16=1` made every float32 tensor bf16. It goes only where `--bf16` can take over: on
        each Trainer/TRL launch it reaches (the prefixed command, or every launch after an `export`) whose
        argument parser is known. Otherwise it stays with a TODO: dropping it would train in float32."""
        name = item.assignment
        if launch is not None:
            targets = [launch] if _script_index(launch) is not None else []
        else:  # the launches after the `export`, up to an `unset` of the variable
            launches = self.survey(ctx)
            end = min(
                (offset for offset, unset in ctx.unsets if unset == name and offset > node.end_byte),
                default=None,
            )
            targets = [
                words
                for offset, words in launches
                if offset > node.end_byte and (end is None or offset < end)
            ]
        # A launch that passes --bf16 already keeps bf16 whatever parses it; another needs a known parser.
        unknown = [
            parser
            for parser in (self.parser_of(words) for words in targets if not _has_bf16(words))
            if parser.table is None
        ]
        if not targets or unknown:
            reaches = "no launch in this file"
            if unknown:
                how = (
                    "which builds no TrainingArguments/SFTConfig from its command line"
                    if unknown[0].read
                    else "whose argument parser is not known"
                )
                reaches = f"`{unknown[0].script}`, {how}"
            self.todo(
                ctx,
                node,
                "NM469",
                f"`{name}=1` trained in bf16 under XLA and nothing reads it on TorchNeuron; it reaches {reaches}: "
                "pass --bf16 to a Trainer/TRL script or load the model with dtype=torch.bfloat16, then delete it",
                at=item.start,
            )
            return False
        for words in targets:
            self.add_bf16(ctx, words)
        self.report(
            ctx.at(item.start),
            "NM468",
            f"`{name}` removed; `--bf16` added to the Trainer launch{'es' if len(targets) > 1 else ''} it reached "
            "(bf16 autocast keeps float32 master weights, where XLA_USE_BF16 cast the weights themselves).",
        )
        return True

    def add_bf16(self, ctx: Context, words: list[Word]) -> None:
        """`--bf16` at the end of a launch, `--bf16 true` where the launch spells its other boolean flags so
        or where its parser needs the value (TRL's configs)."""
        if _has_bf16(words):
            return
        arguments = [w.value for w in words[_script_index(words) + 1 :]]
        if ctx.at(words[-1].start) in self.bf16_added:
            return
        self.bf16_added.add(ctx.at(words[-1].start))
        spelled = next((v for v in arguments if v.lower() in ("true", "false")), None)
        value = (
            " True"
            if spelled and spelled[0] == "T"
            else " true"
            if spelled or self.parser_of(words).trl_config
            else ""
        )
        self.edit(ctx, words[-1].end, words[-1].end, f" --bf16{value}")

    def survey(self, ctx: Context) -> list[tuple[int, list[Word]]]:
        """Every Python launch of the context (offset of its end, launched words), compile runs excluded."""
        if ctx.survey is None:
            ctx.survey = [
                (start, words)
                for start, words in python_launches(ctx.data)
                if _script_index(words) is not None
            ]
            ctx.unsets = unsets(ctx.data)
        return ctx.survey

    def declaration(self, ctx: Context, node: Node, data: bytes) -> None:
        keyword = node.children[0].type if node.children else ""
        if keyword not in ("export", "unset"):
            return
        items = [word(c, data) for c in node.named_children if c.type != "comment"]
        everything = [word(node.children[0], data), *items]
        self.variables(ctx, node, items, data, whole=True, siblings=everything, unset=keyword == "unset")


def _has_bf16(words: list[Word]) -> bool:
    return any(
        w.value == "--bf16" or w.value.startswith("--bf16=") for w in words[_script_index(words) + 1 :]
    )


MATCHER = VariablesMatcher
