"""NM503: a shell command held in a Python string (`subprocess` / `os.system` arguments, `cmd = "..."`, a
notebook's `env_var_options = "XLA_USE_BF16=1 ..."`) goes through the shell migration."""

from __future__ import annotations

import re

import libcst as cst

from migrator.cst_helpers import dotted_name
from migrator.rules import Example, Rule, Severity
from migrator.shell.rewrite import rewrite_shell
from migrator.transform import Handler

COMMAND_STRING = Rule(
    "NM503",
    Severity.WARNING,
    "A shell command in a Python string literal or f-string that holds `neuron_parallel_compile`, "
    "`optimum-cli ... neuron`, an XLA/Neuron compiler variable (`XLA_USE_BF16=1 ...`) or `--use_cpu`",
    "A plain literal is rewritten with the shell migration when every edit it makes is a removal the shell "
    "rules do faithfully (an XLA-only variable, a flag Transformers rejects); otherwise (a pre-compile or "
    "export run, compiler flags, bf16 without `--bf16`, an f-string built at run time, `--use_cpu`) a TODO on "
    "the statement says what the shell rules found.",
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


class CommandString(Handler):
    HINTS = frozenset({"neuron_parallel_compile", "optimum-cli", "XLA_", "NEURON_", "--use_cpu"})

    def __init__(self, ctx) -> None:
        super().__init__(ctx)
        self.messages = 0  # message calls (print, logging) the walk is inside

    def visit_Call(self, node: cst.Call) -> None:
        self.messages += _is_message_call(node)

    def leave_Call(self, original: cst.Call, updated: cst.Call):
        self.messages -= _is_message_call(original)
        return updated

    def _is_documentation(self, node: cst.BaseExpression) -> bool:
        """A string that is a statement of its own (a docstring) or a message printed or logged runs nothing."""
        line = self.ctx.line
        return self.messages > 0 or (
            line is not None
            and any(isinstance(small, cst.Expr) and small.value is node for small in line.body)
        )

    def visit_FormattedString(self, node: cst.FormattedString) -> None:
        if self._is_documentation(node):
            return
        text = "".join(part.value for part in node.parts if isinstance(part, cst.FormattedStringText))
        match = _COMMAND.search(text)
        if match:
            self.ctx.todo(
                node,
                COMMAND_STRING,
                f"this f-string runs `{match.group(0).rstrip('=')}`, and its text is built at run time",
                _action_for(text),
            )

    def leave_SimpleString(self, original: cst.SimpleString, updated: cst.SimpleString):
        if (
            updated.value != original.value
            or "b" in original.prefix.lower()
            or self._is_documentation(original)
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


def _literal(original: cst.SimpleString, text: str) -> str | None:
    """`text` written back with the literal's own prefix and quotes, when no escaping is needed."""
    quote = original.quote
    if "\\" in text or quote[0] in text or ("\n" in text and len(quote) == 1):
        return None
    return f"{original.prefix}{quote}{text}{quote}"


HANDLER = CommandString
