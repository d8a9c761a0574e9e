"""What a shell command launches, read from its words: the launcher programs, the wrappers looked through to
the program they run, and heredoc bodies that are scripts. The one list of each, for the migrator's shell
rewriter and checks, the checklist and `neuron-migrate try`."""

from __future__ import annotations

import ast
import re
import shlex

from usercode.composed_strings import constants
from usercode.python import callee, is_constant, keyword, owner, string
from usercode.shell import Node, Word

LAUNCHERS = {"torchrun", "python", "python3", "accelerate", "deepspeed", "trl"}
SHELLS = {"bash", "sh", "zsh"}
# Wrappers that run the rest of their words as a command. Those with options of their own are looked
# through up to the first word that names a program we know.
PLAIN_WRAPPERS = {"nohup", "exec", "command", "builtin"}
OPTION_WRAPPERS = {"srun", "mpirun", "mpiexec", "timeout", "numactl", "taskset", "stdbuf", "nice", "xargs"}
# Every wrapper: also `time` and `env`, whose options and `NAME=value` words `look_through` reads.
WRAPPERS = frozenset({"time", "env"} | PLAIN_WRAPPERS | OPTION_WRAPPERS)
CONTINUATION = re.compile(rb"\\\r?\n")
LAUNCHER_SUFFIXES = (
    ".sh",
    ".bash",
    ".slurm",
    ".sbatch",
)  # shell scripts, as launchers and job files name them
SCRIPT_SUFFIXES = (".py", *LAUNCHER_SUFFIXES)
# Configuration files a launch passes its script (`--config sft.yaml`: TrlParser and HfArgumentParser read
# their keys as flags).
CONFIG_SUFFIXES = (".yaml", ".yml", ".json")


def is_launcher(program: str) -> bool:
    return program in LAUNCHERS or program.endswith(("/python", "/python3", "/torchrun"))


def command_parts(node: Node, data: bytes) -> list[list[Node]]:
    """The children of a command node, split where tree-sitter-bash merged `A=1 B=2<newline>cmd` into one."""
    children = [c for c in node.named_children if c.type != "comment"]
    parts: list[list[Node]] = [[]]
    for previous, child in zip([None, *children], children, strict=False):
        if previous is not None and b"\n" in CONTINUATION.sub(
            b"", data[previous.end_byte : child.start_byte]
        ):
            parts.append([])
        parts[-1].append(child)
    return parts


def look_through(words: list[Word]) -> tuple[list[Word], list[Word]]:
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
        elif name in PLAIN_WRAPPERS:
            start += 1
        elif name in OPTION_WRAPPERS:
            program = next((i for i in range(start + 1, len(words)) if is_program(words[i].value)), None)
            if program is None:
                break
            start = program
        else:
            break
    return words[start:], assignments


def is_program(value: str) -> bool:
    return (
        value in LAUNCHERS
        or value in SHELLS
        or value in ("neuron_parallel_compile", "optimum-cli", "pip", "pip3")
        or value.endswith(("/python", "/python3", "/torchrun"))
        or (value.endswith(SCRIPT_SUFFIXES) and not value.startswith("-"))
    )


_SHEBANG = re.compile(rb"#!\S*(?:/|\s)(python[\d.]*|(?:ba|z|k|da)?sh)\b")


def heredoc_kind(command: Node | None, statement: Node, content: bytes) -> str | None:
    """`"shell"` or `"python"` when the heredoc body is a script, None when it is data."""
    if command is None or command.type != "command":
        return None
    shebang = _SHEBANG.match(content.lstrip(b"\n"))
    if shebang is not None:  # `cat > $JOB <<EOF` / `#!/bin/bash`: a script whatever the target is called
        return "python" if shebang[1].startswith(b"python") else "shell"
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
            if target.endswith(LAUNCHER_SUFFIXES):
                return "shell"
        return None
    if program in SHELLS or program in ("sbatch", "srun"):
        return "shell" if not any(a.endswith(SCRIPT_SUFFIXES) for a in arguments) else None
    if program.startswith("python") and not any(a.endswith(".py") for a in arguments):
        return "python"
    return None


def _descendants(node: Node):
    stack = list(node.children)
    while stack:
        current = stack.pop()
        yield current
        stack.extend(current.children)


# The calls of a Python program that run a command: subprocess's (a list of words, or a string with
# `shell=True`) and os.system's (a string).
SUBPROCESS_CALLS = frozenset({"run", "call", "check_call", "check_output", "Popen"})
# What separates the commands of a shell string (`cd scripts && torchrun train.py`).
SHELL_SEPARATORS = frozenset({"&&", "||", ";", "|", "&"})


def python_commands(
    tree: ast.Module, known: dict[str, str | int] | None = None
) -> list[tuple[int, list[str]]]:
    """(line, words) of each command a Python module runs with literal words: `subprocess.run(["torchrun",
    "train.py"])` (and `call`, `check_call`, `check_output`, `Popen`; `sys.executable` is `python`), their string
    under `shell=True`, `os.system("python x.py")`; a string's commands split at `&&`, `;` and pipes. A string
    may be a constant of the module (`RUN_CMD = f"python3 train.py"`, then `subprocess.check_call(RUN_CMD,
    shell=True)`: `composed_strings.constants`; `known`: those of the program the tree is part of, a notebook's
    cells). A command built from a value known only at run time is not one of them."""
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call) or not node.args:
            continue
        name, first = callee(node), node.args[0]
        if (
            owner(node) == "subprocess"
            and name in SUBPROCESS_CALLS
            and isinstance(first, ast.List | ast.Tuple)
        ):
            words = [_command_word(item) for item in first.elts]
            if words and None not in words:
                found.append((node.lineno, words))
            continue
        shell = owner(node) == "os" and name == "system"
        shell |= (
            owner(node) == "subprocess"
            and name in SUBPROCESS_CALLS
            and is_constant(keyword(node, "shell"), True)
        )
        if not shell:
            continue
        text = string(first)
        if text is None and isinstance(first, ast.Name):
            known = constants(tree) if known is None else known
            text = known.get(first.id) if isinstance(known.get(first.id), str) else None
        if text is not None:
            found += [(node.lineno, words) for words in shell_string_commands(text)]
    return found


def shell_string_commands(text: str) -> list[list[str]]:
    """The words of each command of a one-line shell string, split at `&&`, `;` and pipes (none when it does
    not split as the shell would: an unclosed quote)."""
    try:
        lexer = shlex.shlex(text, posix=True, punctuation_chars=True)
        lexer.whitespace_split = True
        lexer.commenters = "#"
        words = list(lexer)
    except ValueError:
        return []
    commands: list[list[str]] = [[]]
    for word in words:
        if word in SHELL_SEPARATORS:
            commands.append([])
        else:
            commands[-1].append(word)
    return [command for command in commands if command]


def _command_word(node: ast.AST) -> str | None:
    if string(node) is not None:
        return string(node)
    is_executable = isinstance(node, ast.Attribute) and node.attr == "executable"
    return "python" if is_executable and getattr(node.value, "id", None) == "sys" else None
