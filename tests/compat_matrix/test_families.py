"""The matrix's families besides causal LMs: probe names, selection, the task field, the forward verdict, and
the encoders' forward probe on real tiny models."""

import pytest

from compat_matrix.archs import UnknownArchitecture, select_architectures, support_of
from compat_matrix.families import (
    ENCODER_MODEL_TYPES,
    family_of,
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
    assert [family_of(task) for task in ("text-generation", "feature-extraction", "image-classification")] == [
        "causal-lm", "encoders", "vision"]  # fmt: skip
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
