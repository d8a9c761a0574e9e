"""``results.jsonl``: one complete JSON row per line, appended with a single write; CSV twin via pandas."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

from compat_matrix.families import row_probe_name
from compat_matrix.schema import FIELDS_ADDED, SCHEMA_VERSION, Verdict, environment_key

# Present in rows of every schema version (version 1 rows have no schema_version and none of version 2's
# fields; they are still read: see schema.Row.from_dict).
REQUIRED_FIELDS = (
    "model_type", "rank", "backend", "simulated", "verdict", "stage", "error", "compile_count",
    "recompile_count", "recompile_reasons", "graph_breaks", "graph_break_reasons", "unsupported_ops",
    "outputs_match", "train_compile_count", "seconds", "env",
)  # fmt: skip
VERDICTS = tuple(verdict.value for verdict in Verdict)


class ResultsFileError(ValueError):
    """The results file cannot be used (corrupt, foreign, unwritable); nothing in it was changed."""


def resume_key(row: dict) -> tuple:
    """Rows are equivalent for ``--resume`` when probe (architecture and task) and environment key
    (schema.ENVIRONMENT_KEY) match."""
    return (row_probe_name(row), *environment_key(row["env"]))


def not_yet_measured(names: list[str], env: dict, rows: list[dict]) -> list[str]:
    """The probes of ``names`` (``families.probe_name``) that no row measured under ``env`` (what ``--resume``
    runs)."""
    done = {resume_key(row) for row in rows}
    return [name for name in names if (name, *environment_key(env)) not in done]


def json_lines(path: Path) -> Iterator[tuple[int, object]]:
    """(line number, value) of each non-blank line of a JSON-lines file. ResultsFileError for a line that is
    not UTF-8 text or not JSON: bad syntax, NaN or Infinity (which JSON does not have), an integer too long
    for Python to read, nesting too deep."""
    with path.open("rb") as handle:
        for number, raw in enumerate(handle, start=1):
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError:
                raise ResultsFileError(
                    f"{path}:{number}: not UTF-8 text; is this a neuron-compat results file?"
                ) from None
            if not line.strip():
                continue
            try:
                value = json.loads(line, parse_constant=_not_json)
            except json.JSONDecodeError as error:
                raise ResultsFileError(
                    f"{path}:{number}: not a JSON line ({error.msg}); the file is corrupt"
                ) from None
            except (ValueError, RecursionError) as error:
                reason = (
                    "nested too deeply" if isinstance(error, RecursionError) else str(error).split(";")[0]
                )
                raise ResultsFileError(f"{path}:{number}: not a results row ({reason})") from None
            yield number, value


def _not_json(name: str) -> None:
    raise ValueError(f"{name} is not a JSON number")


def read_rows(path: Path) -> list[dict]:
    """Every row of ``path`` (empty if it does not exist); a line that is not one of our rows is an error."""
    if not path.exists():
        return []
    rows = []
    for number, row in json_lines(path):
        missing = [name for name in REQUIRED_FIELDS if not isinstance(row, dict) or name not in row]
        if missing:
            raise ResultsFileError(
                f"{path}:{number}: not a neuron-compat result row (missing {', '.join(missing[:5])}); "
                "refusing to append to a foreign file"
            )
        if row["verdict"] not in VERDICTS:
            raise ResultsFileError(f"{path}:{number}: unknown verdict {row['verdict']!r}")
        if not isinstance(row["env"], dict):
            raise ResultsFileError(f"{path}:{number}: its env is {type(row['env']).__name__}, not an object")
        version = row.get("schema_version", 1)
        if not isinstance(version, int) or isinstance(version, bool):
            raise ResultsFileError(f"{path}:{number}: schema_version {version!r} is not a number")
        if version > SCHEMA_VERSION:
            raise ResultsFileError(
                f"{path}:{number}: row schema version {row['schema_version']} is newer than this "
                f"neuron-compat reads ({SCHEMA_VERSION}); upgrade neuron-migrate"
            )
        rows.append(row)
    return rows


def older_schema_note(rows: list[dict]) -> str | None:
    """A note for the user when some rows predate the current schema (their new fields read as unset)."""
    versions = [row.get("schema_version", 1) for row in rows]
    older = [version for version in versions if version < SCHEMA_VERSION]
    if not older:
        return None
    missing = [
        name for version in range(min(older) + 1, SCHEMA_VERSION + 1) for name in FIELDS_ADDED[version]
    ]
    return (
        f"note: {len(older)} row(s) written before schema version {SCHEMA_VERSION} (no {', '.join(missing[:6])}, "
        "...): read with those fields unset; re-run them to fill them"
    )


def check_writable(path: Path) -> None:
    """Fail before any work if rows could not be appended to ``path``."""
    parent = path.parent if str(path.parent) else Path(".")
    if path.exists() and path.is_dir():
        raise ResultsFileError(f"{path} is a directory; give a file path with -o")
    if not parent.is_dir():
        raise ResultsFileError(f"cannot write {path}: directory {parent} does not exist")
    if not os.access(path if path.exists() else parent, os.W_OK):
        raise ResultsFileError(f"cannot write {path}: permission denied")


def append_row(path: Path, row: dict) -> None:
    """Append one row as one line with a single ``write`` on an O_APPEND descriptor, so a reader (or a crash)
    never sees half a line."""
    line = (json.dumps(row, sort_keys=False, default=str) + "\n").encode("utf-8")
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line)
        os.fsync(fd)
    finally:
        os.close(fd)


def rows_to_frame(rows: list[dict]):
    import pandas as pd

    flat = []
    for row in rows:
        item = {}
        for key, value in row.items():
            if key == "env":
                item.update({f"env_{k}": v for k, v in value.items()})
            elif isinstance(value, list):
                item[key] = "; ".join(str(v) for v in value)
            elif isinstance(value, dict):
                item[key] = json.dumps(value, sort_keys=True)
            else:
                item[key] = value
        flat.append(item)
    return pd.DataFrame(flat)


# A spreadsheet runs a cell that starts with one of these as a formula (CSV injection): such a text cell gets
# a leading apostrophe, which spreadsheets read as "text" and do not show.
_FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def spreadsheet_safe(frame):
    """`frame` with every text cell that a spreadsheet would run as a formula quoted (numbers untouched)."""
    import pandas as pd

    for column in frame.columns:
        if not (pd.api.types.is_numeric_dtype(frame[column]) or pd.api.types.is_bool_dtype(frame[column])):
            frame[column] = frame[column].map(
                lambda value: (
                    "'" + value if isinstance(value, str) and value.startswith(_FORMULA_STARTS) else value
                )
            )
    return frame


def export_csv(rows: list[dict], csv_path: Path) -> None:
    tmp = csv_path.with_name(csv_path.name + ".tmp")
    spreadsheet_safe(rows_to_frame(rows)).to_csv(tmp, index=False)
    os.replace(tmp, csv_path)
