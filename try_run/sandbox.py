"""The sandbox a try runs the user's code in: Linux namespaces, as container runtimes make them.

- a mount namespace whose whole file system is copy-on-write: every mount (/, /home, /tmp, /opt/ml/model, ...)
  is overlaid (overlayfs) with a layer on a tmpfs that dies with the try, so nothing is copied up front and no
  write reaches the real files; the try's own folder is the one path bound writable (what gets out: reports);
- per command, a network namespace with loopback only and a PID namespace whose first process is this file's
  `run`: when the command ends, is stopped, or the tool that started it dies, every process in it ends
  (torchrun workers, notebook kernels, background children).

`neuron-compat standin -- CMD` gets only the PID namespace (`run_in_own_process_tree`): its files and
network are the point of running it. One `Sandbox` per try holds the mount namespace (a keeper process), so the set-up commands of a launcher and
its launches see each other's files; each command enters it with `nsenter` and gets its own network and PID
namespaces from util-linux `unshare`. As root it needs nothing more; as a user, unprivileged user namespaces
(`--user --map-root-user`) and a kernel that mounts overlayfs in them (5.11 and later).

This file runs on its own too (`python -I -S sandbox.py keep|run SPEC [-- ARGV]`): the keeper and the first
process of each command, inside the namespaces. It imports only the standard library.
"""

from __future__ import annotations

import contextlib
import ctypes
import fcntl
import json
import os
import re
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

# Kernel file systems that are not files: bound or mounted fresh, never overlaid.
PSEUDO_FILE_SYSTEMS = frozenset(
    {
        "proc",
        "sysfs",
        "devtmpfs",
        "devpts",
        "cgroup",
        "cgroup2",
        "mqueue",
        "debugfs",
        "tracefs",
        "securityfs",
        "pstore",
        "bpf",
        "configfs",
        "fusectl",
        "hugetlbfs",
        "binfmt_misc",
        "autofs",
        "efivarfs",
        "nsfs",
        "rpc_pipefs",
    }
)
KERNEL_TREES = ("/proc", "/sys", "/dev")
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_REMOUNT, MS_BIND, MS_REC = 32, 4096, 16384
# Credentials never reach the user's code: by name (AWS_*, ...) or by what the name says it holds.
CREDENTIAL_PREFIXES = ("AWS_", "AZURE_", "GOOGLE_APPLICATION_CREDENTIALS", "SSH_AUTH_SOCK")
CREDENTIAL_WORDS = re.compile(r"TOKEN|SECRET|PASSWORD|PASSWD|API_?KEY|CREDENTIAL|ACCESS_KEY|PRIVATE_KEY|AUTH")
# pip fails at once without a network rather than retrying five times.
NO_NETWORK_ENV = {"PIP_RETRIES": "0", "PIP_DISABLE_PIP_VERSION_CHECK": "1", "PIP_NO_INPUT": "1"}


class IsolationUnavailable(Exception):
    """Namespaces or overlayfs cannot be used here: the message is the one line shown."""


def without_credentials(env: dict[str, str]) -> dict[str, str]:
    return {
        name: value
        for name, value in env.items()
        if not name.upper().startswith(CREDENTIAL_PREFIXES) and not CREDENTIAL_WORDS.search(name.upper())
    }


class Sandbox:
    """The try's copy-on-write view of the machine; `command` wraps an argv to run inside it."""

    def __init__(self, work: Path, user_namespace: bool | None = None) -> None:
        """`user_namespace`: in one of its own (--user --map-root-user), as a user without privileges needs;
        default: when not root."""
        if sys.platform != "linux":
            raise IsolationUnavailable(f"the sandbox needs Linux namespaces; this is {sys.platform}")
        missing = [tool for tool in ("unshare", "nsenter") if shutil.which(tool) is None]
        if missing:
            raise IsolationUnavailable(f"the sandbox needs util-linux's {' and '.join(missing)}, not found")
        self.root = work / "root"  # where the copy-on-write file system is mounted, in the namespace only
        self.layers = work / "layers"  # the tmpfs holding the written layers, in the namespace only
        self.root.mkdir()
        self.layers.mkdir()
        self.as_user = os.geteuid() != 0 if user_namespace is None else user_namespace
        # "shared": the try's folder, bound writable at the same path: the one way out.
        spec = {"root": str(self.root), "layers": str(self.layers), "shared": str(work), "user": self.as_user}
        user = ["--user", "--map-root-user"] if self.as_user else []
        self.keeper = subprocess.Popen(
            ["unshare", "--mount", "--propagation", "private", *user, "--", *_self_argv("keep", spec)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
            text=True,
        )
        ready = self.keeper.stdout.readline()
        if not ready.startswith("{"):
            problem = (self.keeper.communicate()[1].strip().splitlines() or ["it stopped"])[-1]
            self.close()
            raise IsolationUnavailable(f"the sandbox could not be set up ({problem})")
        # The mounts overlayfs refused, bound read-only instead.
        self.read_only: list[str] = json.loads(ready)["read_only"]

    def command(
        self,
        argv: list[str],
        cwd: Path,
        fresh: list[Path] = (),
        place: dict | None = None,
        folders: list[str] = (),
    ) -> list[str]:
        """`argv` run in `cwd` inside the sandbox, with no network and its own process tree. `fresh`: host
        folders the command sees as they are now (a cache written since the sandbox started), overlaid too;
        `place`: {path in the sandbox: host file} copied in first (into the discarded layer); `folders`: made
        first, empty where they are not (SageMaker's /opt/ml/model, which a job finds made)."""
        spec = {
            "root": str(self.root),
            "layers": str(self.layers),
            "cwd": str(cwd),
            "fresh": [str(path) for path in fresh],
            "place": {str(target): str(source) for target, source in (place or {}).items()},
            "folders": [str(folder) for folder in folders],
            "user": self.as_user,
        }
        user = ["--user", "--preserve-credentials"] if self.as_user else []
        enter = ["nsenter", f"--target={self.keeper.pid}", "--mount", *user, "--"]
        # unshare's --kill-child: its child (`run`, PID 1 of the command's namespace) is killed with it.
        isolate = [
            "unshare",
            "--mount",
            "--propagation",
            "private",
            "--net",
            "--pid",
            "--fork",
            "--kill-child",
        ]
        return [*enter, *isolate, "--", *_self_argv("run", spec), "--", *argv]

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.keeper.stdin.close()
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.keeper.pid, signal.SIGKILL)
        self.keeper.wait()

    def __enter__(self) -> Sandbox:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def run_in_own_process_tree(argv: list[str], env: dict[str, str]) -> int:
    """Run `argv` as the first process of a PID namespace of its own, in the real file system and network
    (`neuron-compat standin -- CMD`, whose outputs are the point): when it ends, or this process is stopped by
    Ctrl-C or SIGTERM, every process it started ends too. Its exit code."""
    if sys.platform != "linux" or shutil.which("unshare") is None:
        raise IsolationUnavailable("a process tree of its own needs Linux and util-linux's unshare")
    user = ["--user", "--map-root-user"] if os.geteuid() != 0 else []
    process = subprocess.Popen(
        ["unshare", *user, "--pid", "--fork", "--kill-child", "--mount-proc", "--", *argv], env=env
    )
    previous = signal.signal(signal.SIGTERM, lambda number, frame: process.kill())
    try:
        return process.wait()
    except KeyboardInterrupt:
        return 130
    finally:
        signal.signal(signal.SIGTERM, previous)
        if process.poll() is None:
            process.kill()
        process.wait()


def stop(process: subprocess.Popen) -> None:
    """End a sandboxed command and, with it, every process of its namespace (killing the group kills
    `unshare`, whose child, PID 1 of the namespace, is then killed by the kernel)."""
    if process.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
    with contextlib.suppress(OSError):
        if process.stdin:
            process.stdin.close()
    process.wait()


def _self_argv(role: str, spec: dict) -> list[str]:
    return [sys.executable, "-I", "-S", __file__, role, json.dumps(spec)]


# -- inside the namespaces -------------------------------------------------------------------------------------
_libc = ctypes.CDLL(None, use_errno=True)


def _mount(source: str, target: str, fstype: str | None, flags: int = 0, data: str | None = None) -> None:
    if _libc.mount(
        source.encode(),
        target.encode(),
        fstype.encode() if fstype else None,
        flags,
        data.encode() if data else None,
    ):
        error = ctypes.get_errno()
        raise OSError(error, f"mount {fstype or 'bind'} {source} on {target}: {os.strerror(error)}")


def _bind_read_only(source: str, target: str) -> None:
    _mount(source, target, None, MS_BIND)
    _mount("none", target, None, MS_BIND | MS_REMOUNT | MS_RDONLY)


def _overlay(lower: str, target: str, layers: str, in_user_namespace: bool) -> None:
    layer = tempfile.mkdtemp(dir=layers)
    os.mkdir(f"{layer}/upper")
    os.mkdir(f"{layer}/work")
    options = f"lowerdir={lower},upperdir={layer}/upper,workdir={layer}/work"
    _mount("overlay", target, "overlay", 0, options + (",userxattr" if in_user_namespace else ""))


def _mounts() -> list[tuple[str, str]]:
    """(mount point, file system type) of this namespace, parents first."""
    found = []
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        fields, _, after = line.partition(" - ")
        point = re.sub(r"\\([0-7]{3})", lambda match: chr(int(match.group(1), 8)), fields.split()[4])
        found.append((point, after.split()[0]))
    return found


def _root_view(root: str, layers: str, in_user_namespace: bool) -> list[str]:
    """Overlay / at `root`; where overlayfs refuses / itself (in a user namespace, a mount whose submounts
    are locked cannot be a lower layer), a tmpfs whose every top-level folder is overlaid on its own, its links
    and files as they are. Returns the folders bound read-only instead."""
    try:
        _overlay("/", root, layers, in_user_namespace)
        return []
    except OSError:
        _mount("tmpfs", root, "tmpfs", MS_NOSUID | MS_NODEV, "mode=755")
    read_only = []
    for entry in os.scandir("/"):
        target = f"{root}/{entry.name}"
        if entry.path in KERNEL_TREES:  # mounted in their own right, after
            os.mkdir(target)
        elif entry.is_symlink():
            os.symlink(os.readlink(entry.path), target)
        elif entry.is_dir():
            os.mkdir(target)
            try:
                _overlay(entry.path, target, layers, in_user_namespace)
            except OSError:  # it holds mounts of its own: read-only, and those mounts overlaid after
                read_only.append(entry.path)
                _mount(entry.path, target, None, MS_BIND | MS_REC)
                with contextlib.suppress(OSError):
                    _mount("none", target, None, MS_BIND | MS_REMOUNT | MS_RDONLY)
        else:
            open(target, "w").close()
            with contextlib.suppress(OSError):
                _bind_read_only(entry.path, target)
    return read_only


def _keep(spec: dict) -> None:
    """Mount the copy-on-write view of every mount at spec["root"], say ready, and hold it until stdin closes."""
    root, layers, shared = spec["root"], spec["layers"], spec["shared"]
    _mount("tmpfs", layers, "tmpfs", MS_NOSUID | MS_NODEV, "mode=700")
    read_only = []
    for point, fstype in _mounts():
        if fstype in PSEUDO_FILE_SYSTEMS or point.startswith(KERNEL_TREES) or point.startswith(shared + "/"):
            continue
        if point == "/":
            read_only += _root_view(root, layers, spec["user"])
            continue
        target = root + point
        if not os.path.isdir(point):  # a file bound in (a container's /etc/hosts)
            with contextlib.suppress(OSError):
                _bind_read_only(point, target)
            continue
        if "," in point or ":" in point:  # overlayfs options cannot name it
            read_only.append(point)
            with contextlib.suppress(OSError):
                _bind_read_only(point, target)
            continue
        try:
            _overlay(point, target, layers, spec["user"])
        except OSError:
            read_only.append(point)
            with contextlib.suppress(OSError):
                _bind_read_only(point, target)
    _mount("/dev", f"{root}/dev", None, MS_BIND | MS_REC)
    _mount("tmpfs", f"{root}/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV)
    _mount("/sys", f"{root}/sys", None, MS_BIND | MS_REC)
    _mount(shared, root + shared, None, MS_BIND)
    print(json.dumps({"read_only": read_only}), flush=True)
    sys.stdin.read()


def _loopback_up() -> None:
    siocgifflags, siocsifflags, iff_up = 0x8913, 0x8914, 0x1
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        request = struct.pack("16sH22x", b"lo", 0)
        flags = struct.unpack("16sH22x", fcntl.ioctl(sock, siocgifflags, request))[1]
        fcntl.ioctl(sock, siocsifflags, struct.pack("16sH22x", b"lo", flags | iff_up))


def _run(spec: dict, argv: list[str]) -> int:
    """PID 1 of a command's namespace: mount /proc, bring loopback up, enter the view, run the command, and
    return its exit code (the kernel then ends every process left in the namespace)."""
    root = spec["root"]
    _mount("proc", f"{root}/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
    _loopback_up()
    for path in spec["fresh"]:
        if os.path.isdir(path):
            _overlay(path, root + path, spec["layers"], spec["user"])
    for target, source in spec["place"].items():
        os.makedirs(os.path.dirname(root + target), exist_ok=True)  # a placed folder the tree does not hold
        shutil.copyfile(source, root + target)
    for folder in spec["folders"]:
        os.makedirs(root + folder, exist_ok=True)
    os.chroot(root)
    os.chdir(spec["cwd"])
    child = os.fork()
    if child == 0:
        devnull = os.open(os.devnull, os.O_RDONLY)
        os.dup2(devnull, 0)
        try:
            os.execvp(argv[0], argv)
        except OSError as error:
            print(f"cannot run {argv[0]}: {error.strerror}", file=sys.stderr)
        os._exit(127)
    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(signum, lambda number, frame: os.kill(child, number))

    def lifeline():  # the tool holds stdin open while it waits; gone (even killed), the run ends
        while os.read(0, 4096):
            pass
        os._exit(137)

    threading.Thread(target=lifeline, daemon=True).start()
    while True:
        pid, status = os.wait()
        if pid == child:
            code = os.waitstatus_to_exitcode(status)
            return code if code >= 0 else 128 - code


if __name__ == "__main__":
    role, spec_text, *rest = sys.argv[1:]
    if role == "keep":
        _keep(json.loads(spec_text))
    else:
        os._exit(_run(json.loads(spec_text), rest[1:]))  # not sys.exit: the lifeline thread is blocked
