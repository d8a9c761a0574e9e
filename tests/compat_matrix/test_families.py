"""The matrix's families besides causal LMs: probe names, selection, the task field, the forward verdict, and
the encoders' forward probe on real tiny models."""

import pytest
import torch

from compat_matrix.archs import UnknownArchitecture, select_architectures, support_of
from compat_matrix.families import (
    ENCODER_MODEL_TYPES,
    family_of,
    judged_stages,
    probe_name,
    row_probe_name,
    split_probe_name,
)
from compat_matrix.results_file import not_yet_measured
from compat_matrix.schema import SCHEMA_VERSION, Row
from compat_matrix.verdict import decide_verdict


def test_a_probe_name_is_the_model_type_for_text_generation_and_task_slash_model_type_otherwise():
    assert probe_name("text-generation", "bert") == probe_name(None, "bert") == "bert"
    assert probe_name("feature-extraction", "bert") == "feature-extraction/bert"
    assert split_probe_name("feature-extraction/bert") == ("feature-extraction", "bert")
    assert split_probe_name("bert") == ("text-generation", "bert")
    assert [family_of(task) for task in ("text-generation", "feature-extraction", "image-classification",
                                         "text2text-generation", "automatic-speech-recognition")] == [
        "causal-lm", "encoders", "vision", "seq2seq", "seq2seq"]  # fmt: skip
    # A row written before the task field is text generation's.
    assert row_probe_name({"model_type": "llama"}) == "llama"
    assert row_probe_name({"model_type": "bert", "task": "text-classification"}) == "text-classification/bert"


def test_a_family_or_one_of_its_tasks_selects_every_architecture_for_each_task():
    encoders = select_architectures("encoders")
    assert len(encoders) == 2 * len(ENCODER_MODEL_TYPES)
    assert "feature-extraction/modernbert" in encoders and "text-classification/xlm-roberta" in encoders
    assert select_architectures("text-classification") == [
        f"text-classification/{m}" for m in ENCODER_MODEL_TYPES
    ]
    assert select_architectures("llama,feature-extraction/bert") == ["llama", "feature-extraction/bert"]
    assert "image-feature-extraction/siglip" in select_architectures("vision")
    with pytest.raises(UnknownArchitecture, match="image-classification/gpt2"):
        select_architectures("image-classification/gpt2")
    # Every encoder is one optimum-neuron 0.4.5 exports for inference.
    assert support_of("feature-extraction/bert") == (True, None)


def test_the_seq2seq_family_probes_each_encoder_decoder_for_its_own_task():
    assert select_architectures("seq2seq") == [
        "text2text-generation/bart", "text2text-generation/mt5", "text2text-generation/t5",
        "automatic-speech-recognition/whisper"]  # fmt: skip
    assert select_architectures("automatic-speech-recognition") == ["automatic-speech-recognition/whisper"]
    with pytest.raises(UnknownArchitecture, match="automatic-speech-recognition/t5"):
        select_architectures("automatic-speech-recognition/t5")
    # optimum-neuron 0.4.5 exports t5 and whisper; BART and mT5 are probed beside them.
    assert [support_of(name) for name in select_architectures("seq2seq")] == [
        (False, None), (False, None), (True, None), (True, None)]  # fmt: skip
    assert judged_stages("text2text-generation") == ("generate",)
    assert judged_stages("text-generation") == ("generate", "train")
    assert judged_stages("image-classification") == ("forward",)


def test_an_encoder_decoder_is_judged_on_generation_alone():
    row = {"task": "text2text-generation", "stage": None, "error": None, "generate_failure": None,
           "compiled_generation": True, "recompile_count": 0, "graph_breaks": 0}  # fmt: skip
    assert decide_verdict(row) == {
        "verdict": "works", "cause": None, "generate_verdict": "works", "generate_reason": None}  # fmt: skip
    every_step = decide_verdict(row | {"recompiles_every_step": True, "recompile_guard": "wrapper: len == N",
                                       "compile_count": 8, "recompile_limit_hit": True})  # fmt: skip
    assert every_step["verdict"] == "works-with-caveats" and "train_verdict" not in every_step
    eager = decide_verdict(row | {"compiled_generation": False, "not_compiled_because": "no static cache"})
    assert (eager["verdict"], eager["generate_reason"]) == (
        "works-eager",
        "generation is not compiled: no static cache",
    )
    harness = decide_verdict(row | {"stage": "build", "error": "boom"})
    assert harness["generate_verdict"] == "harness-error" and "train_verdict" not in harness


def test_static_inputs_are_padded_text_or_log_mel_features_at_the_encoders_fixed_length():
    from compat_matrix.static_inputs import LOG_MEL_FRAMES_PER_POSITION, PADDED_LENGTH, batches
    from compat_matrix.tiny import build_tiny_model

    whisper = build_tiny_model("whisper", task="automatic-speech-recognition")
    first, second = batches(whisper, seed=0)
    # Whisper's feature extractor pads every clip to 30 s: 3000 frames, twice the encoder's 1500 positions.
    assert list(first) == ["input_features"] and LOG_MEL_FRAMES_PER_POSITION * 1500 == 3000
    assert first["input_features"].shape == second["input_features"].shape == (2, 80, 3000)
    assert not torch.equal(first["input_features"], second["input_features"])
    # A bfloat16 model gets bfloat16 features, as a user casts the feature extractor's float32 output.
    bf16 = build_tiny_model("whisper", dtype=torch.bfloat16, task="automatic-speech-recognition")
    assert batches(bf16, seed=0)[0]["input_features"].dtype == torch.bfloat16
    t5 = build_tiny_model("t5", task="text2text-generation", overrides={"tie_word_embeddings": False})
    # T5's config class leaves the decoder start unset; its checkpoints start from the pad token.
    assert t5.generation_config.decoder_start_token_id == t5.config.pad_token_id == 0
    # A T5 v1.1 checkpoint's tie_word_embeddings false reaches the constructor: no d_model**-0.5 rescale.
    assert t5.config.scale_decoder_outputs is False
    text = batches(t5, seed=0)
    assert [batch["input_ids"].shape for batch in text] == [(2, PADDED_LENGTH)] * 2
    assert [batch["attention_mask"].sum(-1).tolist() for batch in text] == [[32, 19], [11, 32]]


def test_resume_tells_the_tasks_of_one_architecture_apart():
    env = {
        "backend": "neuron-sim",
        "simulated": True,
        "torch": "2.x",
        "transformers": "5.x",
        "settings_id": "s",
    }
    rows = [
        {"model_type": "bert", "task": "feature-extraction", "env": env},
        {"model_type": "llama", "env": env},
    ]
    names = ["llama", "bert", "feature-extraction/bert", "text-classification/bert"]
    assert not_yet_measured(names, env, rows) == ["bert", "text-classification/bert"]


def test_a_row_older_than_version_5_reads_as_text_generation():
    old = {"model_type": "llama", "rank": 1, "backend": "neuron-sim", "simulated": True, "verdict": "works",
           "stage": None, "error": None, "env": {}, "schema_version": 4}  # fmt: skip
    row = Row.from_dict(old)
    assert (row.task, row.schema_version, row.upgraded_from) == ("text-generation", SCHEMA_VERSION, 4)


def _forward_row(**fields):
    return {"task": "feature-extraction", "stage": None, "error": None, "forward_failure": None} | fields


def test_the_forward_stage_decides_a_forward_only_rows_verdict():
    assert decide_verdict(_forward_row(compile_count=1, recompile_count=0, graph_breaks=0)) == {
        "verdict": "works", "forward_verdict": "works", "cause": None, "forward_reason": None}  # fmt: skip
    caveats = decide_verdict(_forward_row(compile_count=2, recompile_count=1, graph_breaks=1))
    assert caveats["verdict"] == caveats["forward_verdict"] == "works-with-caveats"
    assert caveats["forward_reason"] == (
        "1 recompile(s) for another batch of the same shape; 1 graph break(s) in the forward"
    )
    failure = {"stage": "compare", "error": "OutputsDiffer: x", "cause": "device", "reason": "differs"}
    fails = decide_verdict(_forward_row(stage="compare", forward_failure=failure))
    assert (fails["verdict"], fails["cause"], fails["forward_reason"]) == ("fails", "device", "differs")
    simulator = decide_verdict(
        _forward_row(stage="forward", forward_failure=dict(failure, cause="simulator"))
    )
    assert (simulator["verdict"], simulator["cause"]) == ("not-measured", "simulator")
    harness = decide_verdict(_forward_row(stage="build", error="boom"))
    assert harness["verdict"] == harness["forward_verdict"] == "harness-error"
    assert "generate_verdict" not in harness and "train_verdict" not in harness


@pytest.mark.slow
def test_bert_feature_extraction_compiles_one_graph_for_both_batches_and_matches_eager(settings):
    from compat_matrix.runner import run_one_isolated

    row = run_one_isolated("feature-extraction/bert", settings)
    assert (row["verdict"], row["forward_verdict"], row["task"], row["model_type"]) == (
        "works", "works", "feature-extraction", "bert")  # fmt: skip
    assert list(row) == list(Row.field_names())  # every key the probe wrote is declared
    assert (row["compile_count"], row["recompile_count"], row["graph_breaks"]) == (1, 0, 0)
    assert row["padded_shape"] == [2, 32] and row["outputs_match"] is True
    assert row["max_logit_diff"] <= row["logit_tolerance"] == 1e-4
    assert (row["generate_verdict"], row["train_verdict"], row["rank"]) == (None, None, None)
    assert (row["optimum_neuron_inference"], row["schema_version"]) == (True, SCHEMA_VERSION)


def test_every_top_of_family_architecture_has_a_reference_row_for_its_task():
    import csv
    import json

    from compat_matrix.archs import FIXTURES

    with (FIXTURES / "top-of-family.csv").open(newline="") as handle:
        listed = {(row["task"], row["model_type"]) for row in csv.DictReader(handle)}
    lines = (FIXTURES / "results-encoders-neuron-sim.jsonl").read_text().splitlines()
    measured = {(row["task"], row["model_type"]) for row in map(json.loads, lines)}
    assert listed and listed <= measured


@pytest.mark.slow
def test_a_dual_encoders_image_features_are_its_vision_towers_at_the_checkpoint_image_size(settings):
    from compat_matrix.runner import run_one_isolated

    row = run_one_isolated("image-feature-extraction/clip", settings)
    assert (row["verdict"], row["task"], row["padded_shape"]) == (
        "works",
        "image-feature-extraction",
        [2, 3, 224, 224],
    )
    assert (row["compile_count"], row["recompile_count"], row["graph_breaks"]) == (1, 0, 0)


@pytest.mark.slow
def test_t5_generates_with_an_encoder_decoder_static_cache_in_one_compiled_decode_graph(settings):
    from compat_matrix.runner import run_one_isolated

    row = run_one_isolated("text2text-generation/t5", settings)
    assert (row["verdict"], row["generate_verdict"], row["task"], row["model_type"]) == (
        "works", "works", "text2text-generation", "t5")  # fmt: skip
    assert list(row) == list(Row.field_names())
    # Both batches and all 32 decode steps through one graph: no recompile per step or per batch.
    assert (row["compile_count"], row["recompile_count"], row["graph_breaks"]) == (1, 0, 0)
    assert row["compiled_generation"] is True and row["generation_cache"] == "EncoderDecoderCache"
    assert row["padded_shape"] == [2, 32] and row["tokens_match"] is True
    assert row["max_logit_diff"] <= row["logit_tolerance"] == 1e-4
    assert (row["train_verdict"], row["forward_verdict"], row["train_losses"]) == (None, None, None)
    # FLAN-T5's code path: T5 v1.1's gated GELU and unscaled decoder outputs (checkpoint_configs.json).
    assert (row["config_source"], row["checkpoint"]) == ("checkpoint", "google/flan-t5-xl")
    assert row["checkpoint_values"] == {"feed_forward_proj": "gated-gelu", "tie_word_embeddings": False}
