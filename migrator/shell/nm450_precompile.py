"""NM450 (and NM451, NM458, NM459, each defined in its own module): `neuron_parallel_compile` runs and the
pre-compilation variables it set (`NEURON_EXTRACT_GRAPHS_ONLY`, `NEURON_PARALLEL_COMPILE`). TorchNeuron
compiles just in time and caches its graphs, so there is no separate pre-compilation run: a compile run goes
when the same launch follows it, a branch on the variable is folded with it unset, any other use gets a
TODO."""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

from migrator.families.environment import PRECOMPILE_VARIABLES
from migrator.rules import Finding, Rule, Severity
from migrator.shell import example
from migrator.shell.commands import _signature
from migrator.shell.edits import Context
from usercode.launchers import is_program
from usercode.shell import Node, Word, block_statement, shown_by_shell, statements, walk_expansions

PARALLEL_COMPILE = Rule(
    "NM450",
    Severity.ERROR,
    "`neuron_parallel_compile <launch>` (a compile-only run) that no identical launch follows",
    "Left in place with a TODO: TorchNeuron compiles just in time and caches graphs, so there is no separate "
    "pre-compilation run; removing only the prefix would turn it into a second real run. Delete the job. A "
    "cache command (`--command clean|clear-locks|analyze`) that cannot go on its own (in a pipeline) gets a TODO "
    "too.",
    examples=(
        example(
            "#!/bin/bash\nneuron_parallel_compile torchrun --nproc_per_node=32 train.py --bf16\n",
            "#!/bin/bash\n"
            "# TODO(neuron-migrate): NM450 compile-only run (`neuron_parallel_compile`) with no identical launch after it; TorchNeuron compiles just in time, in the training run itself: delete this job (dropping only the prefix would make it a training run)\n"
            "neuron_parallel_compile torchrun --nproc_per_node=32 train.py --bf16\n",
        ),
    ),
)
RULES: tuple[Rule, ...] = (PARALLEL_COMPILE,)
_PRECOMPILE_ASSIGNMENT = re.compile(rb"\b(?:" + "|".join(sorted(PRECOMPILE_VARIABLES)).encode() + rb")=")


@dataclass
class CompileRun:
    """`neuron_parallel_compile [options] <launch>`: removed only when the same launch follows."""

    node: Node
    context: Context
    offset: int
    signature: tuple[str, ...]
    owner: int
    # `--command clean|clear-locks|analyze` with nothing launched: it manages the XLA flow's compile cache.
    cache_command: str | None = None


class PrecompileMatcher:
    """Matcher of `neuron_parallel_compile` runs, every `if` (a branch on the variables), the expansions of each
    piece once walked; the compile runs are resolved once every launch is known."""

    HOOKS = {
        "start": "start_precompile",
        "wrapper": "compile_command",
        "branch": "fold_branch",
        "script": "precompile_uses",
        "finish": "resolve_compile_runs",
    }

    def start_precompile(self) -> None:
        self.compile_runs: list[CompileRun] = []
        self.sets_precompile = _PRECOMPILE_ASSIGNMENT.search(self.data) is not None

    def compile_command(
        self, ctx: Context, node: Node, words: list[Word], data: bytes, siblings, marks
    ) -> bool | None:
        if words[0].value != "neuron_parallel_compile":
            return None
        self.compile_run(ctx, node, words, data, siblings, marks)
        return True

    def compile_run(self, ctx: Context, node: Node, words: list[Word], data: bytes, siblings, marks) -> None:
        position = 1
        command = None
        while position < len(words) and words[position].text.startswith("-"):
            takes_value = "=" not in words[position].text and position + 1 < len(words)
            option, _, value = words[position].value.partition("=")
            if option == "--command":
                command = value or (words[position + 1].value if takes_value else None)
            position += 2 if takes_value and not is_program(words[position + 1].value) else 1
        inner = words[position:]
        self.owner = len(self.compile_runs) + 1
        # What this command added before its wrapper was seen (env prefixes) belongs to the run too.
        findings, edits, todos = marks
        self.findings[findings:] = [(f, self.owner) for f, _ in self.findings[findings:]]
        self.edits[edits:] = [replace(e, owner=self.owner) for e in self.edits[edits:]]
        self.todos[todos:] = [(o, t, self.owner) for o, t, _ in self.todos[todos:]]
        cache_command = command if not inner and command not in (None, "compile") else None
        run = CompileRun(node, ctx, ctx.at(node.start_byte), _signature(inner), self.owner, cache_command)
        self.compile_runs.append(run)
        if inner:
            self.launched(ctx, node, inner, data, siblings)
        self.owner = 0

    def resolve_compile_runs(self) -> None:
        """A compile run goes when the same launch follows it; otherwise it stays, inert, with a TODO."""
        for run in self.compile_runs:
            follows = run.signature in self.following or any(
                launch.offset > run.offset and launch.signature == run.signature for launch in self.launches
            )
            if follows and run.signature and self.remove_statement(run.context, run.node):
                self.edits = [e for e in self.edits if e.owner != run.owner]
                self.todos = [t for t in self.todos if t[2] != run.owner]
                self.findings = [f for f in self.findings if f[1] != run.owner]
                self.report(run.offset, "NM451")
            elif run.cache_command is not None and self.remove_statement(
                run.context, run.node, placeholder=False
            ):
                self.report(
                    run.offset,
                    "NM451",
                    f"`neuron_parallel_compile --command {run.cache_command}` removed: it manages the compile cache "
                    "of the XLA flow, which TorchNeuron does not use, and launches nothing.",
                )
            elif run.cache_command is not None:
                self.todo(
                    run.context,
                    run.node,
                    PARALLEL_COMPILE,
                    f"`neuron_parallel_compile --command {run.cache_command}` manages the compile cache of the "
                    "XLA flow and launches nothing; TorchNeuron does not use that cache: delete this command",
                )
            else:
                self.todo(
                    run.context,
                    run.node,
                    PARALLEL_COMPILE,
                    "compile-only run (`neuron_parallel_compile`) with no identical launch after it; "
                    "TorchNeuron compiles just in time, in the training run itself: delete this job (dropping "
                    "only the prefix would make it a training run)",
                )

    def fold_branch(self, ctx: Context, node: Node, data: bytes) -> list[Node] | None:
        """Fold `if [ "$NEURON_EXTRACT_GRAPHS_ONLY" = "1" ]; then A; else B; fi` with the variable unset.

        Returns the statements kept (to be rewritten in turn), None when the `if` is not one to fold.
        """
        condition = node.child_by_field_name("condition")
        if condition is None or not _mentions_precompile(condition) or self.sets_precompile:
            return None  # a file that sets the variable itself may take either branch
        if any(c.type == "elif_clause" for c in node.children):
            return None
        value = _test_value(condition.text.decode())
        if value is None:
            return None
        else_clause = next((c for c in node.children if c.type == "else_clause"), None)
        if value:
            kept = [s for s in statements(node) if s.type != "else_clause"]
        else:
            kept = statements(else_clause) if else_clause is not None else []
        line, column = self.position(ctx.at(node.start_byte))
        rule = self.rules["NM458"]
        self.findings.append((Finding(rule, line, column, rule.action, True), 0))
        if not kept:
            if not self.remove_statement(ctx, node):
                self.edit(ctx, node.start_byte, node.end_byte, ":")
            return kept
        self.edit(ctx, node.start_byte, kept[0].start_byte)
        self.edit(ctx, kept[-1].end_byte, node.end_byte)
        # The kept lines move out one level, to the indentation of the `if` (heredoc and string lines stay).
        extra = _indent_of(data, kept[0].start_byte) - _indent_of(data, node.start_byte)
        root = node
        while root.parent is not None:
            root = root.parent
        for newline in _NEWLINE.finditer(data, kept[0].start_byte, kept[-1].end_byte):
            position = newline.end()
            if not position < kept[-1].end_byte or extra <= 0:
                continue
            inside = root.descendant_for_byte_range(position, position)
            if any(a.type in ("heredoc_body", "string", "raw_string") for a in _ancestors(inside)):
                continue
            blanks = len(data[position:]) - len(data[position:].lstrip(b" \t"))
            self.edit(ctx, position, position + min(extra, blanks), weak=True)
        return kept

    def precompile_uses(self, ctx: Context, root: Node, folded: list[Node]) -> None:
        flagged: set[int] = set()
        for expansion, name in walk_expansions(root):
            if name.text.decode() not in PRECOMPILE_VARIABLES:
                continue
            if any(f.start_byte <= expansion.start_byte < f.end_byte for f in folded):
                continue
            if shown_by_shell(
                expansion
            ):  # `echo "compile only: $NEURON_EXTRACT_GRAPHS_ONLY"` decides nothing
                continue
            statement = block_statement(expansion) or expansion
            if statement.start_byte in flagged:
                continue
            flagged.add(statement.start_byte)
            self.todo(
                ctx,
                statement,
                "NM459",
                f"`{name.text.decode()}` is only set by neuron_parallel_compile, which TorchNeuron does not "
                "have; keep only the commands of the real run",
            )


_NEWLINE = re.compile(b"\n")


def _indent_of(data: bytes, offset: int) -> int:
    start = data.rfind(b"\n", 0, offset) + 1
    return offset - start if not data[start:offset].strip() else 0


def _mentions_precompile(node: Node) -> bool:
    return any(name.text.decode() in PRECOMPILE_VARIABLES for _, name in walk_expansions(node))


def _ancestors(node: Node | None):
    while node is not None:
        yield node
        node = node.parent


def _test_value(condition: str) -> bool | None:
    """Value of `[ ... ]` / `[[ ... ]]` with the pre-compilation variables unset; None if unsure."""
    match = re.fullmatch(r"\s*(\[\[?)\s+(.*?)\s+\]\]?\s*;?\s*", condition)
    if not match:
        return None
    operands = match[2].split()
    values = [_operand(operand) for operand in operands]
    if len(operands) == 2 and operands[0] in ("-n", "-z") and values[1] is not None:
        return (values[1] != "") == (operands[0] == "-n")
    if len(operands) == 3 and operands[1] in ("=", "==", "!=") and None not in (values[0], values[2]):
        return (values[0] == values[2]) == (operands[1] != "!=")
    return None


def _operand(operand: str) -> str | None:
    text = operand.strip('"') if operand.startswith('"') and operand.endswith('"') else operand
    reference = re.fullmatch(r"\$\{?([A-Za-z_][A-Za-z0-9_]*)(?::?-([^}]*))?\}?", text)
    if reference:
        return (reference[2] or "") if reference[1] in PRECOMPILE_VARIABLES else None
    if operand.startswith("'") and operand.endswith("'"):
        return operand[1:-1]
    return None if "$" in text or "`" in text else text


MATCHER = PrecompileMatcher
