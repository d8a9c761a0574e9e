"""What is read and where it is written: an output is never an input, what cannot be read is an error (never
skipped in silence), odd but valid inputs (CR-only line ends, a non-UTF-8 launcher) come back byte for byte."""

from __future__ import annotations

import os

import pytest
from click.testing import CliRunner

from commands.neuron_migrate import main
from migrator.engine import Job, Mode, process
from usercode.sources import discover


def invoke(*args):
    return CliRunner().invoke(main, [str(arg) for arg in args], catch_exceptions=False)


def migrate_in_place(path):
    (source,) = discover([path])
    return process(Job(source, Mode.WRITE, display=str(path)))


def test_output_dir_that_is_the_inputs_folder_is_refused(tmp_path, monkeypatch, xla_script):
    """`cd DIR && neuron-migrate --output-dir . train.py` rewrote train.py in place."""
    (tmp_path / "train.py").write_text(xla_script)
    monkeypatch.chdir(tmp_path)
    result = invoke("--output-dir", ".", "train.py")
    assert result.exit_code == 2
    assert "which is the input train.py; nothing was written" in result.stderr
    assert (tmp_path / "train.py").read_text() == xla_script


def test_two_inputs_with_one_output_are_refused(tmp_path, xla_script, plain_script):
    """`--output-dir out a/train.py b/train.py`: the second overwrote the first, the summary said 2 written."""
    for folder, text in (("a", xla_script), ("b", plain_script)):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "train.py").write_text(text)
    out = tmp_path / "out"
    result = invoke("--output-dir", out, tmp_path / "a" / "train.py", tmp_path / "b" / "train.py")
    assert result.exit_code == 2 and "would both be written to" in result.stderr
    assert not (out / "train.py").exists()


def test_output_that_is_a_hard_link_to_an_input_is_refused(tmp_path, xla_script):
    source = tmp_path / "src" / "train.py"
    source.parent.mkdir()
    source.write_text(xla_script)
    out = tmp_path / "out"
    out.mkdir()
    os.link(source, out / "train.py")
    result = invoke("--output-dir", out, source)
    assert result.exit_code == 2 and "which is the input" in result.stderr
    assert source.read_text() == xla_script


def test_report_onto_an_input_is_refused(tmp_path, xla_script):
    (tmp_path / "train.py").write_text(xla_script)
    result = invoke("--check", "--format", "json", "--report", tmp_path / "train.py", tmp_path)
    assert result.exit_code == 2 and "the report would be written to" in result.stderr
    assert (tmp_path / "train.py").read_text() == xla_script


@pytest.mark.parametrize("command", [[], ["checklist"]])
def test_a_symbolic_link_loop_is_an_error_line(tmp_path, xla_script, command):
    (tmp_path / "a.py").symlink_to(tmp_path / "b.py")
    (tmp_path / "b.py").symlink_to(tmp_path / "a.py")
    (tmp_path / "train.py").write_text(xla_script)
    result = CliRunner().invoke(main, [*command, str(tmp_path)])
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    if command:  # the checklist lists it as blocking
        assert result.exit_code == 0 and "a loop of symbolic links" in result.output
    else:
        assert result.exit_code == 2
        assert f"{tmp_path / 'a.py'}: error: cannot read: a loop of symbolic links" in result.stdout
        assert "mark_step" not in (tmp_path / "train.py").read_text()


def test_a_named_symbolic_link_loop_is_an_error_line(tmp_path):
    (tmp_path / "a.py").symlink_to(tmp_path / "b.py")
    (tmp_path / "b.py").symlink_to(tmp_path / "a.py")
    result = invoke("--check", tmp_path / "a.py")
    assert result.exit_code == 2 and "a loop of symbolic links" in result.stdout


def test_a_fifo_named_like_a_script_is_an_error_not_a_hang(tmp_path):
    os.mkfifo(tmp_path / "pipe.py")
    result = invoke("--check", tmp_path)
    assert result.exit_code == 2 and "not a regular file" in result.stdout


def test_a_dangling_link_is_reported(tmp_path):
    (tmp_path / "gone.py").symlink_to(tmp_path / "missing.py")
    result = invoke("--check", tmp_path)
    assert result.exit_code == 2 and "a dangling symbolic link" in result.stdout


def test_cr_only_line_ends_are_kept(tmp_path):
    """Classic Mac OS line ends: an LF line was inserted, and the last CR was lost."""
    path = tmp_path / "train.py"
    path.write_bytes(
        b'"""Doc."""\rimport os\rimport torch_xla.core.xla_model as xm\rdevice = xm.xla_device()\r'
    )
    result = migrate_in_place(path)
    assert result.changed and result.error is None
    data = path.read_bytes()
    assert b"\n" not in data and data.endswith(b'device = torch.device("neuron")\r')
    assert data.startswith(b'"""Doc."""\rimport os\rimport torch\r')


def test_a_launcher_that_is_not_utf8_is_migrated_byte_for_byte(tmp_path):
    """bash reads bytes: a Latin-1 comment must not make the launcher unreadable."""
    path = tmp_path / "run.sh"
    path.write_bytes(
        b"#!/bin/bash\n# r\xe9sum\xe9 of the run\nexport NEURON_FUSE_SOFTMAX=1\ntorchrun train.py\n"
    )
    result = migrate_in_place(path)
    assert result.error is None and result.changed
    data = path.read_bytes()
    assert b"# r\xe9sum\xe9 of the run\n" in data and b"NEURON_FUSE_SOFTMAX" not in data


def test_a_nul_byte_is_reported_at_its_line_and_column(tmp_path):
    path = tmp_path / "train.py"
    path.write_bytes(b"import torch_xla\nx = 1\ny = '\x00'\n")
    result = migrate_in_place(path)
    assert result.error == "line 3, column 6: cannot parse: a NUL byte (Python source cannot contain one)"


def test_skip_unsupported_leaves_out_what_is_not_read(tmp_path, xla_script):
    (tmp_path / "notes.txt").write_text("optimum-neuron")
    (tmp_path / "tool").write_text("#!/usr/bin/env python\nimport torch_xla\n")  # a Python script by #!
    (tmp_path / "train.py").write_text(xla_script)
    names = [tmp_path / "notes.txt", tmp_path / "tool", tmp_path / "train.py"]
    assert invoke("--check", *names).exit_code == 2  # named on purpose: refused
    result = invoke("--check", "--skip-unsupported", *names)
    assert result.exit_code == 1 and "1 file checked" in result.stderr
