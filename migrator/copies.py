"""`--output-dir`: the rest of each input folder, copied beside the migrated files, so that the migrated tree
runs on its own (a launcher's `--config_file_path config/main.yaml`, a script's `data/train.jsonl`).

Links are kept as links when they point inside their input folder (pointed at the same place of the copy) and
left out when they point out of it: the copy never reaches outside the tree it mirrors. A copy is never written
onto an input: targets are checked before anything is written, as migrated files are (`engine.output_conflicts`).
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from usercode.sources import SKIP_DIRS, SourceFile, _excluded


@dataclass(frozen=True)
class Copy:
    source: Path
    relative: Path  # its place under the output folder
    link: str | None = None  # a link's target, as the copy's link will read (relative to its folder)


@dataclass
class TreeCopy:
    copies: list[Copy]
    links_out: list[tuple[Path, str]]  # (link, where it points): left out, they leave the tree


def plan(roots: list[Path], exclude: tuple[str, ...], migrated: list[SourceFile]) -> TreeCopy:
    """What of the folders in `roots` the migration does not write: every other file and link, in walk order."""
    written = {str(source.path) for source in migrated}
    tree = TreeCopy([], [])
    for root in roots:
        if root.is_dir():
            _plan_folder(root, exclude, written, tree)
    return tree


def _plan_folder(root: Path, exclude: tuple[str, ...], written: set[str], tree: TreeCopy) -> None:
    real_root = os.path.realpath(root)
    for directory, subdirs, files in os.walk(root):
        here = Path(directory)
        subdirs[:] = sorted(
            name for name in subdirs if name not in SKIP_DIRS and not _excluded(here / name, root, exclude)
        )
        folder_links = [name for name in subdirs if (here / name).is_symlink()]
        subdirs[:] = [name for name in subdirs if name not in folder_links]  # os.walk would not enter them
        for name in [*folder_links, *sorted(files)]:
            path = here / name
            if str(path) in written or _excluded(path, root, exclude):
                continue
            relative = path.relative_to(root)
            if not path.is_symlink():
                tree.copies.append(Copy(path, relative))
                continue
            pointed = os.path.realpath(path)
            if pointed != real_root and not pointed.startswith(real_root + os.sep):
                tree.links_out.append((path, os.readlink(path)))
                continue
            # The same place in the copy, reached from the link's own folder there.
            inside = os.path.relpath(pointed, real_root)
            tree.copies.append(Copy(path, relative, link=os.path.relpath(inside, relative.parent)))


def conflicts(tree: TreeCopy, output_dir: Path, roots: list[Path], taken: set[str]) -> str | None:
    """Why the copies cannot be written: one would land on an input, or where a migrated file goes."""
    real_roots = [os.path.realpath(root) for root in roots]
    for copy in tree.copies:
        target = os.path.realpath(output_dir / copy.relative)
        if any(target == root or target.startswith(root + os.sep) for root in real_roots):
            return f"the copy of {copy.source} would be written to {output_dir / copy.relative}, inside the input; nothing was written"
        if target in taken:
            return f"{copy.source} and a migrated file would both be written to {output_dir / copy.relative}; nothing was written"
        taken.add(target)
    return None


def write(tree: TreeCopy, output_dir: Path) -> None:
    """Copies (a file keeps its mode and times, as `cp -p`); a link or file already there is replaced, never
    written through. Raises OSError."""
    for copy in tree.copies:
        target = output_dir / copy.relative
        target.parent.mkdir(parents=True, exist_ok=True)
        temporary = target.with_name(f".{target.name}.{os.getpid()}.neuron-migrate-tmp")
        try:
            if copy.link is not None:
                os.symlink(copy.link, temporary)
            else:
                shutil.copy2(copy.source, temporary, follow_symlinks=False)
            os.replace(temporary, target)
        finally:
            if os.path.lexists(temporary):
                os.unlink(temporary)
