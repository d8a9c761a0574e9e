"""``neuron-compat rank --from-hub``: rank causal-LM architectures by Hub usage.

Method (the one Transformers' ``utils/models_to_deprecate.py`` uses for per-architecture usage): list every Hub
model tagged ``text-generation`` with its config, and sum downloads per ``config.model_type``, keeping only the
installed Transformers' causal-LM model types.
"""

from __future__ import annotations

import csv
import datetime as dt
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from compat_matrix.tiny import causal_lm_model_types

PIPELINE_TAG = "text-generation"


class HubUnavailable(RuntimeError):
    """The Hub could not be reached (offline mode or no network)."""


@dataclass
class Ranking:
    rows: list[dict]
    snapshot: str


def aggregate(models, known: set[str]) -> tuple[Counter, Counter]:
    """Downloads and repo counts per ``model_type`` over an iterable of ``huggingface_hub.ModelInfo``."""
    downloads, repos = Counter(), Counter()
    for model in models:
        model_type = (model.config or {}).get("model_type")
        if model_type in known:
            downloads[model_type] += model.downloads or 0
            repos[model_type] += 1
    return downloads, repos


def rank_from_hub(top: int = 100, progress: bool = False, api=None) -> Ranking:
    from huggingface_hub import HfApi
    from huggingface_hub.errors import OfflineModeIsEnabled

    api = api or HfApi()
    models = api.list_models(pipeline_tag=PIPELINE_TAG, expand=["config", "downloads"])
    if progress:
        from tqdm import tqdm

        models = tqdm(models, desc="Hub models", unit="model")
    try:
        downloads, repos = aggregate(models, set(causal_lm_model_types()))
    except OfflineModeIsEnabled as error:
        raise HubUnavailable(f"HF_HUB_OFFLINE is set; the ranking needs the Hub ({error})") from None
    except OSError as error:
        raise HubUnavailable(f"could not list Hub models: {error}") from None
    ordered = sorted(downloads, key=lambda m: (-downloads[m], -repos[m], m))[:top]
    rows = [
        {
            "rank": index,
            "model_type": model_type,
            "downloads": downloads[model_type],
            "repos": repos[model_type],
        }
        for index, model_type in enumerate(ordered, start=1)
    ]
    return Ranking(rows=rows, snapshot=dt.date.today().isoformat())


def write_ranking(ranking: Ranking, path: Path) -> None:
    with path.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=["rank", "model_type", "downloads", "repos", "snapshot"])
        writer.writeheader()
        for row in ranking.rows:
            writer.writerow(row | {"snapshot": ranking.snapshot})
