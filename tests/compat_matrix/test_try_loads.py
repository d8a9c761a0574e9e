"""What `try` serves for what a script loads: ids composed from constants, unknown and remote-code ids,
tokenizers, processors, sentence-transformers models and Diffusers pipelines."""

from __future__ import annotations

import ast

import pytest

from try_run import composed_strings, hub, scan

COMPOSED = '''
SIZE = "tiny"
ORG = "openai"
BASE = ORG + "/whisper-"
a = "openai/whisper-" + SIZE
b = f"{ORG}/whisper-{SIZE}"
c = "{}/whisper-{}".format(ORG, SIZE)
d = "openai/whisper-%s" % SIZE
e = BASE + SIZE
twice = "a"
twice = "b"
f = "openai/whisper-" + twice
def main(size):
    g = f"openai/whisper-{size}"
'''


def test_strings_composed_from_constants_fold_and_the_rest_are_named():
    tree = ast.parse(COMPOSED)
    unresolved = composed_strings.fold(tree)
    values = {
        node.targets[0].id: node.value.value
        for node in ast.walk(tree)
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant)
    }
    assert {values[name] for name in "abcde"} == {"openai/whisper-tiny"}
    # A name bound twice, or a function argument, is known only at run time; its fragment is no id.
    assert values["f"] is None and values["g"] is None
    assert [(found.code, found.pattern, found.line) for found in unresolved] == [
        ("'openai/whisper-' + twice", "openai/whisper-*", 12),
        ("f'openai/whisper-{size}'", "openai/whisper-*", 14),
    ]


def test_code_facts_ids_composed_loaded_unknown_and_remote_code():
    facts = scan.read_python(
        'from transformers import AutoModel, WhisperForConditionalGeneration\n'
        'SIZE = "small"\n'
        'w = WhisperForConditionalGeneration.from_pretrained(f"openai/whisper-{SIZE}")\n'
        'm = AutoModel.from_pretrained("someone/private-model", trust_remote_code=True)\n'
        'def load(size):\n'
        '    return WhisperForConditionalGeneration.from_pretrained("openai/whisper-" + size)\n'
    )
    assert facts.model_ids == {"openai/whisper-small", "someone/private-model"}
    assert "openai/whisper-" not in facts.model_ids and facts.remote_code
    assert list(facts.unresolved_ids) == ["openai/whisper-*"]
    assert "line 6" in facts.unresolved_ids["openai/whisper-*"]
    assert "--model ID=MODEL_TYPE" in facts.unresolved_ids["openai/whisper-*"]


def test_remote_code_ids_say_why_they_are_not_run_and_what_to_pass():
    with pytest.raises(hub.CannotStandIn, match="trust_remote_code=True.*--model ID=MODEL_TYPE"):
        hub.architecture("nomic-ai/nomic-embed-text-v1.5", {}, remote_code=True)
    with pytest.raises(hub.CannotStandIn, match="--model someone/x=MODEL_TYPE.*remote code"):
        hub.architecture("someone/x", {}, remote_code=True)
