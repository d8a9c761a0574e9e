"""Small local datasets in place of Hub datasets, loaded by `datasets`' own offline path.

Offline, `load_dataset("glue", "mrpc")` falls back to a dataset "loaded once already and cached"
(`CachedDatasetModuleFactory`: HF_DATASETS_CACHE/<namespace>___<name>/<config>/<version>/<hash>/). A stand-in
is written there by `datasets`' own JSON builder, so the script's `load_dataset` call, split slicing
(`train[:1%]`) included, runs unchanged. Columns come from the data table of well-known datasets
(`data/known_datasets.json`, with the dataset card each was read from), else from what the code reads, or
from a user's `--dataset ID=FILE.jsonl`. The runner writes those the scan finds before the run; the try's bootstrap
writes, when the code loads it, one the scan did not see (`serve_at_load`).

A folder the code reads with `load_from_disk` that the tried tree does not hold (an earlier step, a notebook or a
pipeline's cache step, tokenized and saved it) gets a tokenized stand-in of the layout such a step saves
(`saved_dataset`).
"""

from __future__ import annotations

import json
import math
import re
import shutil
import tempfile
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

# Rows per split. A training split survives the slices and filters scripts apply (`train[:1%]` keeps 32 rows,
# four batches of 8); evaluation splits stay small, since a Trainer evaluates all of one.
TRAIN_ROWS = 3200
OTHER_ROWS = 64
# A split's rows where the code selects more (`select(range(N))`), up to this bound on the file: 50,500 rows of three
# text columns take 1.7 s to write and 4 s to map row by row in Python (measured on 2 shared cores).
MAX_ROWS = 100_000
WORDS = [
    "the",
    "model",
    "reads",
    "a",
    "short",
    "line",
    "of",
    "text",
    "and",
    "answers",
    "with",
    "another",
    "one",
    "about",
    "trainium",
    "compilers",
    "graphs",
    "tokens",
    "caches",
    "steps",
    "batches",
    "devices",
    "kernels",
    "shapes",
    "memory",
    "and",
    "data",
]
# Keys of tokenizer and model outputs and of audio clips: subscripts the code reads that are never dataset columns.
NOT_COLUMNS = frozenset(
    {
        "input_ids",
        "attention_mask",
        "labels",
        "token_type_ids",
        "position_ids",
        "logits",
        "loss",
        "past_key_values",
        "hidden_states",
        "pixel_values",
        "generated_text",
        "last_hidden_state",
        "attentions",
        "cross_attentions",
        # keys of an audio clip (the value of an `audio` column), read as `row["audio"]["array"]`
        "array",
        "sampling_rate",
        "train",
        "validation",
        "test",
    }
)
LABEL_NAMES = frozenset({"label", "labels"})
# A column's kind: "text", "int", "float", "messages" (chat turns), "chatml" (chat turns as one text in the ChatML
# format of Qwen's chat template, with its special tokens), "words" (a list of words), "label:N" (a class
# label of N classes), "tags:N" (a class label per word), {"label": [names]} / {"tags": [names]} (the table's
# real class names), {"list": KIND} (a value of KIND per word; {"list": KIND, "length": N}: N of them) or
# {"records": {column: KIND}} (a list of records with columns of their own: a document's sentences) or "audio" (a
# clip as `datasets` decoded one before torchcodec: {"path", "array", "sampling_rate"}, mono at AUDIO_RATE).
Kind = str | dict
# A records column holds 1 to RECORDS records per row (their number varies, as a document's sentences do).
RECORDS = 3
# An audio clip's sampling rate (speech datasets' and Whisper's / wav2vec2's) and its samples: short (25 to 95 ms,
# their number varies as real clips' lengths do), since a processor pads or windows them to its own length anyway
# and a training split holds thousands of rows.
AUDIO_RATE = 16_000


class CannotStandIn(Exception):
    """A dataset the try cannot serve; the message is the run's reason."""


@dataclass
class DatasetRequest:
    """What a script asks of one Hub dataset: the config, the splits, the columns it reads."""

    id: str
    config: str | None = None
    splits: set[str] = field(default_factory=set)
    columns: set[str] = field(default_factory=set)
    kinds: dict[str, str] = field(default_factory=dict)  # column -> kind, where the code says how it reads it


@dataclass
class DatasetStandIn:
    id: str
    configs: dict[str, dict[str, Kind]]  # config -> column -> kind
    splits: list[str]
    source: str  # "data table (<card url>)", "columns the code reads", "FILE.jsonl"
    rows_file: Path | None = None

    def as_report(self) -> dict:
        return {
            "id": self.id,
            "configs": sorted(self.configs),
            "splits": self.splits,
            "columns": sorted({name for columns in self.configs.values() for name in columns}),
            "source": self.source,
        }


# The data table, found from this file (compat_matrix/ sits beside try_run/, checked out or installed): the try's
# bootstrap loads this module by its path in the sandboxed environment, where the tool's packages may not be
# importable.
TABLE = Path(__file__).resolve().parent.parent / "compat_matrix" / "data" / "known_datasets.json"


@cache
def known_datasets() -> tuple[dict, ...]:
    return tuple(json.loads(TABLE.read_text(encoding="utf-8"))["datasets"])


def table_entry(dataset_id: str) -> dict | None:
    return next((entry for entry in known_datasets() if dataset_id in entry["ids"]), None)


def split_name(split: str) -> str:
    """`train[:1%]` -> `train`; `train+validation` gives its first split (each part is asked separately)."""
    return re.split(r"[\[+]", split, maxsplit=1)[0].strip()


def stand_in(request: DatasetRequest, override: Path | None = None) -> DatasetStandIn:
    """The local dataset to serve for `request`; raises CannotStandIn with the reason."""
    splits = {split_name(split) for split in request.splits} or {"train"}
    if override is not None:
        columns = _file_columns(override)
        return DatasetStandIn(
            request.id, {request.config or "default": columns}, sorted(splits), str(override), override
        )
    entry = table_entry(request.id)
    if entry is not None:
        configs = entry["configs"]
        if request.config is not None:
            if request.config not in configs:
                raise CannotStandIn(
                    f"dataset {request.id} has no config {request.config!r} in the data table "
                    f"(known: {', '.join(sorted(configs))}); pass --dataset {request.id}=FILE.jsonl"
                )
            configs = {request.config: configs[request.config]}
        table_splits = entry.get("config_splits", {}).get(request.config or "", entry["splits"])
        return DatasetStandIn(
            request.id, dict(configs), sorted(set(table_splits) | splits), f"data table ({entry['source']})"
        )
    columns = {name: _kind(name, request.kinds) for name in sorted(request.columns - NOT_COLUMNS)}
    if not columns:
        raise CannotStandIn(
            f"dataset {request.id}: no column it reads was found in the code and it is not in the data table; "
            f"pass --dataset {request.id}=FILE.jsonl"
        )
    return DatasetStandIn(
        request.id, {request.config or "default": columns}, sorted(splits), "columns the code reads"
    )


def _kind(column: str, read_as: dict[str, str]) -> str:
    """A column's kind from how the code reads it (`read_as`: scan's column kinds), else from its name."""
    if column in read_as:
        return read_as[column]
    if column in LABEL_NAMES:
        return "label:2"
    if column in ("messages", "audio"):
        return column
    return "text"


def _class_label(kind: Kind):
    """The ClassLabel of a `label`/`tags` kind: its names (the table's {"label": [...]}) or `label:N` classes."""
    from datasets import ClassLabel

    if isinstance(kind, dict):
        return ClassLabel(names=kind.get("label") or kind["tags"])
    return ClassLabel(num_classes=int(kind.split(":")[1]))


def _is(kind: Kind, name: str) -> bool:
    return name in kind if isinstance(kind, dict) else kind.startswith(name + ":")


def _file_columns(path: Path) -> dict[str, Kind]:
    try:
        with path.open(encoding="utf-8") as handle:
            first = json.loads(handle.readline())
    except (OSError, ValueError) as error:
        raise CannotStandIn(f"--dataset file {path}: not a JSON Lines file ({error})") from error
    if not isinstance(first, dict) or not first:
        raise CannotStandIn(f"--dataset file {path}: its first line is not a JSON object with columns")
    return {name: "file" for name in first}


def _length(row: int) -> int:
    return 6 + (row * 7) % 29  # lengths vary, as real text does: padding to the longest varies with it


def _value(kind: Kind, row: int, length: int | None = None) -> object:
    """Row `row`'s value of a column of `kind`. `length`: the words of the record the value belongs to, which its
    per-word values (tags, lists, the records nested in it: a sentence's SRL frames) have one of each; None at a
    row's top level, whose words are `_length(row)` and whose records each have their own words."""
    if isinstance(kind, dict) and "records" in kind:
        count = 1 + row % RECORDS
        return [
            _record(kind["records"], row * RECORDS + i, length or _length(row * RECORDS + i))
            for i in range(count)
        ]
    length = _length(row) if length is None else length
    if isinstance(kind, dict) and "list" in kind:
        return [_value(kind["list"], row + i, length) for i in range(kind.get("length", length))]
    words = [WORDS[(row + i) % len(WORDS)] for i in range(length)]
    text = " ".join(words)
    if _is(kind, "label"):
        return row % _class_label(kind).num_classes
    if _is(kind, "tags"):  # one tag per word of the row's `words` columns (the same length)
        return [(row + i) % _class_label(kind).num_classes for i in range(length)]
    if kind == "words":
        return words
    if kind == "int":
        return row
    if kind == "float":
        return float(row % 5)
    if kind == "messages":
        return [{"role": "user", "content": text}, {"role": "assistant", "content": text[::-1]}]
    if kind == "chatml":
        return f"<|im_start|>user\n{text}<|im_end|>\n<|im_start|>assistant\n{text[::-1]}<|im_end|>\n"
    if kind == "audio":
        samples = 400 + 40 * ((row * 7) % 29)
        tone = 220.0 * (1 + row % 4)  # a tone per row, so clips differ
        wave = [round(0.5 * math.sin(2 * math.pi * tone * i / AUDIO_RATE), 4) for i in range(samples)]
        return {"path": f"clip-{row}.flac", "array": wave, "sampling_rate": AUDIO_RATE}
    return text


def _record(columns: dict[str, Kind], seed: int, length: int) -> dict:
    """One record of a records column: its columns' values, the per-word ones with `length` words."""
    return {name: _value(kind, seed, length) for name, kind in columns.items()}


def _feature(kind: Kind):
    """The `datasets` feature of a column of `kind`; None for a user's file column (the builder reads its type)."""
    from datasets import List, Value

    if _is(kind, "label"):
        return _class_label(kind)
    if _is(kind, "tags"):
        return List(_class_label(kind))
    if isinstance(kind, dict) and "records" in kind:
        fields = {name: _feature(sub_kind) for name, sub_kind in kind["records"].items()}
        return None if None in fields.values() else [fields]
    if isinstance(kind, dict) and "list" in kind:
        item = _feature(kind["list"])
        return None if item is None else List(item, length=kind.get("length", -1))
    if kind == "words":
        return List(Value("string"))
    if kind == "messages":
        return [{"role": Value("string"), "content": Value("string")}]
    if kind == "audio":
        return {"path": Value("string"), "array": List(Value("float32")), "sampling_rate": Value("int64")}
    return {
        "text": Value("string"),
        "chatml": Value("string"),
        "int": Value("int64"),
        "float": Value("float32"),
    }.get(kind)


def _features(columns: dict[str, Kind]):
    from datasets import Features

    features = {name: _feature(kind) for name, kind in columns.items()}
    return None if None in features.values() else Features(features)


def cache_folder(cache_root: Path, dataset_id: str) -> Path:
    """Where `datasets` looks for a dataset loaded once already: <namespace>___<name>, the name in snake case."""
    from datasets.naming import camelcase_to_snakecase

    namespace, _, name = dataset_id.rpartition("/")
    name = camelcase_to_snakecase(name)
    return cache_root / (f"{namespace}___{name}" if namespace else name)


def serve_at_load(request: DatasetRequest, cache_root: Path, min_rows: int = 0) -> dict | None:
    """Writes, when the code loads it, the stand-in of a Hub dataset the scan did not see before the run (an id
    built at run time, or given to a script the try could not read: a launcher's subprocess command line), as
    `stand_in` and `write_cache` do before the run. Returns its report; None when the cache holds the dataset (and
    the config asked for) already: served before the run, or by another of the run's processes. Raises
    CannotStandIn. Processes that load it at once (torchrun's workers) write it once, under a lock."""
    import fcntl

    cache_root.mkdir(parents=True, exist_ok=True)
    folder = cache_folder(cache_root, request.id)
    with (cache_root / ".stand-ins.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if folder.is_dir() and (request.config is None or (folder / request.config).is_dir()):
            return None
        served = stand_in(request)
        write_cache(served, cache_root, min_rows)
        return served.as_report()


def write_cache(stand_in: DatasetStandIn, cache_root: Path, min_rows: int = 0) -> None:
    """Writes every config and split of `stand_in` into the `datasets` cache at `cache_root`."""
    from datasets.packaged_modules.json.json import Json

    target_root = cache_folder(cache_root, stand_in.id)
    name = target_root.name.rpartition("___")[2]
    with tempfile.TemporaryDirectory(dir=cache_root) as scratch:
        scratch_path = Path(scratch)
        for config, columns in stand_in.configs.items():
            data_files = {}
            for split in stand_in.splits:
                path = stand_in.rows_file or scratch_path / f"{config}-{split}.jsonl"
                if stand_in.rows_file is None:
                    count = max(
                        TRAIN_ROWS if split.startswith("train") else OTHER_ROWS, min(min_rows, MAX_ROWS)
                    )
                    rows = (
                        {column: _value(kind, row) for column, kind in columns.items()}
                        for row in range(count)
                    )
                    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
                data_files[split] = str(path)
            builder = Json(
                cache_dir=str(scratch_path / "build"),
                dataset_name=name,
                config_name=config,
                data_files=data_files,
                features=_features(columns),
                hash="0" * 16,
            )
            builder.download_and_prepare()
            # The builder's folder is <name>/<config>-<data files hash>; the cache is looked up by config name.
            built = next((scratch_path / "build" / name).glob(f"{config}*"))
            target = target_root / config
            if target.exists():
                shutil.rmtree(target)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.move(str(built), str(target))


SAVED_ROWS = 256  # rows of a saved tokenized stand-in: enough batches for a try's steps
SAVED_LENGTH = 64  # its sequences' length: one length, as a step that pads to max_length saves them


def saved_dataset(
    name: str,
    folder: Path,
    columns: set[str],
    read_as: dict[str, str],
    token_ids_below: int,
    splits: set[str] = frozenset(),
    classifier: bool = False,
    min_rows: int = 0,
) -> dict:
    """Writes at `folder`, with `save_to_disk`, the tokenized dataset an earlier step would have saved at the
    code's `name` for it:
    `input_ids` (ids below `token_ids_below`), `attention_mask`, the labels (class labels where the code reads
    label names or trains a sequence `classifier`, else the ids: a causal LM's; named `label` where the code
    reads a `label` column, as one it renames, else `labels`), and the other columns the code reads (`columns`,
    with scan's `read_as` kinds). `splits`: the splits the code takes of it (`load_from_disk(path)["train"]`),
    saved as one DatasetDict; none: one Dataset. `min_rows`: the rows the code selects (`select(range(N))`).
    Returns its report."""
    from datasets import Dataset, DatasetDict, Features, List, Value

    count = max(SAVED_ROWS, min(min_rows, MAX_ROWS))
    label_name = "label" if "label" in columns else "labels"
    label_kind = read_as.get("labels") or read_as.get("label") or ("label:2" if classifier else None)
    label_kind = label_kind or ("label:2" if label_name == "label" else None)
    features = {"input_ids": List(Value("int64")), "attention_mask": List(Value("int8"))}
    rows: dict[str, list] = {
        "input_ids": [
            [(row * 31 + i * 7) % token_ids_below for i in range(SAVED_LENGTH)] for row in range(count)
        ],
        "attention_mask": [[1] * SAVED_LENGTH for _ in range(count)],
    }
    if label_kind is not None and _is(label_kind, "label"):
        features[label_name] = _class_label(label_kind)
        rows[label_name] = [_value(label_kind, row) for row in range(count)]
    else:
        features[label_name] = List(Value("int64"))
        rows[label_name] = [list(ids) for ids in rows["input_ids"]]
    others = {name: _kind(name, read_as) for name in sorted(columns - NOT_COLUMNS - LABEL_NAMES)}
    features |= dict(_features(others) or {})
    rows |= {name: [_value(kind, row) for row in range(count)] for name, kind in others.items()}
    dataset = Dataset.from_dict(rows, features=Features(features))
    if splits:
        DatasetDict({split: dataset for split in sorted(splits)}).save_to_disk(str(folder))
    else:
        dataset.save_to_disk(str(folder))
    return {
        "id": name,
        "configs": ["default"],
        "splits": sorted(splits) or ["train"],
        "columns": sorted(features),
        "source": "a tokenized dataset saved to disk (load_from_disk of a folder the tree does not hold)",
    }


# torchvision's MNIST family (MNIST, FashionMNIST, KMNIST: one download() and four IDX files, named by each class's
# `resources`): 28 x 28 greyscale images, 10 classes. IDX magic numbers: unsigned bytes, 3 dimensions / 1.
MNIST_SIDE = 28
IDX_IMAGES, IDX_LABELS = 0x00000803, 0x00000801


def mnist_files(raw_folder: Path, names: list[str], dataset: str) -> dict:
    """Writes in `raw_folder` the IDX files a torchvision MNIST-family download extracts there (`names`: its
    resources' file names without `.gz`: `train-images-idx3-ubyte`, `t10k-labels-idx1-ubyte`, ...), TRAIN_ROWS
    rows for the training files, OTHER_ROWS for the test ones; each image is faint noise with a bright bar where
    its label (row % 10) puts it, so a classifier learns. Returns its report."""
    import numpy as np

    raw_folder.mkdir(parents=True, exist_ok=True)
    for name in names:
        count = TRAIN_ROWS if name.startswith("train") else OTHER_ROWS
        labels = np.arange(count, dtype=np.uint8) % 10
        if "idx1" in name:
            header, body = [IDX_LABELS, count], labels
        else:
            images = _faint_noise(count, MNIST_SIDE, MNIST_SIDE)
            for label in range(10):
                images[labels == label, 2 + 2 * label : 4 + 2 * label, 4:24] = 255
            header, body = [IDX_IMAGES, count, MNIST_SIDE, MNIST_SIDE], images
        _write_whole(raw_folder / name, np.array(header, dtype=">u4").tobytes() + body.tobytes())
    return _torchvision_report(dataset, "IDX files")


# torchvision's CIFAR-10 and CIFAR-100: pickled batches of 32 x 32 RGB images (rows of 3,072 bytes, the three
# planes one after the other) with their labels, and a meta file naming the classes.
CIFAR_SIDE = 32
CIFAR10_CLASSES = ["airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck"]


def cifar_files(folder: Path, train: list[str], test: list[str], meta: dict, dataset: str) -> dict:
    """Writes in `folder` the batches a torchvision CIFAR download extracts there (`train` / `test`: the class's
    `train_list` / `test_list` file names; `meta`: its `meta`, whose `key` names the class names' entry: CIFAR-10's
    `label_names`, CIFAR-100's `fine_label_names`), TRAIN_ROWS rows over the training batches and OTHER_ROWS in the
    test one; each image is faint noise with a bright square where its label puts it. Returns its report."""
    import pickle

    import numpy as np

    fine = meta["key"] == "fine_label_names"  # CIFAR-100: 100 fine classes (and 20 coarse ones)
    names = [f"class_{index}" for index in range(100)] if fine else CIFAR10_CLASSES
    folder.mkdir(parents=True, exist_ok=True)
    batches = [(name, TRAIN_ROWS // len(train)) for name in train] + [(name, OTHER_ROWS) for name in test]
    for offset, (name, count) in enumerate(batches):
        labels = (np.arange(count) * 7 + offset) % len(names)
        images = _faint_noise(count, 3, CIFAR_SIDE, CIFAR_SIDE)
        for row, label in enumerate(labels):
            top, left = 4 * (label % 6), 4 * (label // 6 % 6)
            images[row, :, top : top + 8, left : left + 8] = 255
        entry = {
            "data": images.reshape(count, -1),
            "filenames": [f"{name}_{row}.png" for row in range(count)],
        }
        if fine:
            entry |= {"fine_labels": labels.tolist(), "coarse_labels": (labels // 5).tolist()}
        else:
            entry["labels"] = labels.tolist()
        _write_whole(folder / name, pickle.dumps(entry))
    _write_whole(folder / meta["filename"], pickle.dumps({meta["key"]: names}))
    return _torchvision_report(dataset, "batches")


def _faint_noise(*shape: int):
    """Deterministic dim pixels (0 to 40 of 255) of that shape: the background of a stand-in image."""
    import numpy as np

    return (np.arange(math.prod(shape), dtype=np.uint32) * 2654435761 % 41).astype(np.uint8).reshape(shape)


def _torchvision_report(dataset: str, written: str) -> dict:
    """The report's entry of a torchvision dataset whose `written` files the try wrote for its download."""
    return {
        "id": f"torchvision {dataset}",
        "configs": ["default"],
        "splits": ["train", "test"],
        "columns": ["image", "label"],
        "source": f"{written} written where {dataset}.download() extracts them (a try has no network)",
    }


def _write_whole(path: Path, content: bytes) -> None:
    """Written whole, then renamed: torchrun's workers each download into the same folder at once."""
    with tempfile.NamedTemporaryFile(dir=path.parent, prefix=f".{path.name}.", delete=False) as handle:
        handle.write(content)
    Path(handle.name).replace(path)


# The files of a SageMaker channel (or any folder the code reads files from) a stand-in can be written as.
TABLE_SUFFIXES = (".csv", ".json", ".jsonl")


def table_file(path: Path, columns: set[str], read_as: dict[str, str], min_rows: int = 0) -> list[str]:
    """Writes at `path` a CSV or JSON Lines file (by its suffix) of SAVED_ROWS rows (or the `min_rows` the code
    selects) with the columns the code reads (`columns`, with scan's `read_as` kinds; labels are class ids);
    returns the columns. Raises
    CannotStandIn where the code reads no column of it, or `path` is not such a file."""
    import csv

    if path.suffix.lower() not in TABLE_SUFFIXES:
        raise CannotStandIn(f"{path.name}: not a CSV or JSON file")
    kinds = {name: _kind(name, read_as) for name in sorted(columns - NOT_COLUMNS)}
    kinds = {
        name: kind for name, kind in kinds.items() if kind in ("text", "int", "float") or _is(kind, "label")
    }
    if not kinds:
        raise CannotStandIn(f"{path.name}: no column it holds was found in the code")
    count = max(SAVED_ROWS, min(min_rows, MAX_ROWS))
    rows = [{name: _value(kind, row) for name, kind in kinds.items()} for row in range(count)]
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8", newline="") as handle:
        if path.suffix.lower() == ".csv":
            writer = csv.DictWriter(handle, fieldnames=list(kinds))
            writer.writeheader()
            writer.writerows(rows)
        else:
            handle.writelines(json.dumps(row) + "\n" for row in rows)
    return list(kinds)
