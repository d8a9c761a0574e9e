"""Writes `migrator/families/training/tp_plans.json`: which Transformers architectures a tensor-parallel
`DistributedConfig(tp_size=...)` can shard, read from the installed Transformers itself (the migrator does not
depend on Transformers, so it reads this table).

For each model_type: the config class's `base_model_tp_plan` (the decoder layers' plan) and the `_tp_plan` of
its causal-LM class (or, with none, its base model class): "layers" when the base plan is not empty, "lm_head"
when only the head is sharded, "none" when there is no plan (Transformers raises at load: "... has no
tp_plan"). `tests/migrator/test_tp_plans.py` checks that the table is that of the installed Transformers.

Run: `.venv/bin/python scripts/tp_plans.py` (after a Transformers upgrade).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

TABLE = Path(__file__).resolve().parents[1] / "migrator" / "families" / "training" / "tp_plans.json"


def tp_plans() -> dict:
    import transformers
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES, MODEL_MAPPING_NAMES

    architectures = {}
    for model_type in sorted(CONFIG_MAPPING.keys()):
        name = MODEL_FOR_CAUSAL_LM_MAPPING_NAMES.get(model_type) or MODEL_MAPPING_NAMES.get(model_type)
        if not isinstance(name, str):
            continue
        try:
            model_class = getattr(transformers, name)
            base_plan = CONFIG_MAPPING[model_type].base_model_tp_plan
        except (AttributeError, ImportError, KeyError, ValueError):
            continue  # a class that needs a package not installed here
        plan = "layers" if base_plan else "lm_head" if getattr(model_class, "_tp_plan", None) else "none"
        architectures[model_type] = {"class": name, "plan": plan}
    return {"transformers": transformers.__version__, "architectures": architectures}


def main() -> int:
    TABLE.write_text(json.dumps(tp_plans(), indent=1, sort_keys=True) + "\n", encoding="utf-8")
    print(f"wrote {TABLE}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
