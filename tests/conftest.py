import pytest


@pytest.fixture(scope="session")
def try_cache(tmp_path_factory):
    """One tiny-model Hub cache for every try of the session (pytest-xdist workers share its parent)."""
    return tmp_path_factory.getbasetemp().parent / "try-cache"
