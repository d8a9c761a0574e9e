"""What marks a file for the target stack's removals, read before it is parsed (the engine's pre-filter).

Migrated code runs on Transformers 5, TRL 1.x and huggingface_hub 1.x, so a file with no optimum-neuron or XLA code
(a plain Transformers 4 training script) breaks on them too. Built from the rules' own tables: the removed
training-arguments fields (NM202, NM203, NM216: `training_args.py`), NM219's names (`stack_names.py`), NM221's
calls, NM228's formatting functions and NM229's trainer keywords. Substring tests first (memory speed), a regex or
a word-by-word lookup only on the files that pass them: a file with none stays many times cheaper than a parse
(`benchmarks/migrator_speed.py`).
"""

from __future__ import annotations

import re

from migrator.families.training.arguments_names import PARSES
from migrator.families.training.nm221_stack_calls import REMOVED as REMOVED_CALLS
from migrator.families.training.stack_names import (
    DROPPED,
    REMOVED,
    REMOVED_MODULES,
    REMOVED_PREFIXES,
    RENAMED,
    STACK_MODULES,
)
from migrator.families.training.targets import ARGUMENTS_CLASSES, TRAINER_KEYWORDS
from migrator.families.training_args import (
    REMOVED_OPTIMIZERS,
    REMOVED_UPSTREAM,
    SFT_TRAINER_KEYWORDS,
    SFT_TRAINER_PACKING_KEYWORDS,
)

# NM221: a keyword passed, a tokenizer method called or entered; huggingface_hub's removed HfFolder (NM219) by its name.
# Each hint is one scan of every file: one for both quantization keywords, none for a name holding another one.
_CALL_NAMES = {*(name for name in REMOVED_CALLS if not name.startswith("load_in_")), "load_in_", "HfFolder"}
CALL_HINTS = tuple(sorted(name for name in _CALL_NAMES if not any(o in name for o in _CALL_NAMES - {name})))
_CALLS = re.compile(
    r"\.(?:(?:batch_)?encode_plus|as_target_tokenizer)\b|\b(?:use_auth_token|torchscript|resume_download|pad_to_max_length)\s*=(?!=)"
    r"|\bHfFolder\b|\bmulti_commits(?:_verbose)?\s*=(?!=)"
    # inside a model load's call (nested calls of two levels read through): BitsAndBytesConfig takes them too
    r"|from_pretrained\((?:[^()]|\((?:[^()]|\([^()]*\))*\))*?\bload_in_[48]bit\s*=(?!=)"
)

# A field Transformers 5 / TRL 1.x removed, passed by keyword, in a file that names training arguments (the class
# names cover optimum-neuron's: `NeuronTrainingArguments` holds `TrainingArguments`).
_CLASSES = {name.removeprefix("Neuron") for name in ARGUMENTS_CLASSES if "Trainium" not in name}
ARGUMENT_HINTS = tuple(sorted(name for name in _CLASSES if not any(o in name for o in _CLASSES - {name})))
_FIELDS = sorted(REMOVED_UPSTREAM, key=len, reverse=True)
_ARGUMENTS = re.compile(r"\b(?:" + "|".join(_FIELDS) + r")\s*=(?!=)")
# NM227: an `optim` value Transformers removed, given by keyword (the values themselves are the substring test).
_OPTIMIZERS = re.compile(
    r"""\boptim\s*=\s*[rRuUbB]?["'](?:""" + "|".join(map(re.escape, REMOVED_OPTIMIZERS)) + r""")["']"""
)
# NM224: one read or set on a plain name (`training_args.logging_dir`; `self.args.logging_dir` is not one: NM224
# reads names only), in a file that binds such a name (the class called, or a parser's dataclasses unpacked).
_FIELD_USES = re.compile(r"\.(?:" + "|".join(_FIELDS) + r")\b")
_RECEIVER = re.compile(r"[\w.]*\Z")
BINDING_HINTS = ("Arguments(", "Config(", ".parse_")  # substrings every binding `_BINDINGS` finds has
_BINDINGS = re.compile(rf"(?:{'|'.join(ARGUMENT_HINTS)})\(|\.(?:{'|'.join(sorted(PARSES))})\(")


# A trainer built with a keyword Transformers 5 renamed (`tokenizer=` -> `processing_class=`, NM202), inside the
# trainer's call (nested calls of two levels read through).
TRAINER_HINT = "Trainer("
_TRAINER_KEYWORDS = "|".join(TRAINER_KEYWORDS)
_TRAINER = re.compile(rf"Trainer\((?:[^()]|\((?:[^()]|\([^()]*\))*\))*?\b(?:{_TRAINER_KEYWORDS})\s*=(?!=)")


# NM228: an SFT trainer's formatting function, which TRL 1.x calls per row (whether it is batched is read there);
# NM229: TRL 0.11's trainer keywords, which TRL 1.x moved to SFTConfig.
SFT_TRAINER_HINT = "SFTTrainer("
_SFT_KEYWORDS = "|".join(sorted({*SFT_TRAINER_KEYWORDS, *SFT_TRAINER_PACKING_KEYWORDS}))
_SFT_TRAINER = re.compile(
    r"SFTTrainer\((?:[^()]|\((?:[^()]|\([^()]*\))*\))*?"
    rf"\b(?:formatting_func\s*=\s*\w+\s*[,)]|(?:{_SFT_KEYWORDS})\s*=(?!=))"
)


def _removed_name(qualified: str) -> str:
    """The name a script writes for a removed or renamed symbol: `HfFolder` for `huggingface_hub.HfFolder.get_token`."""
    owner, _, name = qualified.rpartition(".")
    owner_name = owner.rpartition(".")[2]
    return owner_name if owner_name[:1].isupper() else name


# NM219: a removed name imported from, or read through, one of the stack's modules; a removed module imported.
MODULE_HINTS = tuple(f"{verb} {module}" for module in STACK_MODULES for verb in ("from", "import"))
# Names in a removed module are found by the module (`GenerationMixin` itself is still in `transformers`).
_REMOVED_NAMES = {
    q for q in (*RENAMED, *REMOVED, *DROPPED) if not q.startswith(tuple(f"{m}." for m in REMOVED_MODULES))
}
_NAME_SET = frozenset(_removed_name(q) for q in _REMOVED_NAMES)
_PREFIX_NAMES = tuple(prefix.rpartition(".")[2] for prefix in REMOVED_PREFIXES)
_MODULES = "|".join(re.escape(module) for module in STACK_MODULES)
# The names an import of a stack module lists (a parenthesised list, or the rest of its line), and the dotted
# chains that start with a stack module: read word by word and looked up in sets, not matched against an
# alternation of every removed name (which Python's `re` tries at each position: most of the pre-filter's time
# on library files that import Transformers).
_STACK_IMPORT = re.compile(rf"from (?:{_MODULES})\b[\w.]* import (\([^)]*|[^\n]*)")
_STACK_CHAIN = re.compile(rf"\b(?:{_MODULES})(?:\.\w+)+")
_WORD = re.compile(r"\w+")
_REMOVED_MODULE_IMPORT = re.compile(
    rf"(?:from|import) (?:{'|'.join(re.escape(module) for module in REMOVED_MODULES)})\b"
)


def _removed_import_name(name: str) -> bool:
    return name in _NAME_SET or any(
        name.startswith(prefix) and "A" <= name[len(prefix) : len(prefix) + 1] <= "Z"
        for prefix in _PREFIX_NAMES
    )


def _stack_names_used(content: str) -> bool:
    """A removed name imported from a stack module, a removed qualified name read (`transformers.AdamW`), or a
    removed module imported."""
    for found in _STACK_IMPORT.finditer(content):
        if any(_removed_import_name(word) for word in _WORD.findall(found.group(1))):
            return True
    for found in _STACK_CHAIN.finditer(content):
        parts = found.group().split(".")
        chains = (
            ".".join(parts[start:end])
            for start in range(len(parts))
            for end in range(start + 2, len(parts) + 1)
        )
        if any(chain in _REMOVED_NAMES for chain in chains):
            return True
    return _REMOVED_MODULE_IMPORT.search(content) is not None


def _field_used_on_a_name(content: str) -> bool:
    if not any(hint in content for hint in BINDING_HINTS):
        return False
    for use in _FIELD_USES.finditer(content):
        receiver = _RECEIVER.search(content, max(0, use.start() - 80), use.start()).group()
        if receiver and "." not in receiver:
            return _BINDINGS.search(content) is not None
    return False


def stack_marked(content: str) -> bool:
    """Whether `content` (Python code) uses something the target stack removed that a rule rewrites or flags."""
    if any(hint in content for hint in CALL_HINTS) and _CALLS.search(content):
        return True
    if any(hint in content for hint in ARGUMENT_HINTS) and (
        _ARGUMENTS.search(content)
        or _field_used_on_a_name(content)
        or (any(value in content for value in REMOVED_OPTIMIZERS) and _OPTIMIZERS.search(content))
    ):
        return True
    if TRAINER_HINT in content and _TRAINER.search(content):
        return True
    if SFT_TRAINER_HINT in content and _SFT_TRAINER.search(content):
        return True
    return any(hint in content for hint in MODULE_HINTS) and _stack_names_used(content)
