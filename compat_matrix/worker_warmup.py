"""Imported once by the runner's fork server, before any architecture's worker is forked from it.

It probes one small architecture on CPU so that the per-process caches of torch and Transformers are filled
once per run instead of once per architecture: Dynamo's trace rules and its function-name table (built by
tokenizing every source file it traces through), FakeTensor's op cache, lazily imported modules. These caches
only make tracing faster: every worker still resets Dynamo, its counters and metrics before probing
(``probes.configure_dynamo``), and a test checks that rows are the same with and without the warm-up. It
runs on CPU with the simulator only and never touches a Neuron device, so forking from it is safe on a
Trainium host too.
"""

from __future__ import annotations

import contextlib
import gc
import io
import warnings

import torch
from transformers.utils import logging as transformers_logging

from compat_matrix.probes import probe_architecture
from compat_matrix.settings import ProbeSettings

WARMUP_ARCHITECTURE = "llama"


def warm_up() -> None:
    # One thread: no OpenMP pool exists in the server when workers are forked (they set their own count).
    torch.set_num_threads(1)
    transformers_logging.set_verbosity_error()
    quiet = io.StringIO()
    # A failed warm-up only means colder workers: the run goes on.
    with (
        warnings.catch_warnings(),
        contextlib.redirect_stdout(quiet),
        contextlib.redirect_stderr(quiet),
        contextlib.suppress(Exception),
    ):
        warnings.simplefilter("ignore")
        probe_architecture(WARMUP_ARCHITECTURE, ProbeSettings(backend="neuron-sim"))
    torch._dynamo.reset()  # drop the compiled code and the model it holds
    gc.collect()


warm_up()
