"""Stand-ins for the metrics `evaluate.load(name)` reads from the Hub (the script of the Space
`evaluate-metric/NAME`), which a try, with no network, cannot reach.

The common classification metrics' scripts each wrap one scikit-learn function: int labels (a Sequence of them
under the "multilabel" config), the function's keywords, one output key. Their stand-ins are that wrapper,
written into the try's own modules cache where evaluate looks for a metric it loaded before
(`HF_MODULES_CACHE/evaluate_modules/metrics/evaluate-metric--NAME/HASH/NAME.py`; evaluate 0.3: `.../NAME/HASH/`),
so evaluate's own offline path loads them (the runner writes those the code loads by a literal; the try's bootstrap,
when the code loads it, one the runner did not see); the values are scikit-learn's, on what the run predicted. GLUE's script
scores each task its own way (`GLUE_SCRIPT`). Another
name still needs the Hub, and the run says so (`runner._conclude`).
"""

from __future__ import annotations

import ast
import hashlib
import os
from pathlib import Path

# name -> (scikit-learn function, the keywords the Hub's script's _compute takes and their defaults)
METRICS = {
    "accuracy": ("accuracy_score", {"normalize": True, "sample_weight": None}),
    "precision": (
        "precision_score",
        {"labels": None, "pos_label": 1, "average": "binary", "sample_weight": None, "zero_division": "warn"},
    ),
    "recall": (
        "recall_score",
        {"labels": None, "pos_label": 1, "average": "binary", "sample_weight": None, "zero_division": "warn"},
    ),
    "f1": ("f1_score", {"labels": None, "pos_label": 1, "average": "binary", "sample_weight": None}),
}
# evaluate.load (or `load` imported from it), and datasets' old load_metric
LOADERS = frozenset({"load", "load_metric"})
HUB_MISS = "doesn't exist on the Hugging Face Hub either"  # what evaluate raises for a metric it cannot find
SCRIPT = '''"""neuron-migrate try: stand-in for the Hub's evaluate-metric/{name}: scikit-learn's {function}, as that
script computes it."""

import datasets
import evaluate
from sklearn.metrics import {function}


class StandIn(evaluate.Metric):
    def _info(self):
        label = datasets.Value("int32")
        if self.config_name == "multilabel":
            label = datasets.Sequence(label)
        return evaluate.MetricInfo(
            description="{name} (neuron-migrate try stand-in)",
            citation="",
            inputs_description="predictions, references",
            features=datasets.Features({{"predictions": label, "references": label}}),
        )

    def _compute(self, predictions, references, **options):
        score = {function}(references, predictions, **{{**{defaults!r}, **options}})
        return {{"{name}": float(score) if getattr(score, "size", 1) == 1 else score}}
'''

# GLUE's metric script: one config per task, each scoring as the Hub's evaluate-metric/glue does (accuracy; accuracy
# and binary f1 for mrpc/qqp; Matthews correlation for cola; Pearson and Spearman for the stsb regression).
GLUE_TASKS = (
    "sst2",
    "mnli",
    "mnli_mismatched",
    "mnli_matched",
    "cola",
    "stsb",
    "mrpc",
    "qqp",
    "qnli",
    "rte",
    "wnli",
    "hans",
)
GLUE_SCRIPT = '''"""neuron-migrate try: stand-in for the Hub's evaluate-metric/glue: its per-task scores, by scikit-learn
and SciPy."""

import datasets
import evaluate
from scipy.stats import pearsonr, spearmanr
from sklearn.metrics import accuracy_score, f1_score, matthews_corrcoef

TASKS = {tasks!r}


class StandIn(evaluate.Metric):
    def _info(self):
        if self.config_name not in TASKS:
            raise KeyError(f"You should supply a configuration name selected in {{list(TASKS)}}")
        value = datasets.Value("float32" if self.config_name == "stsb" else "int64")
        return evaluate.MetricInfo(
            description="glue (neuron-migrate try stand-in)",
            citation="",
            inputs_description="predictions, references",
            features=datasets.Features({{"predictions": value, "references": value}}),
        )

    def _compute(self, predictions, references):
        if self.config_name == "cola":
            return {{"matthews_correlation": float(matthews_corrcoef(references, predictions))}}
        if self.config_name == "stsb":
            return {{
                "pearson": float(pearsonr(predictions, references)[0]),
                "spearmanr": float(spearmanr(predictions, references)[0]),
            }}
        scores = {{"accuracy": float(accuracy_score(references, predictions))}}
        if self.config_name in ("mrpc", "qqp"):
            scores["f1"] = float(f1_score(references, predictions))
        return scores
'''
SERVED = (*METRICS, "glue")


def loaded(sources: list[str]) -> list[str]:
    """The metric names the code loads by a literal (`evaluate.load("accuracy")`), in first-use order."""
    # (imported here: the try's bootstrap loads this module by its path, where usercode/ is not importable)
    from usercode.python import callee, owner, string

    names = []
    for source in sources:
        try:
            tree = ast.parse(source)
        except SyntaxError:
            continue
        calls = [
            node
            for node in ast.walk(tree)
            if isinstance(node, ast.Call)
            and callee(node) in LOADERS
            and owner(node) in ("evaluate", "datasets", "")
        ]
        for call in sorted(calls, key=lambda call: (call.lineno, call.col_offset)):
            name = string(call.args[0]) if call.args else None
            if name and "/" not in name and "." not in name and name not in names:
                names.append(name)
    return names


def serve(names: list[str], modules_cache: Path) -> list[dict]:
    """Writes the stand-ins of `names` that the table holds; what a run report lists for each name."""
    served = []
    for name in names:
        if name not in SERVED:
            served.append({"name": name, "source": f"not served: the Hub's evaluate-metric/{name}"})
            continue
        if name == "glue":
            script, source = (
                GLUE_SCRIPT.format(tasks=GLUE_TASKS),
                "stand-in: GLUE's per-task scores (scikit-learn, SciPy)",
            )
        else:
            function, defaults = METRICS[name]
            script = SCRIPT.format(name=name, function=function, defaults=defaults)
            source = f"stand-in: scikit-learn's {function}"
        digest = hashlib.sha256(script.encode()).hexdigest()
        # evaluate 0.4 caches a canonical metric under evaluate-metric--NAME, 0.3 under NAME
        for cached_as in (f"evaluate-metric--{name}", name):
            folder = modules_cache / "evaluate_modules" / "metrics" / cached_as / digest
            folder.mkdir(parents=True, exist_ok=True)
            # written whole then renamed: processes that load the metric at once (torchrun's workers) each write it
            written = folder / f"{name}.py.{os.getpid()}"
            written.write_text(script, encoding="utf-8")
            os.replace(written, folder / f"{name}.py")
        served.append({"name": name, "source": source})
    return served


def hub_miss_reason(message: str) -> str | None:
    """The not-run reason for evaluate's error on a metric the try does not serve, or None for another error."""
    if HUB_MISS not in message:
        return None
    name = message.split("Module '", 1)[-1].split("'", 1)[0]
    return (
        f"not run: evaluate.load({name!r}) needs the Hub (the metric's script is the Space evaluate-metric/{name}) "
        f"and a try has no network; it serves {', '.join(SERVED)}"
    )
