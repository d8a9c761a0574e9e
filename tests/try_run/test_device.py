"""Which device a try or a bench gets: a real torch-neuronx's device where it sees one (nothing switched on),
the stand-in otherwise; a torch-neuronx that sees no device is a clear refusal, not a silent stand-in."""

from __future__ import annotations

import pytest

from compat_matrix import environment
from try_run import device


@pytest.fixture
def installed_torch_neuronx(tmp_path, monkeypatch):
    """A `torch_neuronx` that find_spec finds outside the stand-in's folder, as a pip install would be."""
    (tmp_path / "torch_neuronx").mkdir()
    (tmp_path / "torch_neuronx" / "__init__.py").write_text("")
    monkeypatch.syspath_prepend(str(tmp_path))


def test_a_real_device_runs_as_it_is(installed_torch_neuronx, monkeypatch) -> None:
    monkeypatch.setattr(environment, "neuron_device_available", lambda: True)
    env, label = device.device_environment({"PATH": "/bin"})
    assert env == {"PATH": "/bin"}  # no stand-in switch, no offline Hub forced by the device
    assert label.startswith("neuron (torch-neuronx")


def test_a_torch_neuronx_without_a_device_is_refused(installed_torch_neuronx, monkeypatch) -> None:
    monkeypatch.setattr(environment, "neuron_device_available", lambda: False)
    with pytest.raises(device.DeviceUnavailable, match="sees no neuron device"):
        device.device_environment({})


def test_without_torch_neuronx_the_stand_in_is_switched_on() -> None:
    env, label = device.device_environment({})
    assert label == device.STANDIN_DEVICE and env["NEURON_STANDIN"] == "1"
