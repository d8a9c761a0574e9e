"""NM503: a shell command held in a Python string (`subprocess` / `os.system` arguments, `cmd = "..."`, a
notebook's `env_var_options = "XLA_USE_BF16=1 ..."`) goes through the shell migration."""

from __future__ import annotations

import re

import libcst as cst

from migrator.cst_helpers import descendants, dotted_name
from migrator.rules import Example, Rule, Severity
from migrator.shell.rewrite import rewrite_shell
from migrator.transform import Handler

COMMAND_STRING = Rule(
    "NM503",
    Severity.WARNING,
    "A shell command in a Python string literal or f-string that holds `neuron_parallel_compile`, "
    "`optimum-cli ... neuron`, an XLA/Neuron compiler variable (`XLA_USE_BF16=1 ...`) or `--use_cpu`",
    "A literal, or an f-string with its expressions kept in place, is rewritten with the shell migration when "
    "every edit it makes is one the shell rules do faithfully (an XLA-only variable, a flag Transformers "
    "rejects, `XLA_USE_BF16=1` moved to `--bf16` on a launch whose parser is known); a constant of variables "
    '(`ENV = "XLA_USE_BF16=1"`) used only as `{ENV}` in such f-strings goes with them. Otherwise (a pre-compile '
    "or export run, compiler flags, bf16 where the launch's parser is not known) a TODO on the statement says what "
    "the shell rules found.",
    examples=(
        Example(
            before="""\
import subprocess

cmd = "NEURON_FUSE_SOFTMAX=1 torchrun --nproc_per_node=2 run_clm.py --zero_1 true --output_dir out"
subprocess.run(cmd, shell=True, check=True)
""",
            after="""\
import subprocess

cmd = "torchrun --nproc_per_node=2 run_clm.py --output_dir out"
subprocess.run(cmd, shell=True, check=True)
""",
        ),
        Example(
            before="""\
import os

for seq_len in (512, 1024):
    os.system(f"neuron_parallel_compile torchrun --nproc_per_node=32 train.py --max_seq_length {seq_len}")
""",
            after="""\
import os

for seq_len in (512, 1024):
    # TODO(neuron-migrate): NM503 this f-string runs `neuron_parallel_compile`, and its text is built at run time; TorchNeuron compiles just in time: delete the compile-only run (keep the launch once)
    os.system(f"neuron_parallel_compile torchrun --nproc_per_node=32 train.py --max_seq_length {seq_len}")
""",
        ),
        Example(
            before="""\
import os

ENV = "XLA_USE_BF16=1"
for task in ("mrpc", "sst2"):
    os.system(f"{ENV} torchrun --nproc_per_node=2 run_glue.py --task_name {task} --output_dir out/{task}")
""",
            after="""\
import os
for task in ("mrpc", "sst2"):
    os.system(f"torchrun --nproc_per_node=2 run_glue.py --task_name {task} --output_dir out/{task} --bf16")
""",
        ),
    ),
)
RULES = (COMMAND_STRING,)

# What makes a string a command for the legacy flow: a pre-compile or export run, an XLA/Neuron variable set
# as `NAME=value` (not the Neuron runtime's NEURON_RT_*, which TorchNeuron's runtime reads too), `--use_cpu`.
_NEURON_SETTING = r"\bNEURON_(?!RT_)\w+="
_COMMAND = re.compile(
    r"\bneuron_parallel_compile\b|\boptimum-cli\s+(?:export\s+)?neuron\b|\b(?:PT_)?XLA_\w+="
    rf"|{_NEURON_SETTING}|--use_cpu\b"
)
_BF16 = re.compile(r"\bXLA_(?:USE|DOWNCAST)_BF16=")
_USE_CPU = re.compile(r"--use_cpu\b")
# Shell findings whose edit is a faithful removal in a string too. NM465 (the async-load prefix) is not
# carried into strings: the launched script sets the variable itself (NM404), and a prefix would break a
# command that is split into an argument list.
_SAFE_CODES = frozenset({"NM451", "NM456", "NM461", "NM465"})
_ASYNC_PREFIX = "HF_DEACTIVATE_ASYNC_LOAD=1 "
# What to do, for each kind of legacy content a command string holds (all that apply, in this order).
_ACTIONS = (
    (
        re.compile(r"\bneuron_parallel_compile\b"),
        "TorchNeuron compiles just in time: delete the compile-only run (keep the launch once)",
    ),
    (
        re.compile(r"\boptimum-cli\s+export\s+neuron\b"),
        "delete the export and load the original checkpoint with Transformers (see NM452)",
    ),
    (
        re.compile(r"\boptimum-cli\s+neuron\b"),
        "delete the optimum-cli neuron command (see NM453-NM455 for what replaces it)",
    ),
    (_BF16, "drop the XLA bf16 variable and pass --bf16 (or bf16=True / dtype=torch.bfloat16) to the launch"),
    (
        re.compile(rf"\b(?:PT_)?XLA_(?!(?:USE|DOWNCAST)_BF16=)\w+=|{_NEURON_SETTING}"),
        "drop the XLA/Neuron variables (NEURON_CC_FLAGS: keep only flags the TorchNeuron compiler reference lists)",
    ),
    (_USE_CPU, "remove `--use_cpu`: on TorchNeuron it trains on the CPU instead of the Neuron device"),
)


def _action_for(text: str) -> str:
    return "; ".join(action for pattern, action in _ACTIONS if pattern.search(text))


# Calls whose string arguments are messages to a person (`print(f"NEURON_CC_FLAGS={flags}")`), not commands.
_LOG_METHODS = frozenset({"debug", "info", "warning", "warn", "error", "exception", "critical", "log"})


def _is_message_call(call: cst.Call) -> bool:
    """`print(...)`, `warnings.warn(...)`, `logger.info(...)` / `logging.warning(...)` / `self.log.debug(...)`."""
    name = dotted_name(call.func) or ""
    owner, _, method = name.rpartition(".")
    if not owner:
        return name == "print"
    holder = owner.rpartition(".")[2].lower()
    return method in _LOG_METHODS and ("log" in holder or holder == "warnings")


# A string that only sets variables for a command it prefixes: `ENV = "XLA_USE_BF16=1"`.
_ASSIGNMENTS = re.compile(r"\s*(?:[A-Za-z_]\w*=\S*\s*)+")
# What stands for an f-string's expression while its text goes through the shell migration (a word character
# run no command holds).
_SLOT = "NMSLOT{}X"
_SLOTS = re.compile(r"NMSLOT(\d+)X")


class CommandString(Handler):
    HINTS = frozenset({"neuron_parallel_compile", "optimum-cli", "XLA_", "NEURON_", "--use_cpu"})

    def __init__(self, ctx) -> None:
        super().__init__(ctx)
        self.messages = 0  # message calls (print, logging) the walk is inside
        # The f-strings that are one piece of an implicit concatenation: the text of the other pieces.
        self.concatenated: dict[cst.FormattedString, str] = {}
        self.prefixes: set[cst.BinaryOperation] = set()  # `ENV + "cmd"` where ENV goes: becomes "cmd"
        # Module-level `NAME = "XLA_USE_BF16=1"` used only as `{NAME}` in f-strings the shell migration
        # rewrites faithfully once the value stands in for it: the constant goes with its uses.
        self.dissolved: dict[str, str] = self._dissolved_constants()
        for name in self.dissolved:
            ctx.watch(name)

    def _dissolved_constants(self) -> dict[str, str]:
        candidates: dict[str, str] = {}
        for statement in self.ctx.module.body:
            small = statement.body[0] if isinstance(statement, cst.SimpleStatementLine) else None
            if (
                isinstance(small, cst.Assign)
                and len(small.targets) == 1
                and isinstance(small.targets[0].target, cst.Name)
                and isinstance(small.value, cst.SimpleString)
            ):
                value = small.value.evaluated_value
                if isinstance(value, str) and _COMMAND.search(value) and _ASSIGNMENTS.fullmatch(value):
                    candidates[small.targets[0].target.value] = value
        if not candidates:
            return {}
        for concatenation in descendants(self.ctx.module, cst.ConcatenatedString):
            pieces = []
            node = concatenation
            while isinstance(node, cst.ConcatenatedString):
                pieces.append(node.left)
                node = node.right
            pieces.append(node)
            for piece in pieces:
                if isinstance(piece, cst.FormattedString):
                    self.concatenated[piece] = "".join(
                        self.ctx.module.code_for_node(other) for other in pieces if other is not piece
                    )
        uses = {name: 0 for name in candidates}
        for name in descendants(self.ctx.module, cst.Name):
            if name.value in uses:
                uses[name.value] += 1
        strings = descendants(self.ctx.module, cst.FormattedString)
        for name, value in list(candidates.items()):
            holders = [
                string
                for string in strings
                if any(
                    isinstance(part, cst.FormattedStringExpression) and _names(part.expression, name)
                    for part in string.parts
                )
            ]
            inside = sum(
                _names(part.expression, name)
                for string in holders
                for part in string.parts
                if isinstance(part, cst.FormattedStringExpression)
            )
            # Only a constant whose every variable goes dissolves (one that keeps some stays, as a constant).
            variables = [f"{word.partition('=')[0]}=" for word in value.split()]
            rewritten = all(
                (migrated := self._rewritten(string, {name: value})) is not None
                and not any(variable in self.ctx.module.code_for_node(migrated) for variable in variables)
                for string in holders
            )
            # `NAME + " torchrun ..."`: where the variables go whole, the prefix goes from the concatenation.
            prefixes = [
                operation
                for operation in descendants(self.ctx.module, cst.BinaryOperation)
                if isinstance(operation.operator, cst.Add)
                and isinstance(operation.left, cst.Name)
                and operation.left.value == name
                and isinstance(operation.right, (cst.SimpleString, cst.FormattedString))
            ]
            if prefixes and _dropped_whole(value):
                self.prefixes.update(prefixes)
                inside += len(prefixes)
            elif prefixes:
                del candidates[name]
                continue
            if not (holders or prefixes) or inside != uses[name] - 1 or not rewritten:  # + the assignment
                del candidates[name]
                self.prefixes.difference_update(prefixes)
        return candidates

    def _rewritten(
        self, string: cst.FormattedString, constants: dict[str, str]
    ) -> cst.FormattedString | None:
        """The f-string's command migrated by the shell rules, its expressions kept in place (a constant that
        `constants` holds stands in as its value); None unless every edit is a faithful one."""
        pieces, expressions = [], []
        for part in string.parts:
            if isinstance(part, cst.FormattedStringText):
                pieces.append(part.value.replace("{{", "{").replace("}}", "}"))
            elif (
                isinstance(part.expression, cst.Name)
                and part.expression.value in constants
                and not (part.conversion or part.format_spec)
            ):
                pieces.append(constants[part.expression.value])
            else:
                pieces.append(_SLOT.format(len(expressions)))
                expressions.append(part)
        text = "".join(pieces)
        if not _COMMAND.search(text) or "\\" in text:
            return None
        others = self.concatenated.get(string)
        if others is not None and (not text[-1:].isspace() or "--bf16" in others or _COMMAND.search(others)):
            return None  # one piece of a longer command: only where what it appends ends a word
        migrated, findings = rewrite_shell(text, None, inline=True)
        if "NM465" in {f.code for f in findings} and _ASYNC_PREFIX not in text:
            migrated = migrated.replace(_ASYNC_PREFIX, "", 1)
        if not findings or any(not f.fixed or f.code not in _SAFE_CODES | {"NM468"} for f in findings):
            return None
        if _COMMAND.search(migrated) or [int(i) for i in _SLOTS.findall(migrated)] != list(
            range(len(expressions))
        ):
            return None
        parts: list[cst.BaseFormattedStringContent] = []
        for index, piece in enumerate(_SLOTS.split(migrated)):
            if index % 2:
                parts.append(expressions[int(piece)])
            elif piece:
                if any(quote in piece for quote in string.quote):
                    return None
                parts.append(cst.FormattedStringText(piece.replace("{", "{{").replace("}", "}}")))
        return string.with_changes(parts=parts)

    def visit_Call(self, node: cst.Call) -> None:
        self.messages += _is_message_call(node)

    def leave_Call(self, original: cst.Call, updated: cst.Call):
        self.messages -= _is_message_call(original)
        return updated

    def _dissolved_value(self, node: cst.SimpleString) -> bool:
        """The literal of a constant that goes with its uses (`ENV = "XLA_USE_BF16=1"`)."""
        line = self.ctx.line
        return (
            line is not None
            and isinstance(line.body[0], cst.Assign)
            and line.body[0].value is node
            and isinstance(line.body[0].targets[0].target, cst.Name)
            and line.body[0].targets[0].target.value in self.dissolved
        )

    def _is_documentation(self, node: cst.BaseExpression) -> bool:
        """A string that is a statement of its own (a docstring) or a message printed or logged runs nothing."""
        line = self.ctx.line
        return self.messages > 0 or (
            line is not None
            and any(isinstance(small, cst.Expr) and small.value is node for small in line.body)
        )

    def leave_FormattedString(self, original: cst.FormattedString, updated: cst.FormattedString):
        if self._is_documentation(original):
            return updated
        rewritten = self._rewritten(original, self.dissolved)
        if rewritten is not None and updated.deep_equals(original):
            self.ctx.report(
                original, COMMAND_STRING, "Rewritten with the shell migration, its expressions kept."
            )
            return rewritten
        text = "".join(part.value for part in original.parts if isinstance(part, cst.FormattedStringText))
        match = _COMMAND.search(text)
        if match:
            self.ctx.todo(
                original,
                COMMAND_STRING,
                f"this f-string runs `{match.group(0).rstrip('=')}`, and its text is built at run time",
                _action_for(text),
            )
        return updated

    def leave_BinaryOperation(self, original: cst.BinaryOperation, updated: cst.BinaryOperation):
        """A concatenation a removal left half empty: `"" + "torchrun ..."`, or `ENV + " torchrun ..."` where
        every variable ENV held goes. What is left is the string that was not emptied (its leading blanks,
        which separated it from the prefix, go too)."""
        if original in self.prefixes:
            return _without_leading_blanks(updated.right)
        if not isinstance(updated.operator, cst.Add) or not isinstance(updated, cst.BinaryOperation):
            return updated
        strings = (cst.SimpleString, cst.FormattedString, cst.ConcatenatedString)
        for emptied, kept in ((updated.left, updated.right), (updated.right, updated.left)):
            if (
                isinstance(emptied, cst.SimpleString)
                and emptied.evaluated_value == ""
                and isinstance(kept, strings)
                and not (isinstance(original.left, cst.SimpleString) and original.left.evaluated_value == "")
                and not (
                    isinstance(original.right, cst.SimpleString) and original.right.evaluated_value == ""
                )
            ):
                return kept.with_changes(lpar=updated.lpar, rpar=updated.rpar) if updated.lpar else kept
        return updated

    def leave_SimpleStatementLine(self, original: cst.SimpleStatementLine, updated: cst.SimpleStatementLine):
        small = original.body[0]
        if (
            len(original.body) == 1
            and isinstance(small, cst.Assign)
            and isinstance(small.targets[0].target, cst.Name)
            and small.targets[0].target.value in self.dissolved
            and not self.ctx.functions
        ):
            name = small.targets[0].target.value
            self.ctx.report(
                original,
                COMMAND_STRING,
                f"`{name}` removed: the variables it held are gone from the commands that used it.",
                subject=name,
            )
            return cst.RemoveFromParent()
        return updated

    def leave_SimpleString(self, original: cst.SimpleString, updated: cst.SimpleString):
        if (
            updated.value != original.value
            or "b" in original.prefix.lower()
            or self._is_documentation(original)
            or self._dissolved_value(original)
        ):
            return updated
        value = original.evaluated_value
        if not isinstance(value, str) or not _COMMAND.search(value):
            return updated
        migrated, findings = rewrite_shell(value, None, inline=True)
        if not findings and migrated == value and not _USE_CPU.search(value):
            return updated  # not a command the shell rules know (prose, a help text): NM501 flags it
        if "NM465" in {f.code for f in findings} and _ASYNC_PREFIX not in value:
            migrated = migrated.replace(_ASYNC_PREFIX, "", 1)
        unsafe = [f for f in findings if not f.fixed or f.code not in _SAFE_CODES]
        left = _COMMAND.search(migrated)
        why = None
        if unsafe:
            found = "; ".join(dict.fromkeys(f"{f.code} {f.rule.title}" for f in unsafe))
            why = f"the shell migration of this command string leaves manual work ({found})"
        elif _BF16.search(value) and "--bf16" not in migrated:
            why = "this command string sets the XLA bf16 switch, and its launch does not pass --bf16"
        elif left:
            why = f"`{left.group(0).rstrip('=')}` in this command string has no faithful rewrite"
        if why is not None:
            self.ctx.todo(original, COMMAND_STRING, why, _action_for(value))
            return updated
        literal = _literal(original, migrated)
        if literal is None:
            self.ctx.todo(
                original,
                COMMAND_STRING,
                "the rewritten command cannot be written back into this literal",
                _action_for(value),
            )
            return updated
        removed = ", ".join(sorted({f.code for f in findings} - {"NM465"}))
        self.ctx.report(original, COMMAND_STRING, f"Rewritten with the shell migration ({removed}).")
        return updated.with_changes(value=literal)


def _dropped_whole(value: str) -> bool:
    """Whether the shell migration drops every variable of `A=1 B=2` (all of them faithfully)."""
    migrated, findings = rewrite_shell(f"{value} true", None, inline=True)
    return migrated.strip() == "true" and all(f.fixed and f.code == "NM456" for f in findings)


def _without_leading_blanks(string: cst.BaseExpression) -> cst.BaseExpression:
    """`" torchrun ..."` -> `"torchrun ..."` (in a plain literal or the first text of an f-string)."""
    if isinstance(string, cst.SimpleString):
        body = string.value[len(string.prefix) + len(string.quote) : -len(string.quote)]
        return string.with_changes(value=f"{string.prefix}{string.quote}{body.lstrip(' ')}{string.quote}")
    if (
        isinstance(string, cst.FormattedString)
        and string.parts
        and isinstance(string.parts[0], cst.FormattedStringText)
    ):
        first = string.parts[0].with_changes(value=string.parts[0].value.lstrip(" "))
        return string.with_changes(parts=[first, *string.parts[1:]])
    return string


def _names(expression: cst.BaseExpression, name: str) -> int:
    """How many times `name` appears in an expression."""
    return sum(1 for node in descendants(expression, cst.Name) if node.value == name)


def _literal(original: cst.SimpleString, text: str) -> str | None:
    """`text` written back with the literal's own prefix and quotes, when no escaping is needed."""
    quote = original.quote
    if "\\" in text or quote[0] in text or ("\n" in text and len(quote) == 1):
        return None
    return f"{original.prefix}{quote}{text}{quote}"


HANDLER = CommandString
