"""The tensor-parallel plan table the migrator reads is that of the installed Transformers, and it refuses
tp_size where the architecture has no plan that shards its layers, or where the model id is not resolved."""

from __future__ import annotations

import json
import runpy
from pathlib import Path

from migrator.families.training.tp_plans import tp_refusal

ROOT = Path(__file__).resolve().parents[2]


def test_table_is_that_of_the_installed_transformers() -> None:
    script = runpy.run_path(str(ROOT / "scripts" / "tp_plans.py"))
    committed = json.loads((ROOT / "migrator" / "families" / "training" / "tp_plans.json").read_text())
    assert committed == script["tp_plans"](), "stale: run .venv/bin/python scripts/tp_plans.py"


def test_refusals() -> None:
    assert tp_refusal("meta-llama/Llama-3.2-1B") is None
    assert tp_refusal("Qwen/Qwen3-8B") is None
    why, what = tp_refusal("openai-community/gpt2")
    assert "gpt2 (GPT2LMHeadModel), which has no tp_plan" in why and "tp_size=1" in what
    why, _ = tp_refusal("openai/gpt-oss-20b")
    assert "shards only lm_head" in why
    why, _ = tp_refusal("someone/private-model")
    assert "not a model id this tool resolves" in why
    why, _ = tp_refusal(None)
    assert why.startswith("the model this load reads")
