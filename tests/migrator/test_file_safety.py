"""In-place writes as a real user meets them: another owner, a hard link, a symbolic link, an edit saved
while the file is migrated, a process killed mid-write, a full disk. Nothing of the user's is ever lost."""

from __future__ import annotations

import errno
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from click.testing import CliRunner

from commands.neuron_migrate import main
from migrator import engine, writes
from migrator.engine import Job, Mode, process
from usercode.sources import discover

SPARE_UID = 1234  # no such user here: a uid that owns nothing
NEURON_MIGRATE = (sys.executable, "-c", "from commands.neuron_migrate import main; main()")


def migrate_in_place(path):
    (source,) = discover([path])
    return process(Job(source, Mode.WRITE, display=str(path)))


def invoke(*args):
    return CliRunner().invoke(main, [str(arg) for arg in args], catch_exceptions=False)


def debris(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.endswith(writes.TEMPORARY_SUFFIX))


root_only = pytest.mark.skipif(os.geteuid() != 0, reason="needs root to make files of another user")


@pytest.fixture
def shared_dir(tmp_path_factory):
    """A folder other users can reach (pytest's own temporary root is private to root)."""
    folder = Path(subprocess.check_output(["mktemp", "-d", "/tmp/nm-safety.XXXXXX"], text=True).strip())
    folder.chmod(0o777)
    yield folder
    subprocess.run(["rm", "-rf", str(folder)], check=False)


def as_user(uid: int, *command: str, cwd: Path) -> subprocess.CompletedProcess:
    """`command` run as `uid` (setpriv drops root: no capability is kept)."""
    prefix = ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups"]
    return subprocess.run([*prefix, *command], cwd=cwd, capture_output=True, text=True, timeout=120)


@pytest.fixture
def other_user(shared_dir):
    if os.geteuid() != 0 or subprocess.run(["which", "setpriv"], capture_output=True).returncode:
        pytest.skip("needs root and setpriv to run as another user")
    probe = as_user(SPARE_UID, sys.executable, "-c", "import migrator", cwd=shared_dir)
    if probe.returncode:
        pytest.skip(f"the interpreter is not reachable by uid {SPARE_UID}: {probe.stderr[-200:]}")
    return SPARE_UID


@root_only
def test_root_keeps_a_users_owner_group_and_mode(tmp_path, xla_script):
    path = tmp_path / "train.py"
    path.write_text(xla_script)
    os.chown(path, SPARE_UID, SPARE_UID + 1)
    path.chmod(0o640)
    result = migrate_in_place(path)
    assert result.error is None and result.changed
    info = path.stat()
    assert (info.st_uid, info.st_gid, info.st_mode & 0o7777) == (SPARE_UID, SPARE_UID + 1, 0o640)
    assert "mark_step" not in path.read_text()


@root_only
def test_extended_attributes_are_kept(tmp_path, xla_script):
    path = tmp_path / "train.py"
    path.write_text(xla_script)
    try:
        os.setxattr(path, "user.origin", b"team-a")
    except OSError as error:
        pytest.skip(f"no user xattrs here: {error}")
    assert migrate_in_place(path).changed
    assert os.getxattr(path, "user.origin") == b"team-a"


def test_a_user_cannot_take_over_another_users_file(other_user, shared_dir, xla_script):
    """A non-root user who may write the folder (and the file, through its group) must not replace the file
    with one of their own: it would change hands."""
    path = shared_dir / "train.py"
    path.write_text(xla_script)
    os.chown(path, other_user + 1, other_user + 1)
    path.chmod(0o666)
    run = as_user(other_user, *NEURON_MIGRATE, str(path), cwd=shared_dir)
    assert run.returncode == 2, run.stderr
    assert "would change its owner" in run.stdout and "Traceback" not in run.stderr
    assert path.read_text() == xla_script and path.stat().st_uid == other_user + 1
    assert debris(shared_dir) == []


def test_a_users_own_file_stays_theirs(other_user, shared_dir, xla_script):
    path = shared_dir / "train.py"
    path.write_text(xla_script)
    os.chown(path, other_user, other_user)
    path.chmod(0o600)
    run = as_user(other_user, *NEURON_MIGRATE, str(path), cwd=shared_dir)
    assert run.returncode == 0, run.stdout + run.stderr
    info = path.stat()
    assert (info.st_uid, info.st_mode & 0o7777) == (other_user, 0o600)
    assert "mark_step" not in path.read_text()


def test_an_unreadable_folder_is_an_error_not_a_clean_check(other_user, shared_dir, xla_script):
    (shared_dir / "ok.py").write_text("print(1)\n")
    locked = shared_dir / "locked"
    locked.mkdir()
    (locked / "train.py").write_text(xla_script)
    locked.chmod(0o700)  # root's: the user cannot list it
    run = as_user(other_user, *NEURON_MIGRATE, "--check", str(shared_dir), cwd=shared_dir)
    assert run.returncode == 2, run.stdout + run.stderr
    assert f"{locked}: error: cannot read this folder: Permission denied" in run.stdout
    assert "1 error" in run.stderr


def test_hard_linked_file_is_refused_and_both_names_keep_their_content(tmp_path, xla_script):
    path = tmp_path / "train.py"
    path.write_text(xla_script)
    backup = tmp_path / "backup_train.py"
    os.link(path, backup)
    result = migrate_in_place(path)
    assert "2 hard links" in result.error and not result.changed
    assert path.read_text() == backup.read_text() == xla_script
    assert os.stat(path).st_ino == os.stat(backup).st_ino  # still one file


def test_symbolic_link_is_written_through_and_stays_a_link(tmp_path, xla_script):
    real = tmp_path / "shared" / "train.py"
    real.parent.mkdir()
    real.write_text(xla_script)
    link = tmp_path / "train.py"
    link.symlink_to(real)
    result = migrate_in_place(link)
    assert result.error is None and result.changed
    assert link.is_symlink() and os.readlink(link) == str(real)
    assert "mark_step" not in real.read_text()
    assert debris(tmp_path) == debris(real.parent) == []


def test_an_edit_saved_by_another_process_during_the_migration_is_kept(tmp_path, xla_script, monkeypatch):
    path = tmp_path / "train.py"
    path.write_text(xla_script)
    edit = "# saved from the editor while neuron-migrate ran\n"
    real_rewriter = engine.rewriter

    def rewriter_while_someone_saves(*args):
        migrate = real_rewriter(*args)

        def run(text):
            migrated = migrate(text)
            # Another program (an editor) saves the file after it was read, before it is written.
            subprocess.run([sys.executable, "-c", f"open({str(path)!r}, 'a').write({edit!r})"], check=True)
            return migrated

        return run

    monkeypatch.setattr(engine, "rewriter", rewriter_while_someone_saves)
    result = migrate_in_place(path)
    assert "changed while it was being migrated" in result.error and not result.changed
    assert path.read_text() == xla_script + edit
    assert debris(tmp_path) == []


def test_an_edit_of_the_same_size_and_time_is_still_seen(tmp_path, xla_script):
    path = tmp_path / "train.py"
    path.write_text(xla_script)
    snapshot = writes.Snapshot.read(path)
    info = path.stat()
    path.write_text(xla_script.replace("odd", "ODD"))
    os.utime(path, ns=(info.st_atime_ns, info.st_mtime_ns))
    with pytest.raises(writes.WriteRefused, match="changed while"):
        writes.replace_file(path, b"new\n", read=snapshot)
    assert "ODD" in path.read_text()


def _killed_while_writing(tmp_path: Path, xla_script: str, at: str) -> subprocess.CompletedProcess:
    """neuron-migrate in a process that SIGKILLs itself at `at` (a system call of the write) in its worker."""
    path = tmp_path / "train.py"
    path.write_text(xla_script)
    script = textwrap.dedent(
        f"""
        import os, signal, sys
        real = getattr(os, {at!r})
        def die(*args, **kwargs):
            os.kill(os.getpid(), signal.SIGKILL)
        setattr(os, {at!r}, die)
        from commands.neuron_migrate import main
        sys.argv = ["neuron-migrate", {str(path)!r}]
        main()
        """
    )
    return subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("at", ["fsync", "replace"])
def test_a_process_killed_mid_write_leaves_the_file_whole(tmp_path, xla_script, at):
    """SIGKILL while the data is written (fsync) or at the rename: the file is the old one, whole, and the
    run reports the file as an error instead of dying."""
    run = _killed_while_writing(tmp_path, xla_script, at)
    assert run.returncode == 2, run.stderr
    assert "the process migrating this file died (SIGKILL" in run.stdout
    assert (tmp_path / "train.py").read_text() == xla_script
    # While the data is written the temporary file has no name: nothing is left. At the rename it has one for
    # two system calls; the next write into the folder removes it (its process is gone).
    if at == "fsync":
        assert debris(tmp_path) == []
    else:
        assert len(debris(tmp_path)) <= 1
        writes._cleaned.clear()
        assert migrate_in_place(tmp_path / "train.py").changed
        assert debris(tmp_path) == []


def test_leftover_of_a_live_process_is_not_removed(tmp_path, xla_script):
    path = tmp_path / "train.py"
    path.write_text(xla_script)
    mine = tmp_path / f".train.py.{os.getpid()}-0123abcd{writes.TEMPORARY_SUFFIX}"
    gone = tmp_path / f".train.py.999999999-0123abcd{writes.TEMPORARY_SUFFIX}"
    mine.write_text("in progress")
    gone.write_text("debris")
    writes._cleaned.clear()
    assert migrate_in_place(path).changed
    assert debris(tmp_path) == [mine.name]


@pytest.fixture
def full_disk(monkeypatch):
    def no_space(handle, data):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "write", no_space)


def test_full_disk_keeps_the_old_file(tmp_path, xla_script, full_disk):
    path = tmp_path / "train.py"
    path.write_text(xla_script)
    result = migrate_in_place(path)
    assert result.error == "cannot write: No space left on device" and not result.changed
    assert path.read_text() == xla_script and debris(tmp_path) == []


def test_report_is_replaced_atomically_and_a_full_disk_keeps_the_old_one(tmp_path, xla_script, monkeypatch):
    (tmp_path / "train.py").write_text(xla_script)
    report = tmp_path / "out" / "report.json"
    report.parent.mkdir()
    report.write_text("previous report\n")
    real_write = os.write

    def no_space(handle, data):
        if bytes(data[:1]) == b"{":  # the report, not a migrated file
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real_write(handle, data)

    monkeypatch.setattr(os, "write", no_space)
    result = invoke("--check", "--format", "json", "--report", report, tmp_path / "train.py")
    assert result.exit_code == 2 and "cannot write report" in result.stderr
    assert "1 file checked, 1 would change" in result.stderr  # the summary is still printed
    assert report.read_text() == "previous report\n" and debris(report.parent) == []


def test_output_dir_replaces_a_link_there_instead_of_writing_through_it(tmp_path, xla_script):
    source = tmp_path / "src" / "train.py"
    source.parent.mkdir()
    source.write_text(xla_script)
    elsewhere = tmp_path / "elsewhere.py"
    elsewhere.write_text("keep me\n")
    out = tmp_path / "out"
    out.mkdir()
    (out / "train.py").symlink_to(elsewhere)
    result = invoke("--output-dir", out, tmp_path / "src")
    assert result.exit_code == 0, result.output
    assert not (out / "train.py").is_symlink() and "mark_step" not in (out / "train.py").read_text()
    assert elsewhere.read_text() == "keep me\n"


def test_sigterm_stops_a_run_like_ctrl_c(tmp_path, xla_script):
    _stopped_run(tmp_path, xla_script, signal.SIGTERM, 143)


def test_ctrl_c_exits_130_with_a_summary_and_no_debris(tmp_path, xla_script):
    _stopped_run(tmp_path, xla_script, signal.SIGINT, 130)


def _stopped_run(tmp_path: Path, xla_script: str, signum: int, code: int) -> None:
    for index in range(30):
        (tmp_path / f"s{index:02}.py").write_text(xla_script)
    # A command started from a terminal has Ctrl-C at Python's default handler; a child inherits an ignored SIGINT
    # (as pytest-xdist's workers may have), and Python then never raises KeyboardInterrupt: restored, as a shell does.
    slow = textwrap.dedent(
        """
        import signal, sys, time
        signal.signal(signal.SIGINT, signal.default_int_handler)
        from migrator import engine
        real = engine.process
        def slow(job):
            time.sleep(0.2)
            return real(job)
        engine.process = slow
        from commands.neuron_migrate import main
        sys.argv = ["neuron-migrate", "-j", "2", sys.argv[1]]
        main()
        """
    )
    run = subprocess.Popen(
        [sys.executable, "-c", slow, str(tmp_path)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # as a terminal does: the signal goes to the whole group
    )
    import time

    assert run.stderr.readline() == "migrating 30 files\n"  # the run has started (not still importing)
    time.sleep(1.0)
    os.killpg(run.pid, signum)
    out, err = run.communicate(timeout=60)
    assert run.returncode == code, err
    assert "interrupted:" in err and "Traceback" not in err
    assert debris(tmp_path) == []
    for path in tmp_path.glob("s*.py"):  # each file is the old one or the migrated one, never half
        text = path.read_text()
        assert text == xla_script or ("mark_step" not in text and text.startswith("import torch\n"))


def test_a_failed_write_is_not_counted_as_rewritten(tmp_path, xla_script, full_disk):
    path = tmp_path / "train.py"
    path.write_text(xla_script)
    result = invoke(path)
    assert result.exit_code == 2
    assert "1 file checked, 0 rewritten" in result.stderr and "1 error" in result.stderr
    assert f"{path}: error: cannot write: No space left on device" in result.stdout


def test_a_rewrite_that_drops_a_binding_still_used_is_refused() -> None:
    from migrator.verify import MigrationError, verify_python

    before = "from transformers import is_torch_tpu_available\nif is_torch_tpu_available():\n    print(notebook_name)\n"
    broken = "from transformers import is_torch_xla_available\nif is_torch_tpu_available():\n    print(notebook_name)\n"
    with pytest.raises(MigrationError, match="uses is_torch_tpu_available, which it no longer binds"):
        verify_python(before, broken)
    # names the input never bound (another notebook cell's, a builtin, a global a function assigns) are not its
    fixed = broken.replace("if is_torch_tpu_available", "if is_torch_xla_available")
    verify_python(before, fixed + "def f():\n    global seen\n    seen = len([])\nprint(seen)\n")
    verify_python("from helpers import *\nprint(x)\n", "from helpers import *\nprint(x, y)\n")  # unknowable
    with pytest.raises(MigrationError, match="uses x"):  # the star import that bound it removed
        verify_python("from helpers import *\nprint(x)\n", "print(x)\n")
