from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from usercode import model_ids


@pytest.mark.parametrize(
    ("model_id", "model_type"),
    [
        ("meta-llama/Llama-3.2-1B", "llama"),
        ("meta-llama/Llama-3.2-11B-Vision-Instruct", "mllama"),
        ("Qwen/Qwen3-0.6B", "qwen3"),
        ("Qwen/Qwen3-30B-A3B", "qwen3_moe"),
        ("qwen/qwen2.5-7b-instruct", "qwen2"),
        ("google/gemma-3-1b-it", "gemma3_text"),
        ("google/gemma-3-4b-it", "gemma3"),
        ("gpt2", "gpt2"),
        ("deepseek-ai/DeepSeek-R1-Distill-Qwen-1.5B", "qwen2"),
        ("HuggingFaceTB/SmolLM3-3B", "smollm3"),
    ],
)
def test_bundled_table(model_id, model_type):
    assert model_ids.resolve(model_id, model_ids.Path("."), online=False).model_type == model_type


def test_local_config_wins_and_is_named(tmp_path):
    (tmp_path / "ckpt").mkdir()
    (tmp_path / "ckpt" / "config.json").write_text(json.dumps({"model_type": "phi3"}))
    architecture = model_ids.resolve("./ckpt", tmp_path, online=False)
    assert architecture.model_type == "phi3" and "ckpt/config.json" in architecture.source


def test_unknown_offline_and_from_the_hub_online(tmp_path, monkeypatch):
    unknown = model_ids.resolve("someone/private-model", tmp_path, online=False)
    assert unknown.model_type == model_ids.UNKNOWN and "--online" in unknown.source
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"model_type": "olmo2"}))
    requested = []

    def fake_download(repo_id, filename, **kwargs):
        requested.append((repo_id, filename))
        return str(config)

    monkeypatch.setattr("huggingface_hub.hf_hub_download", fake_download)
    online = model_ids.resolve("someone/private-model", tmp_path, online=True)
    assert online == model_ids.Architecture("olmo2", "Hub config.json")
    assert requested == [("someone/private-model", "config.json")]


def test_hub_failure_is_unknown_with_the_reason(tmp_path):
    # HF_HUB_OFFLINE=1 (conftest): the real client refuses to go online.
    architecture = model_ids.resolve("someone/private-model", tmp_path, online=True)
    assert architecture.model_type == model_ids.UNKNOWN
    assert architecture.source.startswith("Hub lookup failed")


TOP100 = Path(__file__).resolve().parents[2] / "fixtures" / "compat" / "top100.csv"
# Types whose ranking evidence names only fine-tunes or text-only exports of another type's checkpoints, not
# a checkpoint of their own.
WITHOUT_A_FLAGSHIP = {
    "qwen3_5_text",
    "qwen3_5_moe_text",
    "gemma4_text",
    "gemma3n_text",
    "llama4_text",
    "granitemoeshared",
}


def test_the_table_covers_the_top_100():
    with TOP100.open() as handle:
        ranked = [record["model_type"] for record in csv.DictReader(handle)]
    named = {entry.model_type for entry in model_ids.known_models() if entry.task is None}
    assert len(ranked) == 100
    assert sorted(set(ranked) - named) == sorted(WITHOUT_A_FLAGSHIP)


@pytest.mark.parametrize(
    ("model_id", "model_type", "task"),
    [
        ("codellama/CodeLlama-7b-hf", "llama", None),
        ("Qwen/Qwen3-8B", "qwen3", None),
        ("Qwen/Qwen3-Coder-30B-A3B-Instruct", "qwen3_moe", None),
        ("deepseek-ai/DeepSeek-V3.2-Exp", "deepseek_v32", None),
        ("deepseek-ai/DeepSeek-V3.1", "deepseek_v3", None),
        ("CohereForAI/c4ai-command-r7b-12-2024", "cohere2", None),
        ("CohereForAI/c4ai-command-r-plus", "cohere", None),
        ("zai-org/GLM-4.7-Flash", "glm4_moe_lite", None),
        ("ibm-granite/granite-4.0-h-small", "granitemoehybrid", None),
        ("Qwen/Qwen3-Embedding-8B", "qwen3", "embedding"),
        ("BAAI/bge-small-en-v1.5", "bert", "embedding"),
        ("BAAI/bge-m3", model_ids.UNKNOWN, "embedding"),
        ("stabilityai/stable-diffusion-xl-base-1.0", model_ids.UNKNOWN, "diffusion"),
        # a fine-tune under its base checkpoint's name, by an owner the table does not list
        ("twmkn9/bert-base-uncased-squad2", "bert", "classification"),
        ("deepset/roberta-base-squad2", "roberta", "classification"),
    ],
)
def test_table_gives_the_type_and_says_when_it_is_not_a_causal_lm(model_id, model_type, task):
    architecture = model_ids.resolve(model_id, Path("."), online=False)
    assert (architecture.model_type, architecture.task) == (model_type, task)


@pytest.mark.parametrize(
    ("model_id", "model_type"),
    [
        ("unsloth/Llama-3.2-1B-Instruct", "llama"),  # a re-upload
        ("acme/qwen3-8b-sql-sft", "qwen3"),  # a fine-tune
        ("someone/albert-base-v2-imdb", "albert"),  # not `bert`: the more specific pattern comes first
        ("someone/xlm-roberta-large-ner", "xlm-roberta"),
        ("acme/Llama-4-Scout-tuned", None),  # llama4 or llama4_text: the name does not say
        ("acme/Qwen3-30B-A3B-tuned", None),  # a Qwen3 MoE, not qwen3
        ("someone/x", None),
    ],
)
def test_a_name_says_its_family_only_where_it_is_unambiguous(model_id, model_type):
    assert model_ids.family_from_name(model_id) == model_type


def test_the_name_families_are_transformers_architectures():
    from transformers import CONFIG_MAPPING

    assert {entry.model_type for entry in model_ids._name_families() if entry.model_type} <= set(
        CONFIG_MAPPING
    )
