from __future__ import annotations

import pytest

# An XLA training loop: the two rewrites the engine tests rely on are xm.xla_device() and xm.mark_step().
XLA_SCRIPT = """\
import torch
import torch_xla.core.xla_model as xm

device = xm.xla_device()
model = torch.nn.Linear(4, 4).to(device)   # odd   spacing kept
for step in range(3):
    loss = model(torch.ones(4, device=device)).sum()
    loss.backward()
    xm.mark_step()  # cut the graph
"""

PLAIN_SCRIPT = """\
import torch

model = torch.nn.Linear(4, 4)
print(model(torch.ones(4)))
"""


@pytest.fixture
def xla_script() -> str:
    return XLA_SCRIPT


@pytest.fixture
def plain_script() -> str:
    return PLAIN_SCRIPT
