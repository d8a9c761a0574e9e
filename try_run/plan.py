"""From the file a user gives `neuron-migrate try` to the runs it makes, the way its user runs it.

- a `.py`: `python SCRIPT ARGS` (`torchrun --nproc_per_node=2` when the code needs several processes, up to 4
  when its DistributedConfig's grid needs them);
- a shell launcher: read with the project's shell parser (tree-sitter's bash grammar). bash runs a copy of it
  (in the sandbox, at the launcher's own path) in which each launch (`python`, `torchrun`, `accelerate
  launch`, `trl`, `deepspeed`) only records its expanded command line, working directory and environment,
  and each set-up command that reaches the network (`pip install`, `aws s3`, `huggingface-cli`, `git clone`,
  ...) or activates another environment runs in the sandbox with its exit code recorded (not run at all when
  the try is not isolated); the recorded launches are then run one by one;
- a notebook: its code cells in order, in a real kernel (nbclient + ipykernel), `!torchrun` cells included;
  set-up lines run in the sandbox (listed, not run, when the try is not isolated).
"""

from __future__ import annotations

import ast
import json
import os
import shlex
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from usercode.launchers import LAUNCHERS, WRAPPERS
from usercode.notebook import cd_in_tree, folders_up
from usercode.python import imported_names, sys_path_folders
from usercode.shell import parse, word

NETWORK_PROGRAMS = {
    "pip": "installs packages from an index",
    "pip3": "installs packages from an index",
    "conda": "installs packages from a channel",
    "mamba": "installs packages from a channel",
    "apt": "installs system packages",
    "apt-get": "installs system packages",
    "aws": "reaches AWS (S3, ECR, SageMaker)",
    "gsutil": "reaches cloud storage",
    "huggingface-cli": "reaches the Hugging Face Hub",
    "hf": "reaches the Hugging Face Hub",
    "git": "reaches a remote repository",
    "wget": "downloads",
    "curl": "downloads",
    "docker": "pulls or runs a container image",
    "uv": "installs packages from an index",
    "micromamba": "installs packages from a channel",
    "s5cmd": "reaches cloud storage",
}
LOCAL_GIT_COMMANDS = frozenset({"status", "diff", "log", "rev-parse", "show", "config"})
ENVIRONMENT_ACTIVATION = "activates another environment (the try uses the one neuron-migrate runs in)"
PRECOMPILE = (
    "neuron_parallel_compile: a pre-compilation run of the PyTorch/XLA flow (TorchNeuron compiles as it runs)"
)
# A launch under xargs runs once per line of an input the recorder does not see: xargs is run as it is.
RECORDED_WRAPPERS = WRAPPERS - {"xargs"}
MAX_PROCESSES = 2
# A script whose DistributedConfig grid needs more (tp_size=2, fsdp_size=2) runs on up to this many, so that
# both mesh dimensions are real; larger grids are fitted to it by the bootstrap.
GRID_MAX_PROCESSES = 4
NOT_RUN_UNISOLATED = "not run (the try is not isolated)"
AUTHORS_FOLDER = "a folder on the machine the notebook was written on, which this tree holds"
# Added after a notebook's set-up line: the try's bootstrap in the kernel records its exit code.
RECORD_SET_UP_EXIT = "__import__('sitecustomize').STATE.set_up_exit({index}, _exit_code)"
# Added after a notebook's `!torchrun train.py` line: IPython goes on after a failed `!` command, where a
# person reads its error and stops (the cells after it use what it makes); the try stops there too, as a
# `%%bash` cell that fails does.
STOP_AFTER_FAILED_LAUNCH = (
    "if _exit_code:\n    raise __import__('subprocess').CalledProcessError(_exit_code, {command!r})"
)


class PlanError(Exception):
    """The input cannot be tried at all (usage error): the message is the one line shown."""


@dataclass
class Launch:
    label: str  # the command as its user would type it
    argv: list[str]
    cwd: Path
    env: dict[str, str] = field(default_factory=dict)  # what the launcher exported for it
    scripts: list[Path] = field(default_factory=list)  # Python files it runs (their code is scanned)
    arguments: list[str] = field(default_factory=list)  # the scripts' own arguments
    notebook: Path | None = None
    line: int | None = None  # where a launcher runs it
    processes: int = 1
    # The try chose torchrun for a script that needs several processes: how many its user starts is not known.
    processes_chosen: bool = False
    # Folders put on PYTHONPATH for it: the tree's root, when the script imports the tree's own package from there.
    import_paths: list[Path] = field(default_factory=list)

    def environment(self, base: dict[str, str]) -> dict[str, str]:
        """`base` with what the launcher exported for it and its import paths after base's PYTHONPATH (whose
        first entry, the try's bootstrap, must stay first)."""
        env = {**base, **self.env}
        if self.import_paths:
            paths = [env.get("PYTHONPATH", ""), *map(str, self.import_paths)]
            env["PYTHONPATH"] = os.pathsep.join(filter(None, paths))
        return env


@dataclass
class Skipped:
    command: str
    reason: str
    line: int | None = None  # a launcher's line
    cell: int | None = None  # a notebook's code cell
    outcome: str = NOT_RUN_UNISOLATED

    def as_report(self) -> dict:
        return {
            "command": self.command,
            "reason": self.reason,
            "line": self.line,
            "cell": self.cell,
            "outcome": self.outcome,
        }


@dataclass
class Plan:
    kind: str  # script / launcher / notebook
    launches: list[Launch]
    skipped: list[Skipped] = field(default_factory=list)


# -- commands ----------------------------------------------------------------------------------------------
def program_words(words: list[str]) -> list[str]:
    """The words from the program that wrappers (`time`, `env A=1`, `srun -N1 ...`, `nohup`) launch."""
    index = 0
    while index < len(words):
        name = os.path.basename(words[index])
        if name in LAUNCHERS or name in NETWORK_PROGRAMS or name == "neuron_parallel_compile":
            break
        if (
            name in RECORDED_WRAPPERS
            or "=" in words[index]
            or words[index].startswith("-")
            or words[index].isdigit()
        ):
            index += 1
            continue
        break
    return words[index:]


def classify(words: list[str]) -> tuple[str, str] | None:
    """("launch", "") / ("skip", reason) / None (run as it is) for one command's words."""
    words = program_words(words)
    if not words:
        return None
    program = os.path.basename(words[0])
    if program in ("{sys.executable}", "$sys.executable"):  # a notebook's `!{sys.executable} -m pip ...`
        program = "python"
    rest = words[1:]
    if program == "neuron_parallel_compile":
        return "skip", PRECOMPILE
    if program in ("source", "."):
        return ("skip", ENVIRONMENT_ACTIVATION) if rest and rest[0].endswith("activate") else None
    if program in ("conda", "mamba") and rest[:1] == ["activate"] or program == "module":
        return "skip", ENVIRONMENT_ACTIVATION
    if program.startswith("python") and rest[:2] == ["-m", "pip"]:
        return "skip", NETWORK_PROGRAMS["pip"]
    if program == "git" and rest[:1] and rest[0] in LOCAL_GIT_COMMANDS:
        return None
    if program in NETWORK_PROGRAMS or program.startswith("pip3."):
        return "skip", NETWORK_PROGRAMS.get(program, NETWORK_PROGRAMS["pip"])
    if program in ("python", "python3") or program.startswith("python3."):
        return ("launch", "") if rest and rest[0] not in ("-c", "--version", "-V") else None
    if program == "accelerate":
        return ("launch", "") if rest[:1] == ["launch"] else None
    if program in LAUNCHERS:
        return "launch", ""
    return None


# -- .py ---------------------------------------------------------------------------------------------------
def plan_script(
    script: Path, arguments: list[str], multi_process: str | None, python: str, grid_processes: int = 1
) -> Plan:
    """`python SCRIPT ARGS` in the script's folder; a script importing its tree's own package from a folder above
    runs from that folder with it on the path, as its README's `PYTHONPATH=. python path/to/SCRIPT` does."""
    root = import_root(script)
    if root is None:
        cwd = arguments_folder(script, arguments)
        named, prefix = script.relative_to(cwd).as_posix(), ""
    else:
        cwd, named, prefix = root, script.relative_to(root).as_posix(), "PYTHONPATH=. "
    if multi_process:
        processes = min(max(MAX_PROCESSES, grid_processes), GRID_MAX_PROCESSES)
        argv = [python, "-m", "torch.distributed.run", f"--nproc_per_node={processes}", named]
        label = f"torchrun --nproc_per_node={processes} {named}"
    else:
        argv, label, processes = [python, named], f"python {named}", 1
    launch = Launch(
        prefix + " ".join([label, *map(shlex.quote, arguments)]),
        [*argv, *arguments],
        cwd,
        scripts=[script],
        arguments=list(arguments),
        processes=processes,
        processes_chosen=bool(multi_process),
        import_paths=[root] if root else [],
    )
    return Plan("script", [launch])


def import_root(script: Path) -> Path | None:
    """The nearest folder above `script`'s own (up to the repository's root, the folder with .git) from which a
    module of its tree that it imports, and that its own folder does not hold, resolves (`from
    examples.use_cases.ner import X` in examples/distributed/train.py: the tree's root); None if there is none."""
    try:
        tree = ast.parse(script.read_bytes())
    except (OSError, SyntaxError, ValueError):
        return None
    names = [
        name
        for name in imported_names(ast.walk(tree), relative=False)
        if name.split(".")[0] not in sys.stdlib_module_names
        and not any(script.parent.joinpath(name.split(".")[0] + suffix).exists() for suffix in ("", ".py"))
    ]
    folder = script.parent
    while names and not (folder / ".git").exists() and folder.parent != folder:
        folder = folder.parent
        if any(module_source(folder, name) for name in names):
            return folder
    return None


def module_source(folder: Path, name: str) -> Path | None:
    """The file of module `name` (`a.b`: a/b.py or the package a/b/__init__.py) found from `folder`."""
    base = folder.joinpath(*name.split("."))
    return next((path for path in (base.with_suffix(".py"), base / "__init__.py") if path.is_file()), None)


def local_modules(script: Path, folders: list[Path], limit: int = 64) -> list[Path]:
    """The files of the modules `script` imports from `folders` (as Python would find them there), from the folders
    the code puts on `sys.path` itself, or relative to its package, and those they import in turn (at most
    `limit`): the user's code that runs with it."""
    found: list[Path] = []
    folders = list(folders)
    pending = [script]
    while pending and len(found) < limit:
        current = pending.pop(0)
        try:
            tree = ast.parse(current.read_bytes())
        except (OSError, SyntaxError, ValueError):
            continue
        # (`sys.path` is the process's: what one module adds, the modules imported after it see too)
        folders += [folder for folder in sys_path_folders(tree, current) if folder not in folders]
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.level:  # `from .x import y`: from the file's package
                package = current.parents[node.level - 1] if node.level <= len(current.parents) else None
                candidates = [(package, name) for name in imported_names([node]) if package is not None]
            elif isinstance(node, ast.Import | ast.ImportFrom):
                candidates = [(folder, name) for folder in folders for name in imported_names([node])]
            else:
                continue
            for folder, name in candidates:
                source = module_source(folder, name)
                if source is not None and source != script and source not in found:
                    found.append(source)
                    pending.append(source)
    return found[:limit]


# -- shell launchers ---------------------------------------------------------------------------------------
RECORDER = r"""
__nm_try_launch() {
    local line=$1; shift
    # Named by time: a launch in a pipeline or $(...) runs in a subshell, where a counter would not advance.
    local record="$NM_TRY_RECORD/launch-$(date +%s%N)-$BASHPID"
    printf '%s\0' "$line" "$PWD" "$@" > "$record.argv"
    env -0 > "$record.env"
    return 0
}
__nm_try_setup() {
    local line=$1 shown=$2 outcome="not run"; shift 2
    if [ -n "${NM_TRY_RUN_SETUP:-}" ]; then  # (${...:-}: a launcher under `set -u`)
        if "$@"; then outcome=0; else outcome=$?; fi  # (in a condition: `set -e` does not end the launcher)
    fi
    printf '%s\t%s\t%s\n' "$line" "$shown" "$outcome" >> "$NM_TRY_RECORD/setup"
    return 0  # a failed set-up (no network) does not stop the launcher before its launches
}
"""


def _commands(node):
    stack = [node]
    while stack:
        current = stack.pop()
        if current.type == "command":
            yield current
        stack.extend(reversed(current.children))


def _command_words(command, data: bytes) -> tuple[list, list[str]]:
    nodes = [
        child
        for child in command.named_children
        if child.type not in ("variable_assignment", "file_redirect", "comment", "herestring_redirect")
    ]
    return nodes, [word(node, data).value for node in nodes]


def recorder_script(text: str) -> str:
    """A copy of the launcher whose launches record themselves and whose set-up commands record their exit
    code (run only where NM_TRY_RUN_SETUP is set: in the sandbox)."""
    data = text.encode()
    edits: list[tuple[int, int, str]] = []
    for command in _commands(parse(data).root_node):
        nodes, words = _command_words(command, data)
        kind = classify(words)
        if kind is None or not nodes:
            continue
        line = command.start_point[0] + 1
        start = nodes[0].start_byte
        program_index = len(words) - len(program_words(words))
        if kind[0] == "launch":
            program_start = nodes[program_index].start_byte
            edits.append((start, program_start, f"__nm_try_launch {line} "))
        else:
            shown = " ".join(words)
            edits.append((start, start, f"__nm_try_setup {line} {shlex.quote(shown + chr(9) + kind[1])} "))
    for start, end, replacement in sorted(edits, reverse=True):
        data = data[:start] + replacement.encode() + data[end:]
    return RECORDER + data.decode()


# (argv, cwd, env, {path in the sandbox: file placed there}) -> (exit code, standard error); raises
# subprocess.TimeoutExpired past the try's --timeout.
RunSetUp = Callable[[list[str], Path, dict[str, str], dict[Path, Path]], tuple[int, str]]


def _launcher_line(message: str, script: Path, launcher: Path) -> str:
    """bash's `SCRIPT: line N: ...` about the recorder copy `script`, as `LAUNCHER: line M: ...` with M the line of
    the launcher itself (the copy is RECORDER's lines, then the launcher's, each on its own line)."""
    prefix = f"{script}: line "
    number, _, rest = message.removeprefix(prefix).partition(":")
    if not message.startswith(prefix) or not number.isdigit():
        return message
    return f"{launcher}: line {max(1, int(number) - RECORDER.count(chr(10)))}:{rest}"


def plan_launcher(
    launcher: Path,
    arguments: list[str],
    env: dict[str, str],
    record: Path,
    run: RunSetUp,
    isolated: bool,
    python: str,
) -> Plan:
    """Runs the recorder copy of `launcher` with bash, in its folder, and reads what it recorded in `record`.
    Isolated, the copy runs at the launcher's own path (`$(dirname "$0")`, `${BASH_SOURCE[0]}` resolve as
    for its user) and its set-up commands run; not isolated, it runs from `record` and they are listed only."""
    recorder = recorder_script(launcher.read_text(encoding="utf-8", errors="replace"))
    record.mkdir(exist_ok=True)
    copy = record / "launcher.sh"
    copy.write_text(recorder, encoding="utf-8")
    script, place = (launcher, {launcher: copy}) if isolated else (copy, {})
    flags = {"NM_TRY_RECORD": str(record), **({"NM_TRY_RUN_SETUP": "1"} if isolated else {})}
    try:
        returncode, stderr = run(
            ["bash", str(script), *arguments], launcher_folder(launcher), {**env, **flags}, place
        )
    except subprocess.TimeoutExpired as error:
        raise PlanError(
            f"{launcher}: its commands other than the launches ran over the --timeout of {error.timeout:g} s"
        ) from error
    setup = []
    setup_file = record / "setup"
    if setup_file.is_file():
        for row in setup_file.read_text(encoding="utf-8").splitlines():
            line, command, reason, outcome = (row.split("\t", 3) + ["", "", ""])[:4]
            setup.append(
                Skipped(
                    command,
                    reason,
                    int(line) if line.isdigit() else None,
                    outcome=f"ran in the sandbox: exit {outcome}"
                    if outcome.isdigit()
                    else NOT_RUN_UNISOLATED,
                )
            )
    launches = [_recorded_launch(path, env, python) for path in sorted(record.glob("launch-*.argv"))]
    if not launches and returncode != 0:
        last = (stderr.strip().splitlines() or [f"exit code {returncode}"])[-1]
        raise PlanError(
            f"{launcher}: bash stopped before any launch: {_launcher_line(last, script, launcher)}"
        )
    if not launches:
        raise PlanError(
            f"{launcher}: no launch found (python SCRIPT, torchrun, accelerate launch, trl, deepspeed); nothing to try"
        )
    return Plan("launcher", launches, setup)


def _recorded_launch(path: Path, base_env: dict[str, str], python: str) -> Launch:
    line, cwd, *words = path.read_bytes().decode(errors="replace").split("\0")[:-1]
    environment = {}
    env_file = path.with_suffix(".env")
    if env_file.is_file():
        for entry in env_file.read_bytes().decode(errors="replace").split("\0"):
            name, has_value, value = entry.partition("=")
            if (
                has_value
                and base_env.get(name) != value
                and not name.startswith(("NM_TRY_", "BASH_FUNC_"))
                and name not in ("PWD", "OLDPWD", "SHLVL", "_")
            ):
                environment[name] = value
    label = " ".join(shlex.quote(w) for w in words)
    argv, scripts, arguments, processes = _runnable(words, Path(cwd), python)
    return Launch(
        label, argv, Path(cwd), environment, scripts, arguments, line=int(line), processes=processes
    )


def _runnable(words: list[str], cwd: Path, python: str) -> tuple[list[str], list[Path], list[str], int]:
    """The argv to run (`python`'s own python/torchrun/accelerate), the Python scripts it runs, their
    arguments and the processes it asks for (capped: the bootstrap caps what a launcher starts)."""
    program = os.path.basename(words[0])
    script_index = next((i for i, w in enumerate(words) if w.endswith(".py")), None)
    script, arguments = script_of(words, cwd)
    scripts = [script] if script is not None else []
    processes = 1
    for index, w in enumerate(words[: script_index or len(words)]):
        name, _, value = w.partition("=")
        if name in (
            "--nproc_per_node",
            "--nproc-per-node",
            "--num_processes",
            "--num-processes",
            "--num_gpus",
        ):
            value = value or (words[index + 1] if index + 1 < len(words) else "")
            processes = min(int(value), MAX_PROCESSES) if value.isdigit() else MAX_PROCESSES
    bin_dir = Path(python).parent
    if program.startswith("python"):
        argv = [python, *words[1:]]
    elif (bin_dir / program).exists():
        argv = [python, str(bin_dir / program), *words[1:]]
    else:
        argv = list(words)
    return argv, scripts, arguments, processes


def script_of(words: list[str], cwd: Path) -> tuple[Path | None, list[str]]:
    """The Python script a launch's words run (`X.py` from `cwd`, or the file of `python -m package.module`) and
    the arguments it gets; without a script (`trl sft --model_name_or_path X`), None and the command line."""
    script_index = next((i for i, w in enumerate(words) if w.endswith(".py")), None)
    if script_index is not None:
        return cwd / words[script_index], words[script_index + 1 :]
    module = module_file(words, cwd)
    if module is not None:  # `python -m package.module ARGS`, from the folder it runs in
        return module, words[words.index("-m") + 2 :]
    return None, words[1:]


def module_file(words: list[str], cwd: Path) -> Path | None:
    """The file `python -m package.module` / `torchrun -m package.module` runs, found from `cwd` (the folder
    Python puts first on the path for `-m`), or None."""
    if "-m" not in words[:-1]:
        return None
    name = words[words.index("-m") + 1]
    base = cwd.joinpath(*name.split("."))
    return next((path for path in (base.with_suffix(".py"), base / "__main__.py") if path.is_file()), None)


def repository_root(path: Path) -> Path | None:
    """The folder above `path` that holds .git, or None."""
    return next((folder for folder in path.absolute().parents if (folder / ".git").exists()), None)


def arguments_folder(script: Path, arguments: list[str]) -> Path:
    """The folder a script is run from: its own, unless more of the relative paths its arguments name are found
    from a folder above it (`python scripts/run_sft.py --config notebooks/llama_3_8b.yaml`, as its README runs
    it from the repository root), up to the repository's root."""
    words = [argument.partition("=")[2] if argument.startswith("-") else argument for argument in arguments]
    paths = [w for w in words if "/" in w and not w.startswith(("/", "~", "$")) and "://" not in w]

    def found(folder: Path) -> int:
        return sum((folder / path).exists() for path in paths)

    best, most = script.parent, found(script.parent)
    for folder in folders_up(script.parent)[1:] if paths else []:
        if found(folder) > most:
            best, most = folder, found(folder)
    return best


def launcher_folder(launcher: Path) -> Path:
    """The folder a launcher is run from: its own, unless the relative scripts it launches are found from a
    folder above it (a launcher in scripts/ written to be run from the repository root, as its README says),
    up to the repository's root (the folder with .git)."""
    data = launcher.read_bytes()
    relative = []
    for command in _commands(parse(data).root_node):
        _, words = _command_words(command, data)
        if classify(words) == ("launch", ""):
            relative += [w for w in words if w.endswith(".py") and not w.startswith(("/", "$", "~"))]
            relative += (
                [w.replace(".", "/") for w in words[words.index("-m") + 1 :][:1]] if "-m" in words else []
            )
    for folder in folders_up(launcher.parent) if relative else []:
        if all(
            (folder / w).exists() or (folder / f"{w}.py").exists() or (folder / w).is_dir() for w in relative
        ):
            return folder
    return launcher.parent


# -- notebooks ---------------------------------------------------------------------------------------------
def notebook_cells(notebook: Path) -> list[str]:
    try:
        document = json.loads(notebook.read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:
        raise PlanError(f"{notebook}: not a readable notebook ({error})") from error
    cells = document.get("cells") if isinstance(document, dict) else None
    if not isinstance(cells, list):
        raise PlanError(f"{notebook}: not a notebook (no cells)")
    sources = []
    for cell in cells:
        if isinstance(cell, dict) and cell.get("cell_type") == "code":
            source = cell.get("source", "")
            sources.append("".join(source) if isinstance(source, list) else str(source))
    return sources


def notebook_shell_lines(source: str) -> list[tuple[int, int, str]]:
    """(first line index, last line index, command) of a cell's `!cmd` / `%pip` / `%conda` lines and of a
    `%%bash` cell's commands, each with the lines a trailing `\\` continues it onto (as IPython joins a `!cmd \\`
    line and bash a command)."""
    lines = source.splitlines()
    bash = bool(lines) and lines[0].startswith(("%%bash", "%%sh", "%%script bash"))
    found = []
    index = 1 if bash else 0
    while index < len(lines):
        first, command = index, lines[index].lstrip()
        while command.endswith("\\") and index + 1 < len(lines):
            index += 1
            command = command[:-1] + lines[index]
        index += 1
        if bash and command.strip():
            found.append((first, index - 1, command))
        elif not bash and command.startswith("!") and not command.startswith("!="):
            found.append((first, index - 1, command.lstrip("!")))
        elif not bash and command.startswith(("%pip", "%conda")):
            found.append((first, index - 1, command[1:]))
    return found


def plan_notebook(notebook: Path, isolated: bool, python: str) -> tuple[Plan, list[str]]:
    """The notebook run, and the cells as the kernel gets them: set-up lines listed, and run in the sandbox
    (not isolated, replaced by a print)."""
    cells = notebook_cells(notebook)
    setup: list[Skipped] = []
    executed = []
    for number, source in enumerate(cells, start=1):
        lines = source.splitlines()
        for index, line in enumerate(lines):
            moved = cd_in_tree(line, notebook.parent)
            if moved is not None:
                lines[index] = f"{line[: len(line) - len(line.lstrip())]}%cd {shlex.quote(str(moved))}"
                outcome = f"run as %cd {os.path.relpath(moved, notebook.parent)}, that folder of this tree"
                setup.append(Skipped(line.strip(), AUTHORS_FOLDER, cell=number, outcome=outcome))
        for index, last, command in notebook_shell_lines(source):
            try:
                words = shlex.split(command, comments=True)
            except ValueError:
                continue
            kind = classify(words)
            indent = lines[index][: len(lines[index]) - len(lines[index].lstrip())]
            if kind is not None and kind[0] == "launch" and not lines[0].startswith("%%"):
                stop = STOP_AFTER_FAILED_LAUNCH.format(command=command.strip())
                lines[last] += "".join(f"\n{indent}{line}" for line in stop.splitlines())
                continue
            if kind is None or kind[0] != "skip":
                continue
            if isolated:
                setup.append(Skipped(command.strip(), kind[1], cell=number, outcome="ran in the sandbox"))
                if not lines[0].startswith("%%"):  # IPython keeps a `!`/`%pip` line's exit code in _exit_code
                    lines[last] += f"\n{indent}{RECORD_SET_UP_EXIT.format(index=len(setup) - 1)}"
                continue
            setup.append(Skipped(command.strip(), kind[1], cell=number))
            note = "neuron-migrate try: not run: " + command.strip()
            in_bash = lines[0].startswith("%%")
            lines[index] = indent + (f"echo {shlex.quote(note)}" if in_bash else f"print({note!r})")
            lines[index + 1 : last + 1] = [""] * (last - index)  # the lines it continued onto
        executed.append("\n".join(lines))
    # By path (its folder not on sys.path): the kernel runner imports nothing of ours, so any environment with
    # nbclient runs it.
    runner = (
        f"import runpy; runpy.run_path({str(Path(__file__).with_name('kernel.py'))!r}, run_name='__main__')"
    )
    argv = [python, "-c", runner, notebook.name]
    launch = Launch(
        f"notebook {notebook.name} ({len(cells)} code cells)", argv, notebook.parent, notebook=notebook
    )
    return Plan("notebook", [launch], setup), executed
