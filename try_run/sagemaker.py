"""The training environment SageMaker gives an entry point, for a try of a script that reads it.

A SageMaker training job starts its entry point in a container laid out as the sagemaker-training-toolkit
documents (its ENVIRONMENT_VARIABLES.md): the model folder /opt/ml/model (uploaded to S3 when the job ends),
output folders under /opt/ml/output, each input channel NAME copied from S3 to /opt/ml/input/data/NAME and
named by SM_CHANNEL_NAME, the estimator's hyperparameters given as `--name value` arguments and again as
SM_HP_NAME and SM_HPS, the hosts and the accelerators the instance has. A script written for that
(`parser.add_argument("--model_dir", default=os.environ["SM_MODEL_DIR"])`) stops anywhere else on a KeyError.

A try of a script that reads one of these variables sets them all, as the toolkit would for one host: the
folders at their SageMaker paths, which the sandbox's copy-on-write view makes writable without touching the
machine (under --no-isolation, under the try's own temporary folder instead), the channels the code reads
(scan.py: `SM_CHANNEL_<NAME>`), the try's arguments as the hyperparameters, and the try's processes as the
instance's Neuron cores. What the channels hold is served by the runner (stand-ins, or `--channel NAME=DIR`).
"""

from __future__ import annotations

import json
import os
import posixpath

ROOT = "/opt/ml"
MODEL_DIR = f"{ROOT}/model"
INPUT_DIR = f"{ROOT}/input"
INPUT_CONFIG_DIR = f"{INPUT_DIR}/config"
DATA_DIR = f"{INPUT_DIR}/data"  # each channel's folder is DATA_DIR/NAME
OUTPUT_DIR = f"{ROOT}/output"
OUTPUT_DATA_DIR = f"{OUTPUT_DIR}/data"
OUTPUT_INTERMEDIATE_DIR = f"{OUTPUT_DIR}/intermediate"
CHANNEL_PREFIX = "SM_CHANNEL_"
HYPERPARAMETER_PREFIX = "SM_HP_"
HOST = "algo-1"  # the toolkit's name of the first (here the only) host
# The variables the toolkit sets for every job (ENVIRONMENT_VARIABLES.md); SM_CHANNEL_<NAME> and SM_HP_<NAME>
# are set per channel and hyperparameter.
VARIABLES = frozenset(
    {
        "SM_MODEL_DIR",
        "SM_CHANNELS",
        "SM_HPS",
        "SM_CURRENT_HOST",
        "SM_CURRENT_HOST_RANK",
        "SM_HOSTS",
        "SM_HOST_COUNT",
        "SM_NUM_GPUS",
        "SM_NUM_CPUS",
        "SM_NUM_NEURONS",
        "SM_LOG_LEVEL",
        "SM_NETWORK_INTERFACE_NAME",
        "SM_USER_ARGS",
        "SM_USER_ENTRY_POINT",
        "SM_MODULE_NAME",
        "SM_INPUT_DIR",
        "SM_INPUT_DATA_DIR",
        "SM_INPUT_CONFIG_DIR",
        "SM_OUTPUT_DIR",
        "SM_OUTPUT_DATA_DIR",
        "SM_OUTPUT_INTERMEDIATE_DIR",
        "SM_RESOURCE_CONFIG",
        "SM_INPUT_DATA_CONFIG",
        "SM_TRAINING_ENV",
    }
)
# The folders among them, at their SageMaker paths.
FOLDERS = {
    "SM_MODEL_DIR": MODEL_DIR,
    "SM_INPUT_DIR": INPUT_DIR,
    "SM_INPUT_DATA_DIR": DATA_DIR,
    "SM_INPUT_CONFIG_DIR": INPUT_CONFIG_DIR,
    "SM_OUTPUT_DIR": OUTPUT_DIR,
    "SM_OUTPUT_DATA_DIR": OUTPUT_DATA_DIR,
    "SM_OUTPUT_INTERMEDIATE_DIR": OUTPUT_INTERMEDIATE_DIR,
}


def is_training_variable(name: str) -> bool:
    """Whether `name` is one of the variables SageMaker's training toolkit sets."""
    return name in VARIABLES or name.startswith((CHANNEL_PREFIX, HYPERPARAMETER_PREFIX))


def channel(variable: str) -> str | None:
    """The channel `SM_CHANNEL_<NAME>` names (`train` of SM_CHANNEL_TRAIN: the estimator's `fit({"train": ...})`
    key, which SageMaker upper-cases in the variable), None for another variable."""
    if variable.startswith(CHANNEL_PREFIX) and len(variable) > len(CHANNEL_PREFIX):
        return variable[len(CHANNEL_PREFIX) :].lower()
    return None


def channel_folder(name: str) -> str:
    return f"{DATA_DIR}/{name}"


def folder_value(variable: str) -> str | None:
    """The folder a variable names in a try, at its SageMaker path (scan.py resolves the code's paths with it);
    None for a variable that is not a folder."""
    name = channel(variable)
    return channel_folder(name) if name else FOLDERS.get(variable)


def channel_of_path(path: str) -> str | None:
    """The channel a SageMaker path lies in (`train` of /opt/ml/input/data/train/train.csv), else None."""
    relative = posixpath.normpath(path)
    if not relative.startswith(DATA_DIR + "/"):
        return None
    return relative[len(DATA_DIR) + 1 :].split("/")[0] or None


def hyperparameters(argv: list[str]) -> dict[str, str]:
    """The hyperparameters a command line stands for: SageMaker passes each as `--name value` (and a try's
    arguments are those the estimator would pass)."""
    found = {}
    for index, word in enumerate(argv):
        if not word.startswith("--"):
            continue
        name, has_value, value = word[2:].partition("=")
        if has_value:
            found[name] = value
        elif index + 1 < len(argv) and not argv[index + 1].startswith("--"):
            found[name] = argv[index + 1]
    return found


def environment(channels: list[str], argv: list[str], entry_point: str, neuron_cores: int, root: str) -> dict:
    """The variables SageMaker's training toolkit sets for `entry_point` run with `argv` on one host with
    `neuron_cores` Neuron cores and `channels`, with the folders under `root` (ROOT in the sandbox)."""

    def at(path: str) -> str:
        return root + path[len(ROOT) :]

    hosts = [HOST]
    hps = hyperparameters(argv)
    channel_dirs = {name: at(channel_folder(name)) for name in channels}
    data_config = {
        name: {
            "TrainingInputMode": "File",
            "S3DistributionType": "FullyReplicated",
            "RecordWrapperType": "None",
        }
        for name in channels
    }
    resource_config = {"current_host": HOST, "hosts": hosts, "network_interface_name": "eth0"}
    cpus = os.cpu_count() or 1
    variables = {name: at(path) for name, path in FOLDERS.items()}
    variables |= {
        "SM_CHANNELS": json.dumps(sorted(channels)),
        "SM_HPS": json.dumps(hps),
        "SM_CURRENT_HOST": HOST,
        "SM_CURRENT_HOST_RANK": "0",
        "SM_HOSTS": json.dumps(hosts),
        "SM_HOST_COUNT": "1",
        "SM_NUM_GPUS": "0",
        "SM_NUM_CPUS": str(cpus),
        "SM_NUM_NEURONS": str(neuron_cores),
        "SM_LOG_LEVEL": "20",
        "SM_NETWORK_INTERFACE_NAME": "eth0",
        "SM_USER_ARGS": json.dumps(argv),
        "SM_USER_ENTRY_POINT": entry_point,
        "SM_MODULE_NAME": posixpath.splitext(entry_point)[0],
        "SM_RESOURCE_CONFIG": json.dumps(resource_config),
        "SM_INPUT_DATA_CONFIG": json.dumps(data_config),
    }
    variables |= {CHANNEL_PREFIX + name.upper(): folder for name, folder in channel_dirs.items()}
    variables |= {HYPERPARAMETER_PREFIX + name.upper(): value for name, value in hps.items()}
    variables["SM_TRAINING_ENV"] = json.dumps(
        {
            "channel_input_dirs": channel_dirs,
            "current_host": HOST,
            "hosts": hosts,
            "hyperparameters": hps,
            "input_config_dir": variables["SM_INPUT_CONFIG_DIR"],
            "input_data_config": data_config,
            "input_dir": variables["SM_INPUT_DIR"],
            "log_level": 20,
            "model_dir": variables["SM_MODEL_DIR"],
            "module_name": variables["SM_MODULE_NAME"],
            "network_interface_name": "eth0",
            "num_cpus": cpus,
            "num_gpus": 0,
            "num_neurons": neuron_cores,
            "output_data_dir": variables["SM_OUTPUT_DATA_DIR"],
            "output_dir": variables["SM_OUTPUT_DIR"],
            "output_intermediate_dir": variables["SM_OUTPUT_INTERMEDIATE_DIR"],
            "resource_config": resource_config,
            "user_entry_point": entry_point,
        }
    )
    return variables
