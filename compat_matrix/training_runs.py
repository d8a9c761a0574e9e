"""Training runs of a probe: one compiled step per padded length, and what compiled on each."""

from __future__ import annotations

import collections
import math

import torch
import torch._dynamo

from compat_matrix.compile_stats import CompileStats, graph_break_reason
from compat_matrix.errors import first_error_line
from compat_matrix.settings import ProbeSettings
from compat_matrix.tiny import VOCAB


def padded_training_batch(model, raw_length: int, settings: ProbeSettings, device,
                          content: int = 0) -> dict[str, torch.Tensor]:  # fmt: skip
    """A right-padded batch whose length is rounded up to a multiple of ``pad_multiple`` (TRL >= 1.16);
    ``content`` > 0 draws other tokens for the same lengths."""
    padded = math.ceil(raw_length / settings.pad_multiple) * settings.pad_multiple
    generator = torch.Generator().manual_seed(settings.seed + raw_length + 7919 * content)
    ids = torch.randint(3, VOCAB - 16, (settings.train_batch_size, padded), generator=generator)
    mask = torch.zeros_like(ids)
    mask[:, :raw_length] = 1
    pad_id = getattr(model.config.get_text_config(), "pad_token_id", None)
    ids = ids.masked_fill(mask == 0, pad_id if isinstance(pad_id, int) else 0)
    labels = ids.masked_fill(mask == 0, -100)
    return {"input_ids": ids.to(device), "attention_mask": mask.to(device), "labels": labels.to(device)}


def run_training_step(model, settings: ProbeSettings, device, row: dict, backend: str | None,
                      content_step: bool = False) -> None:  # fmt: skip
    """One training step per padded length, compiled with ``backend`` (uncompiled when None). With
    ``content_step``, one more step at the first padded length with other tokens: compiles there depend on the
    data (expert token counts, a data-dependent branch), not on the padded length."""
    model.train()
    # What Trainer does with --torch_compile on neuron: accelerate compiles the model with dynamic=False.
    step = model if backend is None else torch.compile(model, backend=backend, dynamic=False)
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-3)
    stats = CompileStats()
    per_length = []
    lengths = []
    losses = []

    def one_step(batch: dict[str, torch.Tensor], recorded: bool = True) -> None:
        loss = step(**batch).loss
        if not torch.isfinite(loss):
            raise ValueError(f"training loss is not finite ({loss.item()}) at padded length {lengths[-1]}")
        if recorded:
            losses.append(loss.item())
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    for raw_length in settings.train_lengths:
        batch = padded_training_batch(model, raw_length, settings, device)
        lengths.append(batch["input_ids"].shape[1])
        row["train_lengths_started"] = len(lengths)
        before = len(stats.compilations())
        one_step(batch)
        per_length.append(len(stats.compilations()) - before)
    row["train_losses"] = losses
    per_frame = collections.Counter(metric.compile_id.split("/")[0] for metric in stats.compilations())
    row["train_recompile_limit_hit"] = any(count >= settings.recompile_limit for count in per_frame.values())
    measured_compiles = len(stats.compilations())
    if content_step:
        # The first batch again, then other tokens: what compiles on coming back to the first padded length
        # (module state a step changed, such as RWKV's layer rescaling after generation in eval mode) is not
        # the data's; only the second step's compiles are.
        before = measured_compiles
        try:
            one_step(
                padded_training_batch(model, settings.train_lengths[0], settings, device), recorded=False
            )
            before = len(stats.compilations())
            one_step(padded_training_batch(model, settings.train_lengths[0], settings, device, content=1))
        except Exception as error:  # noqa: BLE001  (the measured steps passed; this one is evidence only)
            row["train_content_error"] = first_error_line(error)
        row["train_content_compiles"] = len(stats.compilations()) - before
    row["train_recompile_reasons"] = stats.recompile_reasons()
    distinct = sorted(set(lengths))
    row["train_padded_lengths"] = lengths
    row["train_compile_count"] = measured_compiles
    row["train_compiles_per_length"] = dict(zip((str(n) for n in lengths), per_length, strict=True))
    # Each distinct padded length compiles the graphs of the first step once; anything more is a recompile.
    row["train_expected_compile_count"] = per_length[0] * len(distinct)
    breaks = stats.graph_breaks()
    row["train_graph_breaks"] = sum(breaks.values())
    row["train_graph_break_reasons"] = sorted({graph_break_reason(message) for message in breaks})
    row["_graph_break_messages"] = row.get("_graph_break_messages", []) + list(breaks)
