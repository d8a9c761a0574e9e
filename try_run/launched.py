"""The user's scripts a tried program launches, and those these launch in turn: what a notebook's `!torchrun
train.py`, `!python x.py`, `%%bash` and `%run x.py` lines run (from the folder its `%cd` lines move to, or a
`cd DIR &&` before the launch; a script a `cp` line put there), what a shell script such a line runs
launches, and what a Python script runs with `subprocess` or `os.system` and literal words. A launch is what the try's plan calls one
(`plan.classify`), and its script the one the plan would run (`plan.script_of`); the runner reads each script
found for what it loads (its models, datasets, columns) and imports (the installs, packages.py).
"""

from __future__ import annotations

import ast
import os
import shlex
from dataclasses import dataclass
from pathlib import Path

from try_run import plan, scan
from usercode.composed_strings import constants
from usercode.launchers import LAUNCHER_SUFFIXES, SHELLS, python_commands, shell_string_commands
from usercode.notebook import cell_python, written_file
from usercode.python import parsed
from usercode.reading import read_code

# At most this many scripts are followed from one tried file (a launch loop that names its own script).
MAX_SCRIPTS = 64
CELL_MAGICS = ("%%bash", "%%sh", "%%script")


@dataclass(frozen=True)
class Launched:
    """A Python script the tried program launches."""

    path: Path  # the file as the run finds it (absolute)
    # the command line's words after the script, after the settings of the configuration files they name
    # (`--config sft.yaml`: scan.config_arguments)
    arguments: tuple[str, ...]
    by: str  # what launches it, for the reports: "cell 3", "run.sh:12", "scripts/train.py:40"
    text: str  # its Python
    # a `%%writefile` cell (or a `cp`) of the notebook writes it: not in the tree before the run
    written: bool

    def where(self, base: Path) -> str:
        """The script as the reports name it (from `base`, the tried file's folder) and what launches it."""
        return f"{os.path.relpath(self.path, base)}, launched by {self.by}"


def launched_scripts(cells: list[str] | None, scripts: list[Path], cwd: Path, base: Path) -> list[Launched]:
    """The scripts that a notebook's `cells` (as the kernel gets them, run from `cwd`) and the Python
    `scripts` a launch runs (from `cwd`) launch, transitively, in the order found: each command line once (a
    script launched twice with other arguments is there twice); `base` is the folder the reports name paths
    from (the tried file's)."""
    finder = _Finder(base)
    if cells is not None:
        finder.notebook(cells, cwd)
    for script in scripts:
        finder.seen.add(os.path.normpath(script))
        text = _text(script)
        if text is not None:
            finder.python(script, text, cwd)
    return list(finder.found.values())


@dataclass
class _Finder:
    base: Path

    def __post_init__(self) -> None:
        self.found: dict[tuple[str, tuple[str, ...]], Launched] = {}
        self.seen: set[str] = set()  # scripts read already (the launching ones included)
        self.written: dict[str, str] = {}  # normalised path -> what a `%%writefile` cell writes there

    def notebook(self, cells: list[str], cwd: Path) -> None:
        trees = [parsed(cell_python(cell)) for cell in cells]
        known = constants(
            ast.Module(body=[node for tree in trees if tree for node in tree.body], type_ignores=[])
        )
        for number, (cell, tree) in enumerate(zip(cells, trees, strict=True), start=1):
            target, body = written_file(cell)
            if target:
                self.written[os.path.normpath(cwd / os.path.expanduser(target))] = body
                continue
            by = f"cell {number}"
            shell_lines = {first: command for first, _, command in plan.notebook_shell_lines(cell)}
            if cell.startswith(CELL_MAGICS):  # one shell: its `cd` lasts to the cell's end
                folder = cwd
                for command in shell_lines.values():
                    folder = self.shell_line(command, folder, by)
                continue
            for index, line in enumerate(cell.splitlines()):
                words = _words(line.strip())
                if words[:1] == ["%cd"] and len(words) == 2:  # the kernel's folder, for the cells after
                    folder = _moved(cwd, words[1])
                    cwd = folder if folder.is_dir() else cwd
                elif words[:1] == ["%run"]:
                    rest = words[1:]
                    while rest and rest[0].startswith("-"):  # %run's own options (-i, -t, -p)
                        rest = rest[1:]
                    self.command(["python", *rest], [cwd], by)
                elif index in shell_lines:  # a `!` line runs in a shell of its own: its `cd` ends with it
                    self.shell_line(shell_lines[index], cwd, by)
            # `subprocess.check_call(RUN_CMD, shell=True)` in a Python cell, from the kernel's folder
            for _, words in python_commands(tree, known) if tree else ():
                self.command(words, [cwd], by)

    def shell_line(self, command: str, cwd: Path, by: str) -> Path:
        """Follows the launches of one shell line run from `cwd`; the folder its `cd`s leave it in."""
        for words in shell_string_commands(command):
            if words[0] == "cd" and len(words) == 2:
                cwd = _moved(cwd, words[1])
            else:
                self.command(words, [cwd], by)
        return cwd

    def command(self, words: list[str], folders: list[Path], by: str) -> None:
        """A command's words: the script it launches (found from the first of `folders` that holds it), or the
        launches of the shell script it runs."""
        if len(self.found) >= MAX_SCRIPTS or not words:
            return
        if words[0] == "cp" and len(words) == 3:  # `!cp scripts/train.py train.py`: launched from there later
            self.copied(words[1], words[2], folders[0])
            return
        if (plan.classify(words) or ("",))[0] == "launch":
            program = plan.program_words(words)
            for folder in folders:
                script, arguments = plan.script_of(program, folder)
                if script is not None and self.launch(script, arguments, folder, by):
                    return
            return
        self.shell_script(plan.program_words(words) or words, folders, by)

    def launch(self, script: Path, arguments: list[str], cwd: Path, by: str) -> bool:
        """Records `script` (when the tree or a `%%writefile` cell has it) and follows what it launches."""
        key = os.path.normpath(script)
        written = key in self.written
        text = self.written[key] if written else _text(script)
        if text is None:
            return False
        settings = scan.config_arguments(arguments, lambda name: self.file_text(cwd, name))
        launch = Launched(Path(key), (*settings, *arguments), by, text, written)
        self.found.setdefault((key, launch.arguments), launch)  # (each command line: its arguments differ)
        if key not in self.seen:
            self.seen.add(key)
            self.python(Path(key), text, cwd)
        return True

    def python(self, script: Path, text: str, cwd: Path) -> None:
        """The launches of a Python script run from `cwd` (their scripts found from there, else from the
        script's own folder)."""
        tree = parsed(text)
        if tree is None:
            return
        moved: dict[int, Path] = {}  # `os.system("cd x && python y.py")`: the folder for that call only
        for line, words in python_commands(tree):
            if words[0] == "cd" and len(words) == 2:
                moved[line] = _moved(moved.get(line, cwd), words[1])
            else:
                folders = list(dict.fromkeys([moved.get(line, cwd), script.parent]))
                self.command(words, folders, f"{self.named(script)}:{line}")

    def shell_script(self, words: list[str], folders: list[Path], by: str) -> None:
        """`bash run.sh`, `./run.sh`: the launches of that file of the tree, run from the same folder."""
        program = os.path.basename(words[0])
        if program in SHELLS:
            name = next((w for w in words[1:] if w.endswith(LAUNCHER_SUFFIXES)), None)
        else:
            name = words[0] if words[0].endswith(LAUNCHER_SUFFIXES) else None
        path = next((f / name for f in folders if name and (f / name).is_file()), None)
        if path is None or os.path.normpath(path) in self.seen:
            return
        self.seen.add(os.path.normpath(path))
        for command in read_code(path, "shell").commands:
            self.command(list(command.words), folders, f"{self.named(path)}:{command.line}")

    def copied(self, source: str, target: str, cwd: Path) -> None:
        """A `cp SOURCE TARGET` run from `cwd`: TARGET (or TARGET/SOURCE's name, for a folder) holds SOURCE's text
        for the launches after it, as a `%%writefile` cell's file."""
        text = self.file_text(cwd, source)
        path = _moved(cwd, target)
        if path.is_dir() or target.endswith("/"):
            path = path / os.path.basename(source)
        if text is not None:
            self.written[str(path)] = text

    def file_text(self, cwd: Path, name: str) -> str | None:
        """The text of the file `name` names from `cwd`: as a `%%writefile` cell writes it, or as it is there."""
        path = _moved(cwd, name)
        return self.written.get(str(path)) or _text(path)

    def named(self, path: Path) -> str:
        return os.path.relpath(path, self.base)


def _words(line: str) -> list[str]:
    try:
        return shlex.split(line, comments=True)
    except ValueError:
        return []


def _moved(cwd: Path, folder: str) -> Path:
    return Path(os.path.normpath(cwd / os.path.expanduser(folder)))


def _text(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8", errors="replace") if path.is_file() else None
    except OSError:
        return None
