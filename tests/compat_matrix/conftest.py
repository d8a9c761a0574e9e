import os

import pytest

# No test may reach the Hub: the tiny models are built from config classes, the ranking from a recorded response.
os.environ["HF_HUB_OFFLINE"] = "1"


@pytest.fixture
def settings():
    from compat_matrix.settings import ProbeSettings

    return ProbeSettings(backend="neuron-sim", timeout_s=300, memory_mb=6144)
