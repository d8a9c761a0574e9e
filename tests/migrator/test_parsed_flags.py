"""NM226 at run time: the migrated parse of optimum-neuron's arguments still takes every flag of theirs that does
nothing on TorchNeuron (as HfArgumentParser read it: a boolean with or without a value, `--no_` for a True
default, a value), leaves the training arguments as they were, and still rejects a flag that changes training."""

from __future__ import annotations

import pytest

from migrator.engine import REWRITERS
from migrator.families.training_args import BOOLEAN_FLAGS, PLAIN_FIELDS, SFT_CONFIG_ARGUMENTS

SCRIPT = """\
from dataclasses import dataclass

from optimum.neuron import NeuronHfArgumentParser, {arguments}


@dataclass
class ScriptArguments:
    model_id: str = "gpt2"


def main(argv):
    parser = NeuronHfArgumentParser((ScriptArguments, {arguments}))
    script_args, training_args = parser.parse_args_into_dataclasses(args=argv)
    return script_args, training_args
"""
# The dropped fields the Transformers 5 / TRL 1.16 classes lack (TRL's SFTConfig parses padding_free itself).
DROPPED = [n for n, action in SFT_CONFIG_ARGUMENTS.items() if action.kind == "drop" and n not in PLAIN_FIELDS]


def _migrated_main(arguments: str):
    migrated, findings = REWRITERS["python"](SCRIPT.format(arguments=arguments))
    ignored = next(f for f in findings if f.code == "NM226" and f.fixed)
    namespace: dict = {}
    exec(compile(migrated, "migrated.py", "exec"), namespace)  # noqa: S102 (the migrator's own output)
    return namespace["main"], ignored.message


def _flags(name: str) -> list[str]:
    if name not in BOOLEAN_FLAGS:
        return [f"--{name}", "2"]
    return [f"--no_{name}"] if BOOLEAN_FLAGS[name] else [f"--{name}", "True"]


@pytest.mark.parametrize("arguments", ["NeuronTrainingArguments", "NeuronSFTConfig"])
def test_flags_with_no_effect_still_parse(arguments, tmp_path) -> None:
    main, message = _migrated_main(arguments)
    # TRL's SFTConfig trains in bf16 by default, which a CPU refuses.
    base = ["--output_dir", str(tmp_path), "--learning_rate", "0.001", "--bf16", "False"]
    expected = main(base)[1]
    given = [flag for name in DROPPED for flag in _flags(name)]
    script_args, training_args = main([*base, *given, "--overwrite_output_dir"])[:2]
    assert script_args.model_id == "gpt2"
    assert training_args.to_dict() == expected.to_dict()
    assert all(f"`--{name}`" in message for name in DROPPED)  # the finding names every flag it accepts


def test_a_flag_that_changes_training_is_still_rejected(tmp_path) -> None:
    main, _ = _migrated_main("NeuronTrainingArguments")
    with pytest.raises(ValueError, match="warmup_ratio"):
        main(["--output_dir", str(tmp_path), "--warmup_ratio", "0.1"])


INDEXED = """\
from optimum.neuron import NeuronHfArgumentParser, NeuronTrainingArguments


def main(argv):
    parser = NeuronHfArgumentParser(NeuronTrainingArguments)
    return parser.parse_args_into_dataclasses(args=argv)[0]
"""
PASSED_ON = """\
from optimum.neuron import NeuronHfArgumentParser, NeuronTrainingArguments


def parse():
    parser = NeuronHfArgumentParser(NeuronTrainingArguments)
    return parser.parse_args_into_dataclasses()
"""


def test_a_parse_indexed_from_the_start_takes_the_flags_too(tmp_path) -> None:
    migrated, _ = REWRITERS["python"](INDEXED)
    namespace: dict = {}
    exec(compile(migrated, "migrated.py", "exec"), namespace)  # noqa: S102 (the migrator's own output)
    args = namespace["main"](["--output_dir", str(tmp_path), "--skip_cache_push", "True", "--no_use_xser"])
    assert type(args).__name__ == "TrainingArguments"


def test_a_parse_passed_on_gets_no_dataclass_and_its_todo_names_the_ignored_flags() -> None:
    migrated, findings = REWRITERS["python"](PASSED_ON)
    assert "IgnoredNeuronFlags" not in migrated
    (todo,) = [f for f in findings if f.code == "NM226"]
    assert not todo.fixed and "`--skip_cache_push`" in todo.message and "`--warmup_ratio`" in todo.message


KEEPING = """\
from optimum.neuron import NeuronHfArgumentParser, NeuronTrainingArguments


def main(argv):
    parser = NeuronHfArgumentParser(NeuronTrainingArguments)
    args, unknown = parser.parse_args_into_dataclasses(args=argv, return_remaining_strings=True)
    return args, unknown
"""


def test_a_parse_that_hands_back_unknown_flags_is_not_said_to_stop(tmp_path) -> None:
    """With `return_remaining_strings=True` the migrated parse hands `--warmup_ratio` back unread (measured
    here): the TODO says the job runs without it, not that it stops; the flags that do nothing are not named."""
    migrated, findings = REWRITERS["python"](KEEPING)
    (todo,) = [f for f in findings if f.code == "NM226"]
    assert "gets it back unread" in todo.message and "stops" not in todo.message
    assert "`--skip_cache_push`" not in todo.message
    namespace: dict = {}
    exec(compile(migrated, "migrated.py", "exec"), namespace)  # noqa: S102 (the migrator's own output)
    args, unknown = namespace["main"](["--output_dir", str(tmp_path), "--warmup_ratio", "0.1"])
    assert unknown == ["--warmup_ratio", "0.1"] and args.warmup_steps == 0
