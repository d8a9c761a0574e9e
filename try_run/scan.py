"""What a tried script will ask of the Hub and of the process launcher, read from its code (Python's `ast`).

- Hub ids: string constants (argparse and dataclass defaults included) and command-line values that the
  model-id table knows, or that sit in a model-named argument; unknown ones are served only if `--model` names
  them (the run's error then says which id had no stand-in).
- Datasets: `load_dataset(...)` calls (id, config, split, or the splits its DatasetDict is subscripted with)
  and dataset-named defaults, with the columns the code reads: string subscripts of examples and batches,
  `dataset_text_field`, `remove_columns`, `formatting_func` bodies, chat `messages`.
- Saved datasets: the folders `load_from_disk(...)` reads, where the code names them by a literal, an argument
  (its command-line value or its default) or an `os.path.join` of those.
- Token ids: the largest bound of `torch.randint(...)` calls (a literal, or a module-level constant), so the
  tiny models' vocabulary holds the ids a script draws as random input.
- Several processes: a script that wraps a model in DDP/FSDP, shards it or asks Transformers for tensor
  parallelism is run under torchrun; a `DistributedConfig` with literal degrees says how many its grid needs.
- Logging integrations: the `report_to` of training arguments (a literal, the command line's `--report_to`,
  else the argument's default), whose packages the try installs (integrations.py).
- SageMaker's training environment: the `SM_*` variables the code reads (`os.environ["SM_MODEL_DIR"]`,
  `os.environ.get("SM_CHANNEL_EVAL")`, `os.getenv(...)`), and what it reads in each channel: a variable read is
  resolved to the folder a try gives it (sagemaker.py), so `load_from_disk(args.training_dir)` with
  `default=os.environ["SM_CHANNEL_TRAIN"]` is a saved dataset at that channel's folder, and
  `os.path.join(os.environ["SM_CHANNEL_TRAIN"], "train.csv")` a file of it.
- A sequence classifier: a `...ForSequenceClassification` class named in the code, or a command-line value
  ending in `SequenceClassification` (a script that builds the class name from `--task`): its saved dataset's
  `labels` are class labels.
"""

from __future__ import annotations

import ast
import builtins
import math
import os
import re
from collections.abc import Callable
from dataclasses import dataclass, field

import yaml

from try_run import data, sagemaker
from usercode import composed_strings, model_ids
from usercode.launchers import CONFIG_SUFFIXES
from usercode.names import COMPILED_MODEL_LOADER, DATASET_NAME_PARTS, MODEL_NAME_PARTS
from usercode.python import callee, environment_read, is_constant, keyword, string

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
# Dataset methods whose first argument names existing columns (a name or a list of names).
COLUMN_METHODS = frozenset(
    {"rename_column", "remove_columns", "select_columns", "cast_column", "class_encode_column"}
)
MULTI_PROCESS_NAMES = {
    "DistributedDataParallel": "wraps the model in DistributedDataParallel",
    "fully_shard": "shards the model with FSDP2 (fully_shard)",
    "FullyShardedDataParallel": "wraps the model in FSDP",
    "DistributedConfig": "asks Transformers for tensor/FSDP parallelism (DistributedConfig)",
    "init_process_group": "starts a process group (init_process_group)",
}
LOADERS = frozenset({"from_pretrained", "pipeline", "SentenceTransformer", "CrossEncoder"})
# huggingface_hub's downloads: their repo_id is a Hub id; their local_dir a folder the code then loads from.
DOWNLOADS = frozenset({"snapshot_download", "hf_hub_download"})
# Modules whose values are never a dataset's rows: the subscripts of what they give (an environment, an AWS or
# SageMaker response, a parsed JSON or YAML file, an HTTP reply) are not the dataset's columns.
NOT_DATASET_MODULES = frozenset({"os", "boto3", "botocore", "sagemaker", "json", "yaml", "requests"})
FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef)
BUILTINS = frozenset(dir(builtins))
# What a class label's feature is read for (`features["label"].names`, `.feature.num_classes` of a tag column).
CLASS_LABEL_ATTRIBUTES = frozenset({"names", "num_classes", "int2str", "str2int"})
# Classes of a tag column the code reads the names of: B- and I- of one entity type, and O.
TAG_CLASSES = 3
# Subscripts of a `load_from_disk` result that name a split of the DatasetDict it saved, not a column.
SPLIT_NAMES = frozenset({"train", "validation", "valid", "val", "test", "eval", "dev", "unsupervised"})
CLASSIFIER_SUFFIX = "SequenceClassification"
# DistributedConfig's degrees whose product is the processes its grid needs (the bootstrap's PARALLEL_SIZES).
GRID_DEGREES = ("tp_size", "pp_size", "fsdp_size", "dp_replicate_size")


@dataclass
class CodeFacts:
    model_ids: set[str] = field(default_factory=set)  # ids the table knows, or in a model-named slot
    datasets: dict[str, data.DatasetRequest] = field(default_factory=dict)
    columns: set[str] = field(default_factory=set)
    column_kinds: dict[str, str] = field(default_factory=dict)  # column -> kind, from how the code reads it
    multi_process: str | None = None  # why it needs torchrun
    grid_processes: int = (
        1  # the processes a DistributedConfig's literal degrees ask for (tp_size=2, fsdp_size=2: 4)
    )
    token_ids_below: int = 0  # the largest bound of the random token ids the code draws
    rows_selected: int = 0  # the largest N of `split.select(range(N))`: the rows each split needs at least
    unresolved_ids: dict[str, str] = field(default_factory=dict)  # pattern -> why it was not resolved
    local_dirs: set[str] = field(default_factory=set)  # folders the code downloads into (local_dir=)
    launched: set[str] = field(
        default_factory=set
    )  # the user's scripts it launches (`!torchrun ../x.py`): paths
    remote_code: bool = False  # a load passes trust_remote_code=True
    saved_datasets: set[str] = field(
        default_factory=set
    )  # folders `load_from_disk` reads, as the code names them
    report_to: set[str] = field(default_factory=set)  # the integrations training arguments report to
    saved_splits: dict[str, set[str]] = field(
        default_factory=dict
    )  # saved folder -> the splits the code takes
    # the SageMaker training variables it reads -> whether a read needs it set (`os.environ["X"]`, not `.get`)
    sagemaker_variables: dict[str, bool] = field(default_factory=dict)
    channel_paths: set[str] = field(default_factory=set)  # paths in SageMaker channels it names (not folders
    # it loads from disk): `/opt/ml/input/data/train/train.csv`, or a channel's folder it reads some other way
    sequence_classifier: bool = False  # it trains a ...ForSequenceClassification model

    def hub_ids(self) -> set[str]:
        """The model ids to serve from the Hub: not the folders the code downloads into
        (`from_pretrained("./models/x")` after `snapshot_download(ID, local_dir="./models/x")`)."""
        local = {os.path.normpath(folder) for folder in self.local_dirs}
        return {model_id for model_id in self.model_ids if os.path.normpath(model_id) not in local}

    def merge(self, other: CodeFacts) -> None:
        self.model_ids |= other.model_ids
        self.unresolved_ids |= other.unresolved_ids
        self.local_dirs |= other.local_dirs
        self.launched |= other.launched
        self.remote_code = self.remote_code or other.remote_code
        self.saved_datasets |= other.saved_datasets
        self.report_to |= other.report_to
        for folder, splits in other.saved_splits.items():
            self.saved_splits.setdefault(folder, set()).update(splits)
        for name, required in other.sagemaker_variables.items():
            self.sagemaker_variables[name] = self.sagemaker_variables.get(name, False) or required
        self.channel_paths |= other.channel_paths
        self.sequence_classifier = self.sequence_classifier or other.sequence_classifier
        self.token_ids_below = max(self.token_ids_below, other.token_ids_below)
        self.rows_selected = max(self.rows_selected, other.rows_selected)
        self.columns |= other.columns
        self.column_kinds |= other.column_kinds
        for dataset_id, request in other.datasets.items():
            mine = self.datasets.setdefault(dataset_id, data.DatasetRequest(dataset_id, request.config))
            mine.splits |= request.splits
            mine.columns |= request.columns
            mine.kinds |= request.kinds
            mine.config = mine.config or request.config
        self.multi_process = self.multi_process or other.multi_process
        self.grid_processes = max(self.grid_processes, other.grid_processes)


def is_hub_dataset(dataset_id: str) -> bool:
    return dataset_id not in PACKAGED_BUILDERS and (
        bool(model_ids.HUB_ID.match(dataset_id)) or data.table_entry(dataset_id) is not None
    )


# `load_dataset("yelp_review_full")`: a bare name there is a canonical Hub dataset (the Hub serves it from its
# owner's namespace); a dot would make it a file. Only as load_dataset's path: elsewhere a bare string is a split.
CANONICAL_DATASET = re.compile(r"^[A-Za-z0-9][\w-]{1,95}$")


def is_loaded_hub_dataset(path: str) -> bool:
    return is_hub_dataset(path) or (path not in PACKAGED_BUILDERS and bool(CANONICAL_DATASET.match(path)))


def _named_defaults(tree: ast.AST) -> list[tuple[str, str]]:
    """(name, default) of argparse arguments and dataclass fields / annotated assignments."""
    pairs = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and callee(node) == "add_argument":
            names = [string(argument) or "" for argument in node.args]
            default = _default(keyword(node, "default"))
            if default is not None:
                pairs += [(name.lstrip("-"), default) for name in names]
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value is not None:
            value = node.value
            if isinstance(value, ast.Call) and callee(value) == "field":
                value = keyword(value, "default")
            default = _default(value)
            if default is not None:
                pairs.append((node.target.id, default))
        elif (
            isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)
        ):
            default = _default(node.value)
            if default is not None:
                pairs.append((node.targets[0].id, default))
    return pairs


def _default(node: ast.AST | None) -> str | None:
    """A default's value: a string literal, or the folder an expression that reads a SageMaker variable names
    in a try (`os.path.join(os.environ["SM_CHANNEL_TRAIN"], "train.csv")`)."""
    if node is None or string(node) is not None:
        return string(node)
    reads = (environment_read(inner) for inner in ast.walk(node))
    if any(read is not None and sagemaker.is_training_variable(read.name) for read in reads):
        return _folder(node, {})
    return None


def read_python(source: str, argv: list[str] = ()) -> CodeFacts:
    """Facts of one module (raises SyntaxError)."""
    tree = ast.parse(source)
    facts = CodeFacts()
    facts.unresolved_ids = _unresolved_ids(composed_strings.fold(tree))
    defaults = _named_defaults(tree)
    named = defaults + _argv_pairs(list(argv))
    integers = _module_integers(tree)
    dataset_dicts = _dataset_dicts(tree)
    foreign = _foreign_subscripts(tree)
    arguments = {name.replace("-", "_"): value for name, value in named}
    saved_names = _saved_dataset_names(tree, arguments)
    facts.channel_paths |= {value for _, value in named if sagemaker.channel_of_path(value)}
    _read_sagemaker(tree, arguments, argv, facts)
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
            _read_subscript(node, facts, dataset_dicts, saved_names, foreign)
        elif isinstance(node, ast.Call):
            _read_call(node, facts)
            local_dir = keyword(node, "local_dir") if callee(node) in DOWNLOADS else None
            if local_dir is not None:  # a literal, or a name bound to one
                folder = string(local_dir) or (
                    dict(named).get(local_dir.id) if isinstance(local_dir, ast.Name) else None
                )
                facts.local_dirs |= {folder} if folder else set()
            if callee(node) == "load_from_disk" and node.args:
                folder = _folder(node.args[0], arguments)
                facts.saved_datasets |= {folder} if folder else set()
            facts.token_ids_below = max(facts.token_ids_below, _randint_bound(node, integers))
            facts.rows_selected = max(facts.rows_selected, _selected_rows(node, integers))
        elif isinstance(node, ast.Name | ast.Attribute):
            if isinstance(node, ast.Attribute):
                facts.column_kinds.update(_column_kind(node))
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
        if (
            any(word in lowered for word in DATASET_NAME_PARTS)
            and is_hub_dataset(value)
            and not _holds_saved(value, facts.saved_datasets)
        ):
            facts.datasets.setdefault(value, data.DatasetRequest(value))
        elif (
            any(word in lowered for word in MODEL_NAME_PARTS)
            and model_ids.HUB_ID.match(value)
            or model_ids.table_entry(value) is not None
            and model_ids.looks_like_model_reference(value)
        ):
            facts.model_ids.add(value)
    # `--report_to tensorboard wandb` (HfArgumentParser takes a list), else the argument's default in the code
    given = _option_values(list(argv), "report_to")
    facts.report_to |= given or {value for name, value in defaults if name == "report_to"}
    splits = {split for request in facts.datasets.values() for split in request.splits}
    for request in facts.datasets.values():
        request.columns = set(facts.columns)
        request.kinds = dict(facts.column_kinds)
        request.splits |= splits  # a split asked of a dataset named through a variable
    return facts


def _read_sagemaker(tree: ast.AST, arguments: dict[str, str], argv: list[str], facts: CodeFacts) -> None:
    """The SageMaker training variables the code reads, the paths in channels it names (resolved with the
    folders a try gives the variables, sagemaker.py), and whether it trains a sequence classifier."""
    facts.sequence_classifier = any(word.endswith(CLASSIFIER_SUFFIX) for word in argv)
    for node in ast.walk(tree):
        if isinstance(node, ast.Name | ast.Attribute):
            name = node.id if isinstance(node, ast.Name) else node.attr
            facts.sequence_classifier |= name.endswith("For" + CLASSIFIER_SUFFIX)
        read = environment_read(node)
        if read is not None and sagemaker.is_training_variable(read.name):
            required = facts.sagemaker_variables.get(read.name, False) or read.required
            facts.sagemaker_variables[read.name] = required
        path = _folder(node, arguments) if read is not None or _is_join(node) else None
        if path is not None and sagemaker.channel_of_path(path):
            facts.channel_paths.add(path)


def _holds_saved(value: str, folders: set[str]) -> bool:
    """Whether `value` names a folder `load_from_disk` reads, or one that holds them (`data/emotion` of
    `os.path.join(args.dataset_path, "train")`): a local folder, not a Hub dataset id."""
    value = os.path.normpath(value)
    folders = {os.path.normpath(folder) for folder in folders}
    return any(folder == value or folder.startswith(value + os.sep) for folder in folders)


def _folder(node: ast.AST | None, named: dict[str, str]) -> str | None:
    """The folder an expression names: a literal, an argument (`args.dataset_path`: its command-line value, else
    its default), a SageMaker variable (`os.environ["SM_CHANNEL_TRAIN"]`: the folder a try gives it), or an
    `os.path.join` of those; None when a part is known only at run time."""
    if string(node) is not None:
        return string(node)
    read = environment_read(node) if node is not None else None
    if read is not None:
        return sagemaker.folder_value(read.name) if sagemaker.is_training_variable(read.name) else None
    if isinstance(node, ast.Name | ast.Attribute):
        return named.get(node.id if isinstance(node, ast.Name) else node.attr)
    if _is_join(node):
        parts = [_folder(part, named) for part in node.args]
        return None if None in parts else os.path.join(*parts)
    return None


def _is_join(node: ast.AST) -> bool:
    return isinstance(node, ast.Call) and callee(node) == "join" and bool(node.args) and not node.keywords


def _read_subscript(
    node: ast.Subscript,
    facts: CodeFacts,
    dataset_dicts: dict[str, str],
    saved_names: dict[str, str],
    foreign: set[int],
) -> None:
    """`x["key"]`: a split of a dataset the code loads, or a column its rows hold."""
    key = string(node.slice)
    dataset_id = _dataset_dict_id(node.value, dataset_dicts)
    saved = _saved_split(node, saved_names)
    if saved is not None:  # `load_from_disk(path)["train"]`: a DatasetDict's split
        facts.saved_splits.setdefault(saved, set()).add(key)
    elif key is not None and dataset_id is not None:  # `dataset["test"]`: a split, not a column
        if dataset_id == "" or is_loaded_hub_dataset(dataset_id):
            facts.datasets.setdefault(dataset_id, data.DatasetRequest(dataset_id)).splits.add(key)
    elif key is not None and id(node) not in foreign and not isinstance(node.ctx, ast.Store):
        # (`data_files["eval"] = path`, `batch["labels"] = ids`: written, not a column the data holds)
        facts.columns.add(key)


def _saved_split(node: ast.Subscript, saved_names: dict[str, str]) -> str | None:
    """The folder of a saved DatasetDict whose split `node` takes (`dataset["train"]`, `dataset` bound to a
    `load_from_disk(folder)`), else None."""
    if isinstance(node.value, ast.Name) and string(node.slice) in SPLIT_NAMES:
        return saved_names.get(node.value.id)
    return None


def _saved_dataset_names(tree: ast.AST, named: dict[str, str]) -> dict[str, str]:
    """Names bound to a `load_from_disk(folder)` -> the folder (its string subscripts may be splits)."""
    names = {}
    for node in ast.walk(tree):
        value = node.value if isinstance(node, ast.Assign) else None
        if isinstance(value, ast.Call) and callee(value) == "load_from_disk" and value.args:
            folder = _folder(value.args[0], named)
            names.update({t.id: folder for t in node.targets if isinstance(t, ast.Name) and folder})
    return names


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


def _selected_rows(call: ast.Call, integers: dict[str, int]) -> int:
    """N of `dataset.select(range(N))` / `select(range(start, N))`, else 0."""
    argument = call.args[0] if call.args else None
    if not (
        isinstance(call.func, ast.Attribute)
        and call.func.attr == "select"
        and isinstance(argument, ast.Call)
        and callee(argument) == "range"
        and argument.args
    ):
        return 0
    return _integer(argument.args[1] if len(argument.args) > 1 else argument.args[0], integers) or 0


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


def config_arguments(argv: list[str], read: Callable[[str], str | None]) -> list[str]:
    """The settings of the configuration files a command line names (`--config train.yaml`, as TrlParser and
    HfArgumentParser read one), as the flags they stand for: `model_id: X` is `--model_id X`, `report_to: [a, b]`
    is `--report_to a b`. `read(PATH)`: the file's text, None where there is none."""
    words: list[str] = []
    for word in argv:
        text = read(word) if word.lower().endswith(CONFIG_SUFFIXES) else None
        try:
            settings = yaml.safe_load(text) if text is not None else None  # (JSON is YAML too)
        except yaml.YAMLError:
            continue
        for key, value in (settings or {}).items() if isinstance(settings, dict) else ():
            values = value if isinstance(value, list) else [value]
            scalars = [str(v) for v in values if isinstance(v, str | int | float) and not isinstance(v, bool)]
            if isinstance(key, str) and scalars and len(scalars) == len(values):
                words += [f"--{key}", *scalars]
    return words


def _option_values(argv: list[str], option: str) -> set[str]:
    """The values a command line gives `--option`: `--option A B` and `--option=A`."""
    values = set()
    for index, word in enumerate(argv):
        name, has_value, value = word.partition("=")
        if name != f"--{option}":
            continue
        if has_value:
            values.add(value)
        else:
            following = argv[index + 1 :]
            values.update(following[: next((i for i, w in enumerate(following) if w.startswith("-")), None)])
    return values


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
        if isinstance(node, ast.Assign) and (dataset_id := _dataset_dict_id(node.value, names)) is not None:
            names.update({target.id: dataset_id for target in node.targets if isinstance(target, ast.Name)})
    return names


# DatasetDict methods that return a DatasetDict (`tokenized = raw.map(...)`; `tokenized["train"]` is a split).
DATASET_DICT_METHODS = frozenset(
    {
        "map",
        "filter",
        "shuffle",
        "sort",
        "flatten",
        "remove_columns",
        "rename_column",
        "rename_columns",
        "select_columns",
        "cast",
        "cast_column",
        "with_format",
        "class_encode_column",
    }
)


def _dataset_dict_id(node: ast.AST, dataset_dicts: dict[str, str]) -> str | None:
    """The dataset id of an expression that is a DatasetDict: a name bound to one, the split-less call, or one
    of its methods that returns a DatasetDict."""
    if isinstance(node, ast.Name):
        return dataset_dicts.get(node.id)
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr in DATASET_DICT_METHODS
    ):
        return _dataset_dict_id(node.func.value, dataset_dicts)
    if not (isinstance(node, ast.Call) and callee(node) == "load_dataset") or keyword(node, "split"):
        return None
    path = string(node.args[0]) if node.args else string(keyword(node, "path"))
    return "" if path is None else path


def _column_kind(node: ast.Attribute) -> dict[str, str]:
    """How the code reads a dataset's feature: `features["ner_tags"].feature.names` (a class label per word),
    `features["label"].names` (a class label)."""
    target, kind = node.value, "label:2"
    if node.attr not in CLASS_LABEL_ATTRIBUTES:
        return {}
    if isinstance(target, ast.Attribute) and target.attr == "feature":
        target, kind = target.value, f"tags:{TAG_CLASSES}"
    key = string(target.slice) if isinstance(target, ast.Subscript) else None
    return {key: kind} if key is not None else {}


def _foreign_subscripts(tree: ast.Module) -> set[int]:
    """ids of the subscripts `X["key"]` whose X holds a value of a module in NOT_DATASET_MODULES: directly
    (`os.environ["HOME"]`) or through names bound to its values in the same function or at module level
    (`client = boto3.client("s3")`, `response = client.get_object(...)`, `for page in paginator.paginate()`)."""
    imported = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            imported |= {
                (alias.asname or alias.name).split(".")[0]
                for alias in node.names
                if alias.name.split(".")[0] in NOT_DATASET_MODULES
            }
        elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] in NOT_DATASET_MODULES:
            imported |= {alias.asname or alias.name for alias in node.names}
    module_level = _bound_from(list(_scope(tree)), imported)
    found = set()
    for scope in [tree, *(node for node in ast.walk(tree) if isinstance(node, FUNCTIONS))]:
        nodes = list(_scope(scope))
        names = module_level if scope is tree else _bound_from(nodes, module_level)
        found |= {
            id(node) for node in nodes if isinstance(node, ast.Subscript) and _root(node.value) in names
        }
    return found


def _scope(scope: ast.AST):
    """The nodes of one function (or the module) without those of the functions defined in it."""
    pending = list(ast.iter_child_nodes(scope))
    while pending:
        node = pending.pop()
        yield node
        if not isinstance(node, FUNCTIONS):
            pending.extend(ast.iter_child_nodes(node))


def _bound_from(nodes: list[ast.AST], names: set[str]) -> set[str]:
    """`names` and the names the assignments and loops of `nodes` bind to values reached from them."""
    bound, changed = set(names), True
    while changed:
        changed = False
        for node in nodes:
            if isinstance(node, ast.Assign | ast.AnnAssign | ast.AugAssign | ast.NamedExpr):
                value, targets = node.value, getattr(node, "targets", None) or [node.target]
            elif isinstance(node, ast.For | ast.AsyncFor | ast.comprehension):
                value, targets = node.iter, [node.target]
            elif isinstance(node, ast.withitem) and node.optional_vars is not None:
                value, targets = node.context_expr, [node.optional_vars]
            else:
                continue
            if value is None or _root(value) not in bound:
                continue
            new = {name.id for target in targets for name in ast.walk(target) if isinstance(name, ast.Name)}
            changed |= not new <= bound
            bound |= new
    return bound


def _root(node: ast.AST) -> str | None:
    """The name an expression starts from: `client` of `client.get(...)["Body"]`, `os` of `dict(os.environ)`."""
    while True:
        if isinstance(node, ast.Attribute | ast.Subscript):
            node = node.value
        elif isinstance(node, ast.Call):
            # a builtin over a value (`dict(os.environ)`, `list(page)`): the value's root
            over_value = isinstance(node.func, ast.Name) and node.func.id in BUILTINS and node.args
            node = node.args[0] if over_value else node.func
        else:
            return node.id if isinstance(node, ast.Name) else None


def _read_call(call: ast.Call, facts: CodeFacts) -> None:
    name = callee(call)
    loaded = (
        string(keyword(call, "model"))
        or string(keyword(call, "repo_id"))
        or (string(call.args[0]) if call.args else None)
    )
    if name == COMPILED_MODEL_LOADER:  # (model_class, model_id)
        name, loaded = "from_pretrained", string(call.args[1]) if len(call.args) > 1 else None
    if name in LOADERS | DOWNLOADS and loaded is not None and model_ids.HUB_ID.match(loaded):
        facts.model_ids.add(loaded)  # an id the table does not know: its run ends with the --model advice
    if is_constant(keyword(call, "trust_remote_code"), True):
        facts.remote_code = True
    # `tokenizer(batch["tokens"], is_split_into_words=True)`: a column of words
    words = call.args[0] if call.args and isinstance(call.args[0], ast.Subscript) else None
    if words is not None and string(words.slice) and is_constant(keyword(call, "is_split_into_words"), True):
        facts.column_kinds[string(words.slice)] = "words"
    if name == "load_dataset":
        path = string(call.args[0]) if call.args else string(keyword(call, "path"))
        config = string(call.args[1]) if len(call.args) > 1 else string(keyword(call, "name"))
        split = string(keyword(call, "split"))
        if path is not None and is_loaded_hub_dataset(path):
            request = facts.datasets.setdefault(path, data.DatasetRequest(path))
            request.config = request.config or config
            if split:
                request.splits |= {part for part in split.split("+")}
        elif path is None and split:
            # A dataset named through a variable: its split still tells which splits to write.
            facts.datasets.setdefault("", data.DatasetRequest("")).splits.add(split)
    if (
        name in COLUMN_METHODS and call.args
    ):  # `ds.rename_column("label", "labels")`: the first names a column
        first = call.args[0]
        items = first.elts if isinstance(first, ast.List | ast.Tuple) else [first]
        facts.columns |= {string(item) for item in items if string(item)}
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
    report_to = keyword(call, "report_to")  # `TrainingArguments(report_to="tensorboard")`, or a list
    items = report_to.elts if isinstance(report_to, ast.List | ast.Tuple) else [report_to]
    facts.report_to |= {string(item) for item in items if report_to is not None and string(item)}
