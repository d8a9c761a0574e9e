"""What a tried script will ask of the Hub and of the process launcher, read from its code (Python's `ast`).

- Hub ids: string constants (argparse and dataclass defaults included) and command-line values that the
  model-id table knows, or that sit in a model-named argument; unknown ones are served only if `--model` names
  them (the run's error then says which id had no stand-in).
- Datasets: `load_dataset(...)` calls (id, config, split, or the splits its DatasetDict is subscripted with)
  and dataset-named defaults, with the columns the code reads: string subscripts of examples and batches,
  `dataset_text_field`, `remove_columns`, `formatting_func` bodies, chat `messages`.
- Token ids: the largest bound of `torch.randint(...)` calls (a literal, or a module-level constant), so the
  tiny models' vocabulary holds the ids a script draws as random input.
- Several processes: a script that wraps a model in DDP/FSDP, shards it or asks Transformers for tensor
  parallelism is run under torchrun; a `DistributedConfig` with literal degrees says how many its grid needs.
"""

from __future__ import annotations

import ast
import math
from dataclasses import dataclass, field

from try_run import data
from usercode import composed_strings, model_ids
from usercode.names import DATASET_NAME_PARTS, MODEL_NAME_PARTS
from usercode.python import callee, is_constant, keyword, string

# Dataset builders `datasets` ships: a load of these reads local files, used as they are.
PACKAGED_BUILDERS = frozenset(
    {
        "json",
        "csv",
        "parquet",
        "text",
        "arrow",
        "pandas",
        "imagefolder",
        "audiofolder",
        "videofolder",
        "webdataset",
        "xml",
        "sql",
    }
)
COLUMN_KEYWORDS = ("dataset_text_field", "text_column", "text_field", "input_column", "label_column")
COLUMN_LIST_KEYWORDS = ("remove_columns", "input_columns", "columns")
MULTI_PROCESS_NAMES = {
    "DistributedDataParallel": "wraps the model in DistributedDataParallel",
    "fully_shard": "shards the model with FSDP2 (fully_shard)",
    "FullyShardedDataParallel": "wraps the model in FSDP",
    "DistributedConfig": "asks Transformers for tensor/FSDP parallelism (DistributedConfig)",
    "init_process_group": "starts a process group (init_process_group)",
}
LOADERS = frozenset({"from_pretrained", "pipeline", "SentenceTransformer", "CrossEncoder"})
# DistributedConfig's degrees whose product is the processes its grid needs (the bootstrap's PARALLEL_SIZES).
GRID_DEGREES = ("tp_size", "pp_size", "fsdp_size", "dp_replicate_size")


@dataclass
class CodeFacts:
    model_ids: set[str] = field(default_factory=set)  # ids the table knows, or in a model-named slot
    datasets: dict[str, data.DatasetRequest] = field(default_factory=dict)
    columns: set[str] = field(default_factory=set)
    multi_process: str | None = None  # why it needs torchrun
    grid_processes: int = (
        1  # the processes a DistributedConfig's literal degrees ask for (tp_size=2, fsdp_size=2: 4)
    )
    token_ids_below: int = 0  # the largest bound of the random token ids the code draws
    unresolved_ids: dict[str, str] = field(default_factory=dict)  # pattern -> why it was not resolved
    remote_code: bool = False  # a load passes trust_remote_code=True

    def merge(self, other: CodeFacts) -> None:
        self.model_ids |= other.model_ids
        self.unresolved_ids |= other.unresolved_ids
        self.remote_code = self.remote_code or other.remote_code
        self.token_ids_below = max(self.token_ids_below, other.token_ids_below)
        self.columns |= other.columns
        for dataset_id, request in other.datasets.items():
            mine = self.datasets.setdefault(dataset_id, data.DatasetRequest(dataset_id, request.config))
            mine.splits |= request.splits
            mine.columns |= request.columns
            mine.config = mine.config or request.config
        self.multi_process = self.multi_process or other.multi_process
        self.grid_processes = max(self.grid_processes, other.grid_processes)


def is_hub_dataset(dataset_id: str) -> bool:
    return dataset_id not in PACKAGED_BUILDERS and (
        bool(model_ids.HUB_ID.match(dataset_id)) or data.table_entry(dataset_id) is not None
    )


def _named_defaults(tree: ast.AST) -> list[tuple[str, str]]:
    """(name, default) of argparse arguments and dataclass fields / annotated assignments."""
    pairs = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and callee(node) == "add_argument":
            names = [string(argument) or "" for argument in node.args]
            default = string(keyword(node, "default"))
            if default is not None:
                pairs += [(name.lstrip("-"), default) for name in names]
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value is not None:
            value = node.value
            if isinstance(value, ast.Call) and callee(value) == "field":
                value = keyword(value, "default")
            default = string(value)
            if default is not None:
                pairs.append((node.target.id, default))
        elif (
            isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)
        ):
            default = string(node.value)
            if default is not None:
                pairs.append((node.targets[0].id, default))
    return pairs


def read_python(source: str, argv: list[str] = ()) -> CodeFacts:
    """Facts of one module (raises SyntaxError)."""
    tree = ast.parse(source)
    facts = CodeFacts()
    facts.unresolved_ids = _unresolved_ids(composed_strings.fold(tree))
    named = _named_defaults(tree) + _argv_pairs(list(argv))
    integers = _module_integers(tree)
    dataset_dicts = _dataset_dicts(tree)
    for node in ast.walk(tree):
        value = string(node)
        if (
            value is not None
            and model_ids.HUB_ID.match(value)
            or (value is not None and model_ids.table_entry(value) is not None and not value.isdigit())
        ):
            if model_ids.table_entry(value) is not None:
                facts.model_ids.add(value)
            elif data.table_entry(value) is not None:
                facts.datasets.setdefault(value, data.DatasetRequest(value))
        if isinstance(node, ast.Subscript):
            key = string(node.slice)
            dataset_id = _dataset_dict_id(node.value, dataset_dicts)
            if key is not None and dataset_id is not None:  # `dataset["test"]`: a split, not a column
                if dataset_id == "" or is_hub_dataset(dataset_id):
                    facts.datasets.setdefault(dataset_id, data.DatasetRequest(dataset_id)).splits.add(key)
            elif key is not None and not _is_environ(node.value):
                facts.columns.add(key)
        elif isinstance(node, ast.Call):
            _read_call(node, facts)
            facts.token_ids_below = max(facts.token_ids_below, _randint_bound(node, integers))
        elif isinstance(node, ast.Name | ast.Attribute):
            name = node.id if isinstance(node, ast.Name) else node.attr
            if name in MULTI_PROCESS_NAMES and facts.multi_process is None:
                facts.multi_process = MULTI_PROCESS_NAMES[name]
    for word in argv:  # a Hub id given as a positional argument (`python eval.py bert-base-cased`)
        if (
            not word.startswith("-")
            and model_ids.table_entry(word)
            and model_ids.looks_like_model_reference(word)
        ):
            facts.model_ids.add(word)
    for name, value in named:
        lowered = name.lower()
        if any(word in lowered for word in DATASET_NAME_PARTS) and is_hub_dataset(value):
            facts.datasets.setdefault(value, data.DatasetRequest(value))
        elif (
            any(word in lowered for word in MODEL_NAME_PARTS)
            and model_ids.HUB_ID.match(value)
            or model_ids.table_entry(value) is not None
            and model_ids.looks_like_model_reference(value)
        ):
            facts.model_ids.add(value)
    splits = {split for request in facts.datasets.values() for split in request.splits}
    for request in facts.datasets.values():
        request.columns = set(facts.columns)
        request.splits |= splits  # a split asked of a dataset named through a variable
    return facts


def _unresolved_ids(compositions: list[composed_strings.Unresolved]) -> dict[str, str]:
    """Model ids the code builds from a value known only at run time (`f"openai/whisper-{size}"`)."""
    return {
        found.pattern: (
            f"model id {found.code} (line {found.line}) is built from a value known only at run time; "
            f"pass --model ID=MODEL_TYPE for the id it builds"
        )
        for found in compositions
        if model_ids.table_entry(found.pattern.replace(composed_strings.UNKNOWN, "x")) is not None
    }


def _module_integers(tree: ast.Module) -> dict[str, int]:
    """Module-level integer constants (`VOCAB = 32000`, `BATCH, SEQ = 8, 128`)."""
    found = {}
    for node in tree.body:
        if not isinstance(node, ast.Assign) or len(node.targets) != 1:
            continue
        target, value = node.targets[0], node.value
        pairs = (
            zip(target.elts, value.elts, strict=False)
            if isinstance(target, ast.Tuple) and isinstance(value, ast.Tuple)
            else [(target, value)]
        )
        for name, constant in pairs:
            if isinstance(name, ast.Name) and _integer(constant, {}) is not None:
                found[name.id] = _integer(constant, {})
    return found


def _integer(node: ast.AST | None, integers: dict[str, int]) -> int | None:
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return node.value
    return integers.get(node.id) if isinstance(node, ast.Name) else None


def _randint_bound(call: ast.Call, integers: dict[str, int]) -> int:
    """The exclusive upper bound of `torch.randint(high, size)` / `torch.randint(low, high, size)`, else 0."""
    function = call.func
    if not (
        isinstance(function, ast.Attribute)
        and function.attr == "randint"
        and isinstance(function.value, ast.Name)
        and function.value.id == "torch"
    ):
        return 0
    high = keyword(call, "high")
    if high is None and call.args:
        # randint(low, high, size) when its second argument is a number, else randint(high, size)
        second = call.args[1] if len(call.args) > 1 else None
        high = second if _integer(second, integers) is not None else call.args[0]
    return _integer(high, integers) or 0


def _argv_pairs(argv: list[str]) -> list[tuple[str, str]]:
    """(option, value) pairs of a command line: `--model_id X` and `--model_id=X`."""
    pairs = []
    for index, word in enumerate(argv):
        if not word.startswith("--"):
            continue
        name, has_value, value = word[2:].partition("=")
        if has_value:
            pairs.append((name, value))
        elif index + 1 < len(argv) and not argv[index + 1].startswith("--"):
            pairs.append((name, argv[index + 1]))
    return pairs


def _dataset_dicts(tree: ast.AST) -> dict[str, str]:
    """Names bound to a `load_dataset(...)` without a split (a DatasetDict) -> the dataset's id, or its
    packaged builder ("json"...), or "" when a variable names it."""
    names = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and (dataset_id := _dataset_dict_id(node.value, {})) is not None:
            names.update({target.id: dataset_id for target in node.targets if isinstance(target, ast.Name)})
    return names


def _dataset_dict_id(node: ast.AST, dataset_dicts: dict[str, str]) -> str | None:
    """The dataset id of an expression that is a DatasetDict: a name bound to one, or the split-less call."""
    if isinstance(node, ast.Name):
        return dataset_dicts.get(node.id)
    if not (isinstance(node, ast.Call) and callee(node) == "load_dataset") or keyword(node, "split"):
        return None
    path = string(node.args[0]) if node.args else string(keyword(node, "path"))
    return "" if path is None else path


def _is_environ(node: ast.AST) -> bool:
    return (
        isinstance(node, ast.Attribute)
        and node.attr == "environ"
        or (isinstance(node, ast.Name) and node.id == "environ")
    )


def _read_call(call: ast.Call, facts: CodeFacts) -> None:
    name = callee(call)
    loaded = string(keyword(call, "model")) or (string(call.args[0]) if call.args else None)
    if name in LOADERS and loaded is not None and model_ids.HUB_ID.match(loaded):
        facts.model_ids.add(loaded)  # an id the table does not know: its run ends with the --model advice
    if is_constant(keyword(call, "trust_remote_code"), True):
        facts.remote_code = True
    if name == "load_dataset":
        path = string(call.args[0]) if call.args else string(keyword(call, "path"))
        config = string(call.args[1]) if len(call.args) > 1 else string(keyword(call, "name"))
        split = string(keyword(call, "split"))
        if path is not None and is_hub_dataset(path):
            request = facts.datasets.setdefault(path, data.DatasetRequest(path))
            request.config = request.config or config
            if split:
                request.splits |= {part for part in split.split("+")}
        elif path is None and split:
            # A dataset named through a variable: its split still tells which splits to write.
            facts.datasets.setdefault("", data.DatasetRequest("")).splits.add(split)
    for argument in call.keywords:
        if argument.arg in COLUMN_KEYWORDS and string(argument.value):
            facts.columns.add(string(argument.value))
        elif argument.arg in COLUMN_LIST_KEYWORDS and isinstance(argument.value, ast.List | ast.Tuple):
            facts.columns |= {string(item) for item in argument.value.elts if string(item)}
    if name == "DistributedConfig":
        degrees = [keyword(call, degree) for degree in GRID_DEGREES]
        literal = [
            degree.value
            for degree in degrees
            if isinstance(degree, ast.Constant) and isinstance(degree.value, int)
        ]
        facts.grid_processes = max(facts.grid_processes, math.prod(max(1, degree) for degree in literal))
    if name == "apply_chat_template":
        facts.columns.add("messages")
