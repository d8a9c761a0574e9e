"""The stand-in's one error (re-exported as ``standin.StandinUnavailable``); a module of its own so that the
modules that raise it never import the package that switches the stand-in on."""


class StandinUnavailable(RuntimeError):
    """The stand-in cannot be switched on here: an unsupported torch, a real torch_neuronx, a malformed NeuronCore
    set, or its C++ backend cannot be compiled."""
