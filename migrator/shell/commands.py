"""What a command launches, read from its words: wrappers looked through, launchers, scripts, signatures."""

from __future__ import annotations

import re
from dataclasses import dataclass

from migrator.shell.syntax import Node, Word

_LAUNCHERS = {"torchrun", "python", "python3", "accelerate", "deepspeed", "trl"}
_SHELLS = {"bash", "sh", "zsh"}
# Wrappers that run the rest of their words as a command. Those with options of their own are looked
# through up to the first word that names a program we know.
_PLAIN_WRAPPERS = {"nohup", "exec", "command", "builtin"}
_OPTION_WRAPPERS = {"srun", "mpirun", "mpiexec", "timeout", "numactl", "taskset", "stdbuf", "nice", "xargs"}
_CONTINUATION = re.compile(rb"\\\r?\n")
_SCRIPT_SUFFIXES = (".py", ".sh", ".bash", ".slurm", ".sbatch")


@dataclass
class Launch:
    offset: int
    signature: tuple[str, ...]


def _is_launcher(program: str) -> bool:
    return program in _LAUNCHERS or program.endswith(("/python", "/python3", "/torchrun"))


def _script_index(words: list[Word]) -> int | None:
    """Where the launched script is: its `.py` word, or the subcommand of the TRL command line (`trl sft`)."""
    if not words:
        return None
    if words[0].value == "trl":
        return 1 if len(words) > 1 and not words[1].value.startswith("-") else None
    return next((i for i, w in enumerate(words) if w.value.endswith(".py")), None)


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


def python_launches(data: bytes) -> list[tuple[int, list[Word]]]:
    """Every Python launch of a shell text (start of its command, launched words): a script or a module run
    by a launcher; `neuron_parallel_compile` runs are not launches."""
    from migrator.shell.syntax import parse, word

    found = []
    stack = [parse(data).root_node]
    while stack:
        node = stack.pop()
        if node.type == "command":
            part = _command_parts(node, data)[-1]
            words = [
                word(c, data) for c in part if c.type != "variable_assignment" and "redirect" not in c.type
            ]
            words, _ = _look_through(words)
            if words and _is_launcher(words[0].value):
                found.append((node.start_byte, words))
        stack.extend(c for c in node.children if c.type != "heredoc_body")
    return found


def unsets(data: bytes) -> list[tuple[int, str]]:
    """Every `unset` of a shell text: (start of the command, variable)."""
    from migrator.shell.syntax import parse

    found = []
    stack = [parse(data).root_node]
    while stack:
        node = stack.pop()
        if node.type == "unset_command":
            found += [
                (node.start_byte, data[c.start_byte : c.end_byte].decode()) for c in node.named_children
            ]
        stack.extend(c for c in node.children if c.type != "heredoc_body")
    return found


def launches(text: str) -> frozenset[tuple[str, ...]]:
    """The signatures of the Python launches a shell text runs: what a later piece of a notebook runs, against
    which a compile run of an earlier one is recognised."""
    return frozenset(_signature(words) for _, words in python_launches(text.encode()))
