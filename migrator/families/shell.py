"""Shell launchers (NM450-NM499): line-based, since shell is not Python (migration map §1.8, §3.3, §3.4).

`rewrite_shell(text) -> (new_text, findings)`; lines are numbered from 1 in `text`. A command continued
with backslashes is one logical command. Edits are made on the words of a command (found by a small
tokenizer that knows quotes, `$(...)` and continuations); everything else stays byte-identical.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from migrator.families.environment import MANUAL_VARIABLES, PRECOMPILE_VARIABLES, dropped_reason
from migrator.families.training_args import SFT_CONFIG_ARGUMENTS
from migrator.rules import Finding, Rule, Severity, define
from migrator.transform import TODO_PREFIX

PARALLEL_COMPILE = define(
    "NM450",
    Severity.INFO,
    "`neuron_parallel_compile` prefix on a launcher line",
    "Removed: TorchNeuron compiles just in time and caches graphs; there is no separate pre-compilation run.",
)
PRECOMPILE_RUN = define(
    "NM451",
    Severity.INFO,
    "`neuron_parallel_compile <launcher>` followed by the same launcher (compile run, then training run)",
    "The pre-compilation run is removed; the training run is kept once.",
)
EXPORT_COMMAND = define(
    "NM452",
    Severity.WARNING,
    "`optimum-cli export neuron ...` ahead-of-time export",
    "Removed: TorchNeuron loads the original checkpoint. Carry --sequence_length into max_cache_len (LLMs) or a "
    "fixed padding length, --batch_size into a fixed batch size, --num_cores/--tensor_parallel_size into "
    "DistributedConfig(tp_size=...) with torchrun, --auto_cast_type into dtype, and load the model id instead "
    "of the export directory.",
)
CONSOLIDATE_COMMAND = define(
    "NM453",
    Severity.INFO,
    "`optimum-cli neuron consolidate ...` merges sharded training checkpoints",
    "Removed: `save_pretrained` writes standard, unsharded checkpoints on TorchNeuron (keep the command only "
    "to convert checkpoints made with optimum-neuron).",
)
CACHE_COMMAND = define(
    "NM454",
    Severity.WARNING,
    "`optimum-cli neuron cache ...` (Neuron compile cache on the Hub)",
    "Removed: TorchNeuron has no Hub compile cache; it caches compiled graphs locally (see the TorchNeuron "
    "environment variable reference for the cache directory).",
)
OPTIMUM_CLI_MANUAL = define(
    "NM455",
    Severity.ERROR,
    "Another `optimum-cli neuron ...` command (`serve`, ...)",
    "Left in place with a TODO: serve with vLLM on Neuron (`vllm serve`) or run the model with Transformers "
    'on device "neuron".',
)
DROPPED_VARIABLE = define(
    "NM456",
    Severity.INFO,
    "An XLA/NxD-only environment variable in a launcher (`export XLA_USE_BF16=1`, `NEURON_FUSE_SOFTMAX=1 cmd`)",
    "Removed: nothing reads it on TorchNeuron.",
)
MANUAL_VARIABLE = define(
    "NM457",
    Severity.WARNING,
    "`NEURON_CC_FLAGS` / `NEURON_COMPILE_CACHE_URL` in a launcher",
    "Left in place with a TODO: these configured the XLA-flow compiler and cache; check the TorchNeuron "
    "environment variable reference and remove or replace them.",
)
PRECOMPILE_BRANCH = define(
    "NM458",
    Severity.INFO,
    '`if [ "$NEURON_EXTRACT_GRAPHS_ONLY" = "1" ]; then ...; else ...; fi`',
    "Folded with the variable unset (only neuron_parallel_compile set it): the branch that runs is kept.",
)
PRECOMPILE_USE = define(
    "NM459",
    Severity.WARNING,
    "A use of `NEURON_EXTRACT_GRAPHS_ONLY` / `NEURON_PARALLEL_COMPILE` the codemod cannot fold",
    "Left in place with a TODO: the variable is never set on TorchNeuron; keep only the code for the real run.",
)
PIP_INSTALL = define(
    "NM460",
    Severity.WARNING,
    "`pip install` of optimum-neuron / torch-xla / neuronx-distributed",
    "Replaced with the TorchNeuron package set: torch-neuronx (from the Neuron pip repository, --extra-index-url "
    'https://pip.repos.neuron.amazonaws.com) "transformers>=5.23" "trl>=1.16" peft accelerate. Uninstall '
    "torch-xla from existing environments: Transformers still takes the XLA path when it is importable.",
)
FLAG_REMOVED = define(
    "NM461",
    Severity.INFO,
    "A training flag Transformers 5 / TRL 1.16 rejects (`--overwrite_output_dir`, `--zero_1`, `--async_save`...)",
    "Removed from the launcher line (HfArgumentParser raises on unknown flags).",
)
FLAG_RENAMED = define(
    "NM462",
    Severity.INFO,
    "A training flag renamed in Transformers 5 / TRL 1.16 (`--warmup_ratio`, `--max_seq_length`...)",
    "Renamed on the launcher line (`--warmup_ratio r` -> `--warmup_steps r`...).",
)
FLAG_DISTRIBUTED = define(
    "NM463",
    Severity.WARNING,
    "`--tensor_parallel_size` on a launcher line",
    "Kept as a script argument with a TODO: it now feeds `DistributedConfig(tp_size=...)` when the script "
    "loads the model; torchrun --nproc_per_node must equal tp_size x fsdp_size.",
)
FLAG_MANUAL = define(
    "NM464",
    Severity.ERROR,
    "A training flag with no faithful rewrite (`--logging_dir`, `--pipeline_parallel_size`...)",
    "Left in place with a TODO that says what to do instead.",
)
ASYNC_LOAD_EXPORT = define(
    "NM465",
    Severity.INFO,
    "A launcher runs a Python script but does not set `HF_DEACTIVATE_ASYNC_LOAD`",
    "Added `export HF_DEACTIVATE_ASYNC_LOAD=1` near the top: asynchronous weight loading is not supported on "
    "TorchNeuron.",
)

_CONTINUATION = re.compile(r"\\\r?\n")
_ASSIGNMENT = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)=")
_OPERATORS = ("&&", "||", ";;", ";", "|", "&")
_LAUNCHERS = {"torchrun", "python", "python3", "accelerate", "deepspeed"}
_LEGACY_PACKAGES = {
    "optimum-neuron",
    "torch-xla",
    "neuronx-distributed",
    "neuronx-distributed-training",
    "libneuronxla",
    "transformers-neuronx",
}
TORCHNEURON_PACKAGES = ("torch-neuronx", '"transformers>=5.23"', '"trl>=1.16"', "peft", "accelerate")
_PRECOMPILE_REFERENCE = re.compile(r"\$\{?(" + "|".join(sorted(PRECOMPILE_VARIABLES)) + r")\b")


@dataclass
class Word:
    start: int
    end: int
    text: str

    @property
    def unquoted(self) -> str:
        return re.sub(r"""["']""", "", self.text)


@dataclass
class Command:
    """A logical command: physical lines joined (continuations included), with its first line number."""

    line: int  # 1-based line of its first physical line
    raw: str
    edits: list[tuple[int, int, str]] = field(default_factory=list)
    todos: list[str] = field(default_factory=list)
    removed: bool = False
    precompile: bool = False  # had a neuron_parallel_compile prefix
    prefix: str = ""  # lines inserted before the command

    def words(self) -> list[Word]:
        return tokenize(self.raw)

    def position(self, offset: int) -> tuple[int, int]:
        before = self.raw[:offset]
        return self.line + before.count("\n"), offset - (before.rfind("\n") + 1) + 1

    def remove_word(self, word: Word, through: Word | None = None) -> None:
        """Remove `word` (to `through`) and the blanks/continuations before it."""
        start = word.start
        while start > 0 and self.raw[start - 1] in " \t\n\r\\":
            start -= 1
        if start == 0:  # first word: take the blanks after it instead
            end = (through or word).end
            while end < len(self.raw) and self.raw[end] in " \t":
                end += 1
            self.edits.append((word.start, end, ""))
            return
        self.edits.append((start, (through or word).end, ""))

    def rendered(self) -> str:
        text = self.raw
        for start, end, replacement in sorted(self.edits, reverse=True):
            text = text[:start] + replacement + text[end:]
        return text


def tokenize(raw: str) -> list[Word]:
    """Shell words (and operators) with their spans; stops at a comment or the end of the command."""
    words = []
    i, n = 0, len(raw)
    while i < n:
        continuation = _CONTINUATION.match(raw, i)
        if continuation:
            i = continuation.end()
            continue
        char = raw[i]
        if char in " \t\r\n":
            i += 1
            continue
        if char == "#":
            break
        operator = next((op for op in _OPERATORS if raw.startswith(op, i)), None)
        if operator or char in "<>()":
            token = operator or char
            words.append(Word(i, i + len(token), token))
            i += len(token)
            continue
        start, depth, quote = i, 0, None
        while i < n:
            char = raw[i]
            if quote:
                if char == "\\" and quote == '"':
                    i += 1
                elif char == quote:
                    quote = None
            elif char in "'\"":
                quote = char
            elif char == "\\":
                i += 1
            elif raw.startswith("$(", i):
                depth += 1
                i += 1
            elif char == ")" and depth:
                depth -= 1
            elif depth == 0 and (char in " \t\r\n;|&<>()"):
                break
            i += 1
        words.append(Word(start, min(i, n), raw[start:i]))
    return words


def _segments(words: list[Word]) -> list[list[Word]]:
    segments, current = [], []
    for word in words:
        if word.text in _OPERATORS:
            segments.append(current)
            current = []
        else:
            current.append(word)
    segments.append(current)
    return [segment for segment in segments if segment]


def _logical_commands(lines: list[str]) -> list[Command]:
    commands, current, first = [], [], 1
    for number, line in enumerate(lines, start=1):
        if not current:
            first = number
        current.append(line)
        body = line.rstrip("\r\n")
        if body.endswith("\\") and not body.lstrip().startswith("#") and number < len(lines):
            continue
        commands.append(Command(first, "".join(current)))
        current = []
    return commands


class ShellRewriter:
    def __init__(self, text: str) -> None:
        self.text = text
        self.newline = "\r\n" if "\r\n" in text else "\n"
        self.commands = _logical_commands(text.splitlines(keepends=True))
        self.findings: list[Finding] = []
        self.launchers: list[Command] = []

    def report(self, command: Command, offset: int, rule: Rule, message: str | None = None, fixed=True):
        line, column = command.position(offset)
        self.findings.append(Finding(rule, line, column, message or rule.action, fixed))

    def todo(self, command: Command, offset: int, rule: Rule, message: str) -> None:
        self.report(command, offset, rule, message, fixed=False)
        command.todos.append(f"{TODO_PREFIX} {rule.code} {message}")

    def run(self) -> tuple[str, list[Finding]]:
        index = 0
        while index < len(self.commands):
            command = self.commands[index]
            words = command.words()
            if words and words[0].text == "if" and _PRECOMPILE_REFERENCE.search(command.raw):
                index = self._precompile_branch(index)
                continue
            for segment in _segments(words):
                self._segment(command, segment, len(_segments(words)) == 1)
            if not command.removed and _PRECOMPILE_REFERENCE.search(command.raw.split("#")[0]):
                variable = _PRECOMPILE_REFERENCE.search(command.raw)[1]
                self.todo(
                    command,
                    0,
                    PRECOMPILE_USE,
                    f"`{variable}` is only set by neuron_parallel_compile, "
                    "which TorchNeuron does not have; keep only the commands of the real run",
                )
            index += 1
        self._drop_precompile_runs()
        self._async_load()
        return self._render(), sorted(self.findings, key=lambda f: (f.line, f.column, f.code))

    # -- one simple command ------------------------------------------------------------------------

    def _segment(self, command: Command, words: list[Word], alone: bool) -> None:
        position = 0
        if words[0].text in ("export", "unset"):
            self._variables(command, words[1:], alone, unset=words[0].text == "unset")
            return
        while position < len(words) and _ASSIGNMENT.match(words[position].text):
            position += 1
        if position == len(words):  # assignments only
            self._variables(command, words, alone)
            return
        self._variables(command, words[:position], alone=False)
        words = words[position:]
        program = words[0].unquoted
        if program == "neuron_parallel_compile":
            self.report(command, words[0].start, PARALLEL_COMPILE)
            command.remove_word(words[0])
            command.precompile = True
            words = words[1:]
            if not words:
                return
            program = words[0].unquoted
        if program == "optimum-cli":
            self._optimum_cli(command, words, alone)
        elif program in ("pip", "pip3") or words[1:3] and [w.text for w in words[:3]][1:] == ["-m", "pip"]:
            self._pip(command, words)
        elif program in _LAUNCHERS or program.endswith("/python") or program.endswith("/torchrun"):
            self._launcher(command, words)

    def _variables(self, command: Command, words: list[Word], alone: bool, unset: bool = False) -> None:
        dropped = []
        for word in words:
            match = _ASSIGNMENT.match(word.text)
            name = match[1] if match else (word.text if unset else None)
            if name is None:
                continue
            reason = dropped_reason(name)
            if reason is not None:
                self.report(command, word.start, DROPPED_VARIABLE, f"`{name}` removed: {reason}.")
                dropped.append(word)
            elif name in MANUAL_VARIABLES:
                self.todo(command, word.start, MANUAL_VARIABLE, f"`{name}` holds {MANUAL_VARIABLES[name]}")
        if not dropped:
            return
        if alone and len(dropped) == len(words):
            command.removed = True
            return
        for word in dropped:
            command.remove_word(word)

    def _optimum_cli(self, command: Command, words: list[Word], alone: bool) -> None:
        arguments = [word.unquoted for word in words[1:3]]
        rule = None
        if arguments[:2] == ["export", "neuron"]:
            rule = EXPORT_COMMAND
        elif arguments[:1] == ["neuron"] and arguments[1:2] == ["consolidate"]:
            rule = CONSOLIDATE_COMMAND
        elif arguments[:1] == ["neuron"] and arguments[1:2] == ["cache"]:
            rule = CACHE_COMMAND
        if rule is not None and alone:
            self.report(command, words[0].start, rule)
            command.removed = True
        elif rule is not None or arguments[:1] == ["neuron"]:
            subcommand = " ".join(arguments)
            self.todo(
                command,
                words[0].start,
                OPTIMUM_CLI_MANUAL,
                f"`optimum-cli {subcommand}` has no "
                "TorchNeuron equivalent; " + (rule or OPTIMUM_CLI_MANUAL).action.split(": ", 1)[-1],
            )

    def _pip(self, command: Command, words: list[Word]) -> None:
        if "install" not in [word.text for word in words]:
            return
        legacy = [word for word in words if _package_name(word.unquoted) in _LEGACY_PACKAGES]
        if not legacy:
            return
        present = {_package_name(word.unquoted) for word in words}
        pinned = [
            word
            for word in words
            if _package_name(word.unquoted) == "torch-neuronx" and word.unquoted != "torch-neuronx"
        ]
        added = [
            package
            for package in TORCHNEURON_PACKAGES
            if _package_name(package.strip('"')) not in present or package == "torch-neuronx" and pinned
        ]
        self.report(command, legacy[0].start, PIP_INSTALL)
        command.edits.append((legacy[0].start, legacy[0].end, " ".join(added)))
        for word in [*legacy[1:], *pinned]:
            command.remove_word(word)

    def _launcher(self, command: Command, words: list[Word]) -> None:
        script = next((i for i, word in enumerate(words) if word.unquoted.endswith(".py")), None)
        if script is None:
            return
        self.launchers.append(command)
        arguments = words[script + 1 :]
        for position, word in enumerate(arguments):
            if not word.text.startswith("--"):
                continue
            name, equals, _ = word.text[2:].partition("=")
            action = SFT_CONFIG_ARGUMENTS.get(name)
            if action is None or action.kind == "keep":
                continue
            value = None
            following = arguments[position + 1] if position + 1 < len(arguments) else None
            if not equals and following is not None and not following.text.startswith("--"):
                value = following
            flag = f"`--{name}`"
            if action.kind == "drop" or (action.kind == "distributed" and action.target != "tp_size"):
                self.report(command, word.start, FLAG_REMOVED, f"{flag} removed: {action.note}.")
                command.remove_word(word, value)
            elif action.kind == "rename":
                self.report(
                    command,
                    word.start,
                    FLAG_RENAMED,
                    f"{flag} renamed to `--{action.target}`: {action.note}.",
                )
                command.edits.append((word.start, word.start + 2 + len(name), f"--{action.target}"))
            elif action.kind == "distributed":
                self.todo(
                    command,
                    word.start,
                    FLAG_DISTRIBUTED,
                    f"{flag} is kept as a script argument and now "
                    f"feeds DistributedConfig({action.target}=...); {action.note}, and torchrun "
                    "--nproc_per_node must equal tp_size x fsdp_size",
                )
            else:
                self.todo(command, word.start, FLAG_MANUAL, f"{flag} {action.note}")

    # -- blocks --------------------------------------------------------------------------------------

    def _precompile_branch(self, index: int) -> int:
        """Fold `if [ "$NEURON_EXTRACT_GRAPHS_ONLY" = "1" ]; then A; else B; fi`; returns the next index."""
        command = self.commands[index]
        first = command.raw
        indent = first[: len(first) - len(first.lstrip())]
        one_line = re.match(
            r"^\s*if (.+?);\s*then\s+(.*?);?\s*(?:else\s+(.*?);?\s*)?fi[ \t]*(\r?\n)?$", first
        )
        if one_line:
            value = _test_value(one_line[1])
            if value is not None:
                chosen = one_line[2] if value else one_line[3]
                self.report(command, len(indent), PRECOMPILE_BRANCH)
                command.removed = chosen is None
                command.edits.append(
                    (0, len(first), f"{indent}{chosen}{one_line[4] or ''}" if chosen else "")
                )
                return index + 1
        block = self._block(index)
        if block is not None:
            condition, then_body, else_body, end = block
            value = _test_value(condition)
            if value is not None:
                self.report(command, len(indent), PRECOMPILE_BRANCH)
                for position in range(index, end + 1):
                    self.commands[position].removed = True
                kept = then_body if value else else_body
                for position in kept:
                    kept_command = self.commands[position]
                    kept_command.removed = False
                    kept_command.edits.append((0, len(kept_command.raw), _dedent(kept_command.raw, indent)))
                return end + 1
        self.todo(
            command,
            len(indent),
            PRECOMPILE_USE,
            "this branch tests a variable only "
            "neuron_parallel_compile sets, which TorchNeuron does not have; keep only the real-run branch",
        )
        return index + 1

    def _block(self, index: int):
        """(condition, then commands, else commands, index of `fi`) of a simple multi-line if, else None."""
        head = re.match(r"^\s*if (.+?)(?:;\s*then)?\s*$", self.commands[index].raw.rstrip("\r\n"))
        if not head:
            return None
        position, depth, part = index + 1, 0, "then"
        bodies = {"then": [], "else": []}
        needs_then = not re.search(r";\s*then\s*$", self.commands[index].raw.rstrip("\r\n"))
        while position < len(self.commands):
            words = [word.text for word in self.commands[position].words()]
            keyword = words[0] if words else None
            if needs_then and keyword == "then" and len(words) == 1:
                needs_then = False
            elif depth == 0 and keyword == "fi" and len(words) == 1:
                return head[1], bodies["then"], bodies["else"], position
            elif depth == 0 and keyword in ("elif",) or needs_then:
                return None
            elif depth == 0 and keyword == "else" and len(words) == 1:
                part = "else"
            else:
                depth += (keyword in ("if", "case", "for", "while", "until")) - (
                    keyword in ("fi", "esac", "done")
                )
                bodies[part].append(position)
            position += 1
        return None

    def _drop_precompile_runs(self) -> None:
        """`neuron_parallel_compile X script.py ...` then `X script.py ...`: the compile run goes."""
        for position, command in enumerate(self.commands):
            if not command.precompile or command.removed:
                continue
            signature = _launch_signature(command.rendered())
            later = [c for c in self.commands[position + 1 :] if not c.removed]
            if signature and any(_launch_signature(c.rendered()) == signature for c in later):
                self.findings = [
                    f for f in self.findings if not (f.rule is PARALLEL_COMPILE and f.line == command.line)
                ]
                self.report(command, len(command.raw) - len(command.raw.lstrip()), PRECOMPILE_RUN)
                self.findings = [
                    f
                    for f in self.findings
                    if f.rule is PRECOMPILE_RUN
                    or not (command.line <= f.line < command.line + command.raw.count("\n") + 1)
                ]
                command.removed = True
                command.todos.clear()

    def _async_load(self) -> None:
        launchers = [command for command in self.launchers if not command.removed]
        if not launchers or "HF_DEACTIVATE_ASYNC_LOAD" in self.text or not self.findings:
            return
        first = launchers[0]
        self.report(first, len(first.raw) - len(first.raw.lstrip()), ASYNC_LOAD_EXPORT)
        if len(self.commands) == 1:  # a single command (a notebook `!` line): prefix it
            offset = len(first.raw) - len(first.raw.lstrip())
            first.edits.append((offset, offset, "HF_DEACTIVATE_ASYNC_LOAD=1 "))
            return
        # Right after the shebang, before anything that could start Python.
        target = self.commands[1] if self.commands[0].raw.startswith("#!") else self.commands[0]
        target.prefix = f"export HF_DEACTIVATE_ASYNC_LOAD=1{self.newline}"

    # -- output --------------------------------------------------------------------------------------

    def _render(self) -> str:
        out = []
        for command in self.commands:
            out.append(command.prefix)
            indent = command.raw[: len(command.raw) - len(command.raw.lstrip(" \t"))]
            existing = "".join(out[-6:])
            for todo in dict.fromkeys(command.todos):
                if todo not in existing:
                    out.append(f"{indent}{todo}{self.newline}")
            if not command.removed:
                out.append(command.rendered())
        return "".join(out)


def _package_name(requirement: str) -> str:
    match = re.match(r"[A-Za-z0-9_.\-]+", requirement)
    name = match[0].lower().replace("_", "-") if match else ""
    if name == "optimum" and re.match(r"optimum\[[^\]]*neuron", requirement.lower()):
        return "optimum-neuron"
    return name


def _test_value(condition: str) -> bool | None:
    """Value of `[ ... ]` / `[[ ... ]]` with the pre-compilation variables unset; None if unsure."""
    match = re.fullmatch(r"\s*(\[\[?)\s+(.*?)\s+\]\]?\s*", condition)
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


def _dedent(raw: str, indent: str) -> str:
    """Re-indent a line from an if-body to the if's own indentation."""
    lines = raw.splitlines(keepends=True)
    current = lines[0][: len(lines[0]) - len(lines[0].lstrip(" \t"))]
    extra = len(current) - len(indent)
    if extra <= 0:
        return raw
    return "".join(line[extra:] if line[:extra].strip() == "" else line for line in lines)


def _launch_signature(raw: str) -> tuple[str, ...] | None:
    words = [word.unquoted for word in tokenize(raw)]
    while words and _ASSIGNMENT.match(words[0]):
        words = words[1:]
    script = next((i for i, word in enumerate(words) if word.endswith(".py")), None)
    return tuple(words[: script + 1]) if script is not None else None


def rewrite_shell(text: str) -> tuple[str, list[Finding]]:
    return ShellRewriter(text).run()
