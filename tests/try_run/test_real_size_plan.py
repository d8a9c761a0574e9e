"""`try` reports, beside each causal LM it ran as a tiny stand-in, the plan of the model at its real size."""

from __future__ import annotations

from try_run.report import RunReport, text_lines
from try_run.runner import _real_size_plans


def test_each_loaded_causal_lm_gets_the_plan_for_what_the_run_did(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("NEURON_MIGRATE_CACHE", str(tmp_path))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    run = RunReport("python train.py", steps=3)
    run.models = [
        {"id": "meta-llama/Llama-3.1-8B", "architecture": "llama", "parameters": 1000, "source": "model-id table",
         "loaded": True},
        {"id": "Qwen/Qwen3-0.6B", "architecture": "qwen3", "parameters": 1000, "source": "model-id table",
         "loaded": False},  # served, never loaded
        {"id": "BAAI/bge-small-en-v1.5", "architecture": "bert", "parameters": 1000, "source": "model-id table",
         "loaded": True},  # an embedding model: no causal-LM plan
    ]  # fmt: skip
    _real_size_plans(run)
    llama, qwen, embedding = run.models
    assert llama["real_size_plan"].startswith("train, bf16, batch 1 x sequence 2048: 8.03B parameters")
    assert "DistributedConfig(tp_size=1, fsdp_size=4)" in llama["real_size_plan"]
    assert "real_size_plan" not in qwen and "real_size_plan" not in embedding
    assert run.timings["real_size_plan_seconds"] > 0
    assert f"           real size: {llama['real_size_plan']}" in text_lines([run])

    generated = RunReport("python generate.py", models=[dict(llama, real_size_plan="")])
    _real_size_plans(generated)
    assert generated.models[0]["real_size_plan"].startswith("generate, bf16")
