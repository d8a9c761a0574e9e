"""neuron-compat: which Transformers causal-LM architectures run on TorchNeuron, and how often they recompile."""

HARNESS_VERSION = "0.3.0"
