"""What a command launches, as the shell rules compare launches: scripts, signatures, flags' truth values
(the launcher programs and wrappers are `usercode.launchers`')."""

from __future__ import annotations

from dataclasses import dataclass

from usercode.launchers import SCRIPT_SUFFIXES, command_parts, is_launcher, look_through
from usercode.shell import Word, parse, word


@dataclass
class Launch:
    offset: int
    signature: tuple[str, ...]


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


def _signature(words: list[Word]) -> tuple[str, ...]:
    """What a launch runs: its words up to the script (later flags may differ between the two runs)."""
    values = [w.value for w in words]
    script = next((i for i, v in enumerate(values) if v.endswith(SCRIPT_SUFFIXES)), None)
    return tuple(values[: script + 1] if script is not None else values)


def python_launches(data: bytes) -> list[tuple[int, list[Word]]]:
    """Every Python launch of a shell text (start of its command, launched words): a script or a module run
    by a launcher; `neuron_parallel_compile` runs are not launches."""
    found = []
    stack = [parse(data).root_node]
    while stack:
        node = stack.pop()
        if node.type == "command":
            part = command_parts(node, data)[-1]
            words = [
                word(c, data) for c in part if c.type != "variable_assignment" and "redirect" not in c.type
            ]
            words, _ = look_through(words)
            if words and is_launcher(words[0].value):
                found.append((node.start_byte, words))
        stack.extend(c for c in node.children if c.type != "heredoc_body")
    return found


def configured_launches(text: str, suffixes: tuple[str, ...]) -> list[tuple[str, str]]:
    """(script, file) of each Python launch of a shell text that passes its script a file named with one of
    `suffixes` (`torchrun run_sft.py --config sft.yaml`: the script reads its flags from the file too)."""
    found = []
    for _, words in python_launches(text.encode()):
        script = _script_index(words)
        if script is not None:
            found += [
                (words[script].value, w.value) for w in words[script + 1 :] if w.value.endswith(suffixes)
            ]
    return found


def unsets(data: bytes) -> list[tuple[int, str]]:
    """Every `unset` of a shell text: (start of the command, variable)."""
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
