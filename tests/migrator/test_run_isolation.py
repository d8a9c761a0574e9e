"""One file never ends a run: a file that crashes the native parser, runs past the time limit or is nested
too deeply is one error line; the other files are migrated and the summary and the report are written."""

from __future__ import annotations

import ctypes
import json
import subprocess
import sys
import textwrap
import time

import pytest
from click.testing import CliRunner

from commands.neuron_migrate import main
from migrator import engine
from migrator.engine import Job, Mode, run
from usercode.sources import discover

NEURON_MIGRATE = (sys.executable, "-c", "from commands.neuron_migrate import main; main()")


def invoke(*args):
    return CliRunner().invoke(main, [str(arg) for arg in args], catch_exceptions=False)


def before_migrating(monkeypatch, action) -> None:
    """Every file's migration (in the worker processes, which are forked) first calls `action(text)`."""
    real = engine.rewriter

    def rewriter(kind, directory, root=None, name=""):
        migrate = real(kind, directory, root, name)

        def run(text):
            action(text)
            return migrate(text)

        return run

    monkeypatch.setattr(engine, "rewriter", rewriter)


@pytest.fixture
def tree(tmp_path, xla_script):
    for name in ("a_first.py", "z_last.py"):
        (tmp_path / name).write_text(xla_script)
    return tmp_path


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_code_nested_too_deeply_for_the_native_parser_is_one_error(tree, jobs):
    """1,200 nested calls: libcst's native parser overflowed its stack (exit 139, later files never migrated;
    with -j 2 a BrokenProcessPool traceback). Python's parser refuses it first."""
    (tree / "m_deep.py").write_text("import torch_xla\nx = " + "f(" * 1200 + ")" * 1200 + "\n")
    report = tree / "report.json"
    run = subprocess.run(
        [*NEURON_MIGRATE, "-j", jobs, "--format", "json", "--report", str(report), str(tree)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 2, run.stderr
    assert "Traceback" not in run.stderr
    assert "3 files checked, 2 rewritten" in run.stderr
    files = {entry["path"].rsplit("/", 1)[1]: entry for entry in json.loads(report.read_text())["files"]}
    assert "cannot parse" in files["m_deep.py"]["error"]
    assert files["a_first.py"]["changed"] and files["z_last.py"]["changed"]


@pytest.mark.parametrize("workers", [1, 2])
def test_a_crashing_worker_costs_one_file(tree, monkeypatch, workers):
    (tree / "m_crash.py").write_text("import torch_xla\nprint('this one crashes the parser')\n")

    def crash(text):
        if "crashes the parser" in text:
            ctypes.string_at(0)  # a read of address 0 in native code: a real segfault, as a stack overflow

    before_migrating(monkeypatch, crash)
    jobs = [Job(source, Mode.CHECK) for source in discover([tree])]
    results = {result.path.rsplit("/", 1)[1]: result for result in run(jobs, workers=workers)}
    assert "died (SIGSEGV" in results["m_crash.py"].error
    assert results["a_first.py"].changed and results["z_last.py"].changed


def test_a_file_past_the_time_limit_is_an_error_and_the_others_go_on(tree, monkeypatch):
    (tree / "m_slow.py").write_text("import torch_xla\nprint('slow')\n")
    before_migrating(monkeypatch, lambda text: time.sleep(60) if "slow" in text else None)
    started = time.monotonic()
    result = invoke("--check", "--timeout", "1", tree)
    assert time.monotonic() - started < 30
    assert result.exit_code == 2
    assert "m_slow.py: error: took longer than 1 s (--timeout)" in result.stdout
    assert "3 files checked, 2 would change" in result.stderr


def test_a_long_flat_expression_is_migrated(tmp_path):
    """A 1,000-term sum is legitimate Python: libcst's recursive visitors need more than the default
    recursion limit (it was refused with a RecursionError)."""
    path = tmp_path / "sum.py"
    path.write_text(
        "import torch_xla.core.xla_model as xm\nx = " + " + ".join(["a"] * 1000) + "\nd = xm.xla_device()\n"
    )
    result = invoke(path)
    assert result.exit_code == 0, result.output
    assert 'd = torch.device("neuron")' in path.read_text()


def test_a_sum_python_itself_cannot_compile_is_refused_in_seconds(tmp_path):
    """A 10,000-term sum was still running after 120 s; Python's own compiler gives up on it too."""
    path = tmp_path / "sum.py"
    path.write_text("import torch_xla\nx = " + " + ".join(["a"] * 10_000) + "\n")
    started = time.monotonic()
    result = invoke("--check", path)
    assert time.monotonic() - started < 30
    assert result.exit_code == 2 and "nested too deeply for Python's own parser" in result.stdout


def test_many_jobs_on_few_files_start_few_workers(tree, monkeypatch):
    """`-j 200` on 5 files forked 200 workers."""
    import os

    forks = []
    real_fork = os.fork

    def counting_fork():
        forks.append(1)
        return real_fork()

    monkeypatch.setattr(os, "fork", counting_fork)
    assert invoke("--check", "-j", "200", tree).exit_code == 1
    assert 1 <= len(forks) <= 2


def test_closed_stdout_exits_141_without_a_traceback(tmp_path, xla_script):
    (tmp_path / "train.py").write_text(xla_script)
    command = " ".join([*map(repr, NEURON_MIGRATE), "--diff", str(tmp_path)])
    # The reader is gone before the diff is printed (`neuron-migrate --diff . | head -0`).
    run = subprocess.run(
        ["bash", "-c", f"set -o pipefail; {command} | true"], capture_output=True, text=True, timeout=300
    )
    assert run.returncode == 141, run.stderr
    assert "Traceback" not in run.stderr and "BrokenPipeError" not in run.stderr


def test_quiet_draws_no_progress(tmp_path, plain_script):
    for index in range(25):
        (tmp_path / f"m{index}.py").write_text(plain_script)
    assert "migrating" in invoke("--check", tmp_path).stderr
    quiet = invoke("--check", "-q", tmp_path)
    assert quiet.exit_code == 0 and "migrating" not in quiet.stderr


def test_a_slow_file_is_named_while_it_runs(tmp_path, monkeypatch):
    from migrator import progress

    (tmp_path / "big.py").write_text("import torch_xla\nprint('big')\n")
    before_migrating(monkeypatch, lambda text: time.sleep(2))
    monkeypatch.setattr(progress, "SLOW_S", 1.0)
    result = invoke("--check", tmp_path / "big.py")
    assert (
        f"still migrating {tmp_path / 'big.py'} (30 bytes) after 1 s; the time limit is 60 s" in result.stderr
    )


def test_progress_on_a_terminal_shows_the_file_in_progress(tmp_path, monkeypatch):
    from migrator.progress import Progress

    class Terminal:
        def __init__(self):
            self.text = ""

        def isatty(self):
            return True

        def write(self, text):
            self.text += text

        def flush(self):
            pass

    (tmp_path / "big.py").write_text("x" * 20_000)
    (source,) = discover([tmp_path / "big.py"])
    job = Job(source, Mode.CHECK, display="big.py")
    screen = Terminal()
    shown = Progress([job], timeout=60, stream=screen)
    shown.tick([(job, 35.2)])
    assert "migrating: 0/1 files; big.py (20.0 kB) 35 s" in screen.text
    shown.close()
    assert screen.text.endswith("\r\033[K")


def test_ctrl_c_before_the_run_exits_130(tmp_path, monkeypatch):
    from usercode import sources

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(sources, "discover", interrupted)
    result = CliRunner().invoke(main, ["--check", str(tmp_path)])
    assert result.exit_code == 130 and "Aborted" not in result.output


def test_checklist_survives_a_file_that_crashed_the_parser(tmp_path):
    (tmp_path / "deep.py").write_text("import torch_xla\nx = " + "f(" * 1200 + ")" * 1200 + "\n")
    (tmp_path / "train.py").write_text("import torch_xla.core.xla_model as xm\nxm.mark_step()\n")
    out = tmp_path / "checklist.md"
    run = subprocess.run(
        [*NEURON_MIGRATE, "checklist", str(tmp_path), "-o", str(out)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stderr
    text = out.read_text()
    assert "neuron-migrate cannot process this file" in text and "train.py" in text


def test_the_worker_stack_walks_what_python_accepts(tmp_path):
    """The deepest nesting Python's parser takes (199 nested brackets is its limit) goes through libcst."""
    code = "import torch_xla.core.xla_model as xm\nx = " + "[" * 199 + "]" * 199 + "\nd = xm.xla_device()\n"
    path = tmp_path / "nested.py"
    path.write_text(code)
    result = invoke(path)
    assert result.exit_code == 0, result.output
    assert textwrap.dedent(path.read_text()).endswith('d = torch.device("neuron")\n')


def test_ctrl_c_while_workers_start_stops_every_started_worker(tree, monkeypatch):
    """A Ctrl-C right after a worker started, before the command recorded it: that worker (which ignores
    SIGTERM) was left waiting on its pipe, and the command's exit waited for it for ever."""
    import multiprocessing.context

    started = []

    class InterruptedAfterTheSecondStart(multiprocessing.context.ForkProcess):
        def start(self):
            super().start()
            started.append(self)
            if len(started) == 2:
                raise KeyboardInterrupt

    monkeypatch.setattr(multiprocessing.context.ForkContext, "Process", InterruptedAfterTheSecondStart)
    jobs = [Job(source, Mode.CHECK) for source in discover([tree])]
    with pytest.raises(engine.Interrupted):
        run(jobs, workers=2)
    assert len(started) == 2 and not any(process.is_alive() for process in started)


def test_a_second_ctrl_c_before_the_workers_are_stopped_still_ends_the_command():
    """kill_race: a Ctrl-C to the command then to its group; the second came before the stop in
    `Supervisor.run`'s `finally` held signals, skipped it, and the command hung at exit joining idle workers
    (they ignore SIGTERM, with which multiprocessing ends its daemons)."""
    script = textwrap.dedent(
        """
        import contextlib, os, signal, threading, time
        from migrator import workers

        @contextlib.contextmanager
        def second_interrupt_first():
            raise KeyboardInterrupt
            yield

        workers._signals_deferred = second_interrupt_first
        threading.Timer(1.0, os.kill, (os.getpid(), signal.SIGINT)).start()
        try:
            workers.Supervisor(lambda i: time.sleep(0.1), lambda i, m: m).run(100, [[i] for i in range(100)], 2)
        except KeyboardInterrupt:
            print("interrupted")
        """
    )
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert run.returncode == 0 and run.stdout.strip() == "interrupted", run.stderr
