"""What the stand-in raises where it cannot run (its own module: the package and its compiled backend raise it)."""


class StandinUnavailable(RuntimeError):
    """The stand-in cannot be switched on here: an unsupported torch, a real torch_neuronx, or its C++ backend
    cannot be compiled."""
