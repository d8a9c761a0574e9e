"""NM460 (and NM472, NM473, each defined in its own module): `pip install` commands (requirements files:
`requirements.py`). What an install becomes is decided per requirement in `installs.py`, from the target stack
of `migrator/target_stack.json`."""

from __future__ import annotations

import re

from migrator.rules import Rule, Severity
from migrator.shell import example, installs
from migrator.shell.edits import Context
from migrator.target_stack import PIP_ARGUMENTS, component
from usercode.declarations import PIP_VALUE_OPTIONS
from usercode.shell import Node, Word

PIP_INSTALL = Rule(
    "NM460",
    Severity.WARNING,
    "An install (`pip install`, `%pip`, a requirements file) of optimum-neuron / torch-xla / neuronx-distributed, "
    f"or of an XLA-era torch-neuronx (below {component('torch-neuronx').version})",
    f"Replaced with the TorchNeuron package set, {PIP_ARGUMENTS}, "
    "plus what an optimum-neuron extra pulled in (`[diffusers]`: diffusers), with the replaced line's marker "
    "(a `neuronx-cc==2.x` pin beside it loses its version); "
    f"`--extra-index-url {installs.NEURON_INDEX}` is added: torch-neuronx comes from the Neuron pip "
    "repository, not PyPI. Uninstall torch-xla from existing environments: Transformers still takes the XLA path "
    "when it is importable.",
    examples=(
        example(
            '#!/bin/bash\npip install "optimum-neuron[diffusers]==0.3.0" datasets\n',
            "#!/bin/bash\n"
            'pip install torch-neuronx "transformers>=5.23" "trl>=1.16" peft accelerate diffusers datasets --extra-index-url https://pip.repos.neuron.amazonaws.com\n',
        ),
    ),
)
RULES: tuple[Rule, ...] = (PIP_INSTALL,)


class InstallsMatcher:
    """Matcher of pip commands: each is decided once the walk is done (a Python heredoc further down may still
    import what the install would remove)."""

    HOOKS = {"start": "start_installs", "program": "pip_command", "walked": "pips"}

    def start_installs(self) -> None:
        self.installs: list[tuple[Context, Node, list[Word], list[Word], int]] = []

    def pip_command(self, ctx: Context, node: Node, words: list[Word], siblings: list[Word]) -> bool | None:
        program = words[0].value
        if program not in ("pip", "pip3") and [w.value for w in words[1:3]] != ["-m", "pip"]:
            return None
        self.installs.append((ctx, node, words, siblings, self.owner))
        return True

    def pips(self) -> None:
        """Every pip command of the file, in order. A transformers/trl pin conflicts with the migrated code
        wherever it is installed once the file installs TorchNeuron: a later `pip install transformers==4.48.3`
        downgrades what the stack install brought."""
        commands = [(entry, _requirements(entry[2])) for entry in self.installs]
        stack = any(installs.concerns_torchneuron([p for _, p in found]) for _, (found, _) in commands)
        for (ctx, node, words, siblings, owner), (requirements, editable) in commands:
            self.owner = owner
            self.pip(ctx, node, words, siblings, requirements, editable, stack)
        self.owner = 0

    def pip(
        self,
        ctx: Context,
        node: Node,
        words: list[Word],
        siblings: list[Word],
        requirements: list[tuple[Word, installs.Parsed]],
        editable: dict[int, Word],
        stack: bool,
    ) -> None:
        if not installs.concerns_torchneuron([parsed for _, parsed in requirements]):
            if stack:
                for item, parsed in requirements:
                    for why in (why for owner, why in installs.plan([parsed]).conflicts):
                        message = (
                            f"`{item.value}` left as it is: {why}, and it replaces the version the TorchNeuron "
                            "install of this file brings"
                        )
                        self.todo(ctx, node, "NM472", message, at=item.start)
            return
        # An XLA-era torch-neuronx pin goes: TorchNeuron is the current torch-neuronx.
        stale = [w for w, p in requirements if installs.stale(p)]
        current = [(w, p) for w, p in requirements if w not in stale]
        plan = installs.plan([p for _, p in current], self.imported, self.beside)
        for item, parsed in current:
            for rule, reasons in (("NM473", plan.kept), ("NM472", plan.conflicts)):
                for why in (why for owner, why in reasons if owner is parsed):
                    message = f"`{item.value}` left as it is: {why}"
                    self.todo(ctx, node, rule, message, at=item.start)
        legacy = [w for w, p in current if installs.replaced(p) and not plan.keeps(p)]
        # An install of an XLA-era torch-neuronx alone is replaced too: it would keep the whole XLA stack.
        replaced = sorted([*legacy, *stale], key=lambda w: w.start)
        if not replaced:
            return
        for item, parsed in current:
            unpinned = installs.unpinned_compiler(parsed)
            if unpinned is not None:
                self.report(ctx.at(item.start), PIP_INSTALL, compiler_unpinned(item.value))
                self.edit(ctx, item.start, item.end, _shell_quoted(unpinned))
        self.report(ctx.at(replaced[0].start), PIP_INSTALL)
        first = editable.get(replaced[0].start, replaced[0])  # an editable install goes with its `-e`
        self.edit(ctx, first.start, replaced[0].end, " ".join(_shell_quoted(text) for text in plan.added))
        values = [w.value for w in words]
        if not any(installs.NEURON_INDEX in value for value in values):  # where torch-neuronx comes from
            self.edit(ctx, words[-1].end, words[-1].end, f" --extra-index-url {installs.NEURON_INDEX}")
        for item in replaced[1:]:
            self.remove_word(ctx, item, siblings)
            if item.start in editable:
                self.remove_word(ctx, editable[item.start], siblings)


def compiler_unpinned(requirement: str) -> str:
    return (
        f"`{requirement}` unpinned: the compiler of an XLA-era Neuron release would hold pip to that release's "
        "torch-neuronx; torch-neuronx requires the compiler it works with."
    )


def _requirements(words: list[Word]) -> tuple[list[tuple[Word, installs.Parsed]], dict[int, Word]]:
    """The requirements a `pip install` names (none for another pip command), and the `-e` option word of
    each editable one, by the start of its value."""
    values = [w.value for w in words]
    requirements: list[tuple[Word, installs.Parsed]] = []
    editable: dict[int, Word] = {}
    if "install" not in values:
        return requirements, editable
    position = values.index("install") + 1
    while position < len(words):
        value = values[position]
        if value in ("-e", "--editable") and position + 1 < len(words):
            parsed = installs.parse(values[position + 1])
            if parsed is not None:
                requirements.append((words[position + 1], parsed))
                editable[words[position + 1].start] = words[position]
            position += 2
            continue
        if value in PIP_VALUE_OPTIONS:  # `-r requirements.txt` is migrated as a file of its own
            position += 2
            continue
        parsed = installs.parse(value) if not value.startswith("-") else None
        if parsed is not None:
            requirements.append((words[position], parsed))
        position += 1
    return requirements, editable


def _shell_quoted(requirement: str) -> str:
    """A requirement as a shell word: quoted when it holds characters the shell would read."""
    return f'"{requirement}"' if re.search(r"[<>;=!\[\] ()*~'$]", requirement) else requirement


MATCHER = InstallsMatcher
