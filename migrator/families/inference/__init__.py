"""Inference (NM1xx): optimum-neuron compiled models and pipelines -> Transformers / Diffusers on "neuron".

There is no ahead-of-time export on TorchNeuron: a model is loaded from its original checkpoint, placed on the
device, and compiled just in time. So a load call keeps its checkpoint id and Hub arguments, loses its
compiler arguments, turns `auto_cast_type` into `dtype`, `sequence_length` into a static KV cache, and
`tensor_parallel_size`/`num_cores` > 1 into `DistributedConfig`. Fixed input shapes become padding findings.
A load whose checkpoint cannot be recovered statically (a compiled folder) is left with a TODO.

`loads.py` holds what every load rewrite shares (argument split, how it decides NM104-NM107, NM116);
`state.py` what the rules learn while walking (models on neuron, literal dicts, preprocessors, config pairs).
"""
