"""`try` of a SageMaker training entry point: the environment SageMaker's training toolkit sets (model and output
folders, channels, hyperparameters), and stand-ins for what the code reads in its channels."""

from __future__ import annotations

import json
import os
import textwrap

import pytest

from tests.try_run.test_standins import run_try, write

os.environ["HF_HUB_OFFLINE"] = "1"  # no test reaches the Hub

# An entry point as SageMaker starts one: its folders and channels from the toolkit's variables, its train channel
# a dataset saved with `save_to_disk` (a DatasetDict: the code takes its "train" split and renames its label), its
# val channel a CSV file.
ENTRY_POINT = """
import argparse
import json
import os

import torch
from datasets import load_dataset, load_from_disk
from transformers import AutoModelForSequenceClassification, AutoTokenizer

parser = argparse.ArgumentParser()
parser.add_argument("--model_id", required=True)
parser.add_argument("--epochs", type=int, default=1)
parser.add_argument("--model_dir", default=os.environ["SM_MODEL_DIR"])
parser.add_argument("--output_data_dir", default=os.environ["SM_OUTPUT_DATA_DIR"])
parser.add_argument("--val_file", default=os.path.join(os.environ["SM_CHANNEL_VAL"], "test.csv"))
args = parser.parse_args()

dataset = load_from_disk(os.environ["SM_CHANNEL_TRAIN"])
train = dataset["train"].select(range(16))
tokenizer = AutoTokenizer.from_pretrained(args.model_id)
train = train.map(lambda b: tokenizer(b["text"], padding="max_length", max_length=32, truncation=True), batched=True)
train = train.rename_column("label", "labels")
train.set_format("torch", columns=["input_ids", "attention_mask", "labels"])
val = load_dataset("csv", data_files={"val": args.val_file})["val"]
print("val columns", sorted(val.column_names), "rows", len(val))

model = AutoModelForSequenceClassification.from_pretrained(args.model_id, num_labels=2).to("neuron")
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
loader = torch.utils.data.DataLoader(train, batch_size=4)
for batch in loader:
    loss = model(**{key: value.to("neuron") for key, value in batch.items()}).loss
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
model.save_pretrained(args.model_dir)
hps = json.loads(os.environ["SM_HPS"])
with open(os.path.join(args.output_data_dir, "hps.json"), "w") as handle:
    json.dump(hps, handle)
print("saved", sorted(os.listdir(args.model_dir)), "epochs", os.environ["SM_HP_EPOCHS"], hps["model_id"])
"""


def test_the_sagemaker_variables_and_channel_reads_of_an_entry_point_are_read():
    from try_run import scan

    facts = scan.read_python(textwrap.dedent(ENTRY_POINT), ["--model_id", "bert-base-uncased"])
    assert facts.sagemaker_variables == {
        "SM_MODEL_DIR": True,
        "SM_OUTPUT_DATA_DIR": True,
        "SM_CHANNEL_VAL": True,
        "SM_CHANNEL_TRAIN": True,
        "SM_HPS": True,
        "SM_HP_EPOCHS": True,
    }
    # the channel's folder a try gives it, resolved through the argparse default and os.path.join
    assert facts.saved_datasets == {"/opt/ml/input/data/train"}
    assert facts.saved_splits == {"/opt/ml/input/data/train": {"train"}}
    assert "/opt/ml/input/data/val/test.csv" in facts.channel_paths
    assert {"text", "label"} <= facts.columns and facts.sequence_classifier
    # an optional channel (`.get`) is read, not required; a variable of another program is not SageMaker's
    optional = scan.read_python('import os\nos.environ.get("SM_CHANNEL_EVAL")\nos.environ["MY_MODEL_DIR"]\n')
    assert optional.sagemaker_variables == {"SM_CHANNEL_EVAL": False}
    # a script that builds its model class from `--task` trains a classifier when the task says so
    built = 'import transformers\nAutoModel = eval(f"transformers.AutoModelFor{args.task}")\n'
    assert scan.read_python(built, ["--task", "SequenceClassification"]).sequence_classifier
    assert not scan.read_python(built, ["--task", "CausalLM"]).sequence_classifier
    # only a SageMaker variable's folder is resolved in a default: a path joined of literals is not a model id
    assert scan.read_python('import os\nmodel_path = os.path.join("models", "bert")\n').model_ids == set()
    # a key the code writes (the data files it hands `load_dataset`) is not a column the data holds
    assert scan.read_python('files = {}\nfiles["eval"] = "test.csv"\nprint(row["text"])\n').columns == {
        "text"
    }


def test_the_environment_is_the_toolkits_for_one_host_with_the_arguments_as_hyperparameters():
    from try_run import sagemaker

    variables = sagemaker.environment(
        ["train", "val"], ["--model_id", "bert-base-uncased", "--epochs=1"], "train.py", 2, sagemaker.ROOT
    )
    assert variables["SM_MODEL_DIR"] == "/opt/ml/model"
    assert variables["SM_OUTPUT_DATA_DIR"] == "/opt/ml/output/data"
    assert variables["SM_CHANNEL_TRAIN"] == "/opt/ml/input/data/train"
    assert json.loads(variables["SM_CHANNELS"]) == ["train", "val"]
    assert json.loads(variables["SM_HPS"]) == {"model_id": "bert-base-uncased", "epochs": "1"}
    assert (variables["SM_HP_MODEL_ID"], variables["SM_HP_EPOCHS"]) == ("bert-base-uncased", "1")
    assert (variables["SM_NUM_NEURONS"], variables["SM_NUM_GPUS"], variables["SM_HOSTS"]) == (
        "2",
        "0",
        '["algo-1"]',
    )
    training = json.loads(variables["SM_TRAINING_ENV"])
    assert training["channel_input_dirs"]["val"] == "/opt/ml/input/data/val"
    assert training["module_name"] == "train" and training["num_neurons"] == 2
    # without the sandbox the folders lie under the try's own folder
    elsewhere = sagemaker.environment(["train"], [], "train.py", 1, "/tmp/try/opt_ml")
    assert elsewhere["SM_CHANNEL_TRAIN"] == "/tmp/try/opt_ml/input/data/train"


@pytest.mark.slow
def test_an_entry_point_runs_with_sagemakers_environment_and_stand_ins_for_its_channels(tmp_path, try_cache):
    script = write(tmp_path, "code/train.py", ENTRY_POINT)
    arguments = ("--steps", "10", "--", "--model_id", "bert-base-uncased", "--epochs", "1")
    code, document = run_try(script, try_cache, *arguments)
    (run,) = document["runs"]
    assert code == 0, (run["reason"], run["output_tail"])
    assert (run["status"], run["steps"], run["loss_finite"]) == ("ran", 4, True)  # 16 rows, batches of 4
    job = run["sagemaker"]
    assert job["variables"]["SM_CHANNEL_VAL"] == "/opt/ml/input/data/val"
    assert job["read"] == sorted(
        ["SM_MODEL_DIR", "SM_OUTPUT_DATA_DIR", "SM_CHANNEL_VAL", "SM_CHANNEL_TRAIN", "SM_HPS", "SM_HP_EPOCHS"]
    )
    assert job["channels"]["train"].startswith("stand-in: a saved dataset at /opt/ml/input/data/train")
    assert job["channels"]["val"] == "stand-in: /opt/ml/input/data/val/test.csv (label, text)"
    (saved,) = run["datasets"]
    assert saved["splits"] == ["train"] and {"label", "text"} <= set(saved["columns"])
    tail = run["output_tail"]
    assert "val columns ['label', 'text'] rows 256" in tail
    assert "saved ['config.json', 'model.safetensors'] epochs 1 bert-base-uncased" in tail
    # the job's folders were written in the sandbox's discarded layer: the tree holds only what it held
    assert sorted(path.name for path in script.parent.iterdir()) == ["train.py", "train.py.try.json"]


@pytest.mark.slow
def test_a_channel_read_another_way_says_which_and_takes_the_users_folder(tmp_path, try_cache):
    script = write(
        tmp_path,
        "train.py",
        """
        import os

        print(open(os.path.join(os.environ["SM_CHANNEL_TRAINING"], "vocab.txt")).read().split())
        print("model dir", os.environ["SM_MODEL_DIR"], os.path.isdir(os.environ["SM_MODEL_DIR"]))
        """,
    )
    code, document = run_try(script, try_cache)
    (run,) = document["runs"]
    assert run["status"] == "not-run"
    assert run["reason"] == (
        "not run: SageMaker channel training (SM_CHANNEL_TRAINING): the code reads "
        "/opt/ml/input/data/training/vocab.txt, which the try has no stand-in for; pass --channel training=DIR, "
        "a folder holding the files the job's channel would"
    )
    write(tmp_path, "mine/vocab.txt", "trainium neuron\n")
    code, document = run_try(script, try_cache, "--channel", f"training={tmp_path / 'mine'}")
    (run,) = document["runs"]
    assert code == 0 and run["status"] == "ran", run["reason"]
    assert run["sagemaker"]["channels"] == {"training": f"--channel training={tmp_path / 'mine'}"}
    assert "['trainium', 'neuron']" in run["output_tail"]
    assert "model dir /opt/ml/model True" in run["output_tail"]
    # without the sandbox, the job's folders and the channel's files lie under the try's own folder, not /opt/ml
    code, document = run_try(
        script, try_cache, "--no-isolation", "--channel", f"training={tmp_path / 'mine'}"
    )
    (run,) = document["runs"]
    assert code == 0 and run["status"] == "ran", run["reason"]
    assert run["sagemaker"]["variables"]["SM_MODEL_DIR"].endswith("/opt_ml/model")
    assert "['trainium', 'neuron']" in run["output_tail"] and "/opt_ml/model True" in run["output_tail"]


@pytest.mark.slow
def test_an_optional_channel_the_try_cannot_fill_is_left_unset_as_by_a_job_without_it(tmp_path, try_cache):
    script = write(
        tmp_path,
        "train.py",
        """
        import os

        test_dir = os.environ.get("SM_CHANNEL_TEST")
        if test_dir is not None:
            print(open(os.path.join(test_dir, "images.npz"), "rb").read())
        print("test channel", test_dir, "hosts", os.environ["SM_HOSTS"])
        """,
    )
    code, document = run_try(script, try_cache)
    (run,) = document["runs"]
    assert code == 0 and run["status"] == "ran", run["reason"]
    assert run["sagemaker"]["channels"] == {
        "test": "not set (the code reads /opt/ml/input/data/test/images.npz, which the try has no stand-in for; "
        "the code reads it with a default)"
    }
    assert "SM_CHANNEL_TEST" not in run["sagemaker"]["variables"]
    assert 'test channel None hosts ["algo-1"]' in run["output_tail"]
