"""What the leftover scan looks for: a `Pattern` names one kind of legacy reference, the rule it reports,
and what the TODO on its line says. The tables live in the rule modules (NM501, NM502)."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from migrator.rules import Rule


@dataclass(frozen=True)
class Pattern:
    rule: Rule
    regex: re.Pattern[str]
    # Text of which every match holds one: `re` cannot skip ahead to a pattern that starts with `\b`, so
    # a file without any of these is not searched at all (most files are not).
    needles: tuple[str, ...]
    why: str  # the TODO's reason; `{0}` is the text found
    action: str  # what to do instead
    # Python: match only inside string literals (an environment variable or a device is a string there;
    # a Python variable named `XLA_AVAILABLE` is not a leftover).
    strings_only: bool = False
    # The "distinct thing" a finding is about: the text found (`ml.inf2.xlarge`), or a fixed name for
    # patterns whose spellings are one thing (`torch_xla.core.xla_model` and `torch_xla` are both torch_xla).
    subject: str | None = None
    # Whether a text found belongs to something else in this file (`found`, the file's text): not reported.
    foreign: Callable[[str, str], bool] | None = None
    # A setting code written for TorchNeuron may set on purpose (NEURON_CC_FLAGS): not a leftover there.
    torchneuron_setting: bool = False
    # One decision for the whole file (NxD Inference model code has no port): one TODO, not one per function.
    whole_file: bool = False

    def finditer(self, text: str) -> Iterator[re.Match[str]]:
        if any(needle in text for needle in self.needles):
            yield from self.regex.finditer(text)

    def subject_of(self, found: str) -> str:
        return self.subject or found
