"""What marks a file for the target stack's removals, read before it is parsed (the engine's pre-filter).

Migrated code runs on Transformers 5, TRL 1.x and huggingface_hub 1.x, so a file with no optimum-neuron or XLA code
(a plain Transformers 4 training script) breaks on them too. Built from the rules' own tables: the removed
training-arguments fields (NM202, NM203, NM216: `training_args.py`), NM219's names (`stack_names.py`) and
NM221's calls. Substring tests first (memory speed), a regex only on the files that pass them: a file with none
stays many times cheaper than a parse (`benchmarks/migrator_speed.py`).
"""

from __future__ import annotations

import re

from migrator.families.training.nm221_stack_calls import REMOVED as REMOVED_CALLS
from migrator.families.training.stack_names import (
    REMOVED,
    REMOVED_MODULES,
    REMOVED_PREFIXES,
    RENAMED,
    STACK_MODULES,
)
from migrator.families.training.targets import ARGUMENTS_CLASSES, TRAINER_KEYWORDS
from migrator.families.training_args import REMOVED_UPSTREAM

# NM221: a keyword passed, a tokenizer method called; huggingface_hub's removed HfFolder (NM219) by its name.
CALL_HINTS = (*REMOVED_CALLS, "HfFolder")
_CALLS = re.compile(r"\.(?:batch_)?encode_plus\b|\b(?:use_auth_token|torchscript)\s*=(?!=)|\bHfFolder\b")

# A field Transformers 5 / TRL 1.x removed, passed by keyword in a file that builds training arguments (the class
# names cover optimum-neuron's: `NeuronTrainingArguments` holds `TrainingArguments`).
_CLASSES = {name.removeprefix("Neuron") for name in ARGUMENTS_CLASSES if "Trainium" not in name}
ARGUMENT_HINTS = tuple(sorted(name for name in _CLASSES if not any(o in name for o in _CLASSES - {name})))
_FIELDS = sorted(REMOVED_UPSTREAM, key=len, reverse=True)
_ARGUMENTS = re.compile(r"\b(?:" + "|".join(_FIELDS) + r")\s*=(?!=)")


# A trainer built with a keyword Transformers 5 renamed (`tokenizer=` -> `processing_class=`, NM202), inside the
# trainer's call (nested calls of two levels read through).
TRAINER_HINT = "Trainer("
_TRAINER_KEYWORDS = "|".join(TRAINER_KEYWORDS)
_TRAINER = re.compile(rf"Trainer\((?:[^()]|\((?:[^()]|\([^()]*\))*\))*?\b(?:{_TRAINER_KEYWORDS})\s*=(?!=)")


def _removed_name(qualified: str) -> str:
    """The name a script writes for a removed or renamed symbol: `HfFolder` for `huggingface_hub.HfFolder.get_token`."""
    owner, _, name = qualified.rpartition(".")
    owner_name = owner.rpartition(".")[2]
    return owner_name if owner_name[:1].isupper() else name


# NM219: a removed name imported from, or read through, one of the stack's modules; a removed module imported.
MODULE_HINTS = tuple(f"{verb} {module}" for module in STACK_MODULES for verb in ("from", "import"))
# Names in a removed module are found by the module (`GenerationMixin` itself is still in `transformers`).
_REMOVED_NAMES = {
    q for q in (*RENAMED, *REMOVED) if not q.startswith(tuple(f"{m}." for m in REMOVED_MODULES))
}
_NAMES_ALTERNATION = "|".join(sorted({_removed_name(q) for q in _REMOVED_NAMES}, key=len, reverse=True))
_QUALIFIED = "|".join(re.escape(q) for q in sorted(_REMOVED_NAMES, key=len, reverse=True))
_PREFIXES = "|".join(prefix.rpartition(".")[2] for prefix in REMOVED_PREFIXES)
_MODULES = "|".join(re.escape(module) for module in STACK_MODULES)
_NAMES = re.compile(
    rf"from (?:{_MODULES})\b[\w.]* import (?:\([^)]*|[^\n]*)\b(?:{_NAMES_ALTERNATION}|(?:{_PREFIXES})[A-Z]\w*)\b"
    rf"|\b(?:{_QUALIFIED})\b"
    rf"|(?:from|import) (?:{'|'.join(re.escape(module) for module in REMOVED_MODULES)})\b"
)


def stack_marked(content: str) -> bool:
    """Whether `content` (Python code) uses something the target stack removed that a rule rewrites or flags."""
    if any(hint in content for hint in CALL_HINTS) and _CALLS.search(content):
        return True
    if any(hint in content for hint in ARGUMENT_HINTS) and _ARGUMENTS.search(content):
        return True
    if TRAINER_HINT in content and _TRAINER.search(content):
        return True
    return any(hint in content for hint in MODULE_HINTS) and _NAMES.search(content) is not None
