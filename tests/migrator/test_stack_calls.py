"""The target stack's removals that NM221 and the training-arguments table act on really fail in the pinned
packages (constraints.txt), their rewrites run there, and the engine's pre-filter reads them in files with no
optimum-neuron or XLA code."""

from __future__ import annotations

import dataclasses

import pytest
from tokenizers import Tokenizer, models, pre_tokenizers
from transformers import BertConfig, BertForSequenceClassification, PreTrainedTokenizerFast, TrainingArguments
from trl import SFTConfig

from migrator.engine import migrate_python
from migrator.families.training.nm221_stack_calls import REMOVED
from migrator.families.training.stack_markers import stack_marked
from migrator.families.training_args import (
    PLAIN_FIELDS,
    REMOVED_UPSTREAM,
    SFT_CONFIG_ARGUMENTS,
    TRAINING_ARGUMENTS,
)


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    folder = tmp_path_factory.mktemp("bert")
    config = BertConfig(
        vocab_size=16, hidden_size=8, num_hidden_layers=1, num_attention_heads=2, intermediate_size=16
    )
    BertForSequenceClassification(config).save_pretrained(folder)
    return folder


@pytest.fixture(scope="module")
def tokenizer():
    vocab = {"[UNK]": 0, "[PAD]": 1, "a": 2, "b": 3, "c": 4}
    backend = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    backend.pre_tokenizer = pre_tokenizers.Whitespace()
    return PreTrainedTokenizerFast(tokenizer_object=backend, pad_token="[PAD]", unk_token="[UNK]")


@pytest.mark.parametrize("keyword", ["torchscript", "use_auth_token"])
@pytest.mark.parametrize("value", [True, False])
def test_a_model_load_rejects_the_removed_keywords(checkpoint, keyword, value) -> None:
    assert keyword in REMOVED
    with pytest.raises(TypeError, match=keyword):
        BertForSequenceClassification.from_pretrained(checkpoint, **{keyword: value})


def test_the_token_keyword_replaces_use_auth_token(checkpoint) -> None:
    BertForSequenceClassification.from_pretrained(checkpoint, token=False)


@pytest.mark.parametrize("method", ["encode_plus", "batch_encode_plus"])
def test_tokenizers_have_no_encode_plus_and_their_call_takes_what_it_took(tokenizer, method) -> None:
    assert method in REMOVED
    assert not hasattr(tokenizer, method)
    # encode_plus(text, text_pair, ...) and batch_encode_plus(pairs, ...), as the rewrite calls them.
    pair = tokenizer("a b", "c", max_length=8, truncation=True)
    assert pair["input_ids"] == [2, 3, 4]
    batch = tokenizer([("a b", "c"), ("a", "b")], padding=True)
    assert batch["input_ids"] == [[2, 3, 4], [2, 3, 1]]


def test_every_training_argument_the_table_changes_is_not_a_field_of_the_pinned_classes() -> None:
    """A field the table drops, renames or moves would still be accepted were it kept: each one is gone, but the
    fields it changes only on optimum-neuron's classes."""
    training = {field.name for field in dataclasses.fields(TrainingArguments)}
    sft = {field.name for field in dataclasses.fields(SFTConfig)}
    assert sorted(set(TRAINING_ARGUMENTS) & training) == []
    assert set(SFT_CONFIG_ARGUMENTS) & sft == PLAIN_FIELDS


@pytest.mark.parametrize("name", sorted(REMOVED_UPSTREAM))
def test_the_fields_transformers_and_trl_removed_are_rejected(name: str) -> None:
    """What marks a plain script (`REMOVED_UPSTREAM`) is in the table and fails in the pinned stack."""
    assert name in SFT_CONFIG_ARGUMENTS
    with pytest.raises(TypeError, match=name):
        SFTConfig(output_dir="out", **{name: None})


PLAIN_SCRIPT = """\
from huggingface_hub import HfFolder
from transformers import AutoTokenizer

tokenizer = AutoTokenizer.from_pretrained("bert-base-uncased", token=HfFolder.get_token())
"""


@pytest.mark.parametrize(
    ("code", "marked"),
    [
        (PLAIN_SCRIPT, True),
        ('args = TrainingArguments(output_dir="out", overwrite_output_dir=True)', True),
        ('args = TrainingArguments(output_dir="out", num_train_epochs=1)', False),
        ("from transformers import (\n    Trainer,\n    AdamW,\n)", True),
        ("from torch.optim import AdamW\nfrom transformers import Trainer", False),
        ("import transformers\noptimizer = transformers.AdamW(params)", True),
        ("from transformers import TFAutoModel", True),
        ("inputs = tokenizer.batch_encode_plus(texts)", True),
        ('model = AutoModel.from_pretrained("gpt2", use_auth_token=True)', True),
        ("if torchscript == flag:\n    pass", False),
        ("trainer = Trainer(model=model, args=TrainingArguments(output_dir=out()), tokenizer=tok)", True),
        ("trainer = Trainer(model=model, processing_class=tok)\npipe = pipeline(tokenizer=tok)", False),
    ],
)
def test_the_pre_filter_reads_the_removals(code: str, marked: bool) -> None:
    assert stack_marked(code) is marked


def test_a_plain_transformers_script_is_migrated() -> None:
    migrated, findings = migrate_python(PLAIN_SCRIPT)
    assert "get_token()" in migrated and "HfFolder" not in migrated
    assert [finding.code for finding in findings if finding.code == "NM219"] == ["NM219"]
