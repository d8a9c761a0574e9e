"""NM452-NM455: `optimum-cli` commands (migration map §1.8): export, consolidate and cache go, any other
`optimum-cli neuron` command gets a TODO."""

from __future__ import annotations

from migrator.rules import Rule, Severity
from migrator.shell import example
from migrator.shell.edits import Context
from migrator.shell.syntax import Node, Word

EXPORT_COMMAND = Rule(
    "NM452",
    Severity.WARNING,
    "`optimum-cli export neuron ...` ahead-of-time export",
    "Removed: TorchNeuron loads the original checkpoint. Carry --sequence_length into max_cache_len (LLMs) or a "
    "fixed padding length, --batch_size into a fixed batch size, --num_cores/--tensor_parallel_size into "
    "DistributedConfig(tp_size=...) with torchrun, --auto_cast_type into dtype, and load the model id instead "
    "of the export directory.",
    examples=(
        example(
            "#!/bin/bash\n"
            "optimum-cli export neuron --model Qwen/Qwen3-0.6B --sequence_length 1024 --batch_size 1 qwen3_neuron/\n",
            "#!/bin/bash\n",
        ),
    ),
)
CONSOLIDATE_COMMAND = Rule(
    "NM453",
    Severity.INFO,
    "`optimum-cli neuron consolidate ...` merges sharded training checkpoints",
    "Removed: `save_pretrained` writes standard, unsharded checkpoints on TorchNeuron (keep the command only "
    "to convert checkpoints made with optimum-neuron).",
    examples=(
        example(
            "#!/bin/bash\noptimum-cli neuron consolidate output/checkpoint-500 output/consolidated\n",
            "#!/bin/bash\n",
        ),
    ),
)
CACHE_COMMAND = Rule(
    "NM454",
    Severity.WARNING,
    "`optimum-cli neuron cache ...` (Neuron compile cache on the Hub)",
    "Removed: TorchNeuron has no Hub compile cache; it caches compiled graphs locally (see the TorchNeuron "
    "environment variable reference for the cache directory).",
    examples=(
        example(
            "#!/bin/bash\noptimum-cli neuron cache synchronize\n",
            "#!/bin/bash\n",
        ),
    ),
)
OPTIMUM_CLI_MANUAL = Rule(
    "NM455",
    Severity.ERROR,
    "Another `optimum-cli neuron ...` command (`serve`, ...)",
    "Left in place with a TODO: serve with vLLM on Neuron (`vllm serve`) or run the model with Transformers "
    'on device "neuron".',
    examples=(
        example(
            "#!/bin/bash\noptimum-cli neuron serve --model Qwen/Qwen3-0.6B\n",
            "#!/bin/bash\n"
            '# TODO(neuron-migrate): NM455 `optimum-cli neuron serve` has no TorchNeuron equivalent; serve with vLLM on Neuron (`vllm serve`) or run the model with Transformers on device "neuron".\n'
            "optimum-cli neuron serve --model Qwen/Qwen3-0.6B\n",
        ),
    ),
)
RULES: tuple[Rule, ...] = (EXPORT_COMMAND, CONSOLIDATE_COMMAND, CACHE_COMMAND, OPTIMUM_CLI_MANUAL)


class OptimumCliMatcher:
    """Mixin of `rewrite.ShellRewriter`: `ShellRewriter.launched` hands it every `optimum-cli` command."""

    def optimum_cli(self, ctx: Context, node: Node, words: list[Word]) -> None:
        arguments = [w.value for w in words[1:3]]
        rule = None
        if arguments == ["export", "neuron"]:
            rule = EXPORT_COMMAND
        elif arguments == ["neuron", "consolidate"]:
            rule = CONSOLIDATE_COMMAND
        elif arguments == ["neuron", "cache"]:
            rule = CACHE_COMMAND
        if rule is not None and self.owner == 0 and self.remove_statement(ctx, node, placeholder=False):
            self.report(ctx.start + words[0].start, rule)
        elif rule is not None or arguments[:1] == ["neuron"]:
            subcommand = " ".join(arguments)
            self.todo(
                ctx,
                node,
                OPTIMUM_CLI_MANUAL,
                f"`optimum-cli {subcommand}` has no TorchNeuron equivalent; "
                + (rule or OPTIMUM_CLI_MANUAL).action.split(": ", 1)[-1],
            )


MATCHER = OptimumCliMatcher
