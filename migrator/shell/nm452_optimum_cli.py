"""NM452 (and NM453-NM455, each defined in its own module): `optimum-cli` commands of optimum-neuron (`export
neuron`, `neuron consolidate`, `neuron cache`, ...). TorchNeuron loads the original checkpoint, saves
unsharded checkpoints and has no Hub compile cache, so export, consolidate and cache go; any other
`optimum-cli neuron` command gets a TODO."""

from __future__ import annotations

import re

from migrator.families.leftovers.platforms import LEGACY_TARGETS, core_count_why
from migrator.rules import Rule, Severity
from migrator.shell import example
from migrator.shell.edits import Context
from usercode.shell import Node, Word

EXPORT_REMOVED = (
    "Removed: TorchNeuron loads the original checkpoint. Carry --sequence_length into max_cache_len (LLMs) or a "
    "fixed padding length, --batch_size into a fixed batch size, --auto_cast_type into dtype, and load the model "
    "id instead of the export directory."
)
EXPORT_KEPT = (
    "make what uses the export directory load the model id instead (its --sequence_length becomes max_cache_len or "
    "a fixed padding length, --auto_cast_type the dtype), then remove this export"
)
# A core count of the export is not a trn2 tensor-parallel degree (NM504 says the same of Python loads).
EXPORT_TP_SIZE = (
    "choose DistributedConfig(tp_size=...) for the trn2 / trn3 instance (a divisor of its NeuronCores and of the "
    "model's attention heads) and launch with torchrun."
)
EXPORT_COMMAND = Rule(
    "NM452",
    Severity.WARNING,
    "`optimum-cli export neuron ...` ahead-of-time export",
    f"{EXPORT_REMOVED} --num_cores/--tensor_parallel_size counted the compile target's (inf2 / trn1) "
    f"NeuronCores, not trn2 NeuronCores: {EXPORT_TP_SIZE} A notebook cell (of the export's notebook) or a "
    "Python file (beside the export's shell script) that loads the export directory with "
    'an optimum-neuron class (`NeuronModelForX.from_pretrained("out/")`, the directory and the model literal, '
    "every export option one a load takes or one that only tuned the compile) loads the export at load time "
    "instead, `from_pretrained(model, export=True, batch_size=..., sequence_length=..., auto_cast_type=...)`, "
    "which the inference rules migrate (`migrator/exported_loads.py`), and the export goes. When the file "
    "uses the export directory otherwise (a run, an upload, a copy, another load; a load in a Python file beside "
    "the script that cannot be rewritten, such as one of a model id from a variable), the export stays with a "
    "TODO: what uses it must change first (for a cell or a file: load the model id with the export's settings).",
    examples=(
        example(
            "#!/bin/bash\n"
            "optimum-cli export neuron --model Qwen/Qwen3-0.6B --sequence_length 1024 --batch_size 1 qwen3_neuron/\n",
            "#!/bin/bash\n",
        ),
        example(
            "#!/bin/bash\n"
            "optimum-cli export neuron --model Qwen/Qwen3-0.6B --sequence_length 1024 --batch_size 1 qwen3_neuron/\n"
            "hf upload my-org/qwen3-neuron qwen3_neuron/\n",
            "#!/bin/bash\n"
            f"# TODO(neuron-migrate): NM452 `optimum-cli export neuron` writes `qwen3_neuron`, which a later command "
            f"of this file uses; TorchNeuron loads the original checkpoint: {EXPORT_KEPT}\n"
            "optimum-cli export neuron --model Qwen/Qwen3-0.6B --sequence_length 1024 --batch_size 1 qwen3_neuron/\n"
            "hf upload my-org/qwen3-neuron qwen3_neuron/\n",
        ),
    ),
)
RULES: tuple[Rule, ...] = (EXPORT_COMMAND,)


class OptimumCliMatcher:
    """Matcher of every `optimum-cli` command."""

    HOOKS = {"program": "optimum_cli_command"}

    def optimum_cli_command(
        self, ctx: Context, node: Node, words: list[Word], siblings: list[Word]
    ) -> bool | None:
        if words[0].value != "optimum-cli":
            return None
        self.optimum_cli(ctx, node, words)
        return True

    def optimum_cli(self, ctx: Context, node: Node, words: list[Word]) -> None:
        arguments = [w.value for w in words[1:3]]
        rule = None
        if arguments == ["export", "neuron"]:
            rule = EXPORT_COMMAND
        elif arguments == ["neuron", "consolidate"]:
            rule = self.rules["NM453"]
        elif arguments == ["neuron", "cache"]:
            rule = self.rules["NM454"]
        reused = _output_reused(self.data, ctx.at(node.end_byte), words) if rule is EXPORT_COMMAND else None
        loading_cell = (
            _cell_using(self.python_cells, words) if rule is EXPORT_COMMAND and reused is None else None
        )
        loading_file = (  # (a load the exported-load rewrite makes no longer names the folder)
            _cell_using(self.python_beside, words)
            if rule is EXPORT_COMMAND and reused is None and loading_cell is None
            else None
        )
        if reused is not None:
            self.todo(
                ctx,
                node,
                EXPORT_COMMAND,
                f"`optimum-cli export neuron` writes `{reused}`, which a later command of this file uses; "
                f"TorchNeuron loads the original checkpoint: {EXPORT_KEPT}",
            )
        elif loading_cell is not None:
            number, output = loading_cell
            self.todo(
                ctx,
                node,
                EXPORT_COMMAND,
                f"`optimum-cli export neuron` writes `{output}`, which Python cell {number} of this notebook "
                f"loads; TorchNeuron loads the original checkpoint: {_load_instead(words, f'cell {number}')}",
            )
        elif loading_file is not None:
            name, output = loading_file
            self.todo(
                ctx,
                node,
                EXPORT_COMMAND,
                f"`optimum-cli export neuron` writes `{output}`, which `{name}` beside this script loads; "
                f"TorchNeuron loads the original checkpoint: {_load_instead(words, f'`{name}`')}",
            )
        elif rule is not None and self.owner == 0 and self.remove_statement(ctx, node, placeholder=False):
            core_count = _export_core_count(words) if rule is EXPORT_COMMAND else None
            self.report(
                ctx.at(words[0].start),
                rule,
                f"{EXPORT_REMOVED} {core_count}: {EXPORT_TP_SIZE}" if core_count else None,
            )
        elif rule is not None or arguments[:1] == ["neuron"]:
            subcommand = " ".join(arguments)
            self.todo(
                ctx,
                node,
                "NM455",
                f"`optimum-cli {subcommand}` has no TorchNeuron equivalent; "
                + (rule or self.rules["NM455"]).action.split(": ", 1)[-1],
            )


MATCHER = OptimumCliMatcher


def _output_reused(data: bytes, after: int, words: list[Word]) -> str | None:
    """The export's output directory (its last word) when a command after it names it again: a load, an
    upload or a copy of the exported model needs the export."""
    output = _output(words)
    if output in ("", ".") or output.startswith("-"):
        return None
    for found in _mentions(output).finditer(data, after):
        line = data[data.rfind(b"\n", 0, found.start()) + 1 : found.start()]
        if not line.lstrip().startswith(b"#"):  # a comment that names it needs nothing
            return output
    return None


def _output(words: list[Word]) -> str:
    """The export's output directory (its last word), as a later command or cell would spell it."""
    return words[-1].value.removeprefix("./").rstrip("/") if len(words) > 3 else ""


def _mentions(output: str) -> re.Pattern[bytes]:
    return re.compile(rb"(?<![\w.$/-])(?:\./)?" + re.escape(output.encode()) + rb"(?![\w-])")


def _cell_using(cells, words: list[Word]) -> tuple[int | str, str] | None:
    """(number or name, output directory) of the first Python cell or file (number or name, code) that names the
    export's output outside a comment: a `from_pretrained("./out")` of the compiled model, which the export must
    stay for."""
    output = _output(words)
    if output in ("", ".") or output.startswith("-"):
        return None
    mention = _mentions(output)
    for number, code in cells:
        for line in code.encode().splitlines():
            if mention.search(line) and not line.lstrip().startswith(b"#"):
                return number, output
    return None


# What each export setting becomes where the model id is loaded instead: the static shapes and dtype the export
# compiled for are set at load and generation time on TorchNeuron.
_LOAD_SETTINGS = {
    "sequence_length": "max_cache_len={} (a decoder) or a fixed padding length of {} (an encoder)",
    "batch_size": "a fixed batch size of {}",
    "auto_cast_type": "dtype {}",
}


def _load_instead(words: list[Word], loader: str) -> str:
    """What `loader` (a cell, a file) must load instead of the export's output: the model id and the export's
    settings."""
    options = _options(words)
    model = options.get("model") or options.get("m") or "the model id the export read"
    settings = [
        form.format(options[name], options[name])
        for name, form in _LOAD_SETTINGS.items()
        if options.get(name)
    ]
    carried = f" with {', '.join(settings)}" if settings else ""
    return f"make {loader} load `{model}`{carried} instead, then remove this export"


def _options(words: list[Word]) -> dict[str, str]:
    """`--name value` / `--name=value` / `-m value` options of a command, by name (the first of each)."""
    options: dict[str, str] = {}
    for index, item in enumerate(words):
        name, equals, given = item.value.partition("=")
        if name.startswith("-") and len(name) > 1:
            value = given if equals else words[index + 1].value if index + 1 < len(words) else ""
            options.setdefault(name.lstrip("-"), value)
    return options


def _export_core_count(words: list[Word]) -> str | None:
    """What the core count of an `optimum-cli export neuron` command counted (NM504's words), if it has one."""
    options = _options(words)
    target = options.get("instance_type")
    if target is not None and target not in LEGACY_TARGETS:
        return None  # compiled for trn2 / trn3: the count is one of their NeuronCores
    for name in ("num_cores", "tensor_parallel_size"):
        written = options.get(name)
        if written and not written.startswith("-"):
            return core_count_why(f"--{name}", int(written) if written.isdigit() else None, written, target)
    return None
