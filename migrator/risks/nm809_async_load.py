"""NM809: weights loaded while asynchronous loading is on (it hangs on TorchNeuron)."""

from __future__ import annotations

import ast
from collections.abc import Iterator

from migrator.families.environment.variables import ASYNC_LOAD_VARIABLE
from migrator.risks.base import TRL_TRAINERS, Risk, at
from migrator.rules import Example, Rule, Severity
from usercode.python import PythonModule, callee, keyword, owner, string
from usercode.reading import Code

ASYNC_LOAD = Rule(
    "NM809",
    Severity.WARNING,
    f"Weights loaded with `from_pretrained()` while `{ASYNC_LOAD_VARIABLE}` is not set: asynchronous loading "
    "hangs on TorchNeuron",
    f"Set {ASYNC_LOAD_VARIABLE}=1 before the first from_pretrained(): "
    f'`os.environ.setdefault("{ASYNC_LOAD_VARIABLE}", "1")` at the top of the script, or export it in the '
    "launcher.",
    fixed_by=("NM404", "NM465"),
    examples=(Example(before='model = AutoModelForCausalLM.from_pretrained("Qwen/Qwen3-0.6B")\n'),),
)
RULES = (ASYNC_LOAD,)
# What a from_pretrained() is called on when it loads no weights.
_NO_WEIGHTS = ("tokenizer", "processor", "config", "generationconfig")


def find(code: Code) -> Iterator[Risk]:
    """The file's first weight load, unless the file sets the variable anywhere (Python or shell)."""
    if _sets_variable(code):
        return
    for module in code.python:
        loads = [call for call in module.calls if _loads_weights(call)]
        if loads:
            yield at(ASYNC_LOAD, module, loads[0], "from_pretrained() loads weights with a thread pool")
            return


def _loads_weights(call: ast.Call) -> bool:
    """Model classes and TRL trainers given a model id load weights; tokenizers and configs do not."""
    name = callee(call)
    if name == "from_pretrained":
        return not any(part in owner(call).lower() for part in _NO_WEIGHTS)
    return name in TRL_TRAINERS and isinstance(keyword(call, "model"), (ast.Constant, ast.Attribute))


def _sets_variable(code: Code) -> bool:
    return any(map(_sets_in_python, code.python)) or any(
        assignment.name == ASYNC_LOAD_VARIABLE and assignment.value.startswith("1")
        for assignment in code.assignments
    )


def _sets_in_python(module: PythonModule) -> bool:
    """`os.environ.setdefault(VARIABLE, ...)`, `os.putenv(VARIABLE, ...)`, `os.environ[VARIABLE] = ...`."""
    for node in module.nodes:
        if isinstance(node, ast.Call) and callee(node) in ("setdefault", "putenv") and node.args:
            if string(node.args[0]) == ASYNC_LOAD_VARIABLE:
                return True
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(isinstance(t, ast.Subscript) and string(t.slice) == ASYNC_LOAD_VARIABLE for t in targets):
                return True
    return False
