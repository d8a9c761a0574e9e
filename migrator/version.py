"""The version of neuron-migrate (its own module, so that the package and its modules never import each other)."""

__version__ = "0.1.0"
