"""A run's output as the report keeps it: torchrun's failure summary in one line, the workers' lines kept."""

from try_run.output import condensed, last_distinct

# What torchrun 2.x prints when its two workers exit with an argument parser's error (recorded from a run).
TORCHRUN_FAILURE = """\
W1206 08:08:34.036000 56 torch/distributed/run.py:874] *****************************************
[W1206 08:08:34.053852651 socket.cpp:207] [c10d] The hostname of the client socket cannot be retrieved. err=-3
usage: run_sft.py [-h] [--model_id MODEL_ID]
run_sft.py: error: argument --bf16: expected one argument
usage: run_sft.py [-h] [--model_id MODEL_ID]
run_sft.py: error: argument --bf16: expected one argument
W1206 08:08:50.389000 56 torch/distributed/elastic/multiprocessing/api.py:1028] Sending process 62 closing signal SIGTERM
E1206 08:07:02.740000 56 torch/distributed/elastic/multiprocessing/api.py:1002] failed (exitcode: 2) local_rank: 1
Traceback (most recent call last):
  File "/venv/bin/torchrun", line 8, in <module>
    sys.exit(main())
             ^^^^^^
  File "/venv/lib/python3.11/site-packages/torch/distributed/launcher/api.py", line 383, in launch_agent
    raise ChildFailedError(
torch.distributed.elastic.multiprocessing.errors.ChildFailedError:\x20
============================================================
../scripts/run_sft.py FAILED
------------------------------------------------------------
Failures:
[1]:
  time      : 2026-12-06_08:08:50
  host      : localhost
  rank      : 0 (local_rank: 0)
  exitcode  : -15 (pid: 61) (SIGTERM)
  error_file: <N/A>
  traceback : Signal 15 (SIGTERM) received by PID 61
------------------------------------------------------------
Root Cause (first observed failure):
[0]:
  time      : 2026-12-06_08:08:50
  host      : localhost
  rank      : 1 (local_rank: 1)
  exitcode  : 2 (pid: 62)\x20
  error_file: <N/A>
  traceback : To enable traceback see: https://pytorch.org/docs/stable/elastic/errors.html
============================================================
after the launch"""


def test_torchruns_summary_is_one_line_and_the_workers_lines_stay():
    """Its log lines and the sandbox's host-name warning go too: neither is the user's code."""
    assert condensed(TORCHRUN_FAILURE.splitlines()) == [
        "usage: run_sft.py [-h] [--model_id MODEL_ID]",
        "run_sft.py: error: argument --bf16: expected one argument",
        "usage: run_sft.py [-h] [--model_id MODEL_ID]",
        "run_sft.py: error: argument --bf16: expected one argument",
        "torchrun: ../scripts/run_sft.py FAILED: rank 1 failed first, exit code 2",
        "after the launch",
    ]


def test_a_worker_ended_by_a_signal_is_named_with_it():
    text = TORCHRUN_FAILURE.replace("exitcode  : 2 (pid: 62) ", "exitcode  : -9 (pid: 62) (SIGKILL)")
    assert "torchrun: ../scripts/run_sft.py FAILED: rank 1 failed first, exit code -9 (SIGKILL)" in condensed(
        text.splitlines()
    )


def test_output_without_a_launcher_is_kept_as_it_is():
    lines = ["Traceback (most recent call last):", '  File "train.py", line 3', "ValueError: no data"]
    assert condensed(lines) == lines


def test_the_last_distinct_lines_drop_the_ranks_repeats_and_prefixes():
    lines = ["[rank1]: ValueError: bad", "[rank0]: ValueError: bad", "done"]
    assert last_distinct(["start", *lines], 3) == ["start", "ValueError: bad", "done"]
