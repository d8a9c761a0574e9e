"""Hub uploads under `neuron-migrate try`: push_to_hub (a model's, a tokenizer's, a Trainer's) and HfApi's
upload calls do their local part, are recorded in the report, and the run goes on; nothing reaches the Hub
(the sandbox has no network) and no credential is needed."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from try_run.report import FAILED, RAN, RunReport, merge_processes, text_lines
from try_run.runner import TryOptions, try_path

TINY_BERT = "BertConfig(hidden_size=8, num_hidden_layers=1, num_attention_heads=2, intermediate_size=8, vocab_size=32)"

UPLOADS = f"""
from huggingface_hub import HfApi, upload_folder
from transformers import BertConfig, BertModel

model = BertModel({TINY_BERT})
info = model.push_to_hub("me/tiny-bert", private=True)
print("pushed:", info.oid, info.commit_url)
model.save_pretrained("saved")
api = HfApi()
api.create_branch("me/tiny-bert", branch="v2")
upload_folder(folder_path="saved", repo_id="me/tiny-bert", revision="v2")
api.create_tag("me/tiny-bert", tag="v2.0")
api.upload_file(path_or_fileobj=b"hello", path_in_repo="notes.txt", repo_id="me/notes", repo_type="dataset")
"""


def _try(tmp_path: Path, source: str, **options) -> RunReport:
    script = tmp_path / "script.py"
    script.write_text(textwrap.dedent(source).lstrip())
    options = TryOptions(cache_root=tmp_path / "cache", show_output=False, timeout_s=300, **options)
    (run,) = try_path(script, [], options)
    return run


@pytest.mark.slow
def test_uploads_are_recorded_with_the_users_line_and_the_run_goes_on(tmp_path):
    run = _try(tmp_path, UPLOADS)
    assert run.status == RAN, (run.reason, run.output_tail)
    # What the script got back names the repository; the commit id says that no commit exists.
    assert f"pushed: {'0' * 40} https://huggingface.co/me/tiny-bert/commit/{'0' * 40}" in run.output_tail
    # (a commit's size, after its file count, depends on the safetensors header: only the bytes are checked)
    recorded = [
        (u["repo_id"], u["repo_type"], u["line"], [w.split(", ")[0] for w in u["what"]]) for u in run.uploads
    ]
    assert recorded == [
        ("me/tiny-bert", "model", 5, ["create the repository (private)", "commit 'Upload model': 3 file(s)"]),
        ("me/tiny-bert", "model", 9, ["create the branch v2"]),
        ("me/tiny-bert", "model", 10, ["commit 'Upload folder using huggingface_hub' on v2: 2 file(s)"]),
        ("me/tiny-bert", "model", 11, ["create the tag v2.0"]),
        ("me/notes", "dataset", 12, ["commit 'Upload notes.txt with huggingface_hub': 1 file(s)"]),
    ]
    assert run.uploads[-1]["what"][0].endswith(": 1 file(s), 5 bytes")
    assert all(upload["file"] == str(tmp_path / "script.py") for upload in run.uploads)
    assert "Hub write not performed at" in "\n".join(text_lines([run]))


@pytest.mark.slow
@pytest.mark.parametrize(
    ("making", "error"),
    [
        # What an upload reads is read: a folder that was never saved fails as it would before any upload.
        ("import os", "ValueError: Provided path"),
        # A model card whose metadata is not a mapping fails as the Hub's validation would fail it.
        (
            'import os; os.makedirs("saved"); open("saved/README.md", "w").write("---\\n- a\\n---\\n")',
            "ValueError",
        ),
    ],
    ids=["missing-folder", "malformed-card"],
)
def test_an_upload_that_would_fail_locally_still_fails(tmp_path, making, error):
    run = _try(
        tmp_path,
        f'{making}\nfrom huggingface_hub import upload_folder\nupload_folder(folder_path="saved", repo_id="me/x")\n',
    )
    assert run.status == FAILED and run.reason.startswith(error), run.reason
    assert run.error["line"] == 3 and not run.uploads


TRAINER = f"""
import torch
from transformers import BertConfig, BertForSequenceClassification, Trainer, TrainingArguments

model = BertForSequenceClassification({TINY_BERT})
rows = [{{"input_ids": torch.randint(0, 32, (6,)), "labels": torch.tensor(i % 2)}} for i in range(16)]
args = TrainingArguments(
    "out", max_steps=3, per_device_train_batch_size=4, save_steps=2, report_to=[],
    push_to_hub=True, hub_model_id="me/trained", hub_strategy="every_save",
)
trainer = Trainer(model=model, args=args, train_dataset=rows)
trainer.train()
trainer.push_to_hub()
"""


@pytest.mark.slow
def test_a_trainers_pushes_are_recorded_at_the_lines_that_made_them(tmp_path):
    run = _try(tmp_path, TRAINER)
    assert run.status == RAN and run.steps == 3, (run.reason, run.output_tail)
    by_line = {upload["line"]: upload["what"] for upload in run.uploads}
    assert by_line[10] == ["create the repository"]  # Trainer(...) with push_to_hub=True
    # The checkpoints' pushes run in a thread (run_as_future); they are the user's trainer.train().
    assert [what.split(":")[0] for what in by_line[11]] == [
        "commit 'Training in progress, step 2'",
        "commit 'Training in progress, step 3'",
    ]
    assert by_line[12][0].startswith("commit 'End of training'")


def test_uploads_are_grouped_per_repository_and_line_and_shown_with_their_cell():
    upload = {"repo_id": "me/sd", "repo_type": "model"}
    at_cell = {"file": "<ipython-input-1>", "line": 3, "cell_source": "pipe.push_to_hub('me/sd')\n"}
    reports = [
        {
            "role": "worker",
            "uploads": [
                {
                    **upload,
                    "what": "create the repository",
                    "user": {**at_cell, "code": "pipe.push_to_hub('me/sd')"},
                },
                {**upload, "what": "commit 'Upload pipeline': 12 file(s), 1.2 MB", "user": dict(at_cell)},
            ],
        }
    ]
    run = RunReport("notebook.ipynb")
    merge_processes(run, reports, ["import torch", "pipe.push_to_hub('me/sd')"])
    assert [(u["cell"], u["what"]) for u in run.uploads] == [
        (2, ["create the repository", "commit 'Upload pipeline': 12 file(s), 1.2 MB"])
    ]
    assert (
        "Hub write not performed at cell 2:3: me/sd: create the repository; commit 'Upload pipeline': 12 file(s), "
        "1.2 MB; recorded, never sent (a try does not reach the Hub)"
    ) in [line.strip() for line in text_lines([run])]


ACCOUNT_AND_WRITES = f"""
from huggingface_hub import HfApi, login, logout, whoami
from transformers import BertConfig, BertModel

login(token="hf_made_up")
repo = f"{{whoami()['name']}}/tiny-bert"
api = HfApi()
print("exists before:", api.repo_exists(repo))
BertModel({TINY_BERT}).push_to_hub(repo)
print("exists after:", api.repo_exists(repo), sorted(api.list_repo_files(repo)))
api.upload_file(path_or_fileobj=b"x", path_in_repo="notes/a.txt", repo_id=repo)
api.delete_folder("notes", repo_id=repo)
api.delete_file("config.json", repo_id=repo)
print("left:", api.list_repo_files(repo), api.file_exists(repo, "config.json"))
api.update_repo_settings(repo, gated="manual")
api.delete_branch(repo, branch="v1"); api.super_squash_history(repo)
api.move_repo(repo, "me/renamed")
api.delete_repo("me/renamed")
print("deleted:", api.repo_exists("me/renamed"))
logout()
"""


@pytest.mark.slow
def test_the_account_is_a_stand_in_and_every_write_is_recorded_and_read_back(tmp_path, monkeypatch):
    # Not isolated, so that a token stored by login would stay where the Hub's library keeps it.
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    run = _try(tmp_path, ACCOUNT_AND_WRITES, isolated=False)
    assert run.status == RAN, (run.reason, run.output_tail)
    # The script reads back what it wrote: the stand-in Hub is this run's writes.
    assert "exists before: False" in run.output_tail
    assert "exists after: True ['README.md', 'config.json', 'model.safetensors']" in run.output_tail
    assert "left: ['README.md', 'model.safetensors'] False" in run.output_tail
    assert "deleted: False" in run.output_tail
    assert [(call["line"], call["what"]) for call in run.hub_account] == [
        (4, ["whoami", "log in"]),
        (5, ["whoami"]),
        (19, ["log out"]),
    ]
    assert {call["name"] for call in run.hub_account} == {"neuron-migrate-try"}
    repo = "neuron-migrate-try/tiny-bert"
    recorded = [(u["repo_id"], u["line"], [w.split(":")[0] for w in u["what"]]) for u in run.uploads]
    assert recorded == [
        (repo, 8, ["create the repository", "commit 'Upload model'"]),
        (repo, 10, ["commit 'Upload notes/a.txt with huggingface_hub'"]),
        (repo, 11, ["commit 'Delete folder notes with huggingface_hub'"]),
        (repo, 12, ["commit 'Delete config.json with huggingface_hub'"]),
        (repo, 14, ["update the settings"]),
        (repo, 15, ["delete the branch v1", "squash the history into one commit"]),
        (repo, 16, ["move the repository to me/renamed"]),
        ("me/renamed", 17, ["delete the repository"]),
    ]
    assert "Hub account at " in "\n".join(text_lines([run]))
    # login stored no token (the real one writes HF_HOME/token and HF_HOME/stored_tokens).
    assert not any((tmp_path / "hf").glob("*token*"))


@pytest.mark.slow
@pytest.mark.parametrize(
    ("call", "error"),
    [
        # The real methods' own checks of their arguments still run before the request they no longer send.
        ("HfApi().update_repo_settings('me/x')", "ValueError: At least one setting must be updated."),
        ("HfApi().move_repo('x', 'me/y')", "ValueError: Invalid repo_id: x."),
        ("login(token='api_org_x')", "ValueError: You must use your personal account token"),
    ],
    ids=["no-setting", "no-namespace", "organization-token"],
)
def test_a_write_with_wrong_arguments_still_fails(tmp_path, call, error):
    run = _try(tmp_path, f"from huggingface_hub import HfApi, login\n{call}\n")
    assert run.status == FAILED and run.reason.startswith(error), run.reason
    assert not run.uploads and not run.hub_account


DATASET_PUSH = """
from datasets import Dataset, DatasetDict
from huggingface_hub import HfFileSystem

rows = Dataset.from_dict({"text": ["a", "b", "c", "d"], "label": [0, 1, 0, 1]})
info = rows.push_to_hub("me/rows", private=True)
print("pushed:", info.oid)
DatasetDict({"train": rows, "test": rows.select(range(2))}).push_to_hub("me/splits", revision="v2")
rows.select(range(2)).push_to_hub("me/rows", split="test")
card = HfFileSystem().read_text("datasets/me/rows/README.md")
print("card splits:", [line.strip() for line in card.splitlines() if line.strip() in ("- name: train", "- name: test")])
"""


@pytest.mark.slow
def test_a_datasets_push_is_recorded(tmp_path):
    run = _try(tmp_path, DATASET_PUSH)
    assert run.status == RAN, (run.reason, run.output_tail)
    assert f"pushed: {'0' * 40}" in run.output_tail
    recorded = [(u["repo_type"], u["line"], [w.split(", ")[0] for w in u["what"]]) for u in run.uploads]
    # datasets asks whether the repository exists (it does not: created), sends the parquet shards ahead of the
    # commit and lists the files it replaces (none: read from this run's writes); each push is one commit.
    assert recorded == [
        ("dataset", 5, ["create the repository (private)", "commit 'Upload dataset': 2 file(s)"]),
        (
            "dataset",
            7,
            ["create the repository", "create the branch v2", "commit 'Upload dataset' on v2: 3 file(s)"],
        ),
        # A push to a repository this run wrote finds it, reads the card it wrote and extends it: both splits.
        ("dataset", 8, ["commit 'Upload dataset': 2 file(s)"]),
    ]
    assert "card splits: ['- name: train', '- name: test']" in run.output_tail


def test_the_account_calls_of_each_process_are_one_line_naming_the_stand_in_user():
    at_line = {"file": "/tree/train.py", "line": 7, "code": "login(token=hf_token)"}
    calls = [
        {"what": what, "name": "neuron-migrate-try", "user": dict(at_line)} for what in ("whoami", "log in")
    ]
    run = RunReport("train.py")
    # two workers of a torchrun launch, each logging in at the same line
    merge_processes(
        run, [{"role": "worker", "hub_account": calls}, {"role": "worker", "hub_account": calls}], None
    )
    assert [(a["name"], a["line"], a["what"]) for a in run.hub_account] == [
        ("neuron-migrate-try", 7, ["whoami", "log in", "whoami", "log in"])
    ]
    assert (
        "Hub account at /tree/train.py:7: whoami; log in: answered as the stand-in user 'neuron-migrate-try'; "
        "no token is sent or stored (a try has no credentials)"
    ) in [line.strip() for line in text_lines([run])]
