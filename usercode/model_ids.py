"""From a model reference in a user's file to its Transformers architecture (`model_type`).

Sources, in order: a local `config.json` (the reference is a directory), the bundled table of well-known
Hub ids (`data/known_models.csv`), and, only when asked (`--online`), the model's config.json on the Hub.
"""

from __future__ import annotations

import csv
import fnmatch
import json
import re
from dataclasses import dataclass
from functools import cache
from importlib import resources
from pathlib import Path

# owner/name as the Hub allows it (no spaces, one slash).
HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]{0,95}/[\w.-]{1,96}$")
FILE_SUFFIXES = (".json", ".py", ".txt", ".csv", ".jsonl", ".parquet", ".sh", ".yaml", ".yml", ".md", ".bin")


@dataclass(frozen=True)
class Architecture:
    model_type: str  # "unknown" when no source knew it
    source: str  # where the answer came from, shown to the reader
    task: str | None = None  # embedding / classification / diffusion: not a causal LM; None: a causal LM


@dataclass(frozen=True)
class TableEntry:
    pattern: str  # lower case, shell-style wildcards
    model_type: str  # "" for models without a Transformers model_type (Diffusers pipelines, ...)
    task: str | None


UNKNOWN = "unknown"


@cache
def known_models() -> tuple[TableEntry, ...]:
    return _table("known_models.csv")


@cache
def _name_families() -> tuple[TableEntry, ...]:
    return _table("model_name_families.csv")


def _table(name: str) -> tuple[TableEntry, ...]:
    text = resources.files("usercode").joinpath("data", name).read_text(encoding="utf-8")
    lines = [line for line in text.splitlines() if line.strip() and not line.startswith("#")]
    return tuple(
        TableEntry(row["pattern"].lower(), row["model_type"], row.get("task") or None)
        for row in csv.DictReader(lines)
    )


def matches(lowered_id: str, pattern: str) -> bool:
    """How a table row's pattern (lower case, shell-style wildcards) matches a lower-cased Hub id."""
    return fnmatch.fnmatchcase(lowered_id, pattern)


def table_entry(model_id: str) -> TableEntry | None:
    lowered = model_id.lower()
    return next((entry for entry in known_models() if matches(lowered, entry.pattern)), None)


def family_from_name(model_id: str) -> str | None:
    """The model_type a Hub id's name says (`data/model_name_families.csv`: `acme/llama-3-8b-sql` is a llama), for
    an id the table does not know. A guess: only `try` takes it, for its tiny stand-in, and says so."""
    lowered = model_id.lower()
    entry = next((entry for entry in _name_families() if matches(lowered, entry.pattern)), None)
    return entry.model_type or None if entry is not None else None


def hub_id_patterns() -> list[list[str]]:
    """[pattern, model_type] of the causal-LM rows, for the report's search (a Hub id finds its row)."""
    return [[entry.pattern, entry.model_type] for entry in known_models() if entry.task is None]


def example_hub_ids() -> dict[str, list[str]]:
    """model_type -> the table's Hub ids and id patterns that name it (wildcards kept), for search text."""
    examples: dict[str, list[str]] = {}
    for entry in known_models():
        if entry.task is None and "/" in entry.pattern:
            examples.setdefault(entry.model_type, []).append(entry.pattern)
    return examples


def looks_like_model_reference(value: str) -> bool:
    """Hub ids, bare well-known ids ("gpt2") and local paths; not file names, URLs or prose."""
    if not value or any(character.isspace() for character in value) or "://" in value:
        return False
    if value.lower().endswith(FILE_SUFFIXES):
        return False
    return (
        bool(HUB_ID.match(value))
        or table_entry(value) is not None
        or value.startswith(("./", "../", "/", "~"))
    )


def local_config(reference: str, base: Path) -> Path | None:
    """config.json of a local model directory, looked up next to the file that names it, then in the cwd."""
    for root in (base, Path.cwd()):
        candidate = (root / reference).expanduser()
        if (candidate / "config.json").is_file():
            return candidate / "config.json"
    return None


def read_model_type(config: Path) -> str | None:
    try:
        data = json.loads(config.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return None
    value = data.get("model_type") if isinstance(data, dict) else None
    return value if isinstance(value, str) and value else None


def from_hub(model_id: str) -> Architecture:
    """Downloads only config.json; any failure (offline, gated, missing) gives "unknown" with the reason."""
    from huggingface_hub import hf_hub_download
    from huggingface_hub.errors import HfHubHTTPError, LocalEntryNotFoundError, OfflineModeIsEnabled

    try:
        config = Path(hf_hub_download(model_id, "config.json", etag_timeout=10))
    except (HfHubHTTPError, LocalEntryNotFoundError, OfflineModeIsEnabled, OSError, ValueError) as error:
        reason = str(error).splitlines()[0] if str(error) else type(error).__name__
        return Architecture(UNKNOWN, f"Hub lookup failed: {reason}")
    model_type = read_model_type(config)
    return Architecture(
        model_type or UNKNOWN, "Hub config.json" if model_type else "Hub config.json has no model_type"
    )


def resolve(reference: str, base: Path, online: bool) -> Architecture:
    config = local_config(reference, base)
    if config is not None:
        model_type = read_model_type(config)
        if model_type:
            return Architecture(model_type, f"local {config}")
        return Architecture(UNKNOWN, f"local {config} has no model_type")
    entry = table_entry(reference)
    if entry is not None:
        return Architecture(entry.model_type or UNKNOWN, "bundled table of well-known models", entry.task)
    if online and HUB_ID.match(reference):
        return from_hub(reference)
    return Architecture(UNKNOWN, "not a local directory, not in the bundled table (try --online)")
