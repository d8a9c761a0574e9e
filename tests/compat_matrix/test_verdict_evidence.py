"""What a verdict rests on, on hand-made rows and fakes (no tiny model): the device rule's severity and the
code paths that avoid it, the artifact guard, data-dependent training recompiles, checkpoint configs."""

import json
import re
from types import SimpleNamespace

import pytest
import torch

from compat_matrix import artifacts, severity
from compat_matrix.checkpoints import NOT_FOUND, config_choice, load_checkpoint_configs
from compat_matrix.settings import ProbeSettings
from compat_matrix.tiny import CONFIG_MAPPING, SECOND, WINDOW, build_tiny_config, declares
from compat_matrix.training_runs import run_training_step
from compat_matrix.verdict import decide_verdict
from standin import sim_backend

COVERAGE = "operator-coverage: transformers.grouped_mm_fallback (compiled graph)"


def a_path(name, runs=True, raising=(), loss_difference=0.0, lowering=()):
    return {"path": name, "change": f"change to {name}", "runs": runs, "error": None if runs else "E: x",
            "raising_ops": list(raising), "lowering_unverified_ops": list(lowering),
            "loss_difference": loss_difference}  # fmt: skip


def test_an_op_the_device_raises_on_fails_the_stage_unless_a_measured_path_avoids_it():
    avoided = severity.stage_judgement(
        "train", [COVERAGE], [a_path("batched_mm", lowering=["aten.topk"]), a_path("bf16")], "float32"
    )
    assert avoided["avoided_by"] == "change to batched_mm"
    assert (
        "in float32 the compiled training graph holds transformers.grouped_mm_fallback" in avoided["caveat"]
    )
    assert "the same first-step loss" in avoided["caveat"] and "aten.topk" in avoided["caveat"]
    failed = severity.stage_judgement(
        "train", [COVERAGE], [a_path("batched_mm", raising=[COVERAGE]), a_path("bf16", runs=False)], "float32"
    )["failure"]
    assert (failed["cause"], failed["stage"], failed["by_rule"]) == ("device", "train", ["operator-coverage"])
    assert failed["error"].startswith("DeviceRuleRaises") and "still holds" in failed["reason"]
    assert "fails (E: x)" in failed["reason"]


def test_code_paths_are_measured_apart_from_the_row():
    sim_backend.reset()
    sim_backend.STATE.add("operator-coverage", "transformers.grouped_mm_fallback (compiled graph)")

    def run_stage(path):
        if path.name == "bfloat16":
            raise RuntimeError("no bf16 here")
        sim_backend.STATE.compiled_ops.add("aten.topk")
        return {"loss_difference": 0.0}

    model = SimpleNamespace(get_experts_implementation=lambda: {"": "grouped_mm"})
    paths = severity.applicable_code_paths(model, "float32")
    assert [path.name for path in paths] == ["experts_implementation=batched_mm", "bfloat16"]
    assert severity.applicable_code_paths(model, "bfloat16") == [severity.EXPERTS_BATCHED_MM]
    results = severity.measure_code_paths(paths, run_stage)
    assert results[0]["runs"] and results[0]["lowering_unverified_ops"] == ["aten.topk"]
    assert not results[1]["runs"] and results[1]["error"] == "RuntimeError: no bf16 here"
    # The row's own findings are untouched.
    assert sim_backend.STATE.as_list() == [COVERAGE] and not sim_backend.STATE.compiled_ops


def generate_failure(cause="transformers"):
    return {
        "stage": "compare",
        "error": "OutputsDiffer: x",
        "cause": cause,
        "reason": "static differs (0.22)",
    }


def failing_row():
    return {"stage": "compare", "error": "OutputsDiffer: x", "generate_failure": generate_failure(),
            "train_failure": None, "max_diff_static_vs_dynamic": 0.22, "max_diff_compiled_vs_dynamic": 0.22,
            "max_logit_diff": 0.22, "outputs_match": False, "tokens_match": False, "recompile_count": 0,
            "graph_breaks": 0, "compiled_generation": True, "train_compile_count": 2,
            "train_expected_compile_count": 2, "traceback_tail": "x"}  # fmt: skip


def second_measurement(failure):
    def remeasure(stage, size, seed, exact):
        assert (stage, size, seed, exact) == ("generate", SECOND, 1, {"index_topk": 64})
        return {"generate_failure": failure, "max_diff_static_vs_dynamic": 1e-7,
                "max_diff_compiled_vs_dynamic": 2e-7, "max_logit_diff": 2e-7, "outputs_match": True,
                "tokens_match": True}  # fmt: skip

    return remeasure


def guarded(failure):
    row = failing_row()
    configs = [SimpleNamespace(index_topk=8)]
    artifacts.guard(row, 0, second_measurement(failure), lambda: configs, cache_length=64)
    return row


def test_a_failure_the_second_measurement_does_not_repeat_is_an_artifact_and_not_blamed():
    row = guarded(None)
    check = row["artifact_check"]["generate"]
    assert check["outcome"] == "dropped" and check["second"]["ties_broken"] == {"index_topk": 64}
    assert check["first"]["max_diff_static_vs_dynamic"] == 0.22  # both measurements are recorded
    # The row's compare figures are the measurement that counts; nothing is blamed.
    assert (row["generate_failure"], row["stage"], row["outputs_match"]) == (None, None, True)
    assert "traceback_tail" not in row
    fields = decide_verdict(row)
    assert (fields["verdict"], fields["cause"]) == ("works", None)
    assert (
        "an artifact of the tiny model, not blamed" in fields["generate_reason"]
        and "index_topk=64" in fields["generate_reason"]
    )


def test_a_failure_both_measurements_agree_on_keeps_its_blame():
    row = guarded(generate_failure() | {"reason": "static differs (0.45)"})
    assert row["artifact_check"]["generate"]["outcome"] == "kept"
    fields = decide_verdict(row)
    assert (fields["verdict"], fields["cause"]) == ("fails", "transformers")
    assert "confirmed at the second tiny size" in fields["generate_reason"]


@pytest.mark.parametrize("second", [generate_failure("device"), "raises"])
def test_a_failure_that_cannot_be_confirmed_is_not_measured_never_blamed(second):
    if second == "raises":
        row = failing_row()

        def remeasure(*args):
            raise ValueError("cannot build the second size")

        artifacts.guard(row, 0, remeasure, lambda: [], cache_length=64)
        assert "cannot build the second size" in row["artifact_check"]["generate"]["second"]["error"]
    else:
        row = guarded(second)
    assert row["artifact_check"]["generate"]["outcome"] == "unconfirmed"
    fields = decide_verdict(row)
    assert (fields["verdict"], fields["cause"]) == ("not-measured", "harness")
    assert "not confirmed" in fields["generate_reason"]


def test_device_rule_failures_and_simulator_limits_are_not_re_measured():
    assert not artifacts.needs_guard(generate_failure() | {"by_rule": ["operator-coverage"]})
    assert not artifacts.needs_guard(generate_failure("simulator"))
    assert artifacts.needs_guard(generate_failure("device"))
    assert artifacts.tie_free_values([SimpleNamespace(index_topk=8, indexer_budget=128)], 64) == {
        "index_topk": 64
    }


class ContentDependent(torch.nn.Module):
    """A model whose compiled forward specialises on how many tokens pass a threshold (like expert token
    counts), so other tokens at the same padded length compile again."""

    def __init__(self):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.ones(()))
        self.config = SimpleNamespace(get_text_config=lambda: SimpleNamespace(pad_token_id=0))

    def forward(self, input_ids, attention_mask, labels):
        chosen = input_ids[input_ids > 100].float()
        return SimpleNamespace(loss=(chosen * self.weight).mean())


def test_training_recompiles_that_follow_the_data_are_flagged():
    torch._dynamo.reset()
    settings = ProbeSettings(train_lengths=(100,), train_batch_size=1)
    row: dict = {}
    run_training_step(ContentDependent(), settings, torch.device("cpu"), row, "eager", content_step=True)
    # The boolean mask graph-breaks (its reason is recorded); the sum after it recompiles per mask count.
    assert row["train_content_compiles"] > 0 and row["train_graph_break_reasons"]
    fields = decide_verdict({"stage": None, "compiled_generation": True, "generate_failure": None,
                             "train_failure": None, "train_padded_lengths": [128], **row})  # fmt: skip
    assert "recompiles that depend on the data" in fields["train_reason"]


class StateFlipping(torch.nn.Module):
    """A model whose first training call changes a Python attribute its forward branches on (as RWKV's layer
    rescaling does after generation in eval mode): coming back to a padded length compiles again, whatever
    the tokens."""

    def __init__(self):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.ones(()))
        self.rescaled = True
        self.config = SimpleNamespace(get_text_config=lambda: SimpleNamespace(pad_token_id=0))

    def forward(self, input_ids, attention_mask, labels):
        scale = 2.0 if self.rescaled else 1.0
        self.rescaled = False
        return SimpleNamespace(loss=(input_ids.float().mean() * self.weight * scale))


def test_a_recompile_on_coming_back_to_a_padded_length_is_not_the_datas():
    torch._dynamo.reset()
    settings = ProbeSettings(train_lengths=(100, 200), train_batch_size=1)
    row: dict = {}
    run_training_step(StateFlipping(), settings, torch.device("cpu"), row, "eager", content_step=True)
    assert row["train_content_compiles"] == 0
    assert row["train_compile_count"] == 2  # the measured steps only


def test_checkpoint_values_each_have_a_source_and_a_field_that_exists():
    data = json.loads((__import__("compat_matrix").checkpoints.DATA_PATH).read_text())
    from compat_matrix.archs import ranks
    from compat_matrix.families import SEQ2SEQ_TASK_MODEL_TYPES

    encoder_decoders = {model_type for types in SEQ2SEQ_TASK_MODEL_TYPES.values() for model_type in types}
    for model_type, entry in data["architectures"].items():
        assert model_type in ranks() or model_type in encoder_decoders, model_type
        assert entry["checkpoint"].count("/") == 1 and entry["chosen_because"]
        config_cls = CONFIG_MAPPING[model_type]
        subs = [c for c in getattr(config_cls, "sub_configs", {}).values() if isinstance(c, type)]
        for name, item in entry["fields"].items():
            assert name in data["code_path_fields"], (model_type, name)
            assert item["source"] == NOT_FOUND or re.match(r"https://\S+", item["source"]), (model_type, name)
            assert ("value" in item) == (item["source"] != NOT_FOUND), (model_type, name)
            assert declares(config_cls, name) or any(declares(sub, name) for sub in subs), (model_type, name)


def test_rows_measure_a_checkpoints_values_where_recorded_and_say_so():
    mistral = config_choice("mistral", "checkpoint")
    assert mistral.row_fields()["checkpoint"] == "mistralai/Mistral-7B-Instruct-v0.2"
    assert mistral.overrides == {"sliding_window": None}
    assert build_tiny_config("mistral", overrides=mistral.overrides).sliding_window is None
    assert build_tiny_config("mistral").sliding_window == WINDOW  # the class default, shrunk
    assert config_choice("mistral", "class-defaults").row_fields() == {"config_source": "class-defaults"}
    assert config_choice("gpt2", "checkpoint").row_fields() == {"config_source": "class-defaults"}
    # A value not found is not applied.
    assert "rope_scaling" in load_checkpoint_configs()["qwen3"].not_found
    assert config_choice("qwen3", "checkpoint").overrides == {}


def test_checkpoint_values_go_to_the_sub_config_that_declares_them():
    gemma3 = build_tiny_config("gemma3", overrides=load_checkpoint_configs()["gemma3"].values).text_config
    assert (
        gemma3.rope_parameters["full_attention"]["rope_type"] == "linear" and gemma3.sliding_window == WINDOW
    )
    dbrx = build_tiny_config("dbrx", overrides={"moe_top_k": 4})
    assert dbrx.ffn_config.moe_top_k == 2  # a top-k above 1 becomes the tiny top-k
    # Derived per-layer lists follow a checkpoint's switches: sliding layers appear with use_sliding_window.
    qwen2 = build_tiny_config("qwen2", overrides={"use_sliding_window": True, "max_window_layers": 2})
    assert set(qwen2.layer_types) == {"full_attention", "sliding_attention"}
