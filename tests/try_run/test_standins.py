"""`try` stands in for what real programs load and launches them as their READMEs do: the tree's own package
on the path, notebooks with magics of other kernels, shell cells whose command fails, downloads into a folder,
dataset columns of the types the code reads, tokenizers with their family's special tokens."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from try_run import plan

os.environ["HF_HUB_OFFLINE"] = "1"  # no test reaches the Hub
CLI = [sys.executable, "-c", "from commands.neuron_migrate import main; main()"]


def write(folder: Path, name: str, text: str) -> Path:
    path = folder / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text).lstrip())
    return path


def run_try(target: Path, cache: Path, *arguments: str, cwd: Path | None = None) -> tuple[int, dict]:
    report = target.parent / f"{target.name}.try.json"
    result = subprocess.run(
        [*CLI, "try", str(target), "-q", "--format", "json", "--report", str(report), *arguments],
        cwd=cwd or target.parent,
        capture_output=True,
        text=True,
        timeout=400,
        env={**os.environ, "NEURON_MIGRATE_CACHE": str(cache)},
    )
    assert report.is_file(), result.stderr
    return result.returncode, json.loads(report.read_text())


# -- the tree's own package ----------------------------------------------------------------------------------
def tree_with_a_package(root: Path) -> Path:
    """examples/distributed/train.py importing examples.use_cases.ner (its README: run from the root)."""
    (root / ".git").mkdir()
    write(root, "examples/use_cases/__init__.py", "")
    write(
        root,
        "examples/use_cases/ner.py",
        """
        DEFAULT_MODEL = "Qwen/Qwen3-0.6B"


        def check(value):
            if value != "ok":
                raise ValueError(f"not ok: {value}")
        """,
    )
    return write(
        root,
        "examples/distributed/train.py",
        """
        import json
        import os

        from examples.use_cases.ner import check

        check(open("examples/distributed/value.txt").read().strip())
        """,
    )


def test_a_script_importing_its_trees_package_runs_from_the_root_with_it_on_the_path(tmp_path):
    script = tree_with_a_package(tmp_path)
    assert plan.import_root(script) == tmp_path
    (launch,) = plan.plan_script(script, ["--x", "1"], None, "python").launches
    assert launch.cwd == tmp_path and launch.argv == ["python", "examples/distributed/train.py", "--x", "1"]
    assert launch.label == "PYTHONPATH=. python examples/distributed/train.py --x 1"
    env = launch.environment({"PYTHONPATH": "/bootstrap"})
    assert env["PYTHONPATH"] == os.pathsep.join(["/bootstrap", str(tmp_path)])  # the bootstrap stays first
    # The module it imports is read too (its model id is served), and those that module imports.
    assert plan.local_modules(script, [script.parent, tmp_path]) == [tmp_path / "examples/use_cases/ner.py"]

    # What its own folder holds, the standard library and a name no folder of the tree holds: nothing to add.
    write(tmp_path, "examples/distributed/local.py", "from helpers import x\n")
    write(tmp_path, "examples/distributed/helpers.py", "x = 1\n")
    write(tmp_path, "examples/distributed/plain.py", "import json\nimport examples_not_here.mod\n")
    assert plan.import_root(tmp_path / "examples/distributed/local.py") is None
    assert plan.import_root(tmp_path / "examples/distributed/plain.py") is None
    # Not above the repository's root (the folder with .git).
    (tmp_path / ".git").rmdir()
    (tmp_path / "examples/distributed/.git").mkdir()
    assert plan.import_root(script) is None


def test_a_script_whose_arguments_name_paths_from_the_root_runs_from_the_root(tmp_path):
    """philschmid/llama3-aws-trainium-sample: `python scripts/run_sft.py --config notebooks/llama_3_8b.yaml`,
    from the repository's root as its notebook runs it."""
    (tmp_path / ".git").mkdir()
    write(tmp_path, "scripts/run_sft.py", "import sys\nopen(sys.argv[2]).read()\n")
    write(tmp_path, "notebooks/llama_3_8b.yaml", "model_id: x\n")
    script = tmp_path / "scripts/run_sft.py"
    (launch,) = plan.plan_script(script, ["--config", "notebooks/llama_3_8b.yaml"], None, "python").launches
    assert launch.cwd == tmp_path and launch.argv[1] == "scripts/run_sft.py"
    # Paths found from its own folder, Hub ids and absolute paths: its own folder.
    write(tmp_path, "scripts/local/c.yaml", "")
    for arguments in (
        ["--config", "local/c.yaml"],
        ["--model_id=meta-llama/Meta-Llama-3-8B"],
        ["/abs/x.yaml"],
    ):
        (launch,) = plan.plan_script(script, arguments, None, "python").launches
        assert launch.cwd == script.parent and launch.argv[1] == "run_sft.py"


def test_the_trys_own_code_is_never_the_users_even_in_a_tree_that_holds_it():
    import importlib.util

    tool = Path(plan.__file__).resolve().parents[1]
    spec = importlib.util.spec_from_file_location(
        "try_bootstrap", tool / "try_run/bootstrap/sitecustomize.py"
    )
    bootstrap = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bootstrap)  # (without a try's configuration it installs nothing)
    state = bootstrap._State(
        {"roots": {str(tool): "checkout"}}
    )  # a try of a file of the tool's own repository
    assert state.user_location(str(tool / "try_run/bootstrap/sitecustomize.py"), 3) is None
    assert state.user_location(str(tool / "standin/__init__.py"), 3) is None
    assert state.user_location(str(tool / "fixtures/examples/sft_llama.py"), 3) == {
        "file": "checkout/fixtures/examples/sft_llama.py",
        "line": 3,
    }


def test_an_error_in_the_trees_package_is_reported_at_the_users_line(tmp_path, try_cache):
    script = tree_with_a_package(tmp_path)
    write(tmp_path, "examples/distributed/value.txt", "bad\n")
    code, document = run_try(script, try_cache)
    (run,) = document["runs"]
    assert code == 1 and run["command"] == "PYTHONPATH=. python examples/distributed/train.py"
    error = run["error"]
    assert (error["type"], Path(error["file"]).parts[-2:], error["line"]) == (
        "ValueError",
        ("use_cases", "ner.py"),
        6,
    )
    write(tmp_path, "examples/distributed/value.txt", "ok\n")
    code, document = run_try(script, try_cache)
    assert code == 0, document["runs"][0]["reason"]


def test_torchvision_without_its_compiled_operators_imports_and_its_python_parts_run(tmp_path, try_cache):
    """A torchvision wheel built for another torch (the registry's CUDA build beside a CPU-only torch) loads none
    of its operators; torchvision then imports all the same (each operator fails when called), except for the
    fake kernels it registers unconditionally. A package laid out as torchvision is stands in for that wheel."""
    write(tmp_path, "torchvision/__init__.py", "from . import extension\nfrom . import _meta_registrations\n")
    write(tmp_path, "torchvision/extension.py", "def _has_ops():\n    return False  # its _C did not load\n")
    write(
        tmp_path,
        "torchvision/_meta_registrations.py",
        """
        import torch.library


        @torch.library.register_fake("torchvision::nms")
        def meta_nms(dets, scores, iou_threshold):
            return dets.new_empty(0)
        """,
    )
    script = write(tmp_path, "train.py", "import torchvision\nprint('models and transforms run')\n")
    code, document = run_try(script, try_cache)
    (run,) = document["runs"]
    assert code == 0, run["reason"]
    assert run["missing_native_ops"] == ["torchvision"]


FAKE_MNIST = """
import os


class MNIST:  # torchvision 0.28's download protocol: resources, raw_folder, _check_exists, download
    resources = [
        ("train-images-idx3-ubyte.gz", "f68b3c2dcbeaaa9fbdd348bbdeb94873"),
        ("train-labels-idx1-ubyte.gz", "d53e105ee54ea40749a09fcbcd1e9432"),
        ("t10k-images-idx3-ubyte.gz", "9fb629c4189551a2d022fa330f9573f3"),
        ("t10k-labels-idx1-ubyte.gz", "ec29112dd5afa0611ce80d1b7f02629c"),
    ]

    def __init__(self, root, train=True, download=False):
        self.root, self.train = root, train
        if download:
            self.download()
        prefix = "train" if train else "t10k"
        with open(os.path.join(self.raw_folder, f"{prefix}-labels-idx1-ubyte"), "rb") as labels:
            self.count = int.from_bytes(labels.read(8)[4:], "big")

    @property
    def raw_folder(self):
        return os.path.join(self.root, self.__class__.__name__, "raw")

    def _check_exists(self):
        return all(
            os.path.isfile(os.path.join(self.raw_folder, os.path.splitext(os.path.basename(url))[0]))
            for url, _ in self.resources
        )

    def download(self):
        if not self._check_exists():
            raise RuntimeError("Error downloading train-images-idx3-ubyte.gz: no network")


class FashionMNIST(MNIST):
    pass
"""


def test_torchvisions_mnist_download_gets_the_files_it_extracts(tmp_path, try_cache):
    """MNIST(root, download=True) with no network to download from: the IDX files its download extracts are
    written where it looks for them. A module laid out as torchvision's is stands in for torchvision here."""
    write(tmp_path, "torchvision/__init__.py", "")
    write(tmp_path, "torchvision/datasets/__init__.py", "")
    write(tmp_path, "torchvision/datasets/mnist.py", FAKE_MNIST)
    script = write(
        tmp_path,
        "train.py",
        """
        from torchvision.datasets import mnist

        train = mnist.FashionMNIST(root="./data", train=True, download=True)
        test = mnist.FashionMNIST(root="./data", train=False, download=True)
        print(train.count, test.count)
        """,
    )
    code, document = run_try(script, try_cache)
    (run,) = document["runs"]
    assert code == 0, run["reason"]
    assert [dataset["id"] for dataset in run["datasets"]] == ["torchvision FashionMNIST"]
    assert not (tmp_path / "data").exists()  # written in the run's discarded layer, not in the tree


FAKE_CIFAR = """
import hashlib
import os
import pickle


def check_integrity(fpath, md5=None):  # torchvision.datasets.utils': the file's MD5 against the real archive's
    if not os.path.isfile(fpath):
        return False
    return md5 is None or hashlib.md5(open(fpath, "rb").read()).hexdigest() == md5


class CIFAR10:  # torchvision 0.28's protocol: base_folder, train_list, test_list, meta, download, _check_integrity
    base_folder = "cifar-10-batches-py"
    train_list = [["data_batch_1", "c99cafc152244af753f735de768cd75f"], ["data_batch_2", "d4bba439e000b95fd0a9bffe97cbabec"]]
    test_list = [["test_batch", "40351d587109b95175f43aff81a1287e"]]
    meta = {"filename": "batches.meta", "key": "label_names", "md5": "5ff9c542aee3614f3951f8cda6e48888"}

    def __init__(self, root, train=True, download=False):
        self.root = root
        if download:
            self.download()
        if not self._check_integrity():
            raise RuntimeError("Dataset not found or corrupted. You can use download=True to download it")
        self.targets = []
        for name, _ in self.train_list if train else self.test_list:
            with open(os.path.join(root, self.base_folder, name), "rb") as f:
                entry = pickle.load(f, encoding="latin1")
            self.targets.extend(entry["labels"] if "labels" in entry else entry["fine_labels"])
        path = os.path.join(root, self.base_folder, self.meta["filename"])
        if not check_integrity(path, self.meta["md5"]):
            raise RuntimeError("Dataset metadata file not found or corrupted.")
        with open(path, "rb") as f:
            self.classes = pickle.load(f, encoding="latin1")[self.meta["key"]]

    def _check_integrity(self):
        return all(
            check_integrity(os.path.join(self.root, self.base_folder, name), md5)
            for name, md5 in self.train_list + self.test_list
        )

    def download(self):
        if not self._check_integrity():
            raise RuntimeError("<urlopen error [Errno -3] Temporary failure in name resolution>")
"""


def test_torchvisions_cifar_download_gets_the_batches_it_extracts(tmp_path, try_cache):
    """CIFAR10(root, download=True) with no network: the batches its download extracts are written where it looks,
    and its MD5 check passes for the files the try wrote (a module laid out as torchvision's stands in for it)."""
    write(tmp_path, "torchvision/__init__.py", "")
    write(tmp_path, "torchvision/datasets/__init__.py", "")
    write(tmp_path, "torchvision/datasets/cifar.py", FAKE_CIFAR)
    script = write(
        tmp_path,
        "train.py",
        """
        from torchvision.datasets import cifar

        train = cifar.CIFAR10("./data", train=True, download=True)
        test = cifar.CIFAR10("./data", train=False, download=True)
        print(len(train.targets), len(test.targets), train.classes[:2], sorted(set(train.targets)))
        """,
    )
    code, document = run_try(script, try_cache)
    (run,) = document["runs"]
    assert code == 0, run["reason"] + run["output_tail"]
    assert "3200 64 ['airplane', 'automobile'] [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]" in run["output_tail"]
    assert [dataset["id"] for dataset in run["datasets"]] == ["torchvision CIFAR10"]


def _write_mnist_again_and_again(folder: str) -> None:
    from try_run import data

    for _ in range(6):
        data.mnist_files(Path(folder), ["train-images-idx3-ubyte"], "MNIST")


def test_mnist_stand_in_files_are_whole_while_another_process_writes_them(tmp_path):
    """torchrun's workers each run MNIST(download=True) at once: a worker reading the images must never see a file
    another one is half-way through writing."""
    import multiprocessing

    from try_run import data

    whole = 16 + data.TRAIN_ROWS * 28 * 28
    path = tmp_path / "train-images-idx3-ubyte"
    writer = multiprocessing.get_context("spawn").Process(
        target=_write_mnist_again_and_again, args=(str(tmp_path),)
    )
    writer.start()
    sizes = set()
    while writer.is_alive():
        if path.exists():
            sizes.add(len(path.read_bytes()))
    writer.join()
    assert writer.exitcode == 0 and sizes <= {whole}
    assert [file.name for file in tmp_path.iterdir()] == [path.name]  # no partial file left behind


def test_mnist_stand_in_files_are_idx_images_and_labels_a_classifier_can_learn(tmp_path):
    import numpy as np

    from try_run import data

    names = [
        "train-images-idx3-ubyte",
        "train-labels-idx1-ubyte",
        "t10k-images-idx3-ubyte",
        "t10k-labels-idx1-ubyte",
    ]
    data.mnist_files(tmp_path, names, "MNIST")
    images = np.frombuffer((tmp_path / names[0]).read_bytes(), dtype=np.uint8)
    labels = np.frombuffer((tmp_path / names[1]).read_bytes(), dtype=np.uint8)
    # torchvision's read_sn3_pascalvincent_tensor: a big-endian magic (type 0x08: ubyte; its dimensions), then sizes
    assert images[:16].view(">u4").tolist() == [0x803, data.TRAIN_ROWS, 28, 28]
    assert labels[:8].view(">u4").tolist() == [0x801, data.TRAIN_ROWS]
    images, labels = images[16:].reshape(-1, 28, 28), labels[8:]
    assert sorted(set(labels.tolist())) == list(range(10))
    for row in (0, 7, 13):  # the bar a label puts in its image
        bright_rows = np.flatnonzero(images[row, :, 10] == 255)
        assert bright_rows.tolist() == [2 + 2 * labels[row], 3 + 2 * labels[row]]
    test_labels = np.frombuffer((tmp_path / names[3]).read_bytes(), dtype=np.uint8)
    assert test_labels[:8].view(">u4").tolist() == [0x801, data.OTHER_ROWS]


# -- dataset columns -----------------------------------------------------------------------------------------
NER_SCRIPT = """
import os

import boto3
from datasets import load_dataset

env = os.environ.copy()
env["NEURON_RT_VISIBLE_CORES"] = "0-1"


def secret(name):
    client = boto3.session.Session().client("secretsmanager")
    for page in client.get_paginator("list_secrets").paginate():
        for entry in page["SecretList"]:
            if entry["Name"] == name:
                return client.get_secret_value(SecretId=entry["ARN"])["SecretString"]


def tokenize(batch, tokenizer):
    return tokenizer(batch["tokens"], is_split_into_words=True, truncation=True)


raw = load_dataset("someone/ner-corpus")
label_names = raw["train"].features["ner_tags"].feature.names
topics = raw["train"].features["topic"].names
"""


def test_columns_come_from_dataset_reads_with_the_kinds_the_code_reads_them_as():
    from try_run import scan

    facts = scan.read_python(NER_SCRIPT)
    # Not the environment's keys nor the AWS responses' fields: those dictionaries are not the dataset's rows.
    assert facts.columns == {"tokens", "ner_tags", "topic"}
    assert facts.column_kinds == {"tokens": "words", "ner_tags": "tags:3", "topic": "label:2"}
    # A name bound to an AWS value in one function is not one in another.
    facts = scan.read_python(
        "def a(c):\n    page = c\n    page['x']\ndef b():\n    import boto3\n    page = boto3.client('s3')\n    page['y']\n"
    )
    assert facts.columns == {"x"}


def test_a_stand_in_dataset_has_the_feature_types_the_code_reads(tmp_path):
    from datasets import List, load_dataset

    from try_run import data, scan

    request = scan.read_python(NER_SCRIPT).datasets["someone/ner-corpus"]
    data.write_cache(data.stand_in(request), tmp_path)
    # The table's NER datasets carry their real class names.
    data.write_cache(data.stand_in(data.DatasetRequest("ncbi/ncbi_disease")), tmp_path)
    coded = load_dataset("someone/ner-corpus", split="train", cache_dir=str(tmp_path))
    tagged = load_dataset("ncbi/ncbi_disease", split="train", cache_dir=str(tmp_path))
    assert isinstance(coded.features["tokens"], List) and coded.features["topic"].num_classes == 2
    assert coded.features["ner_tags"].feature.num_classes == 3
    assert tagged.features["ner_tags"].feature.names == ["O", "B-Disease", "I-Disease"]
    for row in (coded[5], tagged[7]):  # one tag per word, as a tagger aligns them
        assert len(row["tokens"]) == len(row["ner_tags"]) > 1


DOCUMENTS_SCRIPT = """
from datasets import load_dataset

dataset = load_dataset("conll2012_ontonotesv5", "english_v4")
for document in dataset["train"]:
    for sentence in document["sentences"]:
        sentence["words"], sentence["named_entities"]
"""


def test_a_dataset_of_records_has_its_real_nested_columns(tmp_path):
    from datasets import load_dataset

    from try_run import data, scan

    request = scan.read_python(DOCUMENTS_SCRIPT).datasets["conll2012_ontonotesv5"]
    data.write_cache(data.stand_in(request), tmp_path)
    loaded = load_dataset("conll2012_ontonotesv5", "english_v4", cache_dir=str(tmp_path))
    assert sorted(loaded) == ["test", "train", "validation"]
    sentence_features = loaded["train"].features["sentences"].feature  # (a list of records)
    assert sentence_features["named_entities"].feature.names[:3] == ["O", "B-PERSON", "I-PERSON"]
    assert sentence_features["named_entities"].feature.num_classes == 37
    documents = loaded["train"].select(range(3))
    assert sorted({len(document["sentences"]) for document in documents}) == [1, 2, 3]
    for sentence in documents[2]["sentences"]:  # a document's sentences: records with per-word columns
        words = sentence["words"]
        assert isinstance(words, list) and isinstance(sentence["part_id"], int)
        assert len(sentence["named_entities"]) == len(sentence["pos_tags"]) == len(words)
        # the records nested in a sentence (its SRL frames) annotate its words
        assert {len(frame["frames"]) for frame in sentence["srl_frames"]} == {len(words)}
        assert {len(span) for span in sentence["coref_spans"]} == {3}


SPEECH_SCRIPT = """
from datasets import load_dataset

clips = load_dataset("someone/speech", split="train")
sample = clips[3]["audio"]
features = processor(sample["array"], sampling_rate=sample["sampling_rate"], return_tensors="pt")
out = model(**features)
out["last_hidden_state"], clips[0]["transcript"]
"""


def test_an_audio_column_holds_clips_as_the_code_reads_them(tmp_path):
    from datasets import load_dataset

    from try_run import data, scan

    request = scan.read_python(SPEECH_SCRIPT).datasets["someone/speech"]
    data.write_cache(data.stand_in(request), tmp_path)
    # The table's LibriSpeech sample has its real columns, the clip among them.
    data.write_cache(
        data.stand_in(data.DatasetRequest("hf-internal-testing/librispeech_asr_dummy", "clean")), tmp_path
    )
    clips = load_dataset("someone/speech", split="train", cache_dir=str(tmp_path))
    libri = load_dataset(
        "hf-internal-testing/librispeech_asr_dummy", "clean", split="validation", cache_dir=str(tmp_path)
    )
    # A clip's keys and the model output's are not columns of the dataset.
    assert sorted(clips.column_names) == ["audio", "transcript"]
    assert libri.column_names == ["file", "audio", "text", "speaker_id", "chapter_id", "id"]
    for clip in (clips[3]["audio"], libri[3]["audio"]):
        assert sorted(clip) == ["array", "path", "sampling_rate"] and clip["sampling_rate"] == 16_000
        assert len(clip["array"]) > 100 and all(-1 <= value <= 1 for value in clip["array"])
    assert len(clips[0]["audio"]["array"]) != len(clips[1]["audio"]["array"])  # clips vary in length


def test_a_split_has_the_rows_the_code_selects(tmp_path):
    from datasets import load_dataset

    from try_run import data, scan

    facts = scan.read_python(
        "from datasets import load_dataset\n"
        "d = load_dataset('someone/sql', split='train')\n"
        "train, held_out = d.select(range(50000)), d.select(range(50000, 50500))\n"
        "train.map(lambda row: {'q': row['question']})\n"
    )
    assert facts.rows_selected == 50500
    data.write_cache(data.stand_in(facts.datasets["someone/sql"]), tmp_path, facts.rows_selected)
    assert len(load_dataset("someone/sql", split="train", cache_dir=str(tmp_path))) == 50500


def _serve_at_load(cache: str, start, results) -> None:
    from try_run import data

    start.wait()
    report = data.serve_at_load(data.DatasetRequest("nyu-mll/glue", "mrpc", {"train"}), Path(cache))
    results.put(report and report["configs"])


def test_processes_that_load_a_dataset_at_once_write_its_stand_in_once(tmp_path):
    import multiprocessing

    context = multiprocessing.get_context("fork")
    start, results = context.Barrier(2), context.Queue()
    workers = [context.Process(target=_serve_at_load, args=(str(tmp_path), start, results)) for _ in range(2)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(120)
    assert sorted([results.get(timeout=5), results.get(timeout=5)], key=str) == [None, ["mrpc"]]
    assert [path.name for path in (tmp_path / "nyu-mll___glue").iterdir()] == ["mrpc"]


def test_a_dataset_and_metric_named_only_when_the_code_runs_are_stood_in_at_their_load(tmp_path, try_cache):
    # The launcher builds the trainer's command line at run time: the try never reads train.py before the run.
    launcher = write(
        tmp_path,
        "main.py",
        """
        import subprocess
        import sys

        task = "mrpc"
        subprocess.check_call(f"{sys.executable} scripts/train.py --task_name {task}", shell=True)
        """,
    )
    write(
        tmp_path,
        "scripts/train.py",
        """
        import sys

        import evaluate
        from datasets import load_dataset

        task = sys.argv[sys.argv.index("--task_name") + 1]
        raw = load_dataset("nyu-mll/glue", task)
        print("columns:", raw["train"].column_names, raw["train"].features["label"].num_classes)
        print("scores:", evaluate.load("glue", task).compute(predictions=[1, 0], references=[1, 1]))
        load_dataset("someone/unknown-corpus")  # no column known: it fails as offline, and the try says why
        """,
    )
    _, document = run_try(launcher, try_cache)
    (run,) = document["runs"]
    assert "columns: ['sentence1', 'sentence2', 'label', 'idx'] 2" in run["output_tail"]
    assert "scores: {'accuracy': 0.5, 'f1': 0.6666666666666666}" in run["output_tail"]
    assert [(metric["name"], metric.get("served")) for metric in run["metrics"]] == [
        ("glue", "when the code loaded it")
    ]
    assert run["status"] == "not-run", run["reason"]
    assert run["reason"].startswith(
        "dataset someone/unknown-corpus: no column it reads was found in the code"
    )
    (glue,) = run["datasets"]
    assert glue["id"] == "nyu-mll/glue" and glue["configs"] == ["mrpc"]
    assert glue["served"] == "when the code loaded it" and glue["source"].startswith("data table")


# -- datasets an earlier step saved ------------------------------------------------------------------------
SAVED_SCRIPT = """
import argparse
import os

from datasets import load_from_disk
from transformers import AutoModelForSequenceClassification, Trainer, TrainingArguments

parser = argparse.ArgumentParser()
parser.add_argument("--model_id", default="google-bert/bert-base-uncased")
parser.add_argument("--dataset-path", default="dataset")
args, _ = parser.parse_known_args()

train = load_from_disk(os.path.join(args.dataset_path, "train"))
labels = train.features["labels"].names
model = AutoModelForSequenceClassification.from_pretrained(args.model_id, num_labels=len(labels))
arguments = TrainingArguments(output_dir="out", per_device_train_batch_size=4, report_to="none")
Trainer(model=model, args=arguments, train_dataset=train).train()
"""


def test_folders_the_code_loads_from_disk_are_read_from_its_arguments():
    from try_run import scan

    assert scan.read_python(SAVED_SCRIPT).saved_datasets == {"dataset/train"}
    given = scan.read_python(SAVED_SCRIPT, ["--dataset-path", "lm_dataset"])
    assert given.saved_datasets == {"lm_dataset/train"}
    assert given.column_kinds == {"labels": "label:2"}
    # a folder named like a Hub id (`data/emotion`) that the code loads from disk is not asked of the Hub
    local = scan.read_python(SAVED_SCRIPT, ["--dataset-path", "data/emotion"])
    assert local.saved_datasets == {"data/emotion/train"} and local.datasets == {}
    # a folder known only at run time is not guessed
    assert (
        scan.read_python("from datasets import load_from_disk\nload_from_disk(input())\n").saved_datasets
        == set()
    )


def test_a_tokenized_dataset_an_earlier_step_saved_is_stood_in_without_writing_the_tree(tmp_path, try_cache):
    script = write(tmp_path, "scripts/train.py", SAVED_SCRIPT)
    code, document = run_try(script, try_cache, "--", "--dataset-path", "lm_dataset")
    (run,) = document["runs"]
    assert code == 0, run["reason"]
    (saved,) = run["datasets"]
    assert saved["id"] == "lm_dataset/train" and saved["columns"] == ["attention_mask", "input_ids", "labels"]
    assert sorted(path.name for path in script.parent.iterdir()) == ["train.py", "train.py.try.json"]


# -- downloads into a folder ---------------------------------------------------------------------------------
def test_a_download_into_a_folder_gets_the_stand_in_and_an_unknown_id_the_model_advice(tmp_path, try_cache):
    from try_run import scan

    script = write(
        tmp_path,
        "download.py",
        """
        from huggingface_hub import hf_hub_download, snapshot_download
        from transformers import AutoModelForCausalLM

        model_id = "Qwen/Qwen3-0.6B"
        local_model_path = "./models/qwen3"
        folder = snapshot_download(repo_id=model_id, local_dir=local_model_path, ignore_patterns=["*.json"])
        print("files:", sorted(path.name for path in __import__("pathlib").Path(folder).iterdir()))
        print("one:", hf_hub_download(model_id, "config.json", local_dir="configs"))
        snapshot_download(repo_id=model_id, local_dir=local_model_path)
        model = AutoModelForCausalLM.from_pretrained("models/qwen3")
        """,
    )
    facts = scan.read_python(script.read_text())
    # The folder it downloads into is not a Hub id to serve.
    assert facts.local_dirs == {"./models/qwen3", "configs"} and facts.hub_ids() == {"Qwen/Qwen3-0.6B"}
    code, document = run_try(script, try_cache)
    (run,) = document["runs"]
    assert code == 0, run["reason"]
    assert "config.json" not in run["output_tail"].split("files:")[1].splitlines()[0]  # ignore_patterns kept
    assert f"one: {tmp_path.resolve()}/configs/config.json" in run["output_tail"]
    served = next(model for model in run["models"] if model["id"] == "Qwen/Qwen3-0.6B")
    assert served["local_dirs"] == [
        str(tmp_path.resolve() / "configs"),
        str(tmp_path.resolve() / "models/qwen3"),
    ]
    assert not (tmp_path / "models").exists()  # written in the sandbox only

    write(
        tmp_path,
        "private.py",
        'from huggingface_hub import snapshot_download\nsnapshot_download("someone/private-weights", local_dir="w")\n',
    )
    code, document = run_try(tmp_path / "private.py", try_cache)
    (run,) = document["runs"]
    assert code == 1 and run["status"] == "not-run"
    assert "pass --model someone/private-weights=MODEL_TYPE" in run["reason"]


def test_a_forced_download_is_served_from_the_try_cache(tmp_path, try_cache):
    """Offline, huggingface_hub refuses `force_download=True` (ValueError); the stand-in is what it would fetch."""
    script = write(
        tmp_path,
        "forced.py",
        """
        from transformers import AutoModelForSequenceClassification, AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained("bert-base-cased", force_download=True)
        model = AutoModelForSequenceClassification.from_pretrained("bert-base-cased", num_labels=3, force_download=True)
        print("labels:", model.config.num_labels, len(tokenizer("a b")["input_ids"]) > 0)
        """,
    )
    code, document = run_try(script, try_cache)
    (run,) = document["runs"]
    assert code == 0, run["reason"]
    assert "labels: 3 True" in run["output_tail"]


# -- notebooks -----------------------------------------------------------------------------------------------
def notebook(path: Path, cells: list[str]) -> Path:
    import nbformat

    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(cell) for cell in cells]), path)
    return path


def test_a_metric_a_script_the_notebook_launches_loads_is_served(tmp_path, try_cache):
    write(
        tmp_path,
        "scripts/score.py",
        """
        import evaluate

        print(evaluate.load("f1").compute(predictions=[1, 0], references=[1, 1]))
        """,
    )
    # the command goes on over the next line, as IPython joins a `!cmd \\` line with it
    launching = notebook(tmp_path / "launch.ipynb", ["!torchrun --nproc_per_node 1 \\\n  scripts/score.py"])
    code, document = run_try(launching, try_cache)
    (run,) = document["runs"]
    assert code == 0, run["reason"]
    assert [metric["name"] for metric in run["metrics"]] == ["f1"]


def test_magics_of_another_kernel_are_set_up_not_run_and_a_failing_shell_cell_shows_its_command(
    tmp_path, try_cache
):
    write(
        tmp_path,
        "scripts/train.py",
        "import sys\n\n\ndef main():\n    raise RuntimeError('no data at ' + sys.argv[1])\n\n\nmain()\n",
    )
    glue = notebook(
        tmp_path / "notebooks/glue.ipynb",
        [
            "%additional_python_modules transformers\n%glue_version 4.0\nprint('after the magics')",
            '%%configure\n{"--conf": "spark"}',
            "%%bash\necho training\ntorchrun --nproc_per_node 1 ../scripts/train.py data/train",
        ],
    )
    code, document = run_try(glue, try_cache)
    (run,) = document["runs"]
    assert code == 1
    assert [(entry["command"], entry["cell"], entry["outcome"]) for entry in run["skipped"]] == [
        ("%additional_python_modules transformers", 1, "not run"),
        ("%glue_version 4.0", 1, "not run"),
        ("%%configure", 2, "not run"),
    ]
    # The notebook went on to its shell cell, whose script is the user's code: its own error, at its line.
    error = run["error"]
    assert (error["type"], Path(error["file"]).name, error["line"]) == ("RuntimeError", "train.py", 5)

    failing = notebook(tmp_path / "notebooks/ls.ipynb", ["%%bash\necho listing\nls /no-such-folder-here"])
    code, document = run_try(failing, try_cache)
    (run,) = document["runs"]
    assert code == 1 and run["error"]["cell"] == 1
    assert run["reason"].startswith("CalledProcessError")
    assert run["reason"].endswith(
        "the command's output ends: listing | ls: cannot access '/no-such-folder-here': No such file or directory"
    )


def test_a_shell_cell_whose_torchrun_workers_exit_shows_what_they_printed_not_torchruns_summary(
    tmp_path, try_cache
):
    """Workers that exit without a traceback (an argument parser's error): the report ends with their own
    lines, and torchrun's 35-line summary is one line."""
    write(
        tmp_path,
        "scripts/parse.py",
        "import argparse\n\nparser = argparse.ArgumentParser()\nparser.add_argument('--bf16')\n"
        "parser.parse_args()\n",
    )
    launch = notebook(
        tmp_path / "notebooks/launch.ipynb",
        ["%%bash\ntorchrun --nproc_per_node 2 ../scripts/parse.py --bf16"],
    )
    code, document = run_try(launch, try_cache)
    (run,) = document["runs"]
    assert code == 1 and run["error"]["type"] == "CalledProcessError"
    assert re.search(
        r"the command's output ends: usage: parse.py \[-h\] \[--bf16 BF16\] \| parse.py: error: argument --bf16: "
        r"expected one argument \| torchrun: ../scripts/parse.py FAILED: rank [01] failed first, exit code 2$",
        run["reason"],
    ), run["reason"]
    assert "ChildFailedError" not in run["output_tail"]


# -- tokenizers of a model family ----------------------------------------------------------------------------
def test_a_model_familys_stand_in_tokenizer_has_its_real_special_tokens(tmp_path):
    from transformers import AutoConfig, AutoTokenizer

    from try_run import hub

    def served(model_id):
        hub.ensure_model(tmp_path, model_id, *hub.architecture(model_id, {}))
        return (
            AutoTokenizer.from_pretrained(model_id, cache_dir=str(tmp_path)),
            AutoConfig.from_pretrained(model_id, cache_dir=str(tmp_path)),
        )

    base, config = served("meta-llama/Llama-3.1-8B")
    base.pad_token = "<|finetune_right_pad_id|>"  # optimum-neuron's finetune_llama.py
    assert base.pad_token_id not in (None, base.unk_token_id)
    assert (base.bos_token, base.eos_token, base.model_max_length) == (
        "<|begin_of_text|>",
        "<|end_of_text|>",
        131072,
    )
    ids = base("hi").input_ids
    assert (
        ids[0] == base.bos_token_id == config.bos_token_id and len(ids) == 3
    )  # its bos starts every sequence
    assert base.decode(ids, skip_special_tokens=True) == "hi"
    assert "<|eot_id|>" in base.all_special_tokens and config.vocab_size >= len(base)
    instruct, config = served("meta-llama/Llama-3.2-1B-Instruct")
    assert instruct.eos_token == "<|eot_id|>" and config.eos_token_id == instruct.eos_token_id
    # Llama 3 (before 3.1) has no such token; other families keep the plain stand-in.
    older, _ = served("meta-llama/Meta-Llama-3-8B")
    assert older.convert_tokens_to_ids("<|finetune_right_pad_id|>") == older.unk_token_id
    plain, _ = served("Qwen/Qwen3-0.6B")
    assert plain("hi").input_ids == [plain.convert_tokens_to_ids(c) for c in "hi"]


def test_a_cell_that_does_not_parse_is_reported_at_its_cell_and_line(tmp_path, try_cache):
    # A notebook with prose in a code cell (didhd/inferentia2-llm's 3.1-Compile-TransformerNeuronX.ipynb, cell 3).
    prose = notebook(tmp_path / "prose.ipynb", ["x = 1", "print(x)\nthis cell is prose, not Python"])
    code, document = run_try(prose, try_cache)
    error = document["runs"][0]["error"]
    assert code == 1 and (error["type"], error["cell"], error["line"]) == ("SyntaxError", 2, 2)
    assert error["code"] == "this cell is prose, not Python"


def test_a_reporting_integration_whose_package_is_missing_is_not_run_with_what_to_install(
    tmp_path, try_cache
):
    """`report_to="tensorboard"` without tensorboard: Transformers' callback raises a RuntimeError that names
    the package; the try says which to install, as for an import that fails."""
    import importlib.util

    if importlib.util.find_spec("tensorboard") or importlib.util.find_spec("tensorboardX"):
        pytest.skip("tensorboard is installed here")
    script = write(
        tmp_path,
        "report.py",
        """
        from transformers.integrations import TensorBoardCallback

        TensorBoardCallback()
        """,
    )
    code, document = run_try(script, try_cache, "--no-install")
    (run,) = document["runs"]
    assert code == 1 and run["status"] == "not-run"
    assert run["reason"].startswith("not run: install tensorboard in the environment that runs it")


def test_a_notebook_stops_at_a_launch_line_that_fails_with_what_it_printed(tmp_path, try_cache):
    """IPython goes on after a failed `!python train.py`; a person reads its error and stops, since the cells
    after it use what it makes. The try stops there too, with the command's own last lines."""
    write(tmp_path, "train.py", "import sys\n\nprint('no training data in data/')\nsys.exit(3)\n")
    launch = notebook(
        tmp_path / "launch.ipynb",
        ["!python train.py \\\n    --epochs 1", "print('the model it trained')"],
    )
    code, document = run_try(launch, try_cache)
    (run,) = document["runs"]
    assert code == 1 and run["error"]["cell"] == 1
    assert run["reason"].startswith(
        "CalledProcessError: Command 'python train.py     --epochs 1' returned non-zero"
    )
    assert run["reason"].endswith("the command's output ends: no training data in data/")
    assert "the model it trained" not in run["output_tail"]


# -- an id the table does not know ---------------------------------------------------------------------------
def test_an_unknown_id_whose_name_says_its_family_is_served_and_a_failure_names_the_guess(
    tmp_path, try_cache
):
    from try_run import hub

    assert hub.architecture("acme/llama-3-8b-sql", {}) == ("llama", hub.GUESSED)
    script = write(
        tmp_path,
        "tuned.py",
        """
        from transformers import AutoModelForCausalLM

        model = AutoModelForCausalLM.from_pretrained("acme/llama-3-8b-sql")
        print("layers:", model.config.num_hidden_layers)
        raise ValueError("the script's own check")
        """,
    )
    code, document = run_try(script, try_cache)
    (run,) = document["runs"]
    assert run["status"] == "failed" and "layers:" in run["output_tail"]
    assert [(model["id"], model["architecture"], model["source"]) for model in run["models"]] == [
        ("acme/llama-3-8b-sql", "llama", hub.GUESSED)
    ]
    assert run["reason"].startswith("ValueError: the script's own check")
    assert "acme/llama-3-8b-sql: served as a tiny model of the architecture its name says" in run["reason"]


@pytest.mark.parametrize("output", ["'out'", "os.path.abspath('out')"], ids=["relative", "absolute"])
def test_the_checkpoint_a_full_run_ends_with_is_the_trys_last_for_code_after_train(
    tmp_path, try_cache, output
):
    """A Trainer stopped at the try's steps saves checkpoint-3, not the checkpoint-50 its max_steps names: code
    after train() that reads checkpoint-50 (a merge, an export) reads the try's last through a link, reported.
    An absolute output folder is the script's own too (the sandbox discards the write), so the code after
    train() finds it there."""
    script = write(
        tmp_path,
        "train_then_merge.py",
        f"""
        import os
        import torch
        from transformers import BertConfig, BertForSequenceClassification, Trainer, TrainingArguments

        config = BertConfig(hidden_size=8, num_hidden_layers=1, num_attention_heads=2, intermediate_size=8, vocab_size=32)
        rows = [{{"input_ids": torch.randint(0, 32, (6,)), "labels": torch.tensor(i % 2)}} for i in range(16)]
        args = TrainingArguments({output}, max_steps=50, save_steps=25, per_device_train_batch_size=4, report_to=[])
        Trainer(model=BertForSequenceClassification(config), args=args, train_dataset=rows).train()
        print(BertForSequenceClassification.from_pretrained({output} + "/checkpoint-50").config.hidden_size)
        """,
    )
    code, document = run_try(script, try_cache, "--steps", "3")
    (run,) = document["runs"]
    assert code == 0, run["reason"]
    assert run["checkpoint_links"] == [{"asked": "checkpoint-50", "written": "checkpoint-3"}]
    assert not (tmp_path / "out").exists()


def test_torchvisions_pretrained_weights_are_the_architectures_own_initialisation(tmp_path, try_cache):
    """`resnet18(weights=ResNet18_Weights.DEFAULT)` and the legacy `mobilenet_v2(pretrained=True)` download their
    weights from download.pytorch.org; with no network, the builder's own random initialisation stands in (the
    same keys and shapes, 1,000 classes), reported at the user's line. torchvision itself is the registry's, which
    the try installs for the run."""
    script = write(
        tmp_path,
        "classify.py",
        """
        import torch
        from torchvision.models import ResNet18_Weights, mobilenet_v2, resnet18

        weights = ResNet18_Weights.DEFAULT
        model = resnet18(weights=weights).eval()
        legacy = mobilenet_v2(pretrained=True).eval()
        batch = weights.transforms()(torch.rand(3, 256, 256)).unsqueeze(0)
        with torch.no_grad():
            assert model(batch).shape == legacy(batch).shape == (1, len(weights.meta["categories"]))
        """,
    )
    code, document = run_try(script, try_cache)
    (run,) = document["runs"]
    assert code == 0, run["reason"]
    assert [(entry["weights"], entry["line"]) for entry in run["weights"]] == [
        ("ResNet18_Weights.IMAGENET1K_V1", 5),
        ("MobileNet_V2_Weights.IMAGENET1K_V1", 6),
    ]


def test_a_download_pinned_to_a_revision_gets_the_stand_ins_one_revision(tmp_path, try_cache):
    """A stand-in has one revision: `snapshot_download(..., revision="2.15.0", local_dir=...)` and
    `from_pretrained(..., revision="v1.0")` (a tag, a branch, a commit of the real repository) get its files, where
    offline they found no such revision in the cache; the report says which revision was asked for."""
    script = write(
        tmp_path,
        "pinned.py",
        """
        from huggingface_hub import snapshot_download
        from transformers import AutoModelForCausalLM

        folder = snapshot_download("meta-llama/Llama-3.2-1B", revision="2.15.0", local_dir="llama")
        model = AutoModelForCausalLM.from_pretrained("meta-llama/Llama-3.2-1B", revision="v1.0")
        print(folder, model.config.model_type)
        """,
    )
    code, document = run_try(script, try_cache)
    (run,) = document["runs"]
    assert code == 0, run["reason"]
    assert run["pinned_revisions"] == [{"repo_id": "meta-llama/Llama-3.2-1B", "revision": "2.15.0"}]
