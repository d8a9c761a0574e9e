"""Facts about the chips optimum-neuron compiled for, shared by the rules that meet a core count (NM101, NM452,
the core-count finding NM504)."""

from __future__ import annotations

# Logical NeuronCores of the largest trn2 instance (trn2.48xlarge: 16 Trainium2 chips, LNC=2), the
# instance AWS's TorchNeuron distributed tutorial runs 64 workers on.
TRN2_CORES = 64

# optimum-neuron `instance_type` values of chips TorchNeuron does not run on.
LEGACY_TARGETS = frozenset({"inf1", "inf2", "trn1", "trn1n"})


def core_count_why(name: str, value: object, written: str, target: str | None) -> str:
    """The TODO's reason for `<name>=<written>` (`value`: its literal value, None when computed) compiled
    for `target` (the load's `instance_type`, when it has one)."""
    platform = f"{target} " if target in LEGACY_TARGETS else "the compile target's (inf2 / trn1) "
    why = f"{name}={written} counted {platform}NeuronCores, not trn2 NeuronCores"
    if isinstance(value, int) and TRN2_CORES % value:
        why += f"; {value} does not divide the {TRN2_CORES} logical NeuronCores of a trn2.48xlarge"
    return why
