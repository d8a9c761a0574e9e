"""What `try` serves for what a script loads: ids composed from constants, unknown and remote-code ids,
tokenizers, processors, sentence-transformers models and Diffusers pipelines."""

from __future__ import annotations

import ast

import pytest

from try_run import hub, scan
from usercode import composed_strings

COMPOSED = """
SIZE = "tiny"
ORG = "openai"
BASE = ORG + "/whisper-"
a = "openai/whisper-" + SIZE
b = f"{ORG}/whisper-{SIZE}"
c = "{}/whisper-{}".format(ORG, SIZE)
d = "openai/whisper-%s" % SIZE
e = BASE + SIZE
twice = "a"
twice = "b"
f = "openai/whisper-" + twice
def main(size):
    g = f"openai/whisper-{size}"
"""


def test_strings_composed_from_constants_fold_and_the_rest_are_named():
    tree = ast.parse(COMPOSED)
    unresolved = composed_strings.fold(tree)
    values = {node.targets[0].id: node.value for node in ast.walk(tree) if isinstance(node, ast.Assign)}
    assert {values[name].value for name in "abcde"} == {"openai/whisper-tiny"}
    # A name bound twice, or a function argument, is known only at run time; its fragment is no id, and what
    # the composition reads at run time stays: the tuple of its parts.
    assert [ast.unparse(values[name]) for name in "fg"] == ["(twice,)", "(size,)"]
    assert [(found.code, found.pattern, found.line) for found in unresolved] == [
        ("'openai/whisper-' + twice", "openai/whisper-*", 12),
        ("f'openai/whisper-{size}'", "openai/whisper-*", 14),
    ]


def test_what_an_unresolved_composition_reads_is_still_read():
    # `raw["test"]` inside a printed f-string: a split the stand-in must hold, a column it must have
    facts = scan.read_python(
        "from datasets import load_dataset\n"
        'raw = load_dataset("philschmid/emotion")\n'
        "print(f\"test rows: {len(raw['test'])}, first: {raw['train'][0]['text']!r}\")\n"
        'print("{} labels".format(raw["validation"].features["label"].names))\n'
    )
    assert facts.datasets["philschmid/emotion"].splits == {"test", "train", "validation"}
    assert {"text", "label"} <= facts.columns


def test_code_facts_ids_composed_loaded_unknown_and_remote_code():
    facts = scan.read_python(
        "from transformers import AutoModel, WhisperForConditionalGeneration\n"
        'SIZE = "small"\n'
        'w = WhisperForConditionalGeneration.from_pretrained(f"openai/whisper-{SIZE}")\n'
        'm = AutoModel.from_pretrained("someone/private-model", trust_remote_code=True)\n'
        "def load(size):\n"
        '    return WhisperForConditionalGeneration.from_pretrained("openai/whisper-" + size)\n'
    )
    assert facts.model_ids == {"openai/whisper-small", "someone/private-model"}
    assert "openai/whisper-" not in facts.model_ids and facts.remote_code
    assert list(facts.unresolved_ids) == ["openai/whisper-*"]
    assert "line 6" in facts.unresolved_ids["openai/whisper-*"]
    assert "--model ID=MODEL_TYPE" in facts.unresolved_ids["openai/whisper-*"]


def test_remote_code_ids_say_why_they_are_not_run_and_what_to_pass():
    with pytest.raises(hub.CannotStandIn, match="trust_remote_code=True.*--model ID=MODEL_TYPE"):
        hub.architecture("nomic-ai/nomic-embed-text-v1.5", {}, remote_code=True)
    with pytest.raises(hub.CannotStandIn, match="--model someone/x=MODEL_TYPE.*remote code"):
        hub.architecture("someone/x", {}, remote_code=True)


def test_stand_ins_keep_the_checkpoints_shape_values_and_serve_its_processors(tmp_path):
    import json

    import numpy as np
    from transformers import AutoConfig, AutoProcessor, AutoTokenizer

    def snapshot(model_id: str):
        return tmp_path / f"models--{model_id.replace('/', '--')}" / "snapshots" / hub.REVISION

    bert = hub.ensure_model(tmp_path, "google-bert/bert-base-uncased", "bert", "model-id table")
    assert (
        dict(bert.kept)["tokenizer.model_max_length"] == 512
        and bert.kept_from == "google-bert/bert-base-uncased"
    )
    tokenizer = AutoTokenizer.from_pretrained("google-bert/bert-base-uncased", cache_dir=tmp_path)
    assert tokenizer("Hi", padding="max_length", return_tensors="pt")["input_ids"].shape == (1, 512)
    assert (
        AutoConfig.from_pretrained(snapshot("google-bert/bert-base-uncased")).max_position_embeddings == 512
    )

    whisper = hub.ensure_model(tmp_path, "openai/whisper-large-v3", "whisper", "model-id table")
    assert whisper.parts == ("WhisperFeatureExtractor", "WhisperProcessor")
    config = json.loads((snapshot("openai/whisper-large-v3") / "config.json").read_text())
    assert config["architectures"] == ["WhisperForConditionalGeneration"] and config["num_mel_bins"] == 128
    processor = AutoProcessor.from_pretrained("openai/whisper-large-v3", cache_dir=tmp_path)
    features = processor(np.zeros(16000, dtype=np.float32), sampling_rate=16000, return_tensors="pt")
    assert features.input_features.shape == (1, 128, 3000)

    hub.ensure_model(tmp_path, "openai/clip-vit-base-patch32", "clip", "model-id table")
    clip = AutoProcessor.from_pretrained("openai/clip-vit-base-patch32", cache_dir=tmp_path)
    inputs = clip(
        text=["a cat"],
        images=np.zeros((90, 120, 3), dtype=np.uint8),
        padding="max_length",
        return_tensors="pt",
    )
    assert inputs["pixel_values"].shape == (1, 3, 224, 224) and inputs["input_ids"].shape == (1, 77)
    vision = AutoConfig.from_pretrained(snapshot("openai/clip-vit-base-patch32")).vision_config
    assert (vision.image_size, vision.patch_size) == (224, 32)
    # An architecture with no processor and no table row: the model and tokenizer only, nothing kept.
    llama = hub.ensure_model(tmp_path, "someone/model", "llama", "--model")
    assert llama.parts == () and llama.kept == ()


def test_every_checkpoint_value_names_its_source_and_a_served_field():
    import json

    from transformers import CONFIG_MAPPING

    from compat_matrix.tiny import build_tiny_config
    from try_run import checkpoint_parts
    from usercode import model_ids

    rows = json.loads(checkpoint_parts.VALUES_PATH.read_text())["checkpoints"]
    parts = {"config", "tokenizer", "image_processor", "feature_extractor", "sentence_transformers"}
    for row in rows:
        assert set(row["values"]) == set(row["sources"]), row["checkpoint"]
        assert {key.split(".")[0] for key in row["values"]} <= parts
        entry = model_ids.table_entry(row["checkpoint"])
        assert entry is not None and entry.model_type in CONFIG_MAPPING, row["checkpoint"]
        kept = checkpoint_parts.checkpoint_values(row["checkpoint"])
        assert kept.checkpoint == row["checkpoint"]  # no earlier row shadows it
        config = build_tiny_config(entry.model_type, exact=kept.part("config"))
        configs = [config, *(getattr(config, name) for name in getattr(config, "sub_configs", {}))]
        for name, value in kept.part("config").items():
            assert any(getattr(part, name, None) == value for part in configs), (row["checkpoint"], name)


def test_every_pipeline_stand_in_is_written_in_its_checkpoints_layout(tmp_path):
    import json

    from compat_matrix import pipelines

    for checkpoint in pipelines.checkpoints():
        spec = pipelines.spec_for(checkpoint)
        assert set(spec.values) == set(spec.sources), checkpoint
        model_type, source = hub.architecture(checkpoint, {})
        assert (model_type, source) == (spec.pipeline, "pipeline table")
        stand_in = hub.ensure_model(tmp_path, checkpoint, model_type, source)
        folder = tmp_path / f"models--{checkpoint.replace('/', '--')}" / "snapshots" / hub.REVISION
        index = json.loads((folder / "model_index.json").read_text())
        assert index["_class_name"] == spec.pipeline
        assert index["scheduler"] == ["diffusers", spec.values["scheduler"]]
        tokenizers = {name: value[1] for name, value in index.items() if name.startswith("tokenizer")}
        assert set(tokenizers.values()) <= {"CLIPTokenizer", "T5Tokenizer"}, checkpoint
        for variant in spec.values.get("variants", []):
            assert list(folder.glob(f"*/*.{variant}.safetensors")), (checkpoint, variant)
        assert stand_in.parameters < 2_000_000 and stand_in.kept_from == checkpoint
    # A diffusion pipeline of another family is not run, with the reason.
    with pytest.raises(hub.CannotStandIn, match="Diffusers pipeline with no tiny stand-in"):
        hub.architecture("Qwen/Qwen-Image", {})
