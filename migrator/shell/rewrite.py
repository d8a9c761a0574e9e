"""Rewrite shell launchers on tree-sitter's parse tree, by the byte ranges of its nodes.

A command is what bash runs: its words wherever they sit (continued lines, pipelines, `&&`/`||` lists,
`if`/`for`/function bodies, `$(...)`). Env prefixes (`VAR=1 cmd`) and wrappers (`time`, `env`, `nohup`,
`srun`/`mpirun` and their options) are looked through to the launched program. Code inside strings
that bash runs again (`bash -c "..."`, `sbatch --wrap="..."`, `eval "..."`) and heredoc bodies that are
scripts (fed to bash/python, or written to a .sh/.py file) are parsed and rewritten in place; what is
inserted there is escaped for the quoting around it. A heredoc of data is left alone. TODO comments go
above the statement that holds the command, at the top level of the file.

Everything outside the edited ranges stays byte-identical. The rules' matchers are mixins of `ShellRewriter`,
taken from every shell rule module (`nm<code>_<what>.py`, found by `rules.rule_modules` as the registry finds
them: nothing lists them); each declares the events of the walk it takes (`HOOKS`, below). The edit list is
`edits.py`.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from migrator.families.training.nm222_tp_compile_checkpointing import TP_COMPILE_CHECKPOINTING
from migrator.families.training.nm227_optimizer_name import OPTIMIZER_NAME
from migrator.rules import KINDS, Finding, rule_modules
from migrator.shell.commands import Launch, _script_index, _signature
from migrator.shell.edits import Context, Edit, EditList, _escape_for
from migrator.shell.installs import Importer
from migrator.shell.scripts import ScriptParser, script_parser
from usercode.launchers import SHELLS, command_parts, heredoc_kind, look_through
from usercode.python import python_imports
from usercode.shell import Node, Word, parse, quoted_body, word

PythonRewriter = Callable[[str], tuple[str, list[Finding]]]


RULE_MODULES = rule_modules(KINDS["shell"])
# Every shell rule module's matcher, by code (None: a rule another module's matcher decides).
MATCHERS = tuple(module.MATCHER for module in RULE_MODULES if module.MATCHER is not None)
# The events of the walk a matcher takes, each the name of its method in `HOOKS`; every matcher that takes an
# event is called, by code:
# - "start" (): the rewriter is built: the matcher sets up its own state;
# - "assignments" (ctx, node, words, data, **how): variable assignments, alone or as a command's env prefix;
# - "declaration" (ctx, node, data): `export` / `declare` / `unset`;
# - "branch" (ctx, node, data) -> the statements kept, None when not folded: an `if`; the first that folds it
#   decides;
# - "wrapper" (ctx, node, words, data, siblings, marks) -> True, None when not taken: a command that runs
#   another (its launch is not recorded, its arguments are not walked);
# - "program" (ctx, node, words, siblings) -> True, None when not taken: a command by its program; the first
#   that takes it decides;
# - "script" (ctx, root, folded): a piece parsed as a script was walked;
# - "walked" (): the whole file was walked; "finish" (): then, before the edits are rendered.
EVENTS = ("start", "assignments", "declaration", "branch", "wrapper", "program", "script", "walked", "finish")
HOOKS = {
    event: tuple(name for matcher in MATCHERS if (name := vars(matcher).get("HOOKS", {}).get(event)))
    for event in EVENTS
}


# Every shell rule module's matcher on the shared walk below and the edit list of `edits.py`.
class ShellRewriter(*MATCHERS, EditList):
    def __init__(
        self,
        text: str,
        migrate_python: PythonRewriter | None = None,
        inline: bool = False,
        directory: Path | None = None,
        imported: frozenset[str] = frozenset(),
        written: Mapping[str, str] | None = None,
        python_cells: Sequence[tuple[int, str]] = (),
        root: Path | None = None,
        beside: Importer | None = None,
        following: frozenset[tuple[str, ...]] = frozenset(),
        python_beside: Sequence[tuple[str, str]] = (),
    ) -> None:
        self.inline = inline
        self.python_beside = (
            python_beside  # the Python files of the script's folder (name, code): what they load
        )
        self.following = following  # launches that run after this text (later cells of a notebook)
        self.written = written  # scripts the notebook writes, by path (their parsers are read there)
        self.python_cells = python_cells  # the notebook's Python cells (number, code): what they load
        self.directory = directory
        self.root = root
        self.beside = beside  # what the code of the file's folder still imports (see `installs.plan`)
        self.imported = imported  # grows with what the file's Python heredocs import once migrated
        self.text = text
        self.data = text.encode()
        self.newline = "\r\n" if "\r\n" in text else "\n"
        self.migrate_python = migrate_python
        self.scripts: dict[str, str] = {}  # the text of a script a launch runs -> that script migrated
        self.line_starts = [0] + [m.end() for m in re.finditer(b"\n", self.data)]
        self.edits: list[Edit] = []
        self.todos: list[tuple[int, str, int]] = []  # (offset, text, owner)
        self.findings: list[tuple[Finding, int]] = []  # (finding, owner)
        self.launches: list[Launch] = []
        self.contexts: list[Context] = []
        self.owner = 0  # >0 while inside a compile run: what it adds goes if the run is removed
        self.command_start = 0  # where the command being rewritten starts (after merged assignments)
        self.rules = SHELL_RULES
        self.hook("start")

    def hook(self, event: str, *args, **kwargs) -> list:
        """Call every matcher that takes `event` (`HOOKS`), by code; what each returned."""
        return [getattr(self, name)(*args, **kwargs) for name in HOOKS[event]]

    def first(self, event: str, *args):
        """Call the matchers that take `event` until one takes what it is given (returns other than None); what
        that one returned."""
        for name in HOOKS[event]:
            taken = getattr(self, name)(*args)
            if taken is not None:
                return taken
        return None

    # -- walking ------------------------------------------------------------------------------------------

    def run(self) -> tuple[str, list[Finding]]:
        top = Context(0, len(self.data), _escape_for(None), standalone=True, data=self.data)
        self.script(top)
        self.hook("walked")
        self.hook("finish")
        text = self.render()
        findings = sorted((f for f, _ in self.findings), key=lambda f: (f.line, f.column, f.code))
        return text, findings

    def script(self, ctx: Context) -> None:
        self.contexts.append(ctx)
        data = ctx.data
        tree = parse(data)
        folded = self.walk(ctx, tree.root_node, data)
        self.hook("script", ctx, tree.root_node, folded)

    def walk(self, ctx: Context, node: Node, data: bytes) -> list[Node]:
        """Rewrite every command under `node`; returns the `if`s folded (their tests are resolved)."""
        folded: list[Node] = []
        kind = node.type
        if kind == "heredoc_body":  # parsed on its own when it is a script
            return folded
        if kind == "ERROR":  # what tree-sitter could not parse is not rewritten: its words are guesses
            return folded
        kept = self.first("branch", ctx, node, data) if kind == "if_statement" else None
        if kept is not None:
            folded.append(node)
            for child in kept:
                folded += self.walk(ctx, child, data)
            return folded
        if kind == "command":
            self.command(ctx, node, data)
            return folded
        if kind in ("declaration_command", "unset_command"):
            self.hook("declaration", ctx, node, data)
            return folded
        if kind in ("variable_assignment", "variable_assignments"):
            assignments = node.named_children if kind == "variable_assignments" else [node]
            self.hook("assignments", ctx, node, [word(a, data) for a in assignments], data, whole=True)
            return folded
        elif kind == "redirected_statement":
            self.heredocs(ctx, node)
        for child in node.children:
            if child.type != "heredoc_body":
                folded += self.walk(ctx, child, data)
        return folded

    # -- commands -----------------------------------------------------------------------------------------

    def command(self, ctx: Context, node: Node, data: bytes) -> None:
        marks = (len(self.findings), len(self.edits), len(self.todos))
        parts = command_parts(node, data)
        for part in parts[:-1]:
            self.hook("assignments", ctx, part[0], [word(c, data) for c in part], data, whole=True, span=part)
        part = parts[-1]
        self.command_start = part[0].start_byte
        prefix = [word(c, data) for c in part if c.type == "variable_assignment"]
        words = [word(c, data) for c in part if c.type != "variable_assignment" and "redirect" not in c.type]
        removable = [word(c, data) for c in part]
        if not words:
            self.hook("assignments", ctx, node, prefix, data, whole=True)
            return
        words, assignments = look_through(words)
        self.hook(
            "assignments",
            ctx,
            node,
            [*prefix, *assignments],
            data,
            whole=False,
            siblings=removable,
            launch=words,
        )
        if not words:
            return
        if self.first("wrapper", ctx, node, words, data, removable, marks) is not None:
            return
        self.launched(ctx, node, words, data, removable)
        if self.owner == 0:
            self.launches.append(Launch(ctx.at(node.start_byte), _signature(words)))

    def launched(
        self, ctx: Context, node: Node, words: list[Word], data: bytes, siblings: list[Word]
    ) -> None:
        taken = self.first("program", ctx, node, words, siblings)
        if taken is None and words[0].value in (*SHELLS, "eval", "sbatch"):
            self.nested_strings(ctx, node, words)
            return
        for child in node.named_children:  # $(...) in arguments
            if child.type != "command_name":
                self.substitutions(ctx, child, data)

    def substitutions(self, ctx: Context, node: Node, data: bytes) -> None:
        if node.type in ("command_substitution", "process_substitution"):
            self.walk(ctx, node, data)
            return
        for child in node.named_children:
            self.substitutions(ctx, child, data)

    def parser_of(self, words: list[Word]) -> ScriptParser:
        """The argument parser of a launch (`trl sft` parses into the config of TRL's sft.py)."""
        script = words[_script_index(words)].value
        if words[0].value == "trl":
            return script_parser(f"{script}.py", None)
        return script_parser(script, self.directory, self.written, self.root, self.migrated_script)

    def migrated_script(self, code: str) -> str:
        """A script a launch runs, migrated as it will be (as it is where it cannot be)."""
        if self.migrate_python is None:
            return code
        if code not in self.scripts:  # a launcher often runs one script several times
            try:
                self.scripts[code] = self.migrate_python(code)[0]
            except Exception:  # a script that cannot be migrated runs as it is (a rule's bug included)
                self.scripts[code] = code
        return self.scripts[code]

    # -- code inside strings and heredocs -----------------------------------------------------------------

    def nested_strings(self, ctx: Context, node: Node, words: list[Word]) -> None:
        """`bash -c "..."`, `eval "..."`, `sbatch --wrap="..."`: the string is a script bash runs."""
        program = words[0].value
        targets: list[Node] = []
        for position, item in enumerate(words[1:], start=1):
            if program in SHELLS and item.text == "-c" and position + 1 < len(words):
                targets.append(words[position + 1].node)
                break
            if program == "eval" and len(words) == 2:
                targets.append(item.node)
            if program == "sbatch" and item.text == "--wrap" and position + 1 < len(words):
                targets.append(words[position + 1].node)
            if program == "sbatch" and item.text.startswith("--wrap=") and item.node.type == "concatenation":
                targets += [c for c in item.node.children if c.type in ("string", "raw_string")][:1]
        for target in targets:
            body = quoted_body(target)
            if body is None:
                continue
            start, end, quote = body
            inner = ctx.piece(
                start,
                end,
                _compose(ctx.escape, _escape_for(quote)),
                standalone=False,
                host=node,
                host_context=ctx,
                anchor=self.anchor(ctx, node),
            )
            self.script(inner)
            ctx.launchers += [(node.start_byte, node.end_byte)] if inner.launchers else []

    def heredocs(self, ctx: Context, node: Node) -> None:
        body = node.child_by_field_name("body")
        for redirect in (c for c in node.children if c.type == "heredoc_redirect"):
            content = next((c for c in redirect.children if c.type == "heredoc_body"), None)
            start = next((c for c in redirect.children if c.type == "heredoc_start"), None)
            if content is None or start is None or content.end_byte <= content.start_byte:
                continue
            kind = heredoc_kind(body, node, ctx.data[content.start_byte : content.end_byte])
            if kind is None:
                continue  # data, not code
            quoted = any(q in start.text.decode() for q in "'\"\\")
            escape = _compose(ctx.escape, _escape_for(None if quoted else "heredoc"))
            if kind == "shell":
                # Parsed as bash writes it out: `--flag \\` in an unquoted body is a continued line.
                body = ctx.piece(
                    content.start_byte,
                    content.end_byte,
                    escape,
                    standalone=True,
                    unescape=not quoted,
                    anchor=self.anchor(ctx, node),
                )
                self.script(body)
            elif self.migrate_python is not None:
                self.python_body(ctx, content, escape, unescape=not quoted)

    def python_body(self, ctx: Context, content: Node, escape: Callable[[str], str], unescape: bool) -> None:
        from migrator.verify import MigrationError

        body = ctx.piece(content.start_byte, content.end_byte, escape, standalone=True, unescape=unescape)
        source = body.data.decode()
        try:
            migrated, findings = self.migrate_python(source)
            self.imported = self.imported | python_imports(migrated)
        except MigrationError:
            return  # not Python after all (or shell expansions in it): leave it as it is
        line, _ = self.position(body.start)
        for finding in findings:
            self.findings.append((_shifted(finding, line - 1), self.owner))
        # Only what the Python rewrite inserted is escaped; the user's text is already as bash needs it.
        matcher = difflib.SequenceMatcher(None, source, migrated, autojunk=False)
        for tag, i1, i2, j1, j2 in matcher.get_opcodes():
            if tag != "equal":
                start, end = len(source[:i1].encode()), len(source[:i2].encode())
                self.edits.append(
                    Edit(body.at(start), body.at(end), escape(migrated[j1:j2]), owner=self.owner)
                )


# The shell rules, by code (what `EditList.rules` resolves), and NM222 / NM227 of the training family, which a
# launcher's `--gradient_checkpointing` / `--optim` also trigger (`nm461_flags.py`).
SHELL_RULES = {rule.code: rule for module in RULE_MODULES for rule in module.RULES} | {
    rule.code: rule for rule in (TP_COMPILE_CHECKPOINTING, OPTIMIZER_NAME)
}


def _compose(outer: Callable[[str], str], inner: Callable[[str], str]) -> Callable[[str], str]:
    return lambda text: outer(inner(text))


def _shifted(finding: Finding, lines: int) -> Finding:
    return finding.moved({other: other + lines for other in finding.also}, line=finding.line + lines)


def rewrite_shell(
    text: str,
    migrate_python: PythonRewriter | None = None,
    inline: bool = False,
    directory: Path | None = None,
    imported: frozenset[str] = frozenset(),
    written: Mapping[str, str] | None = None,
    python_cells: Sequence[tuple[int, str]] = (),
    root: Path | None = None,
    beside: Importer | None = None,
    following: frozenset[tuple[str, ...]] = frozenset(),
    python_beside: Sequence[tuple[str, str]] = (),
) -> tuple[str, list[Finding]]:
    """Migrate a shell script; `migrate_python` rewrites Python heredoc bodies (left alone without it).

    `inline`: the text is one command line of a notebook, run in a shell of its own; a variable it needs
    is set as a prefix of the command, not exported on a line of its own. `directory`: where the file is, to
    read the scripts it launches (None: scripts are known by name only). `imported`: modules the file (the
    notebook) still imports after its migration; the packages that provide them are not uninstalled.
    `written`: the scripts a notebook writes (`%%writefile`), by path, read for their argument parsers.
    `python_cells`: the notebook's Python cells (number, code), where an export's output may be loaded.
    `root`: the top of the tree being migrated (a launched script's path may start there); `beside`: what the
    code of the file's folder still imports once migrated, asked only when an install would remove a package.
    `following`: signatures of the launches that run after the text (a notebook's later cells);
    `python_beside`: the Python files of the script's folder (name, code), where an export's output may be loaded.
    """
    return ShellRewriter(
        text,
        migrate_python,
        inline,
        directory,
        imported,
        written,
        python_cells,
        root,
        beside,
        following,
        python_beside,
    ).run()
