"""The target stack's removals that real code still hits: the imports of the corpus' migrated trees that fail.

For each repository of the corpus (`benchmarks/corpus.json`, from the local mirrors as `run_rate.py` reads them),
the commit is extracted and migrated with `neuron-migrate --output-dir` (the migrator of the checkout this script
stands in); then every import of a stack package (transformers, trl, huggingface_hub, peft, datasets, accelerate,
diffusers) in its Python files and notebooks' code cells (`from X import Y`, `import X.Y`) is tried against the
packages installed here (the target stack, constraints.txt), without running the files. Each failure is listed
with whether a TODO(neuron-migrate) stands above it (the migrator told the owner) or not (silent: the program stops
there with no word of why).

A name a package does not have is a removal (`cannot import name`); an import that needs another, uninstalled
package (`No module named 'torch_xla'`) is counted apart: it says nothing about the stack.

    python benchmarks/stack_imports.py --mirrors /work/.mirror --output /tmp/stack-imports.json
"""

from __future__ import annotations

import argparse
import ast
import importlib
import json
import subprocess
import sys
import tempfile
from pathlib import Path

from run_rate import extract, mirror_of

ROOT = Path(__file__).resolve().parents[1]
# The migrator of this checkout (the working directory comes first on the path of `python -c`).
CLI = [sys.executable, "-c", "from commands.neuron_migrate import main; main()"]
STACK = ("transformers", "trl", "huggingface_hub", "peft", "datasets", "accelerate", "diffusers")
TODO = "TODO(neuron-migrate)"
LOOK_ABOVE = 8  # lines above an import searched for its TODO (a TODO sits above what it is about)


def imports(code: str) -> list[tuple[int, str, str | None]]:
    """(line, module, name) of each absolute stack import: `from module import name`, `import module` (name
    None)."""
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return []
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if node.module.split(".")[0] in STACK:
                found += [(node.lineno, node.module, alias.name) for alias in node.names if alias.name != "*"]
        elif isinstance(node, ast.Import):
            found += [
                (node.lineno, alias.name, None) for alias in node.names if alias.name.split(".")[0] in STACK
            ]
    return found


def failure(module: str, name: str | None) -> str | None:
    """Why the import fails on the installed packages, None where it works."""
    try:
        imported = importlib.import_module(module)
    except Exception as error:  # noqa: BLE001 - any failure of the import is the finding
        return f"{type(error).__name__}: {error}"
    if name is None or hasattr(imported, name):
        return None
    try:
        importlib.import_module(f"{module}.{name}")
    except ModuleNotFoundError as error:
        if error.name != f"{module}.{name}":
            return f"ModuleNotFoundError: {error}"
    except Exception as error:  # noqa: BLE001
        return f"{type(error).__name__}: {error}"
    else:
        return None
    return f"ImportError: cannot import name '{name}' from '{module}'"


def code_of(path: Path) -> list[tuple[str, str]]:
    """(where, code) of a Python file, or of each code cell of a notebook (magics and shell lines blanked)."""
    text = path.read_text(encoding="utf-8", errors="replace")
    if path.suffix == ".py":
        return [(str(path), text)]
    try:
        cells = json.loads(text).get("cells", [])
    except (json.JSONDecodeError, AttributeError):
        return []
    found = []
    for number, cell in enumerate(cells, start=1):
        if cell.get("cell_type") != "code":
            continue
        source = cell.get("source", "")
        source = "".join(source) if isinstance(source, list) else source
        lines = ["" if line.lstrip().startswith(("!", "%")) else line for line in source.splitlines()]
        found.append((f"{path} (cell {number})", "\n".join(lines)))
    return found


def scan(tree: Path, repo: str) -> list[dict]:
    rows = []
    for path in sorted([*tree.rglob("*.py"), *tree.rglob("*.ipynb")]):
        for where, code in code_of(path):
            lines = code.splitlines()
            for line, module, name in imports(code):
                why = failure(module, name)
                if why is None:
                    continue
                above = lines[max(0, line - 1 - LOOK_ABOVE) : line]
                missing_other = why.startswith("ModuleNotFoundError") and not any(
                    f"'{package}" in why for package in STACK
                )
                rows.append(
                    {
                        "repo": repo,
                        "file": where.replace(str(tree) + "/", "", 1),
                        "line": line,
                        "import": f"from {module} import {name}" if name else f"import {module}",
                        "error": why,
                        "kind": "needs another package" if missing_other else "removed from the stack",
                        "todo": any(TODO in text for text in above),
                    }
                )
    return rows


def migrate(source: Path, migrated: Path) -> None:
    subprocess.run(
        [*CLI, "-j", "1", "--output-dir", str(migrated), str(source), "-q"],
        cwd=ROOT,
        capture_output=True,
        check=False,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mirrors", type=Path, required=True, help="folder of the repositories' git mirrors")
    parser.add_argument("--corpus", type=Path, default=ROOT / "benchmarks" / "corpus.json")
    parser.add_argument("--repo", action="append", default=[], help="only these repositories (OWNER/NAME)")
    parser.add_argument("--output", type=Path, help="write the failing imports and counts here (JSON)")
    args = parser.parse_args()
    corpus = json.loads(args.corpus.read_text())
    rows = []
    for repo in corpus["repos"]:
        if args.repo and repo["repo"] not in args.repo:
            continue
        git_dir = mirror_of(args.mirrors, repo["repo"])
        if git_dir is None:
            print(f"{repo['repo']}: no mirror", file=sys.stderr)
            continue
        with tempfile.TemporaryDirectory(prefix="stack-imports-") as work:
            source, migrated = Path(work) / "src", Path(work) / "migrated"
            extract(git_dir, repo["commit"], source, repo.get("extract", []))
            migrate(source, migrated)
            found = scan(migrated if migrated.is_dir() else source, repo["repo"])
        print(f"{repo['repo']}: {len(found)} failing imports", file=sys.stderr)
        rows += found
    removed = [row for row in rows if row["kind"] == "removed from the stack"]
    counts = {
        "failing imports": len(rows),
        "removed from the stack": len(removed),
        "removed, silent (no TODO above)": sum(not row["todo"] for row in removed),
        "removed, under a TODO": sum(row["todo"] for row in removed),
        "needs another package": len(rows) - len(removed),
    }
    for row in rows:
        mark = "TODO" if row["todo"] else "SILENT"
        print(f"{mark:6} {row['repo']}: {row['file']}:{row['line']}: {row['import']}  [{row['error']}]")
    print(json.dumps(counts))
    if args.output:
        args.output.write_text(json.dumps({"counts": counts, "rows": rows}, indent=1) + "\n")


if __name__ == "__main__":
    main()
