import os

import pytest

# No test may reach the Hub: the tiny models are built from config classes, the ranking from a recorded response.
os.environ["HF_HUB_OFFLINE"] = "1"


@pytest.fixture
def settings():
    from compat_matrix.settings import ProbeSettings

    return ProbeSettings(backend="neuron-sim", timeout_s=300, memory_mb=6144)


@pytest.fixture(scope="session")
def try_cache(tmp_path_factory):
    """One tiny-model Hub cache for every try of the session (pytest-xdist workers share its parent)."""
    return tmp_path_factory.getbasetemp().parent / "try-cache"
