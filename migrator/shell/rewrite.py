"""Rewrite shell launchers on tree-sitter's parse tree, by the byte ranges of its nodes.

A command is what bash runs: its words wherever they sit (continued lines, pipelines, `&&`/`||` lists,
`if`/`for`/function bodies, `$(...)`). Env prefixes (`VAR=1 cmd`) and wrappers (`time`, `env`, `nohup`,
`srun`/`mpirun` and their options) are looked through to the launched program. Code inside strings
that bash runs again (`bash -c "..."`, `sbatch --wrap="..."`, `eval "..."`) and heredoc bodies that are
scripts (fed to bash/python, or written to a .sh/.py file) are parsed and rewritten in place; what is
inserted there is escaped for the quoting around it. A heredoc of data is left alone. TODO comments go
above the statement that holds the command, at the top level of the file.

Everything outside the edited ranges stays byte-identical.
"""

from __future__ import annotations

import bisect
import difflib
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path

from migrator.families.environment import MANUAL_VARIABLES, PRECOMPILE_VARIABLES, dropped_reason
from migrator.families.leftovers.nm504_core_count import LEGACY_TARGETS, core_count_why
from migrator.families.training_args import SFT_CONFIG_ARGUMENTS
from migrator.rules import Finding, Rule
from migrator.shell import installs
from migrator.shell import rules as r
from migrator.shell.installs import python_imports
from migrator.shell.scripts import ScriptParser, script_parser
from migrator.shell.syntax import (
    BLOCKS,
    Node,
    Word,
    block_statement,
    parse,
    quoted_body,
    statements,
    walk_expansions,
    word,
)
from migrator.transform import TODO_PREFIX

PythonRewriter = Callable[[str], tuple[str, list[Finding]]]

# `--use_cpu True` (and the older `--no_cuda True`) kept XLA runs off CUDA; on TorchNeuron they select the CPU.
_CPU_FLAGS = frozenset({"use_cpu", "no_cuda"})
BF16_VARIABLES = frozenset({"XLA_USE_BF16", "XLA_DOWNCAST_BF16"})
_LAUNCHERS = {"torchrun", "python", "python3", "accelerate", "deepspeed", "trl"}
_SHELLS = {"bash", "sh", "zsh"}
# Wrappers that run the rest of their words as a command. Those with options of their own are looked
# through up to the first word that names a program we know.
_PLAIN_WRAPPERS = {"nohup", "exec", "command", "builtin"}
_OPTION_WRAPPERS = {"srun", "mpirun", "mpiexec", "timeout", "numactl", "taskset", "stdbuf", "nice", "xargs"}
# pip options that take a value (the value is not a requirement).
_PIP_VALUE_OPTIONS = frozenset(
    {
        "-r",
        "--requirement",
        "-c",
        "--constraint",
        "-i",
        "--index-url",
        "--extra-index-url",
        "-f",
        "--find-links",
    }
    | {"-t", "--target", "--prefix", "--root", "--platform", "--python-version", "--implementation", "--abi"}
    | {"--src", "--upgrade-strategy", "--trusted-host", "--cache-dir", "--log", "-e", "--editable"}
)
ASYNC_LOAD = "HF_DEACTIVATE_ASYNC_LOAD"
_DIRECTIVE = re.compile(rb"^#(?:SBATCH|PBS|BSUB|FLUX|COBALT|\$)[^\n]*\n", re.MULTILINE)
_PRECOMPILE_ASSIGNMENT = re.compile(rb"\b(?:" + "|".join(sorted(PRECOMPILE_VARIABLES)).encode() + rb")=")
_CONTINUATION = re.compile(rb"\\\r?\n")
_TIME_KEYWORD = re.compile(rb"time(?:[ \t]+-p)?[ \t]+")
_SCRIPT_SUFFIXES = (".py", ".sh", ".bash", ".slurm", ".sbatch")


def _escape_for(quote: str | None) -> Callable[[str], str]:
    """How text inserted inside a quoting context must be written so bash reads it back unchanged."""
    if quote == '"':
        return lambda text: re.sub(r'([\\"$`])', r"\\\1", text)
    if quote == "'":
        return lambda text: text.replace("'", "'\\''")
    if quote == "heredoc":  # unquoted delimiter: the body is expanded
        return lambda text: re.sub(r"([\\$`])", r"\\\1", text)
    return lambda text: text


@dataclass
class Context:
    """A piece of the file parsed as a script of its own: the file, a string bash re-runs, a heredoc."""

    start: int  # byte offset of the piece in the file
    end: int
    escape: Callable[[str], str]
    standalone: bool  # a script of its own (the file, a heredoc written to a script): gets its own export
    host: Node | None = None  # the command holding the piece (strings bash re-runs)
    host_context: Context | None = None
    anchor: int | None = None  # where TODOs go, for pieces nested in the file
    launchers: list[tuple[int, int]] = field(default_factory=list)  # byte ranges of its Python launches
    survey: list[tuple[int, list[Word]]] | None = None  # every Python launch in it (see `survey`)


@dataclass
class Launch:
    offset: int
    signature: tuple[str, ...]


@dataclass
class CompileRun:
    """`neuron_parallel_compile [options] <launch>`: removed only when the same launch follows."""

    node: Node
    context: Context
    offset: int
    signature: tuple[str, ...]
    owner: int


@dataclass(frozen=True)
class Edit:
    start: int
    end: int
    text: str
    weak: bool = False  # re-indentation: gives way to any edit it overlaps
    owner: int = 0


class ShellRewriter:
    def __init__(
        self,
        text: str,
        migrate_python: PythonRewriter | None = None,
        inline: bool = False,
        directory: Path | None = None,
        imported: frozenset[str] = frozenset(),
        written: Mapping[str, str] | None = None,
    ) -> None:
        self.inline = inline
        self.written = written  # scripts the notebook writes, by path (their parsers are read there)
        self.directory = directory
        self.imported = imported  # grows with what the file's Python heredocs import once migrated
        self.installs: list[tuple[Context, Node, list[Word], list[Word], int]] = []
        self.bf16_added: set[int] = set()
        self.data = text.encode()
        self.newline = "\r\n" if "\r\n" in text else "\n"
        self.migrate_python = migrate_python
        self.line_starts = [0] + [m.end() for m in re.finditer(b"\n", self.data)]
        self.edits: list[Edit] = []
        self.todos: list[tuple[int, str, int]] = []  # (offset, text, owner)
        self.findings: list[tuple[Finding, int]] = []  # (finding, owner)
        self.launches: list[Launch] = []
        self.compile_runs: list[CompileRun] = []
        self.contexts: list[Context] = []
        self.owner = 0  # >0 while inside a compile run: what it adds goes if the run is removed
        self.command_start = 0  # where the command being rewritten starts (after merged assignments)
        self.sets_precompile = _PRECOMPILE_ASSIGNMENT.search(self.data) is not None

    # -- positions, findings, edits ---------------------------------------------------------------------

    def position(self, offset: int) -> tuple[int, int]:
        line = bisect.bisect_right(self.line_starts, offset)
        start = self.line_starts[line - 1]
        return line, len(self.data[start:offset].decode(errors="replace")) + 1

    def line_start(self, offset: int) -> int:
        return self.line_starts[bisect.bisect_right(self.line_starts, offset) - 1]

    def report(self, offset: int, rule: Rule, message: str | None = None, fixed: bool = True) -> None:
        line, column = self.position(offset)
        self.findings.append((Finding(rule, line, column, message or rule.action, fixed), self.owner))

    def todo(self, ctx: Context, node: Node, rule: Rule, message: str, at: int | None = None) -> None:
        """A manual finding at `at` (default: the node) and a TODO comment above the node's statement."""
        self.report(ctx.start + (node.start_byte if at is None else at), rule, message, fixed=False)
        self.todos.append((self.anchor(ctx, node), f"{TODO_PREFIX} {rule.code} {message}", self.owner))

    def edit(self, ctx: Context, start: int, end: int, text: str = "", weak: bool = False) -> None:
        self.edits.append(Edit(ctx.start + start, ctx.start + end, ctx.escape(text), weak, self.owner))

    def anchor(self, ctx: Context, node: Node) -> int:
        """The line start where a comment about `node` can go: above the statement that holds it."""
        if ctx.anchor is not None:
            return ctx.anchor
        statement = block_statement(node) or node
        while True:
            block = statement.parent
            same_line = [
                s
                for s in (statements(block) if block is not None else [statement])
                if self.line_start(s.start_byte) == self.line_start(statement.start_byte)
            ]
            first = min(same_line, key=lambda s: s.start_byte)
            start = self.line_start(first.start_byte)
            if not self.data[start : first.start_byte].strip() or block is None:
                return start
            statement = block_statement(block) or block  # mid-line (`then cmd`): go one level out

    # -- walking ------------------------------------------------------------------------------------------

    def run(self) -> tuple[str, list[Finding]]:
        top = Context(0, len(self.data), _escape_for(None), standalone=True)
        self.script(top)
        for ctx, node, words, siblings, owner in self.installs:
            self.owner = owner
            self.pip(ctx, node, words, siblings)
        self.owner = 0
        self.resolve_compile_runs()
        for ctx in self.contexts:
            self.async_load(ctx)
        text = self.render()
        findings = sorted((f for f, _ in self.findings), key=lambda f: (f.line, f.column, f.code))
        return text, findings

    def script(self, ctx: Context) -> None:
        self.contexts.append(ctx)
        tree = parse(self.data[ctx.start : ctx.end])
        data = self.data[ctx.start : ctx.end]
        folded = self.walk(ctx, tree.root_node, data)
        self.precompile_uses(ctx, tree.root_node, folded)

    def walk(self, ctx: Context, node: Node, data: bytes) -> list[Node]:
        """Rewrite every command under `node`; returns the `if`s folded (their tests are resolved)."""
        folded: list[Node] = []
        kind = node.type
        if kind == "heredoc_body":  # parsed on its own when it is a script
            return folded
        if kind == "ERROR":  # what tree-sitter could not parse is not rewritten: its words are guesses
            return folded
        kept = self.fold_branch(ctx, node, data) if kind == "if_statement" else None
        if kept is not None:
            folded.append(node)
            for child in kept:
                folded += self.walk(ctx, child, data)
            return folded
        if kind == "command":
            self.command(ctx, node, data)
            return folded
        if kind in ("declaration_command", "unset_command"):
            self.declaration(ctx, node, data)
            return folded
        if kind in ("variable_assignment", "variable_assignments"):
            assignments = node.named_children if kind == "variable_assignments" else [node]
            self.variables(ctx, node, [word(a, data) for a in assignments], data, whole=True)
            return folded
        elif kind == "redirected_statement":
            self.heredocs(ctx, node)
        for child in node.children:
            if child.type != "heredoc_body":
                folded += self.walk(ctx, child, data)
        return folded

    # -- commands -----------------------------------------------------------------------------------------

    def command(self, ctx: Context, node: Node, data: bytes) -> None:
        marks = (len(self.findings), len(self.edits), len(self.todos))
        parts = _command_parts(node, data)
        for part in parts[:-1]:
            self.variables(ctx, part[0], [word(c, data) for c in part], data, whole=True, span=part)
        part = parts[-1]
        self.command_start = part[0].start_byte
        prefix = [word(c, data) for c in part if c.type == "variable_assignment"]
        words = [word(c, data) for c in part if c.type != "variable_assignment" and "redirect" not in c.type]
        removable = [word(c, data) for c in part]
        if not words:
            self.variables(ctx, node, prefix, data, whole=True)
            return
        words, assignments = _look_through(words)
        self.variables(
            ctx, node, [*prefix, *assignments], data, whole=False, siblings=removable, launch=words
        )
        if not words:
            return
        program = words[0].value
        if program == "neuron_parallel_compile":
            self.compile_run(ctx, node, words, data, removable, marks)
            return
        self.launched(ctx, node, words, data, removable)
        if self.owner == 0:
            self.launches.append(Launch(ctx.start + node.start_byte, _signature(words)))

    def launched(
        self, ctx: Context, node: Node, words: list[Word], data: bytes, siblings: list[Word]
    ) -> None:
        program = words[0].value
        if program == "optimum-cli":
            self.optimum_cli(ctx, node, words)
        elif program in ("pip", "pip3") or [w.value for w in words[1:3]] == ["-m", "pip"]:
            # After the walk: a Python heredoc further down may still import what the install would remove.
            self.installs.append((ctx, node, words, siblings, self.owner))
        elif _is_launcher(program):
            self.launcher(ctx, node, words, siblings)
        elif program in _SHELLS or program == "eval" or program == "sbatch":
            self.nested_strings(ctx, node, words)
            return
        for child in node.named_children:  # $(...) in arguments
            if child.type != "command_name":
                self.substitutions(ctx, child, data)

    def substitutions(self, ctx: Context, node: Node, data: bytes) -> None:
        if node.type in ("command_substitution", "process_substitution"):
            self.walk(ctx, node, data)
            return
        for child in node.named_children:
            self.substitutions(ctx, child, data)

    def compile_run(self, ctx: Context, node: Node, words: list[Word], data: bytes, siblings, marks) -> None:
        position = 1
        while position < len(words) and words[position].text.startswith("-"):
            takes_value = "=" not in words[position].text and position + 1 < len(words)
            position += 2 if takes_value and not _is_program(words[position + 1].value) else 1
        inner = words[position:]
        self.owner = len(self.compile_runs) + 1
        # What this command added before its wrapper was seen (env prefixes) belongs to the run too.
        findings, edits, todos = marks
        self.findings[findings:] = [(f, self.owner) for f, _ in self.findings[findings:]]
        self.edits[edits:] = [replace(e, owner=self.owner) for e in self.edits[edits:]]
        self.todos[todos:] = [(o, t, self.owner) for o, t, _ in self.todos[todos:]]
        run = CompileRun(node, ctx, ctx.start + node.start_byte, _signature(inner), self.owner)
        self.compile_runs.append(run)
        if inner:
            self.launched(ctx, node, inner, data, siblings)
        self.owner = 0

    def resolve_compile_runs(self) -> None:
        """A compile run goes when the same launch follows it; otherwise it stays, inert, with a TODO."""
        for run in self.compile_runs:
            follows = any(
                launch.offset > run.offset and launch.signature == run.signature for launch in self.launches
            )
            if follows and run.signature and self.remove_statement(run.context, run.node):
                self.edits = [e for e in self.edits if e.owner != run.owner]
                self.todos = [t for t in self.todos if t[2] != run.owner]
                self.findings = [f for f in self.findings if f[1] != run.owner]
                self.report(run.offset, r.PRECOMPILE_RUN)
            else:
                self.todo(
                    run.context,
                    run.node,
                    r.PARALLEL_COMPILE,
                    "compile-only run (`neuron_parallel_compile`) with no identical launch after it; "
                    "TorchNeuron compiles just in time, in the training run itself: delete this job (dropping "
                    "only the prefix would make it a training run)",
                )

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
                continue
            value = item.text.partition("=")[2]
            held = next((v for v in sorted(BF16_VARIABLES) if f"{v}=" in value), None)
            # `ENV_OPTS="XLA_USE_BF16=1 ..."`, expanded into a command later.
            if held is not None and not unset:
                self.todo(
                    ctx,
                    node,
                    r.PRECISION_MANUAL,
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
                    r.PRECOMPILE_USE,
                    f"`{name}={value}` selects the real run of what runs next (its compile-only branch off); "
                    "TorchNeuron has no compile-only run: remove it once the scripts it reaches no longer read it"
                    if _falsy(value)
                    else f"`{name}` is set here so that what runs next only compiles (as under "
                    "neuron_parallel_compile); TorchNeuron has no compile-only run and dropping the variable would "
                    "make this a second real run: delete this compile step by hand",
                    at=item.start,
                )
                continue
            reason = dropped_reason(name)
            if reason is not None:
                self.report(ctx.start + item.start, r.DROPPED_VARIABLE, f"`{name}` removed: {reason}.")
                dropped.append(item)
            elif name in MANUAL_VARIABLES:
                self.todo(
                    ctx, node, r.MANUAL_VARIABLE, f"`{name}` holds {MANUAL_VARIABLES[name]}", at=item.start
                )
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
        for item in dropped:
            self.remove_word(ctx, item, siblings or words)

    def keep_precision(self, ctx: Context, node: Node, item: Word, launch: list[Word] | None) -> bool:
        """`XLA_USE_BF16=1` made every float32 tensor bf16. It goes only where `--bf16` can take over: on
        each Trainer/TRL launch it reaches (the prefixed command, or every launch after an `export`) whose
        argument parser is known. Otherwise it stays with a TODO: dropping it would train in float32."""
        name = item.assignment
        if launch is not None:
            targets = [launch] if _script_index(launch) is not None else []
        else:
            targets = [words for offset, words in self.survey(ctx) if offset > node.end_byte]
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
                r.PRECISION_MANUAL,
                f"`{name}=1` trained in bf16 under XLA and nothing reads it on TorchNeuron; it reaches {reaches}: "
                "pass --bf16 to a Trainer/TRL script or load the model with dtype=torch.bfloat16, then delete it",
                at=item.start,
            )
            return False
        for words in targets:
            self.add_bf16(ctx, words)
        self.report(
            ctx.start + item.start,
            r.PRECISION_FLAG,
            f"`{name}` removed; `--bf16` added to the Trainer launch{'es' if len(targets) > 1 else ''} it reached "
            "(bf16 autocast keeps float32 master weights, where XLA_USE_BF16 cast the weights themselves).",
        )
        return True

    def parser_of(self, words: list[Word]) -> ScriptParser:
        """The argument parser of a launch (`trl sft` parses into the config of TRL's sft.py)."""
        script = words[_script_index(words)].value
        if words[0].value == "trl":
            return script_parser(f"{script}.py", None)
        return script_parser(script, self.directory, self.written)

    def add_bf16(self, ctx: Context, words: list[Word]) -> None:
        """`--bf16` (or `--bf16 true`, like the launch's other boolean flags) at the end of a launch."""
        if _has_bf16(words):
            return
        arguments = [w.value for w in words[_script_index(words) + 1 :]]
        if ctx.start + words[-1].start in self.bf16_added:
            return
        self.bf16_added.add(ctx.start + words[-1].start)
        spelled = next((v for v in arguments if v.lower() in ("true", "false")), None)
        value = "" if spelled is None else " True" if spelled[0] == "T" else " true"
        self.edit(ctx, words[-1].end, words[-1].end, f" --bf16{value}")

    def survey(self, ctx: Context) -> list[tuple[int, list[Word]]]:
        """Every Python launch of the context (offset of its end, launched words), compile runs excluded."""
        if ctx.survey is None:
            data = self.data[ctx.start : ctx.end]
            ctx.survey = []
            stack = [parse(data).root_node]
            while stack:
                node = stack.pop()
                if node.type == "command":
                    part = _command_parts(node, data)[-1]
                    words = [
                        word(c, data)
                        for c in part
                        if c.type != "variable_assignment" and "redirect" not in c.type
                    ]
                    words, _ = _look_through(words)
                    if words and _is_launcher(words[0].value) and _script_index(words) is not None:
                        ctx.survey.append((node.start_byte, words))
                stack.extend(c for c in node.children if c.type != "heredoc_body")
        return ctx.survey

    def declaration(self, ctx: Context, node: Node, data: bytes) -> None:
        keyword = node.children[0].type if node.children else ""
        if keyword not in ("export", "unset"):
            return
        items = [word(c, data) for c in node.named_children if c.type != "comment"]
        everything = [word(node.children[0], data), *items]
        self.variables(ctx, node, items, data, whole=True, siblings=everything, unset=keyword == "unset")

    def optimum_cli(self, ctx: Context, node: Node, words: list[Word]) -> None:
        arguments = [w.value for w in words[1:3]]
        rule = None
        if arguments == ["export", "neuron"]:
            rule = r.EXPORT_COMMAND
        elif arguments == ["neuron", "consolidate"]:
            rule = r.CONSOLIDATE_COMMAND
        elif arguments == ["neuron", "cache"]:
            rule = r.CACHE_COMMAND
        if rule is not None and self.owner == 0 and self.remove_statement(ctx, node, placeholder=False):
            core_count = _export_core_count(words) if rule is r.EXPORT_COMMAND else None
            self.report(
                ctx.start + words[0].start,
                rule,
                f"{r.EXPORT_REMOVED} {core_count}: {r.EXPORT_TP_SIZE}" if core_count else None,
            )
        elif rule is not None or arguments[:1] == ["neuron"]:
            subcommand = " ".join(arguments)
            self.todo(
                ctx,
                node,
                r.OPTIMUM_CLI_MANUAL,
                f"`optimum-cli {subcommand}` has no TorchNeuron equivalent; "
                + (rule or r.OPTIMUM_CLI_MANUAL).action.split(": ", 1)[-1],
            )

    def pip(self, ctx: Context, node: Node, words: list[Word], siblings: list[Word]) -> None:
        values = [w.value for w in words]
        if "install" not in values:
            return
        requirements: list[tuple[Word, installs.Parsed]] = []
        editable: dict[int, Word] = {}  # `-e URL`: the option word, by the start of its value
        position = values.index("install") + 1
        while position < len(words):
            value = values[position]
            if value in ("-e", "--editable") and position + 1 < len(words):
                parsed = installs.parse(values[position + 1])
                if parsed is not None:
                    requirements.append((words[position + 1], parsed))
                    editable[words[position + 1].start] = words[position]
                position += 2
                continue
            if value in _PIP_VALUE_OPTIONS:  # `-r requirements.txt` is migrated as a file of its own
                position += 2
                continue
            parsed = installs.parse(value) if not value.startswith("-") else None
            if parsed is not None:
                requirements.append((words[position], parsed))
            position += 1
        if not installs.concerns_torchneuron([parsed for _, parsed in requirements]):
            return
        # An XLA-era torch-neuronx pin goes: TorchNeuron is the current torch-neuronx.
        stale = [w for w, p in requirements if installs.stale(p)]
        current = [(w, p) for w, p in requirements if w not in stale]
        plan = installs.plan([p for _, p in current], self.imported)
        for item, parsed in current:
            for rule, reasons in ((r.INSTALL_KEPT, plan.kept), (r.INSTALL_CONFLICT, plan.conflicts)):
                for why in (why for owner, why in reasons if owner is parsed):
                    message = f"`{item.value}` left as it is: {why}"
                    self.todo(ctx, node, rule, message, at=item.start)
        kept = {id(owner) for owner, _ in plan.kept}
        legacy = [w for w, p in current if installs.replaced(p) and id(p) not in kept]
        if not legacy:
            return
        self.report(ctx.start + legacy[0].start, r.PIP_INSTALL)
        first = editable.get(legacy[0].start, legacy[0])  # an editable install goes with its `-e`
        self.edit(ctx, first.start, legacy[0].end, " ".join(_shell_quoted(text) for text in plan.added))
        if not any(installs.NEURON_INDEX in value for value in values):  # where torch-neuronx comes from
            self.edit(ctx, words[-1].end, words[-1].end, f" --extra-index-url {installs.NEURON_INDEX}")
        for item in [*legacy[1:], *stale]:
            self.remove_word(ctx, item, siblings)
            if item.start in editable:
                self.remove_word(ctx, editable[item.start], siblings)

    def launcher(self, ctx: Context, node: Node, words: list[Word], siblings: list[Word]) -> None:
        script = _script_index(words)
        if script is None:
            return
        if self.owner == 0:  # a compile-only run is not a run on TorchNeuron
            ctx.launchers.append((self.command_start, node.end_byte))
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
            offset = ctx.start + item.start
            if (
                name in _CPU_FLAGS
                and name not in parser.own
                and _truthy(given if equals else value.value if value else "1")
            ):
                self.todo(
                    ctx,
                    node,
                    r.CPU_FLAG,
                    f"{flag} made sense under XLA (the XLA device is not CUDA), but on TorchNeuron it makes the "
                    "Trainer run on the CPU instead of the neuron device: remove it",
                    at=item.start,
                )
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
                self.report(offset, r.FLAG_REMOVED, f"{flag} removed: {action.note}.")
                self.remove_word(ctx, item, siblings, through=value)
            elif action.kind == "rename":
                note = f": {action.note}" if action.note else ""
                self.report(offset, r.FLAG_RENAMED, f"{flag} renamed to `--{action.target}`{note}.")
                self.edit(ctx, item.start, item.start + 2 + len(name), f"--{action.target}")
            elif action.kind == "distributed":
                self.todo(
                    ctx,
                    node,
                    r.FLAG_DISTRIBUTED,
                    f"{flag} is kept as a script argument and now feeds DistributedConfig({action.target}=...); "
                    f"{action.note}, and torchrun --nproc_per_node must equal tp_size x fsdp_size",
                    at=item.start,
                )
            else:
                self.todo(ctx, node, r.FLAG_MANUAL, f"{flag} {action.note}", at=item.start)
        if unknown:
            self.unknown_parser(ctx, node, parser, unknown)

    def unknown_parser(
        self, ctx: Context, node: Node, parser: ScriptParser, flags: list[tuple[Word, str]]
    ) -> None:
        """Training flags on a script whose parser is not known: a finding each, one TODO for the launch."""
        how = (
            "builds no TrainingArguments/SFTConfig from its command line"
            if parser.read
            else "is neither in this tree nor a known Transformers/TRL example script"
        )
        changes = []
        for item, name in flags:
            change = _legacy_change(name)
            changes.append(change)
            note = SFT_CONFIG_ARGUMENTS[name].note
            message = f"`--{name}` left as it is: `{parser.script}` {how}; if it reaches TrainingArguments/SFTConfig, {change}"
            self.report(
                ctx.start + item.start,
                r.FLAG_UNKNOWN_SCRIPT,
                message + (f" ({note})" if note else ""),
                fixed=False,
            )
        text = (
            f"{TODO_PREFIX} {r.FLAG_UNKNOWN_SCRIPT.code} `{parser.script}` {how}, so its optimum-neuron training "
            f"flags are left as they are; if they reach TrainingArguments/SFTConfig: {'; '.join(changes)}"
        )
        self.todos.append((self.anchor(ctx, node), text, self.owner))

    # -- code inside strings and heredocs -----------------------------------------------------------------

    def nested_strings(self, ctx: Context, node: Node, words: list[Word]) -> None:
        """`bash -c "..."`, `eval "..."`, `sbatch --wrap="..."`: the string is a script bash runs."""
        program = words[0].value
        targets: list[Node] = []
        for position, item in enumerate(words[1:], start=1):
            if program in _SHELLS and item.text == "-c" and position + 1 < len(words):
                targets.append(words[position + 1].node)
                break
            if program == "eval" and len(words) == 2:
                targets.append(item.node)
            if program == "sbatch" and item.text == "--wrap" and position + 1 < len(words):
                targets.append(words[position + 1].node)
            if program == "sbatch" and item.text.startswith("--wrap=") and item.node.type == "concatenation":
                targets += [c for c in item.node.children if c.type in ("string", "raw_string")][:1]
        for target in targets:
            body = quoted_body(target)
            if body is None:
                continue
            start, end, quote = body
            inner = Context(
                ctx.start + start,
                ctx.start + end,
                _compose(ctx.escape, _escape_for(quote)),
                standalone=False,
                host=node,
                host_context=ctx,
                anchor=self.anchor(ctx, node),
            )
            self.script(inner)
            ctx.launchers += [(node.start_byte, node.end_byte)] if inner.launchers else []

    def heredocs(self, ctx: Context, node: Node) -> None:
        body = node.child_by_field_name("body")
        for redirect in (c for c in node.children if c.type == "heredoc_redirect"):
            content = next((c for c in redirect.children if c.type == "heredoc_body"), None)
            start = next((c for c in redirect.children if c.type == "heredoc_start"), None)
            if content is None or start is None or content.end_byte <= content.start_byte:
                continue
            kind = _heredoc_kind(body, node)
            if kind is None:
                continue  # data, not code
            quoted = any(q in start.text.decode() for q in "'\"\\")
            escape = _compose(ctx.escape, _escape_for(None if quoted else "heredoc"))
            if kind == "shell":
                self.script(
                    Context(
                        ctx.start + content.start_byte,
                        ctx.start + content.end_byte,
                        escape,
                        standalone=True,
                        anchor=self.anchor(ctx, node),
                    )
                )
            elif self.migrate_python is not None:
                self.python_body(ctx, content, escape)

    def python_body(self, ctx: Context, content: Node, escape: Callable[[str], str]) -> None:
        from migrator.verify import MigrationError

        base = ctx.start + content.start_byte
        raw = self.data[base : ctx.start + content.end_byte].decode()
        # What bash writes out: an unquoted body has its \\, \$ and \` escapes undone.
        source, where = _unescape(raw) if escape("`") != "`" else (raw, list(range(len(raw) + 1)))
        try:
            migrated, findings = self.migrate_python(source)
            self.imported = self.imported | python_imports(migrated)
        except MigrationError:
            return  # not Python after all (or shell expansions in it): leave it as it is
        line, _ = self.position(ctx.start + content.start_byte)
        for finding in findings:
            self.findings.append((_shifted(finding, line - 1), self.owner))
        # Only what the Python rewrite inserted is escaped; the user's text is already as bash needs it.
        matcher = difflib.SequenceMatcher(None, source, migrated, autojunk=False)
        for tag, i1, i2, j1, j2 in matcher.get_opcodes():
            if tag != "equal":
                start, end = len(raw[: where[i1]].encode()), len(raw[: where[i2]].encode())
                self.edits.append(Edit(base + start, base + end, escape(migrated[j1:j2]), owner=self.owner))

    # -- pre-compilation branches and uses ----------------------------------------------------------------

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
        line, column = self.position(ctx.start + node.start_byte)
        self.findings.append(
            (Finding(r.PRECOMPILE_BRANCH, line, column, r.PRECOMPILE_BRANCH.action, True), 0)
        )
        if not kept:
            if not self.remove_statement(ctx, node):
                self.edit(ctx, node.start_byte, node.end_byte, ":")
            return kept
        self.edit(ctx, node.start_byte, kept[0].start_byte)
        self.edit(ctx, kept[-1].end_byte, node.end_byte)
        # The kept lines move out one level, to the indentation of the `if` (heredoc and string lines stay).
        extra = self.indent_of(ctx.start + kept[0].start_byte) - self.indent_of(ctx.start + node.start_byte)
        root = node
        while root.parent is not None:
            root = root.parent
        for line_start in self.line_starts:
            position = line_start - ctx.start
            if not kept[0].start_byte < position < kept[-1].end_byte or extra <= 0:
                continue
            inside = root.descendant_for_byte_range(position, position)
            if any(a.type in ("heredoc_body", "string", "raw_string") for a in _ancestors(inside)):
                continue
            blanks = len(data[position:]) - len(data[position:].lstrip(b" \t"))
            self.edit(ctx, position, position + min(extra, blanks), weak=True)
        return kept

    def indent_of(self, offset: int) -> int:
        start = self.line_start(offset)
        return offset - start if not self.data[start:offset].strip() else 0

    def precompile_uses(self, ctx: Context, root: Node, folded: list[Node]) -> None:
        flagged: set[int] = set()
        for expansion, name in walk_expansions(root):
            if name.text.decode() not in PRECOMPILE_VARIABLES:
                continue
            if any(f.start_byte <= expansion.start_byte < f.end_byte for f in folded):
                continue
            statement = block_statement(expansion) or expansion
            if statement.start_byte in flagged:
                continue
            flagged.add(statement.start_byte)
            self.todo(
                ctx,
                statement,
                r.PRECOMPILE_USE,
                f"`{name.text.decode()}` is only set by neuron_parallel_compile, which TorchNeuron does not "
                "have; keep only the commands of the real run",
            )

    # -- removal ------------------------------------------------------------------------------------------

    def remove_word(self, ctx: Context, item: Word, words: list[Word], through: Word | None = None) -> None:
        """Remove a word (through its value) with the blanks and continuation before it."""
        last = through or item
        index = next(i for i, w in enumerate(words) if w.start == item.start)
        if index > 0:
            self.edit(ctx, words[index - 1].end, last.end)
            return
        following = next((w for w in words if w.start >= last.end), None)
        self.edit(ctx, item.start, following.start if following else last.end)

    def remove_statement(self, ctx: Context, node: Node, placeholder: bool = True) -> bool:
        """Remove the statement `node` is, with its line when it has one of its own; False if it cannot go.

        The only statement of a block becomes `:` (a block cannot be empty), unless `placeholder` is False.
        """
        data = self.data[ctx.start : ctx.end]
        if node.parent is not None and node.parent.type == "redirected_statement":
            node = node.parent  # `cmd > log 2>&1` goes with its redirections
        parent = node.parent
        if parent is not None and parent.type == "list":  # `A && B`: drop one side with its operator
            sides = [c for c in parent.named_children if c.type != "comment"]
            if len(sides) == 2 and parent.parent is not None and parent.parent.type in BLOCKS:
                if node == sides[0]:
                    self.edit(ctx, node.start_byte, sides[1].start_byte)
                else:
                    self.edit(ctx, sides[0].end_byte, node.end_byte)
                return True
            return False
        if parent is None or parent.type not in BLOCKS or node not in statements(parent):
            return False
        siblings = statements(parent)
        if len(siblings) == 1 and parent.type != "program":
            if placeholder:
                self.edit(ctx, node.start_byte, node.end_byte, ":")
            return placeholder
        if len(siblings) == 1 and ctx.host is not None:  # the whole string bash re-runs: drop its command
            return self.remove_statement(ctx.host_context, ctx.host)
        if self.remove_lines(ctx, node.start_byte, node.end_byte, data):
            return True
        index = siblings.index(node)
        if index + 1 < len(siblings):
            self.edit(ctx, node.start_byte, siblings[index + 1].start_byte)
        else:
            self.edit(ctx, siblings[index - 1].end_byte, node.end_byte)
        return True

    def remove_lines(self, ctx: Context, start: int, end: int, data: bytes) -> bool:
        """Remove [start, end) with its whole lines when nothing else is on them (a trailing comment goes)."""
        line_start = self.line_start(ctx.start + start) - ctx.start
        if line_start < 0 or data[line_start:start].strip():
            return False
        rest = re.match(rb"[ \t]*;?[ \t]*(#[^\n]*)?(\r?\n|$)", data[end:])
        if rest is None:
            return False
        self.edit(ctx, line_start, end + rest.end())
        return True

    # -- additions and output -----------------------------------------------------------------------------

    def async_load(self, ctx: Context) -> None:
        """A script that launches Python gets `export HF_DEACTIVATE_ASYNC_LOAD=1` near the top."""
        data = self.data[ctx.start : ctx.end]
        launchers = list(dict.fromkeys(ctx.launchers))
        if not ctx.standalone or not launchers or not self.findings:
            return
        if self.inline or b"\n" not in _CONTINUATION.sub(b"", data).strip():
            # Commands that each run in a shell of their own (notebook lines), or a one-command script.
            message = (
                f"Added `{ASYNC_LOAD}=1` before the command: asynchronous weight loading is not supported."
            )
            for start, end in launchers:
                if ASYNC_LOAD.encode() not in data[start:end]:
                    # After the `time` keyword: an assignment before it makes `time` /usr/bin/time, which
                    # then tries to run the command's own `VAR=1` words as a program.
                    keyword = _TIME_KEYWORD.match(data, start, end)
                    at = keyword.end() if keyword else start
                    self.report(ctx.start + start, r.ASYNC_LOAD_EXPORT, message)
                    self.edit(ctx, at, at, f"{ASYNC_LOAD}=1 ")
            return
        if ASYNC_LOAD.encode() in data:
            return
        top = statements(parse(data).root_node)
        self.report(ctx.start + launchers[0][0], r.ASYNC_LOAD_EXPORT)
        # Right after the shebang and any scheduler directives (#SBATCH...: they must precede every
        # command), before anything that could start Python.
        offset = data.index(b"\n") + 1 if data.startswith(b"#!") and b"\n" in data else 0
        first = top[0].start_byte if top else len(data)
        for directive in _DIRECTIVE.finditer(data, offset, first):
            offset = directive.end()
        self.edit(ctx, offset, offset, f"export {ASYNC_LOAD}=1{self.newline}")

    def render(self) -> str:
        out: list[str] = []
        todos: dict[int, list[str]] = {}
        for offset, text, _ in self.todos:
            if text not in todos.setdefault(offset, []):
                todos[offset].append(text)
        inserts = [Edit(offset, offset, self.todo_lines(offset, texts)) for offset, texts in todos.items()]
        replacements = sorted((e for e in self.edits if e.start != e.end), key=lambda e: (e.start, -e.end))
        strong: list[Edit] = []
        for item in replacements:
            if item.weak and any(
                s.start < item.end and item.start < s.end for s in replacements if not s.weak
            ):
                continue
            if strong and item.start < strong[-1].end:
                if item.end <= strong[-1].end:
                    continue  # inside a range that is removed or replaced whole
                raise ValueError(f"overlapping shell edits at byte {item.start}")
            strong.append(item)
        # At one offset: whole lines (the export) first, then the TODO lines right above their command,
        # then a prefix of the command itself.
        added = [e for e in self.edits if e.start == e.end and e.text]
        lines = [e for e in added if e.text.endswith("\n")]
        insertions = [*lines, *inserts, *(e for e in added if not e.text.endswith("\n"))]
        insertions = [e for e in insertions if not any(s.start < e.start < s.end for s in strong)]
        position = 0
        events = sorted(
            [(e.start, 0, n, e) for n, e in enumerate(insertions)]
            + [(e.start, 1, n, e) for n, e in enumerate(strong)]
        )
        data = self.data
        for start, _, _, item in events:
            out.append(data[position:start].decode())
            out.append(item.text)
            position = item.end
        out.append(data[position:].decode())
        return "".join(out)

    def todo_lines(self, offset: int, texts: list[str]) -> str:
        """TODO comment lines for `offset`, without the ones already right above it (a rerun adds none)."""
        line = bisect.bisect_right(self.line_starts, offset)
        above = set()
        for number in range(line - 2, -1, -1):
            text = self.data[self.line_starts[number] : self.line_starts[number + 1]].decode().strip()
            if not text.startswith("#"):
                break
            above.add(text)
        end = self.data.find(b"\n", offset)
        current = self.data[offset : end if end >= 0 else len(self.data)].decode()
        indent = current[: len(current) - len(current.lstrip(" \t"))]
        return "".join(f"{indent}{text}{self.newline}" for text in texts if text not in above)


def _unescape(raw: str) -> tuple[str, list[int]]:
    """An unquoted heredoc body as bash expands its escapes, and where each character came from in `raw`."""
    text, where, position = [], [], 0
    while position < len(raw):
        escaped = raw[position] == "\\" and raw[position + 1 : position + 2] in ("\\", "$", "`")
        where.append(position)
        text.append(raw[position + 1] if escaped else raw[position])
        position += 2 if escaped else 1
    return "".join(text), [*where, len(raw)]


def _compose(outer: Callable[[str], str], inner: Callable[[str], str]) -> Callable[[str], str]:
    return lambda text: outer(inner(text))


def _shifted(finding: Finding, lines: int) -> Finding:
    return Finding(finding.rule, finding.line + lines, finding.column, finding.message, finding.fixed)


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


def _is_launcher(program: str) -> bool:
    return program in _LAUNCHERS or program.endswith(("/python", "/python3", "/torchrun"))


def _script_index(words: list[Word]) -> int | None:
    """Where the launched script is: its `.py` word, or the subcommand of the TRL command line (`trl sft`)."""
    if not words:
        return None
    if words[0].value == "trl":
        return 1 if len(words) > 1 and not words[1].value.startswith("-") else None
    return next((i for i, w in enumerate(words) if w.value.endswith(".py")), None)


def _has_bf16(words: list[Word]) -> bool:
    return any(
        w.value == "--bf16" or w.value.startswith("--bf16=") for w in words[_script_index(words) + 1 :]
    )


def _truthy(value: str) -> bool:
    return value.strip("\"'").lower() in ("1", "true", "yes", "on")


def _falsy(value: str) -> bool:
    return value.strip("\"'").lower() in ("0", "false", "no", "off")


def _command_parts(node: Node, data: bytes) -> list[list[Node]]:
    """The children of a command node, split where tree-sitter-bash merged `A=1 B=2<newline>cmd` into one."""
    children = [c for c in node.named_children if c.type != "comment"]
    parts: list[list[Node]] = [[]]
    for previous, child in zip([None, *children], children, strict=False):
        if previous is not None and b"\n" in _CONTINUATION.sub(
            b"", data[previous.end_byte : child.start_byte]
        ):
            parts.append([])
        parts[-1].append(child)
    return parts


def _look_through(words: list[Word]) -> tuple[list[Word], list[Word]]:
    """The words from the program that wrappers (`time`, `env A=1`, `srun ...`) launch, and the variables
    that `env` sets for it."""
    start, assignments = 0, []
    while True:
        name = words[start].value if start < len(words) else ""
        if name in ("time", "env"):
            start += 1
            while start < len(words) and words[start].text.startswith("-"):
                start += 2 if words[start].text == "-u" else 1
            while start < len(words) and words[start].assignment:
                assignments.append(words[start])
                start += 1
        elif name in _PLAIN_WRAPPERS:
            start += 1
        elif name in _OPTION_WRAPPERS:
            program = next((i for i in range(start + 1, len(words)) if _is_program(words[i].value)), None)
            if program is None:
                break
            start = program
        else:
            break
    return words[start:], assignments


def _is_program(value: str) -> bool:
    return (
        value in _LAUNCHERS
        or value in _SHELLS
        or value in ("neuron_parallel_compile", "optimum-cli", "pip", "pip3")
        or value.endswith(("/python", "/python3", "/torchrun"))
        or (value.endswith(_SCRIPT_SUFFIXES) and not value.startswith("-"))
    )


def _signature(words: list[Word]) -> tuple[str, ...]:
    """What a launch runs: its words up to the script (later flags may differ between the two runs)."""
    values = [w.value for w in words]
    script = next((i for i, v in enumerate(values) if v.endswith(_SCRIPT_SUFFIXES)), None)
    return tuple(values[: script + 1] if script is not None else values)


def _mentions_precompile(node: Node) -> bool:
    return any(name.text.decode() in PRECOMPILE_VARIABLES for _, name in walk_expansions(node))


def _heredoc_kind(command: Node | None, statement: Node) -> str | None:
    """`"shell"` or `"python"` when the heredoc body is a script, None when it is data."""
    if command is None or command.type != "command":
        return None
    name = command.child_by_field_name("name")
    program = name.text.decode().rsplit("/", 1)[-1] if name is not None else ""
    arguments = [c.text.decode().strip("'\"") for c in command.children_by_field_name("argument")]
    if program in ("cat", "tee"):
        targets = [
            c.child_by_field_name("destination")
            for c in _descendants(statement)
            if c.type == "file_redirect" and c.child_by_field_name("destination") is not None
        ]
        names = [t.text.decode().strip("'\"") for t in targets] + (arguments if program == "tee" else [])
        for target in names:
            if target.endswith(".py"):
                return "python"
            if target.endswith((".sh", ".bash", ".slurm", ".sbatch")):
                return "shell"
        return None
    if program in _SHELLS or program in ("sbatch", "srun"):
        return "shell" if not any(a.endswith(_SCRIPT_SUFFIXES) for a in arguments) else None
    if program.startswith("python") and not any(a.endswith(".py") for a in arguments):
        return "python"
    return None


def _ancestors(node: Node | None):
    while node is not None:
        yield node
        node = node.parent


def _descendants(node: Node):
    stack = list(node.children)
    while stack:
        current = stack.pop()
        yield current
        stack.extend(current.children)


def _shell_quoted(requirement: str) -> str:
    """A requirement as a shell word: quoted when it holds characters the shell would read."""
    return f'"{requirement}"' if re.search(r"[<>;=!\[\] ()*~'$]", requirement) else requirement


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


def rewrite_shell(
    text: str,
    migrate_python: PythonRewriter | None = None,
    inline: bool = False,
    directory: Path | None = None,
    imported: frozenset[str] = frozenset(),
    written: Mapping[str, str] | None = None,
) -> tuple[str, list[Finding]]:
    """Migrate a shell script; `migrate_python` rewrites Python heredoc bodies (left alone without it).

    `inline`: the text is one command line of a notebook, run in a shell of its own; a variable it needs
    is set as a prefix of the command, not exported on a line of its own. `directory`: where the file is, to
    read the scripts it launches (None: scripts are known by name only). `imported`: modules the file (the
    notebook) still imports after its migration; the packages that provide them are not uninstalled.
    `written`: the scripts a notebook writes (`%%writefile`), by path, read for their argument parsers.
    """
    return ShellRewriter(text, migrate_python, inline, directory, imported, written).run()


def _export_core_count(words: list[Word]) -> str | None:
    """What the core count of an `optimum-cli export neuron` command counted (NM504's words), if it has one."""
    options: dict[str, str] = {}
    for index, item in enumerate(words):
        name, equals, given = item.value.partition("=")
        if name.startswith("--"):
            value = given if equals else words[index + 1].value if index + 1 < len(words) else ""
            options.setdefault(name[2:], value)
    target = options.get("instance_type")
    if target is not None and target not in LEGACY_TARGETS:
        return None  # compiled for trn2 / trn3: the count is one of their NeuronCores
    for name in ("num_cores", "tensor_parallel_size"):
        written = options.get(name)
        if written and not written.startswith("-"):
            return core_count_why(f"--{name}", int(written) if written.isdigit() else None, written, target)
    return None
