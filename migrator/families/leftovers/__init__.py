"""NM5xx: what must not survive a migration unnoticed.

After every rewrite, `scan.py` reads each output (Python through Python's own parse, shell through
tree-sitter; code and strings, never comments) for legacy references (NM501: optimum-neuron, torch_xla, NxD, pre-compile and
export commands, XLA-only variables, `"xla"` devices, optimum-only attributes) and targets TorchNeuron cannot
run on (NM502: inf1/inf2/trn1 instances, neuronx containers, `HF_NUM_CORES`). NM503 migrates shell commands
held in Python strings; NM504 flags an inference core count turned into a tensor-parallel degree.
"""
