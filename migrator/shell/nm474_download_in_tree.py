"""NM474: a notebook's `!wget` / `!curl` of a script from a GitHub repository whose own copy this tree holds
(the notebook beside the repository's `scripts/train.py`, downloading that file from the repository's main
branch) becomes a copy of the tree's file, which this run migrated: what NM501 asks for on the download, done.

The file is the tree's when the URL's whole path from some folder of the tree (an ancestor of the notebook's,
within the tree being migrated) names a file there, at least a folder and a name deep. Only notebook lines are
rewritten: their commands run in the notebook's folder, so the copy's path is exact; a shell script's working
folder is its caller's."""

from __future__ import annotations

import os
import re
import shlex
from pathlib import Path, PurePosixPath

from migrator.notebook_rules import example
from migrator.rules import Example, Rule, Severity
from migrator.shell.edits import Context
from usercode.shell import Node, Word

DOWNLOAD_IN_TREE = Rule(
    "NM474",
    Severity.INFO,
    "A notebook downloads a script (`!wget` / `!curl` of a GitHub file URL) that this tree holds at the same path "
    "of the repository",
    "The download becomes `!cp` of the tree's copy, which this run migrated (the downloaded one would be the "
    "repository's unmigrated file, at the branch the URL names: the copy is the version of this checkout).",
    examples=(
        Example(
            example(
                "!wget https://raw.githubusercontent.com/huggingface/optimum-neuron/main/notebooks/text-"
                "classification/scripts/train.py"
            ).before,
            example("!cp scripts/train.py train.py").before,
            kind="notebook",
            beside=(("scripts/train.py", "import torch\n"),),
        ),
    ),
)
RULES = (DOWNLOAD_IN_TREE,)

# A file of a GitHub repository: raw.githubusercontent.com/OWNER/REPO/REF/PATH, github.com/OWNER/REPO/{raw,blob}/REF/PATH.
_FILE_URL = re.compile(
    r"https?://(?:raw\.githubusercontent\.com/[^/\s]+/[^/\s]+/|github\.com/[^/\s]+/[^/\s]+/(?:raw|blob)/)"
    r"(?P<rest>[^?#\s]+)(?:\?raw=true)?$"
)
_SCRIPTS = (".py", ".sh", ".ipynb")
# Options that change neither what is fetched nor where it goes (quiet, retries, redirects, fail on errors).
_QUIET = {
    "wget": {"-q", "--quiet", "-nv", "--no-verbose", "-nc", "--no-clobber", "-N", "--timestamping"},
    "curl": {"-L", "--location", "-s", "--silent", "-S", "--show-error", "-f", "--fail", "-k", "--insecure"},
}


class DownloadInTreeMatcher:
    HOOKS = {"program": "download_in_tree"}

    def download_in_tree(
        self, ctx: Context, node: Node, words: list[Word], siblings: list[Word]
    ) -> bool | None:
        program = words[0].value
        if not self.inline or self.directory is None or self.root is None or program not in _QUIET:
            return None
        fetched = _fetched(program, [w.value for w in words[1:]])
        if fetched is None:
            return None
        url, rest, output = fetched
        local = _tree_file(rest, self.directory, self.root)
        if local is None:
            return None
        copy = os.path.relpath(local, self.directory)
        self.edit(ctx, words[0].start, words[-1].end, f"cp {shlex.quote(copy)} {shlex.quote(output)}")
        self.report(
            ctx.at(words[0].start),
            DOWNLOAD_IN_TREE,
            f"`{program}` of {url} -> `cp {copy} {output}`: this tree holds that file, migrated in this run; the "
            "download would be the repository's unmigrated copy at the branch the URL names.",
        )
        return True


MATCHER = DownloadInTreeMatcher


def _fetched(program: str, arguments: list[str]) -> tuple[str, str, str] | None:
    """(URL, its REF/PATH, the file it is written to) of a download of one script with no other effect; else
    None."""
    urls, output, remote_name = [], None, False
    words = iter(arguments)
    for word in words:
        if word in _QUIET[program]:
            continue
        if program == "wget" and word in ("-O", "--output-document"):
            output = next(words, None)
        elif program == "wget" and word.startswith("--output-document="):
            output = word.split("=", 1)[1]
        elif program == "curl" and word in ("-o", "--output"):
            output = next(words, None)
        elif program == "curl" and word in ("-O", "--remote-name"):
            remote_name = True
        elif program == "curl" and re.fullmatch(r"-[LsSfkO]+", word):  # `-sSLO`: short flags together
            remote_name = remote_name or "O" in word
        elif _FILE_URL.match(word):
            urls.append(word)
        else:
            return None
    if len(urls) != 1 or output in ("-", ""):
        return None
    rest = _FILE_URL.match(urls[0])["rest"]
    name = PurePosixPath(rest).name
    if output is None and (program == "wget" or remote_name):
        output = name
    if output is None or not name.endswith(_SCRIPTS):
        return None  # curl with neither -o nor -O writes to its output
    return urls[0], rest, output


def _tree_file(rest: str, directory: Path, root: Path) -> Path | None:
    """The tree's file that `rest` (the URL's REF/PATH, a branch name possibly holding slashes) names: the
    longest tail of it, at least two parts, found from the nearest folder between `directory` and `root`."""
    parts = PurePosixPath(rest).parts
    if ".." in parts:
        return None
    root = root.resolve()
    folders = [directory.resolve(), *directory.resolve().parents]
    folders = folders[: folders.index(root) + 1] if root in folders else []
    for start in range(1, len(parts) - 1):
        for folder in folders:
            candidate = folder.joinpath(*parts[start:])
            if candidate.is_file():
                return candidate
    return None
