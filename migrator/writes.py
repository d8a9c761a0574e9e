"""Replacing a user's file so that nothing of it is ever lost: not its content, owner, group, mode, links or
extended attributes, nor an edit saved while it was being migrated.

The new content is written to a temporary file in the target's folder and renamed over it (a rename is
atomic: a reader, or a crash, sees the old file or the new one, never half of one). The temporary file is
unnamed (Linux's O_TMPFILE): a process killed while writing it leaves nothing behind; it gets a name only for
the two system calls that link it and rename it into place. Where the file system cannot make unnamed files,
it is named `.NAME.PID-XXXXXXXX.neuron-migrate-tmp`, removed on every exit Python sees; one a killed process
left is removed by the next write into that folder once its process is gone. docs/reference/safety.md has the details.
"""

from __future__ import annotations

import ctypes
import errno
import os
import secrets
import stat
import time
from contextlib import suppress
from pathlib import Path

from usercode.sources import Snapshot

TEMPORARY_SUFFIX = ".neuron-migrate-tmp"
_STALE_AFTER_S = 24 * 3600  # a temporary file this old is debris even where its PID was reused
_AT_FDCWD, _AT_EMPTY_PATH = -100, 0x1000  # Linux
_cleaned: set[str] = set()  # folders whose leftover temporaries this process has already removed


class WriteRefused(OSError):
    """A write that would lose something of the user's (an edit, an owner, a hard link); nothing was written."""


def replace_file(
    path: Path,
    data: bytes,
    *,
    read: Snapshot | None = None,
    like: Path | None = None,
    follow_symlinks: bool = True,
) -> None:
    """Atomically make `data` the content of `path`.

    `read`: the version of the file the data was made from (an in-place rewrite): the write is refused when the
    file changed since, or has other hard links (replacing it would split them from it). `follow_symlinks`:
    a symbolic link's target is replaced and the link kept; otherwise the link itself is replaced by a file.
    An existing file keeps its owner, group, mode and extended attributes (refused when they cannot be kept,
    as a non-root user replacing another user's file); a new file takes its mode from `like` if given.
    Raises OSError (WriteRefused for a refusal); the file is then as it was.
    """
    target = Path(os.path.realpath(path)) if follow_symlinks else Path(path)
    try:
        current: os.stat_result | None = os.lstat(target)
    except FileNotFoundError:
        current = None
    if current is not None and stat.S_ISLNK(current.st_mode):
        current = None  # not following links: the link itself is replaced
    if read is not None:
        if current is None or not read.same_version(current):
            raise _changed(path)
        if current.st_nlink > 1:
            raise WriteRefused(
                errno.EMLINK,
                f"it has {current.st_nlink} hard links; replacing it would split them (the other names would "
                "keep the old content): not written (use --output-dir, or copy the file to break the link)",
            )
    directory = target.parent
    directory.mkdir(parents=True, exist_ok=True)
    _remove_leftovers(directory)
    handle, named = _temporary(directory, target.name)
    try:
        _fill(handle, data, current, target, like)
        # The last moment an edit saved meanwhile can be seen: between here and the rename lie two system calls.
        if read is not None and not read.still_current(target):
            raise _changed(path)
        if named is None:
            named = _named(directory, target.name)
            if not _link(handle, named):  # a kernel or sandbox that will not name it: write a named one
                os.close(handle)
                handle = os.open(named, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
                _fill(handle, data, current, target, like)
        os.replace(named, target)
        named = None
        _sync_directory(directory)
    finally:
        os.close(handle)
        if named is not None:
            with suppress(OSError):
                os.unlink(named)


def _fill(handle: int, data: bytes, current: os.stat_result | None, target: Path, like: Path | None) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(handle, view) :]
    if current is not None:
        _keep_metadata(handle, current, target)
    elif like is not None:
        os.fchmod(handle, os.stat(like).st_mode & 0o7777)
    os.fsync(handle)


def _link(handle: int, name: str) -> bool:
    """Gives the unnamed file `handle` the name `name`: linkat(AT_EMPTY_PATH), else through /proc."""
    try:
        linkat = ctypes.CDLL(None, use_errno=True).linkat
        if linkat(handle, b"", _AT_FDCWD, os.fsencode(name), _AT_EMPTY_PATH) == 0:
            return True
    except (OSError, AttributeError):
        pass
    try:
        os.link(f"/proc/self/fd/{handle}", name, follow_symlinks=True)
    except OSError:
        return False
    return True


def _changed(path: Path) -> WriteRefused:
    return WriteRefused(
        errno.EAGAIN,
        "it changed while it was being migrated (another program wrote it): not written, so that edit is kept; "
        "run neuron-migrate on it again",
    )


def _temporary(directory: Path, name: str) -> tuple[int, str | None]:
    """An open temporary file in `directory`: unnamed where the file system allows it (name None)."""
    if hasattr(os, "O_TMPFILE"):
        try:
            return os.open(directory, os.O_TMPFILE | os.O_WRONLY, 0o666), None
        except OSError as error:
            if error.errno not in (errno.EOPNOTSUPP, errno.EISDIR, errno.EINVAL):
                raise
    named = _named(directory, name)
    return os.open(named, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666), named


def _named(directory: Path, name: str) -> str:
    # Under NAME_MAX (255 bytes) whatever the file's own name.
    stem = name.encode("utf-8", "surrogateescape")[:150].decode("utf-8", "ignore")
    return str(directory / f".{stem}.{os.getpid()}-{secrets.token_hex(4)}{TEMPORARY_SUFFIX}")


def _remove_leftovers(directory: Path) -> None:
    """Removes the named temporaries of processes that were killed while renaming one into place."""
    key = str(directory)
    if key in _cleaned:
        return
    _cleaned.add(key)
    try:
        entries = list(os.scandir(directory))
    except OSError:
        return
    now = time.time()
    for entry in entries:
        if not (entry.name.startswith(".") and entry.name.endswith(TEMPORARY_SUFFIX)):
            continue
        pid_text = entry.name[: -len(TEMPORARY_SUFFIX)].rpartition(".")[2].partition("-")[0]
        with suppress(OSError):
            old = now - entry.stat(follow_symlinks=False).st_mtime > _STALE_AFTER_S
            if entry.is_file(follow_symlinks=False) and (old or not _alive(pid_text)):
                os.unlink(entry.path)


def _alive(pid_text: str) -> bool:
    if not pid_text.isdigit():
        return False
    try:
        os.kill(int(pid_text), 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _keep_metadata(handle: int, current: os.stat_result, target: Path) -> None:
    """The replaced file's owner, group, mode and extended attributes (ACLs included) on the new one."""
    mine = os.fstat(handle)
    if (mine.st_uid, mine.st_gid) != (current.st_uid, current.st_gid):
        try:
            os.fchown(handle, current.st_uid, current.st_gid)
        except PermissionError:
            raise WriteRefused(
                errno.EPERM,
                f"it belongs to {_owner(current.st_uid, current.st_gid)}; replacing it as "
                f"{_owner(os.geteuid(), os.getegid())} would change its owner or group: not written (run as its "
                "owner, or use --output-dir)",
            ) from None
    os.fchmod(handle, current.st_mode & 0o7777)  # after chown, which clears set-user-ID bits
    if hasattr(os, "listxattr"):
        with suppress(OSError):
            for name in os.listxattr(target):
                with suppress(OSError):  # security.* needs privileges; a file system may not take one
                    os.setxattr(handle, name, os.getxattr(target, name))


def _owner(uid: int, gid: int) -> str:
    import grp
    import pwd

    try:
        user = pwd.getpwuid(uid).pw_name
    except KeyError:
        user = str(uid)
    try:
        group = grp.getgrgid(gid).gr_name
    except KeyError:
        group = str(gid)
    return f"{user}:{group}"


def _sync_directory(directory: Path) -> None:
    """The rename itself on disk (a power cut after it keeps the new file)."""
    with suppress(OSError):
        handle = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(handle)
        finally:
            os.close(handle)
