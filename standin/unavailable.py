"""What the stand-in raises where it cannot run (its own module: the package, its NeuronCore set and its compiled
backend raise it)."""


class StandinUnavailable(RuntimeError):
    """The stand-in cannot be switched on here: an unsupported torch, a real torch_neuronx, a malformed NeuronCore
    set, or its C++ backend cannot be compiled."""
