"""Migrated code targets real APIs: every import in every expected fixture resolves against the
installed transformers/trl/peft/diffusers/torch, and every call the codemod emitted (a call to an imported
symbol whose text is not in the input) binds to its real signature; keywords that disappear into **kwargs
must be ones the function, or the function it forwards them to, actually reads."""

from __future__ import annotations

import importlib
import inspect
import json
import re
from pathlib import Path

import libcst as cst
import pytest
from IPython.core.inputtransformer2 import TransformerManager

from migrator.cst_helpers import dotted_name

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "migrator"
TARGET_LIBRARIES = ("transformers", "trl", "peft", "diffusers", "torch", "accelerate")
EXPECTED = sorted(p for p in FIXTURES.rglob("*.expected.*") if p.suffix in (".py", ".ipynb"))
# Functions that forward **kwargs to another one: the keywords must be read by the delegate.
DELEGATES = {
    "from_pretrained": [
        ("transformers", "PreTrainedModel.from_pretrained"),
        ("transformers", "PreTrainedConfig.__init__"),
    ],
    "pipeline": [("transformers", "Pipeline.__init__")],
}


def python_source(path: Path) -> str:
    if path.suffix == ".py":
        return path.read_text()
    cells = [c for c in json.loads(path.read_text())["cells"] if c["cell_type"] == "code"]
    code = ["".join(c["source"]) if isinstance(c["source"], list) else c["source"] for c in cells]
    code = [text for text in code if not text.startswith("%%")]  # cell magics: shell or other languages
    # What IPython runs for each cell (`!cmd \` continuations included); a cell left broken on purpose is not.
    python = [TransformerManager().transform_cell(text) for text in code]
    return "\n".join(text for text in python if _parses(text))


def _parses(code: str) -> bool:
    try:
        cst.parse_module(code)
    except cst.ParserSyntaxError:
        return False
    return True


# `torch.neuron` is the device module TorchNeuron registers when it loads; here, the stand-in's (read, not
# registered: registering renames PrivateUse1 for the whole test process).
DEVICE_MODULE = "torch.neuron"


def resolve(qualified: str):
    if qualified.startswith(f"{DEVICE_MODULE}."):
        import standin.runtime

        return getattr(standin.runtime, qualified.removeprefix(f"{DEVICE_MODULE}."))
    parts = qualified.split(".")
    for split in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:split]))
        except ImportError:
            continue
        for attr in parts[split:]:
            obj = getattr(obj, attr)
        return obj
    raise ImportError(qualified)


class Collector(cst.CSTVisitor):
    def __init__(self) -> None:
        self.imports: dict[str, str] = {}
        self.calls: list[tuple[str, int, list[str], str]] = []  # qualified, positional, keywords, code
        self.generation_attrs: list[str] = []
        self.todo = False  # the statement being visited carries a neuron-migrate TODO

    def visit_SimpleStatementLine(self, node: cst.SimpleStatementLine) -> None:
        # An import the codemod left with a TODO is known not to resolve (NM219): a person replaces it.
        self.todo = any(
            line.comment is not None and line.comment.value.startswith("# TODO(neuron-migrate)")
            for line in node.leading_lines
        )

    def visit_ImportFrom(self, node: cst.ImportFrom) -> None:
        if self.todo:
            return
        module = dotted_name(node.module) if node.module else None
        if module and module.split(".")[0] in TARGET_LIBRARIES and not isinstance(node.names, cst.ImportStar):
            for alias in node.names:
                local = alias.asname.name.value if alias.asname else alias.name.value
                self.imports[local] = f"{module}.{alias.name.value}"

    def visit_Import(self, node: cst.Import) -> None:
        for alias in node.names:
            name = dotted_name(alias.name)
            if name.split(".")[0] in TARGET_LIBRARIES:
                self.imports[alias.asname.name.value if alias.asname else name.split(".")[0]] = (
                    name if alias.asname else name.split(".")[0]
                )

    def visit_Call(self, node: cst.Call) -> None:
        name = dotted_name(node.func)
        if name is None:
            return
        head, _, rest = name.partition(".")
        if head in self.imports:
            qualified = self.imports[head] + (f".{rest}" if rest else "")
            positional = sum(1 for arg in node.args if arg.keyword is None and not arg.star)
            keywords = [arg.keyword.value for arg in node.args if arg.keyword is not None]
            if not any(arg.star for arg in node.args):
                self.calls.append((qualified, positional, keywords, cst.Module([]).code_for_node(node)))

    def visit_Assign(self, node: cst.Assign) -> None:
        target = dotted_name(node.targets[0].target)
        if target and ".generation_config." in target:
            self.generation_attrs.append(target.rsplit(".", 1)[1])


def collect(path: Path) -> Collector:
    collector = Collector()
    cst.parse_module(python_source(path)).visit(collector)
    return collector


def read_keywords(function) -> set[str]:
    """Keywords a function reads out of **kwargs, or declares (for __init__ delegates)."""
    declared = set(inspect.signature(function).parameters)
    try:
        source = inspect.getsource(function)
    except OSError:  # generated (dataclass) __init__: its parameters are all it reads
        return declared
    return declared | set(re.findall(r"""kwargs\.(?:pop|get)\(\s*["'](\w+)["']""", source))


def check_call(qualified: str, positional: int, keywords: list[str]) -> None:
    target = resolve(qualified)
    try:
        signature = inspect.signature(target)
    except ValueError:  # a builtin without a signature (torch.device): resolving it is all we can check
        return
    bound = signature.bind(*([object()] * positional), **dict.fromkeys(keywords, object()))
    var_keyword = next((p.name for p in signature.parameters.values() if p.kind is p.VAR_KEYWORD), None)
    extra = set(bound.arguments.get(var_keyword, {})) if var_keyword else set()
    if not extra:
        return
    method = qualified.rsplit(".", 1)[-1]
    readers = [target] + [resolve(".".join(delegate)) for delegate in DELEGATES.get(method, [])]
    known = set().union(*(read_keywords(reader) for reader in readers))
    assert extra <= known, f"{qualified}: keywords {sorted(extra - known)} are not read by {qualified}"


@pytest.mark.parametrize("path", EXPECTED, ids=lambda p: str(p.relative_to(FIXTURES)))
def test_emitted_imports_and_calls_are_real(path: Path) -> None:
    collector = collect(path)
    for local, qualified in collector.imports.items():
        assert resolve(qualified) is not None, f"{local} -> {qualified}"
    source = path.with_name(path.name.replace(".expected", ""))
    # Compared without whitespace: a call printed on its own loses the indentation of its continuation lines.
    written_by_user = "".join(source.read_text().split())
    emitted = [call for call in collector.calls if "".join(call[3].split()) not in written_by_user]
    for qualified, positional, keywords, _ in emitted:
        check_call(qualified, positional, keywords)
    if collector.generation_attrs:
        from transformers import GenerationConfig

        config = GenerationConfig()
        for attr in collector.generation_attrs:
            assert hasattr(config, attr), f"GenerationConfig has no {attr}"


def test_the_checker_catches_a_wrong_keyword() -> None:
    with pytest.raises(TypeError):
        check_call("transformers.TrainingArguments", 0, ["output_dir", "zero_1"])
    with pytest.raises(AssertionError):
        check_call("transformers.AutoModelForCausalLM.from_pretrained", 1, ["export"])
    check_call("transformers.AutoModelForCausalLM.from_pretrained", 1, ["dtype", "device_map"])
