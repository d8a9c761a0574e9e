"""NM108 (and NM109, defined in `nm109_unpaired_neuron_config.py`): `cfg =
NeuronModelForCausalLM.get_neuron_config(...)` is paired with the load that consumes it later in the same
function (`export(id, cfg)`, `export(id, neuron_config=cfg)`, `from_pretrained(id, neuron_config=cfg)`),
wherever the two statements sit in its blocks; the load rewrite (`nm101_causal_lm.py`) merges the config's
values and removes its statement. What cannot be paired, or a config whose load stays manual, keeps a TODO."""

from __future__ import annotations

import libcst as cst
import libcst.matchers as m

from migrator.cst_helpers import descendants, source_code
from migrator.families.inference import tables as t
from migrator.families.inference.state import HINTS, TRIGGERS, InferenceFile
from migrator.rules import Example, Rule, Severity
from migrator.transform import FileContext, Handler

NEURON_CONFIG_PAIR = Rule(
    "NM108",
    Severity.INFO,
    "`cfg = NeuronModelForCausalLM.get_neuron_config(...)` consumed by `NeuronModelForCausalLM.export(id, cfg)`",
    "The get_neuron_config statement is removed; its values move into the rewritten load (NM101-NM104).",
    examples=(
        Example(
            before="""\
from optimum.neuron import NeuronModelForCausalLM

MODEL_ID = "Qwen/Qwen3-0.6B"


def load(prompts):
    config = NeuronModelForCausalLM.get_neuron_config(
        MODEL_ID, batch_size=1, sequence_length=1024, tensor_parallel_size=2
    )
    print(f"compiling {MODEL_ID} for {len(prompts)} prompts")
    model = NeuronModelForCausalLM.export(MODEL_ID, neuron_config=config, load_weights=True)
    return model
""",
            after="""\
import os
from transformers import AutoModelForCausalLM, DistributedConfig

os.environ.setdefault("HF_DEACTIVATE_ASYNC_LOAD", "1")

MODEL_ID = "Qwen/Qwen3-0.6B"


def load(prompts):
    print(f"compiling {MODEL_ID} for {len(prompts)} prompts")
    # TODO(neuron-migrate): NM103 Rewritten to DistributedConfig(tp_size=2), which shards the model over 2 processes: optimum-neuron ran it in one, and nothing here shows torchrun starting this script; launch the script with `torchrun --nproc_per_node=2` (all ranks run generate; print on rank 0)
    model = AutoModelForCausalLM.from_pretrained(MODEL_ID, distributed_config=DistributedConfig(tp_size=2))
    model.generation_config.cache_implementation = "static"
    model.generation_config.max_cache_len = 1024
    return model
""",
        ),
        Example(
            before="""\
from optimum.neuron import NeuronModelForCausalLM

if __name__ == "__main__":
    neuron_config = NeuronModelForCausalLM.get_neuron_config(
        "meta-llama/Llama-3.2-1B", batch_size=1, sequence_length=2048
    )
    model = NeuronModelForCausalLM.from_pretrained(
        "meta-llama/Llama-3.2-1B", neuron_config=neuron_config, export=True
    )
""",
            after="""\
import os
from transformers import AutoModelForCausalLM

os.environ.setdefault("HF_DEACTIVATE_ASYNC_LOAD", "1")

if __name__ == "__main__":
    model = AutoModelForCausalLM.from_pretrained(
        "meta-llama/Llama-3.2-1B", device_map="neuron"
    )
    model.generation_config.cache_implementation = "static"
    model.generation_config.max_cache_len = 2048
""",
        ),
    ),
)
RULES = (NEURON_CONFIG_PAIR,)
_PAIRED_EXPORT_ARGS = frozenset({"load_weights", "token", "revision"})


class NeuronConfigPairs(Handler):
    """Finds the pairs when the walk enters a scope (the module, a function, a class body)."""

    HINTS = HINTS
    TRIGGERS = TRIGGERS

    def __init__(self, ctx: FileContext) -> None:
        super().__init__(ctx)
        self.file = ctx.state(InferenceFile)

    def visit_Module(self, node: cst.Module) -> None:
        self._pair(node)

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        self._pair(node)

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        self._pair(node)

    def _pair(self, scope: cst.CSTNode) -> None:
        """In one function (or the module, or a class body), pair `cfg = X.get_neuron_config(...)` with a
        later `m = X.export(id, cfg)` (or `neuron_config=cfg`, or `X.from_pretrained(id, neuron_config=cfg)`),
        wherever the two statements sit in its blocks, when `cfg` is used nowhere else and both name the
        same checkpoint expression."""
        if "get_neuron_config" not in self.ctx.source.identifiers:
            return  # no config to pair
        configs: dict[str, cst.Call] = {}
        for statement in _statements(scope):
            value, target = _assigned(statement)
            if value is None:
                continue
            if m.matches(value.func, m.Attribute(attr=m.Name("get_neuron_config"))) and isinstance(
                target, cst.Name
            ):
                configs[target.value] = value
                continue
            passed = _passed_config(value)
            config = configs.get(passed.value) if isinstance(passed, cst.Name) else None
            if config is None:
                continue
            why = _unpaired(scope, config, value, passed, target)
            if why is None:
                self.file.config_pairs[value] = config
                self.file.paired_configs.add(config)
            else:
                line = (self.ctx.source_map.position(config) or (0,))[0]
                self.file.unpaired_configs[value] = f"built by get_neuron_config on line {line}, but {why}"
                line = (self.ctx.source_map.position(value) or (0,))[0]
                self.file.unpaired_configs[config] = f"the load on line {line} consumes it, but {why}"


def _unpaired(
    scope: cst.CSTNode, config: cst.Call, load: cst.Call, passed: cst.Name, target: cst.BaseExpression | None
) -> str | None:
    """Why the `get_neuron_config` call `config` cannot merge into the load that consumes it (`passed`, the
    name holding it); None when it can."""
    if not config.args or config.args[0].keyword is not None:
        return "it does not name its checkpoint as its first positional argument"
    if source_code(config.args[0].value) != source_code(load.args[0].value):
        return "it names another checkpoint expression than the load"
    if _references(scope, passed.value) != 2:  # the assignment + the argument only
        return f"`{passed.value}` is used elsewhere too"
    unknown = [
        arg for arg in config.args[1:] if arg.keyword is None or arg.keyword.value not in t.CONFIG_ARGS
    ] + [
        arg
        for arg in load.args[1:]
        if arg.value is not passed
        and (
            arg.keyword is None or arg.keyword.value not in _PAIRED_EXPORT_ARGS | {"neuron_config", "export"}
        )
    ]
    if unknown:
        return (
            "it or the load passes arguments the codemod does not map ("
            + ", ".join(f"`{source_code(arg).rstrip(', ')}`" for arg in unknown)
            + ")"
        )
    if not isinstance(target, (cst.Name, cst.Attribute)):
        return "the load's result is not assigned to a name"
    return None


def _statements(scope: cst.CSTNode) -> list[cst.SimpleStatementLine]:
    """The simple statements of a module, function or class in source order, those of nested functions
    and classes excluded (they are scopes of their own)."""
    found: list[cst.SimpleStatementLine] = []

    def walk(node: cst.CSTNode) -> None:
        for child in node.children:
            if isinstance(child, cst.SimpleStatementLine):
                found.append(child)
            elif isinstance(child, _BLOCKS) and not isinstance(child, (cst.FunctionDef, cst.ClassDef)):
                walk(child)

    walk(scope.body if isinstance(scope, (cst.FunctionDef, cst.ClassDef)) else scope)
    return found


_BLOCKS = (
    cst.BaseSuite,
    cst.BaseCompoundStatement,
    cst.Else,
    cst.ExceptHandler,
    cst.ExceptStarHandler,
    cst.Finally,
    cst.MatchCase,
)


def _references(scope: cst.CSTNode, name: str) -> int:
    """How many times `name` is read or bound in `scope` (keyword names and attribute names do not count)."""
    nodes = descendants(scope, (cst.Name, cst.Arg, cst.Attribute))
    not_references = {n.keyword for n in nodes if isinstance(n, cst.Arg)}
    not_references |= {n.attr for n in nodes if isinstance(n, cst.Attribute)}
    return sum(isinstance(n, cst.Name) and n.value == name and n not in not_references for n in nodes)


def _passed_config(call: cst.Call) -> cst.BaseExpression | None:
    """The neuron config given to a load: `export(id, cfg)`, `export(id, neuron_config=cfg)`,
    `from_pretrained(id, neuron_config=cfg)`."""
    keyword = next((a.value for a in call.args if m.matches(a.keyword, m.Name("neuron_config"))), None)
    if m.matches(call.func, m.Attribute(attr=m.Name("export"))) and len(call.args) >= 2:
        return keyword or (call.args[1].value if call.args[1].keyword is None else None)
    if m.matches(call.func, m.Attribute(attr=m.Name("from_pretrained"))) and call.args:
        return keyword
    return None


def _assigned(statement) -> tuple[cst.Call | None, cst.BaseExpression | None]:
    if not m.matches(statement, m.SimpleStatementLine(body=[m.Assign(targets=[m.AssignTarget()])])):
        return None, None
    assign = statement.body[0]
    return (assign.value, assign.targets[0].target) if isinstance(assign.value, cst.Call) else (None, None)


HANDLER = NeuronConfigPairs
