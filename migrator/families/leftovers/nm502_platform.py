"""NM502: a target TorchNeuron cannot run on: inf1/inf2/trn1 instances, neuronx containers, HF_NUM_CORES, the
inf1 toolchain (torch-neuron, neuron-cc)."""

from __future__ import annotations

import re

from migrator.families.leftovers.patterns import Pattern
from migrator.rules import Example, Rule, Severity
from migrator.target_stack import component

TRN2 = "TorchNeuron runs on trn2 and trn3 only"
_NEURONX = component("torch-neuronx").version
_STACK = f"torch-neuronx {_NEURONX} and Transformers >= {component('transformers').version}"

PLATFORM = Rule(
    "NM502",
    Severity.ERROR,
    "A target TorchNeuron cannot run on, in code or strings of any file kind: an inf1 / inf2 / trn1 instance "
    "type (SageMaker `ml.inf2.8xlarge`, EC2 `trn1.32xlarge`, a Neo `ml_inf1` target), a `huggingface-*-neuronx` / "
    "`pytorch-*-neuronx` container image, `HF_NUM_CORES`, a compiler `--target` of those chips, the inf1 toolchain "
    "(`torch-neuron`, `neuron-cc` installs and names, `NEURONCORE_GROUP_SIZES`)",
    "A TODO on its statement and a blocking finding per distinct target: TorchNeuron runs on trn2 and trn3 only. "
    "Pick a trn2 / trn3 instance (`ml.trn2.48xlarge`, `trn2.48xlarge`: 64 logical NeuronCores), a container "
    f"with {_STACK}, and set the parallel degree with "
    "`DistributedConfig(tp_size=N)` + `torchrun --nproc_per_node=N`.",
    examples=(
        Example(
            before="""\
import os

from sagemaker.huggingface import HuggingFaceModel

model = HuggingFaceModel(
    image_uri="763104351884.dkr.ecr.us-east-1.amazonaws.com/huggingface-pytorch-tgi-inference:2.1.2-optimum0.0.27-neuronx-py310-ubuntu22.04",
    env={"HF_MODEL_ID": "Qwen/Qwen3-0.6B", "HF_NUM_CORES": "2"},
    role=os.environ["SAGEMAKER_ROLE"],
)
predictor = model.deploy(initial_instance_count=1, instance_type="ml.inf2.xlarge")
""",
            after="""\
import os

from sagemaker.huggingface import HuggingFaceModel

# TODO(neuron-migrate): NM502 `huggingface-pytorch-tgi-inference:2.1.2-optimum0.0.27-neuronx-py310-ubuntu22.04` is a Neuron container of the XLA flow (TorchNeuron runs on trn2 and trn3 only); use an image with torch-neuronx 2.14 and Transformers >= 5.23 on a trn2 / trn3 instance
# TODO(neuron-migrate): NM502 `HF_NUM_CORES` sets the cores of an optimum-neuron / TGI Neuron container (TorchNeuron runs on trn2 and trn3 only); on trn2 / trn3, serve with vLLM Neuron (`vllm serve MODEL --tensor-parallel-size N`), or in your own code set the degree with DistributedConfig(tp_size=N) and torchrun --nproc_per_node=N
model = HuggingFaceModel(
    image_uri="763104351884.dkr.ecr.us-east-1.amazonaws.com/huggingface-pytorch-tgi-inference:2.1.2-optimum0.0.27-neuronx-py310-ubuntu22.04",
    env={"HF_MODEL_ID": "Qwen/Qwen3-0.6B", "HF_NUM_CORES": "2"},
    role=os.environ["SAGEMAKER_ROLE"],
)
# TODO(neuron-migrate): NM502 `ml.inf2.xlarge` is an instance TorchNeuron cannot run on (TorchNeuron runs on trn2 and trn3 only); use a trn2 / trn3 instance (trn2.48xlarge, ml.trn2.48xlarge)
predictor = model.deploy(initial_instance_count=1, instance_type="ml.inf2.xlarge")
""",
        ),
        Example(
            before="""\
#!/bin/bash
aws ec2 run-instances --image-id "$NEURON_DLAMI" --instance-type trn1.32xlarge --count 1
""",
            after="""\
#!/bin/bash
# TODO(neuron-migrate): NM502 `trn1.32xlarge` is an instance TorchNeuron cannot run on (TorchNeuron runs on trn2 and trn3 only); use a trn2 / trn3 instance (trn2.48xlarge, ml.trn2.48xlarge)
aws ec2 run-instances --image-id "$NEURON_DLAMI" --instance-type trn1.32xlarge --count 1
""",
            kind="shell",
        ),
        Example(
            before="""\
#!/bin/bash
pip install torch-neuron neuron-cc[tensorflow] --extra-index-url=https://pip.repos.neuron.amazonaws.com
""",
            after="""\
#!/bin/bash
# TODO(neuron-migrate): NM502 `torch-neuron` installs or names torch-neuron, the PyTorch package of inf1 (Inferentia 1), which TorchNeuron does not run on (TorchNeuron runs on trn2 and trn3 only); install torch-neuronx 2.14 from the Neuron pip repository on a trn2 / trn3 instance, and load the original checkpoint on device "neuron" instead of a model traced for inf1
# TODO(neuron-migrate): NM502 `neuron-cc[tensorflow]` is the inf1 (Inferentia 1) compiler, which TorchNeuron does not use (TorchNeuron runs on trn2 and trn3 only); remove it: TorchNeuron compiles on the device with torch.compile(backend="neuron")
pip install torch-neuron neuron-cc[tensorflow] --extra-index-url=https://pip.repos.neuron.amazonaws.com
""",
            kind="shell",
        ),
    ),
)
RULES = (PLATFORM,)
HANDLER = None  # found by the scan of each output (`scan.py`), after every rule has run

PATTERNS = (
    Pattern(
        PLATFORM,
        re.compile(r"\b(?:ml\.)?(?:inf1|inf2|trn1n?)\.(?:\d*xlarge|large|medium)\b"),
        ("inf1", "inf2", "trn1"),
        "`{0}` is an instance TorchNeuron cannot run on (" + TRN2 + ")",
        "use a trn2 / trn3 instance (trn2.48xlarge, ml.trn2.48xlarge)",
    ),
    Pattern(
        PLATFORM,
        # DLC names (`huggingface-pytorch-tgi-inference:...-neuronx-...`) and TGI Neuron's own image.
        re.compile(
            r"\b(?:huggingface|pytorch)-[a-z0-9-]*(?::[\w.-]*)?neuronx\b[\w.-]*|\bhuggingface/neuronx-tgi\b[\w.:-]*"
        ),
        ("neuronx",),
        "`{0}` is a Neuron container of the XLA flow (" + TRN2 + ")",
        f"use an image with {_STACK} on a trn2 / trn3 instance",
    ),
    Pattern(
        PLATFORM,
        re.compile(r"\bHF_NUM_CORES\b"),
        ("HF_NUM_CORES",),
        "`HF_NUM_CORES` sets the cores of an optimum-neuron / TGI Neuron container (" + TRN2 + ")",
        "on trn2 / trn3, serve with vLLM Neuron (`vllm serve MODEL --tensor-parallel-size N`), or in your own code set "
        "the degree with DistributedConfig(tp_size=N) and torchrun --nproc_per_node=N",
    ),
    Pattern(
        PLATFORM,
        re.compile(r"\bml_(?:inf[12]|trn1)\b"),
        ("ml_inf", "ml_trn1"),
        "`{0}` is a SageMaker Neo target TorchNeuron cannot run on (" + TRN2 + ")",
        "drop the compilation job and deploy the original model on a trn2 / trn3 instance",
    ),
    Pattern(
        PLATFORM,
        re.compile(r"\btorch[-_]neuron\b"),
        ("torch-neuron", "torch_neuron"),
        "`{0}` installs or names torch-neuron, the PyTorch package of inf1 (Inferentia 1), which TorchNeuron does not run on ("
        + TRN2
        + ")",
        f"install torch-neuronx {_NEURONX} from the Neuron pip repository on a trn2 / trn3 instance, and load the original "
        'checkpoint on device "neuron" instead of a model traced for inf1',
        subject="torch-neuron",
    ),
    Pattern(
        PLATFORM,
        re.compile(r"\bneuron-cc\b(?:\[\w+(?:,\w+)*\])?"),
        ("neuron-cc",),
        "`{0}` is the inf1 (Inferentia 1) compiler, which TorchNeuron does not use (" + TRN2 + ")",
        'remove it: TorchNeuron compiles on the device with torch.compile(backend="neuron")',
        subject="neuron-cc",
    ),
    Pattern(
        PLATFORM,
        re.compile(r"\bNEURONCORE_GROUP_SIZES\b"),
        ("NEURONCORE_GROUP_SIZES",),
        "`{0}` groups NeuronCores for torch-neuron models on inf1 (" + TRN2 + ")",
        "remove it; to use several NeuronCores, run one process per core with torchrun",
        strings_only=True,
    ),
    Pattern(
        PLATFORM,
        re.compile(r"--target[= ](?:inf1|inf2|trn1n?)\b"),
        ("--target",),
        "`{0}` compiles for a chip TorchNeuron does not support (" + TRN2 + ")",
        "drop the target: TorchNeuron compiles for the device it runs on",
    ),
)
