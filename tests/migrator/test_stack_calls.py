"""The target stack's removals that NM221 and the training-arguments table act on really fail in the pinned
packages (constraints.txt), their rewrites run there, and the engine's pre-filter reads them in files with no
optimum-neuron or XLA code."""

from __future__ import annotations

import dataclasses
import inspect

import pytest
from tokenizers import Tokenizer, models, pre_tokenizers
from transformers import (
    BertConfig,
    BertForSequenceClassification,
    BitsAndBytesConfig,
    PreTrainedTokenizerFast,
    TrainingArguments,
)
from trl import SFTConfig

from migrator.engine import migrate_python
from migrator.families.torchscript_loads import RETURN_DICT_FALSE_WORKS
from migrator.families.training.nm221_stack_calls import BITSANDBYTES_KEYWORDS, REMOVED
from migrator.families.training.nm224_removed_fields import READ_RENAMES
from migrator.families.training.stack_markers import stack_marked
from migrator.families.training_args import (
    PLAIN_FIELDS,
    REMOVED_OPTIMIZERS,
    REMOVED_UPSTREAM,
    SFT_CONFIG_ARGUMENTS,
    SFT_TRAINER_KEYWORDS,
    SFT_TRAINER_PACKING_KEYWORDS,
    TRAINING_ARGUMENTS,
    TRAINING_ARGUMENTS_DEFAULTS_SFT_CHANGES,
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


@pytest.mark.parametrize(
    "keyword", ["torchscript", "use_auth_token", "load_in_8bit", "load_in_4bit", "resume_download"]
)
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
        ("from transformers.utils import check_min_version, send_example_telemetry", True),
        ('model = AutoModel.from_pretrained("gpt2", load_in_8bit=True)', True),
        ("with tokenizer.as_target_tokenizer():\n    labels = tokenizer(targets)", True),
        (
            "training_args = TrainingArguments(output_dir=o)\nif training_args.overwrite_output_dir:\n    pass",
            True,
        ),
        ("_, args = parser.parse_args_into_dataclasses()\nprint(args.logging_dir, TrainingArguments)", True),
        (
            "from transformers import TrainingArguments\nif training_args.overwrite_output_dir:\n    pass",
            False,
        ),
        ("args = TrainingArguments(output_dir=o)\nprint(self.args.logging_dir)", False),
        ("from transformers import TrainingArguments\nprint(training_args.output_dir)", False),
        ("if args.overwrite_output_dir:\n    pass", False),
        ("trainer = Trainer(model=model, args=TrainingArguments(output_dir=out()), tokenizer=tok)", True),
        ("trainer = Trainer(model=model, processing_class=tok)\npipe = pipeline(tokenizer=tok)", False),
        ('args = TrainingArguments(output_dir="out", optim="adamw_hf")', True),
        ("from datasets.filesystems import S3FileSystem\ns3 = S3FileSystem()", True),
        (
            "from transformers.models.llama.modeling_llama import (\n    LlamaMLP,\n    LLAMA_START_DOCSTRING,\n)",
            True,
        ),
        ("args = TrainingArguments(output_dir='out', optim = 'adamw_apex_fused')", True),
        ('args = TrainingArguments(output_dir="out", optim="adamw_torch")', False),
        ('api.upload_folder(folder_path="out", repo_id="me/model", multi_commits=True)', True),
        ("api.upload_folder(folder_path=out, repo_id=repo)\nif multi_commits == 2:\n    pass", False),
    ],
)
def test_the_pre_filter_reads_the_removals(code: str, marked: bool) -> None:
    assert stack_marked(code) is marked


@pytest.mark.parametrize("module", ["huggingface_hub", "huggingface_hub.hf_api"])
def test_a_plain_transformers_script_is_migrated(module: str) -> None:
    migrated, findings = migrate_python(PLAIN_SCRIPT.replace("huggingface_hub", module, 1))
    assert "get_token()" in migrated and "HfFolder" not in migrated
    assert [finding.code for finding in findings if finding.code == "NM219"] == ["NM219"]


def test_resume_download_is_dropped_from_a_load_and_the_load_runs(checkpoint) -> None:
    code = "from transformers import BertForSequenceClassification\nm = BertForSequenceClassification.from_pretrained(path, resume_download=True)\n"
    migrated, _ = migrate_python(code)
    assert "from_pretrained(path)" in migrated
    assert isinstance(_run(migrated, path=str(checkpoint))["m"], BertForSequenceClassification)


def test_a_multi_commit_upload_becomes_one_upload_huggingface_hub_takes(monkeypatch) -> None:
    """huggingface_hub 0.27 removed `upload_folder(multi_commits=...)`: the call then raises TypeError; without
    the keywords the same folder uploads to the same repository (recorded here, not sent)."""
    import huggingface_hub

    assert "multi_commits" in REMOVED
    with pytest.raises(TypeError, match="multi_commits"):
        huggingface_hub.HfApi().upload_folder(folder_path=".", repo_id="me/model", multi_commits=True)
    sent = []
    monkeypatch.setattr(huggingface_hub.HfApi, "upload_folder", lambda self, **kwargs: sent.append(kwargs))
    code = (
        "from huggingface_hub import HfApi\n\napi = HfApi()\n"
        'api.upload_folder(\n    folder_path="out",\n    repo_id="me/model",\n    multi_commits=True,\n'
        "    multi_commits_verbose=True,\n)\n"
    )
    migrated, findings = migrate_python(code)
    assert "multi_commits" not in migrated and [f.code for f in findings] == ["NM221"]
    _run(migrated)
    assert sent == [{"folder_path": "out", "repo_id": "me/model"}]


def test_the_quantization_keywords_are_those_of_bitsandbytes_config() -> None:
    assert set(inspect.signature(BitsAndBytesConfig).parameters) - {"kwargs"} == BITSANDBYTES_KEYWORDS


def _run(code: str, **names) -> dict:
    """Execute migrated code with `names` bound; its globals afterwards."""
    scope = dict(names)
    exec(compile(code, "<migrated>", "exec"), scope)
    return scope


def test_a_quantized_load_becomes_a_bitsandbytes_config_the_pinned_stack_takes(checkpoint) -> None:
    code = (
        "from transformers import BertForSequenceClassification\n"
        "model = BertForSequenceClassification.from_pretrained(path, load_in_8bit=True, llm_int8_threshold=5.0)\n"
        "plain = BertForSequenceClassification.from_pretrained(path, load_in_4bit=flag)\n"
    )
    migrated, findings = migrate_python(code)
    assert "quantization_config=BitsAndBytesConfig(load_in_8bit=True, llm_int8_threshold=5.0)" in migrated
    assert "quantization_config=BitsAndBytesConfig(load_in_4bit=flag) if flag else None" in migrated
    assert all(finding.fixed for finding in findings if finding.code == "NM221")
    # The keywords are taken: the load gets as far as bitsandbytes itself, which this CPU stack does not install.
    with pytest.raises(ImportError, match="bitsandbytes"):
        _run(migrated, path=str(checkpoint), flag=False)
    scope = _run(migrated.replace("model = ", "# "), path=str(checkpoint), flag=False)
    assert isinstance(scope["plain"], BertForSequenceClassification)


def test_a_quantized_load_beside_quantization_config_keeps_a_todo() -> None:
    code = "from transformers import AutoModel\nm = AutoModel.from_pretrained(p, load_in_8bit=True, **kw)\n"
    migrated, findings = migrate_python(code)
    assert (
        "# TODO(neuron-migrate): NM221 `load_in_8bit=`" in migrated and "load_in_8bit=True, **kw" in migrated
    )


TARGET_BLOCK = """\
def labels_of(tokenizer, targets):
    with tokenizer.as_target_tokenizer():
        labels = tokenizer(targets, max_length=8, truncation=True)
    return labels["input_ids"]
"""


def test_a_target_tokenizer_block_becomes_text_target_and_runs(tokenizer) -> None:
    assert not hasattr(tokenizer, "as_target_tokenizer")
    migrated, findings = migrate_python(TARGET_BLOCK)
    assert "as_target_tokenizer" not in migrated
    assert "labels = tokenizer(text_target=targets, max_length=8, truncation=True)" in migrated
    assert _run(migrated)["labels_of"](tokenizer, ["a b", "c"]) == [[2, 3], [4]]


def test_a_target_block_that_reads_the_tokenizer_otherwise_keeps_a_todo() -> None:
    code = TARGET_BLOCK.replace("    return", "        pad = tokenizer.pad_token_id\n    return")
    migrated, findings = migrate_python(code)
    assert "# TODO(neuron-migrate): NM221 `as_target_tokenizer()`" in migrated
    assert "with tokenizer.as_target_tokenizer():" in migrated


FIELDS_SCRIPT = """\
from transformers import HfArgumentParser, TrainingArguments

parser = HfArgumentParser((TrainingArguments,))
(training_args,) = parser.parse_dict(
    {"output_dir": "out", "eval_strategy": "steps", "use_cpu": True, "per_device_train_batch_size": 4}
)
seen = (training_args.evaluation_strategy, training_args.no_cuda, training_args.per_gpu_train_batch_size)
if training_args.overwrite_output_dir:
    print("starting over")


def other(args):
    return args.no_cuda
"""


def test_renamed_fields_read_on_training_arguments_are_renamed_and_run() -> None:
    assert {"evaluation_strategy", "no_cuda", "per_gpu_train_batch_size"} <= set(READ_RENAMES)
    migrated, findings = migrate_python(
        FIELDS_SCRIPT.replace("if training_args.overwrite", "if False and t.over")
    )
    assert (
        "training_args.eval_strategy, training_args.use_cpu, training_args.per_device_train_batch_size"
        in migrated
    )
    assert "return args.no_cuda" in migrated  # not a name that holds training arguments
    assert _run(migrated)["seen"] == ("steps", True, 4)


def test_a_removed_field_with_no_renamed_twin_keeps_a_todo_on_its_statement() -> None:
    migrated, findings = migrate_python(FIELDS_SCRIPT)
    todo = "# TODO(neuron-migrate): NM224 `training_args.overwrite_output_dir` reads a field"
    assert f"{todo}" in migrated and migrated.index(todo) < migrated.index("if training_args.overwrite")
    assert [f.fixed for f in findings if f.code == "NM224" and f.subject == "overwrite_output_dir"] == [False]
    with pytest.raises(AttributeError, match="overwrite_output_dir"):
        _run(migrated)


def test_pad_to_max_length_pads_and_truncates_as_transformers_4_read_it(tokenizer) -> None:
    assert "pad_to_max_length" in REMOVED
    # Transformers 5 takes the keyword and pads nothing: the reason for the rewrite.
    assert tokenizer("a b", max_length=4, pad_to_max_length=True)["input_ids"] == [2, 3]
    code = (
        "from transformers import AutoTokenizer\n"
        'fixed = tokenizer.encode_plus("a b c a b", max_length=4, pad_to_max_length=True)\n'
        'longest = tokenizer(["a", "a b c"], pad_to_max_length=True)\n'
        'switched = tokenizer("a", max_length=3, pad_to_max_length=flag)\n'
        'kept = tokenizer("a", padding="longest", pad_to_max_length=True)\n'
    )
    assert stack_marked(code.replace(".encode_plus", ""))  # the keyword alone brings a file to NM221
    migrated, findings = migrate_python(code)
    assert "pad_to_max_length" not in migrated and all(f.fixed for f in findings if f.code == "NM221")
    scope = _run(migrated, tokenizer=tokenizer, flag=True)
    assert scope["fixed"]["input_ids"] == [2, 3, 4, 2]  # padded to max_length and truncated to it, as in 4.x
    assert scope["longest"]["input_ids"] == [[2, 1, 1], [2, 3, 4]]  # no max_length: the longest
    assert scope["switched"]["input_ids"] == [2, 1, 1] and scope["kept"]["input_ids"] == [2]
    assert _run(migrated, tokenizer=tokenizer, flag=False)["switched"]["input_ids"] == [2]


def test_a_pad_to_max_length_the_file_declares_is_its_own() -> None:
    code = (
        "from dataclasses import dataclass\n\n@dataclass\nclass DataArguments:\n    pad_to_max_length: bool = True\n\n"
        "args = DataArguments(pad_to_max_length=False)\n"
    )
    assert migrate_python(code)[0] == code


def test_torchscript_in_a_file_that_trains_nothing_becomes_tuples_the_pinned_stack_returns(
    checkpoint,
) -> None:
    import torch

    code = (
        "from transformers import BertForSequenceClassification\n"
        "model = BertForSequenceClassification.from_pretrained(path, torchscript=True)\n"
        "logits = model(ids)[0]\n"
    )
    migrated, findings = migrate_python(code)
    assert "return_dict=False" in migrated and all(f.fixed for f in findings if f.code == "NM221")
    assert _run(migrated, path=str(checkpoint), ids=torch.tensor([[1, 2, 3]]))["logits"].shape == (1, 2)
    trains = migrate_python(code + "logits.sum().backward()\n")[0]
    assert "torchscript=True" in trains and "this file trains" in trains


OWN_DATACLASS_SCRIPT = """\
import sys
from dataclasses import dataclass

from transformers import HfArgumentParser, TrainingArguments


@dataclass
class ScriptArguments:
    model: str = "bert-base-uncased"


def main(argv):
    parser = HfArgumentParser((ScriptArguments, TrainingArguments))
    script_args, training_args = parser.parse_args_into_dataclasses(argv)
    return training_args.overwrite_output_dir
"""


@pytest.mark.parametrize(("argv", "expected"), [(["--overwrite_output_dir"], True), ([], False)])
def test_overwrite_output_dir_moves_to_the_scripts_dataclass_and_its_flag_parses(argv, expected) -> None:
    migrated, findings = migrate_python(OWN_DATACLASS_SCRIPT)
    assert "return script_args.overwrite_output_dir" in migrated and "TODO" not in migrated
    assert (
        "    overwrite_output_dir: bool = False\n" in migrated
    )  # the class writes no field(): neither does it
    assert _run(migrated)["main"](["--output_dir", "out", *argv]) is expected


@pytest.mark.parametrize(
    "change",
    [
        (
            "    return training_args",
            "    training_args.overwrite_output_dir = True\n    return training_args",
        ),
        ("@dataclass\n", ""),  # not a dataclass: the parse has none of the script's own
        (  # read in another function, which does not see the dataclass's variable
            "    script_args, training_args = parser.parse_args_into_dataclasses(argv)\n    return training_args.",
            "    (script_args, training_args) = parser.parse_args_into_dataclasses(argv)\n    return other(training_args)"
            "\n\n\ndef other(training_args):\n    return training_args.",
        ),
        (
            "    script_args, training_args = parser",
            "    training_args = TrainingArguments('out')\n    _, _ = parser",
        ),
    ],
)
def test_overwrite_output_dir_keeps_its_todo_where_the_move_is_not_proven(change) -> None:
    migrated, findings = migrate_python(OWN_DATACLASS_SCRIPT.replace(*change))
    assert "TODO(neuron-migrate): NM224 `training_args.overwrite_output_dir`" in migrated


@pytest.mark.parametrize("model_type", sorted(RETURN_DICT_FALSE_WORKS))
def test_return_dict_false_at_the_load_keeps_tuples_for_the_model_types_the_rewrite_trusts(
    model_type,
) -> None:
    import torch
    import transformers

    small = {"hidden_size": 32, "num_hidden_layers": 1, "num_attention_heads": 2, "intermediate_size": 64}
    if model_type == "distilbert":
        small = {"dim": 32, "n_layers": 1, "n_heads": 2, "hidden_dim": 64}
    config = transformers.AutoConfig.for_model(model_type, **({} if model_type == "resnet" else small))
    config.return_dict = False
    prefix = RETURN_DICT_FALSE_WORKS[model_type]
    heads = ("ForImageClassification",) if model_type == "resnet" else ("ForSequenceClassification", "Model")
    for head in heads:
        model = getattr(transformers, prefix + head)(config).eval()
        inputs = torch.randn(1, 3, 64, 64) if model_type == "resnet" else torch.tensor([[1, 2, 3]])
        assert isinstance(model(inputs), tuple), (model_type, head)


# Tiny models of architectures whose forward `return_dict=False` in the config breaks (ViT, Llama) or not
# (GPT-2, DistilBERT) in the pinned Transformers: class, config, the example input's code.
TINY_MODELS = {
    "vit": (
        "ViTForImageClassification",
        {
            "hidden_size": 32,
            "num_hidden_layers": 1,
            "num_attention_heads": 2,
            "intermediate_size": 64,
            "image_size": 32,
            "patch_size": 8,
        },
        "torch.randn(1, 3, 32, 32)",
    ),
    "gpt2": (
        "GPT2Model",
        {"n_embd": 32, "n_layer": 1, "n_head": 2, "vocab_size": 50},
        "torch.tensor([[1, 2, 3]])",
    ),
    "llama": (
        "LlamaForCausalLM",
        {
            "hidden_size": 32,
            "num_hidden_layers": 1,
            "num_attention_heads": 2,
            "num_key_value_heads": 2,
            "intermediate_size": 64,
            "vocab_size": 50,
        },
        "torch.tensor([[1, 2, 3]])",
    ),
    "distilbert": (  # by an Auto class: a checkpoint named at run time, of a type not known here
        "AutoModelForSequenceClassification",
        {"dim": 32, "n_layers": 1, "n_heads": 2, "hidden_dim": 64, "vocab_size": 50},
        "torch.tensor([[1, 2, 3]])",
    ),
}


@pytest.fixture(scope="module")
def tiny_checkpoints(tmp_path_factory) -> dict[str, str]:
    import transformers

    folders = {}
    for model_type, (cls, settings, _) in TINY_MODELS.items():
        folder = tmp_path_factory.mktemp(model_type)
        config = transformers.AutoConfig.for_model(model_type, **settings)
        model_class = getattr(transformers, cls)
        model = model_class.from_config(config) if cls.startswith("Auto") else model_class(config)
        model.save_pretrained(folder)
        folders[model_type] = str(folder)
    return folders


@pytest.mark.parametrize("model_type", sorted(TINY_MODELS))
def test_torchscript_becomes_return_dict_false_at_each_call_of_the_model_for_any_architecture(
    tiny_checkpoints, model_type
) -> None:
    cls, _, example = TINY_MODELS[model_type]
    code = (
        f"import torch\nfrom transformers import {cls}\n\n"
        f"model = {cls}.from_pretrained(path, torchscript=True)\nmodel.eval()\n"
        f"outputs = model({example})\nfirst = model.forward({example})[0]\nlabels = model.config.id2label\n"
    )
    migrated, findings = migrate_python(code)
    assert "torchscript" not in migrated and "TODO" not in migrated
    assert f"model({example}, return_dict=False)" in migrated
    assert f"model.forward({example}, return_dict=False)" in migrated
    scope = _run(migrated, path=tiny_checkpoints[model_type])
    assert isinstance(scope["outputs"], tuple)
    assert scope["first"].shape == scope["outputs"][0].shape


WRAPPED_GPT2 = """\
import torch
from transformers import GPT2Model


class Wrapper(torch.nn.Module):
    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, ids, mask):
        return self.model(input_ids=ids, attention_mask=mask)


def wrap(model):
    return Wrapper(model)


gpt2 = GPT2Model.from_pretrained(path, torchscript=True)
wrapped = wrap(gpt2.eval())
ids = torch.tensor([[1, 2, 3]])
outputs = wrapped(ids, torch.ones_like(ids))
{extra}"""


def test_torchscript_follows_the_model_into_the_files_own_functions_and_wrapper_classes(
    tiny_checkpoints,
) -> None:
    migrated, findings = migrate_python(WRAPPED_GPT2.format(extra=""))
    assert "torchscript" not in migrated and "TODO" not in migrated
    assert "self.model(input_ids=ids, attention_mask=mask, return_dict=False)" in migrated
    outputs = _run(migrated, path=tiny_checkpoints["gpt2"])["outputs"]
    assert isinstance(outputs, tuple) and outputs[0].shape == (1, 3, 32)


@pytest.mark.parametrize(
    ("extra", "where"),
    [
        (
            "features = pipeline('feature-extraction', model=gpt2)\n",
            "features = pipeline('feature-extraction', model=gpt2)",
        ),
        ("models = [gpt2]\n", "models = [gpt2]"),
        (
            "other = wrap(torch.nn.Identity())\n",
            "wrapped = wrap(gpt2.eval())",
        ),  # the helper takes other models too
        (
            "print(wrapped.model(ids))\n",
            "print(wrapped.model(ids))",
        ),  # the wrapper's model called from outside
        # the name may hold another model where it is read
        ("if flag:\n    gpt2 = load_other()\nfeatures = gpt2(ids)\n", "features = gpt2(ids)"),
    ],
)
def test_torchscript_keeps_its_todo_where_the_model_goes_where_its_outputs_are_not_followed(
    extra, where
) -> None:
    migrated, findings = migrate_python(WRAPPED_GPT2.format(extra=extra))
    todo = next(f for f in findings if f.code == "NM221" and not f.fixed)
    assert "torchscript=True" in migrated and ", return_dict=False)" not in migrated
    assert f"the model goes on at `{where}`" in todo.message


def test_torchscript_keeps_a_todo_where_the_flag_is_computed_or_a_return_dict_it_overrode_is_given() -> None:
    for keywords, why in (
        ("torchscript=flag", "computes the flag"),
        ("torchscript=True, return_dict=True", "overrode"),
    ):
        migrated, findings = migrate_python(
            f"from transformers import ViTForImageClassification\nm = ViTForImageClassification.from_pretrained(p, {keywords})\n"
        )
        assert "torchscript=" in migrated and why in migrated


@pytest.mark.parametrize(("removed", "replacement"), sorted(REMOVED_OPTIMIZERS.items()))
def test_a_removed_optim_value_is_rewritten_and_the_arguments_build(removed, replacement) -> None:
    with pytest.raises(ValueError, match=removed):
        TrainingArguments(output_dir="out", optim=removed)
    code = f"from transformers import TrainingArguments\n\nargs = TrainingArguments(output_dir='out', optim='{removed}')\n"
    migrated, findings = migrate_python(code)
    assert f"optim='{replacement[0]}'" in migrated
    assert [finding.code for finding in findings] == ["NM227"]
    scope: dict = {}
    exec(compile(migrated, "<migrated>", "exec"), scope)
    assert scope["args"].optim == replacement[0]


BATCHED_FORMAT = """\
from trl import SFTTrainer


def fmt(batch):
    texts: list = []
    for i in range(len(batch["q"])):
        texts.append(f"Q: {batch['q'][i]} A: {batch['a'][i]}")
    return texts


def per_row(row):
    return f"Q: {row['q']}"


trainer = SFTTrainer(model="m", train_dataset=None, formatting_func=fmt)
other = SFTTrainer(model="m", train_dataset=None, formatting_func=per_row)
"""


def test_a_batched_formatting_func_gives_trl_1_each_rows_text_as_trl_0_11_made_it() -> None:
    assert stack_marked(BATCHED_FORMAT)  # a file with no optimum-neuron code is read
    migrated, findings = migrate_python(BATCHED_FORMAT)
    assert [f.code for f in findings] == ["NM228"]
    assert "formatting_func=per_row)" in migrated  # a per-row function is what TRL 1.x calls already
    call = migrated.split("formatting_func=")[1].rsplit(")\nother", 1)[0]
    namespace: dict = {}
    exec(BATCHED_FORMAT.split("\n\n\ntrainer")[0].replace("from trl import SFTTrainer", ""), namespace)
    per_row_call = eval(call, namespace)
    rows = [{"q": "1+1", "a": "2"}, {"q": "2+2", "a": "4"}]
    batch = {"q": [r["q"] for r in rows], "a": [r["a"] for r in rows]}
    assert [per_row_call(row) for row in rows] == namespace["fmt"](batch)
    assert migrate_python(migrated) == (migrated, [])


@pytest.mark.parametrize(
    "function",
    [
        "def fmt(batch):\n    return batch['text']\n",  # what it returns is not known to be a list
        "def fmt(batch, extra):\n    return []\n",  # not a one-argument function
        "def fmt(batch):\n    out = []\n    for out in batch:\n        pass\n    return out\n",  # rebound
    ],
)
def test_a_formatting_func_not_proven_batched_stays(function) -> None:
    source = (
        f"from trl import SFTTrainer\n\n{function}\ntrainer = SFTTrainer(model='m', formatting_func=fmt)\n"
    )
    assert migrate_python(source) == (source, [])


def test_trl_0_11_trainer_keywords_are_sft_config_fields_and_the_defaults_it_keeps_are_the_ones_that_differ() -> (
    None
):
    from trl import SFTTrainer

    fields = {f.name: f for f in dataclasses.fields(SFTConfig)}
    trainer = inspect.signature(SFTTrainer.__init__).parameters
    assert {k for k in SFT_TRAINER_KEYWORDS} & set(trainer) == set()  # TRL 1.16 rejects each on the trainer
    assert {v for v in SFT_TRAINER_KEYWORDS.values() if v} <= set(fields)
    assert not {*SFT_TRAINER_PACKING_KEYWORDS} & {*fields, *trainer}
    # TrainingArguments' values where SFTConfig's defaults differ, as TRL's conversion keeps them
    converted = SFTConfig(**TrainingArguments(output_dir="o", use_cpu=True).to_dict())
    plain = SFTConfig(output_dir="o", use_cpu=True)
    differing = {
        name
        for name in fields
        if name not in ("output_dir", "logging_dir", "hub_token")
        and getattr(converted, name) != getattr(plain, name)
    }
    assert differing <= {*TRAINING_ARGUMENTS_DEFAULTS_SFT_CHANGES, "activation_checkpointing"}
    kept = SFTConfig(
        output_dir="o", **{k: eval(v) for k, v in TRAINING_ARGUMENTS_DEFAULTS_SFT_CHANGES.items()}
    )
    assert all(getattr(kept, name) == getattr(converted, name) for name in differing)


def test_trl_0_11_trainer_keywords_move_into_the_config_the_trainer_gets() -> None:
    source = (
        "from transformers import TrainingArguments\nfrom trl import SFTTrainer\n\n"
        "args = TrainingArguments(output_dir='o', learning_rate=1e-4)\n"
        "SFTTrainer(model='m', args=args, dataset_text_field='text', max_seq_length=64, packing=True)\n"
        "SFTTrainer(model='m', dataset_text_field='text', dataset_batch_size=8)\n"
    )
    migrated, findings = migrate_python(source)
    assert (
        "args = SFTConfig(output_dir='o', learning_rate=1e-4, logging_steps=500, bf16=False, gradient_checkpointing=False, dataset_text_field='text', max_length=64, packing=True, packing_strategy=\"wrapped\")"
        in migrated
    )
    assert (
        "SFTTrainer(model='m', args=SFTConfig(output_dir=\"tmp_trainer\", dataset_text_field='text'))"
        in migrated
    )
    assert not [f for f in findings if not f.fixed] and "TrainingArguments" not in migrated
    assert migrate_python(migrated) == (migrated, [])


@pytest.mark.parametrize(
    "header",
    [
        "from my_project.training import SFTTrainer\n",  # the project's own trainer takes its own keywords
        "class SFTTrainer:\n    def __init__(self, **kwargs):\n        self.kwargs = kwargs\n",
    ],
)
def test_a_trainer_named_sft_trainer_that_is_not_trl_s_keeps_its_keywords(header: str) -> None:
    source = header + "\ntrainer = SFTTrainer(model='m', dataset_text_field='text', max_seq_length=64)\n"
    assert migrate_python(source) == (source, [])


def test_a_star_imported_sft_trainer_is_trl_s() -> None:
    source = "from trl import *\n\ntrainer = SFTTrainer(model='m', dataset_text_field='text')\n"
    migrated, findings = migrate_python(source)
    assert "args=SFTConfig(output_dir=\"tmp_trainer\", dataset_text_field='text')" in migrated
    assert [f.code for f in findings] == ["NM229"]


@pytest.mark.parametrize(
    "lines",
    [
        "args = TrainingArguments(output_dir='o')\nn = 64\nSFTTrainer(model='m', args=args, max_seq_length=n)\n",
        "SFTTrainer(model='m', args=make_args(), max_seq_length=64)\n",
        "args = TrainingArguments(output_dir='o')\nSFTTrainer(model='m', args=args, packing=True, chars_per_token=3.6)\n",
    ],
)
def test_trl_0_11_trainer_keywords_that_cannot_move_exactly_keep_a_todo(lines) -> None:
    source = "from transformers import TrainingArguments\nfrom trl import SFTTrainer\n\n" + lines
    migrated, findings = migrate_python(source)
    assert [f.code for f in findings if not f.fixed] == [
        "NM229"
    ] and "# TODO(neuron-migrate): NM229" in migrated


@pytest.mark.parametrize(
    ("code", "marked"),
    [
        ("from transformers import (\n    AutoModel,\n    AdamW,\n)\n", True),  # in a parenthesised list
        ("from transformers.optimization import get_scheduler, AdamW  # old\n", True),
        ("from transformers import TFAutoModel\n", True),  # a removed prefix
        ("from transformers import TFLiteThing as x, Tfoo\n", True),
        ("from transformers import Tfoo, AutoModel\n", False),  # the prefix, but not a TF class
        ("import transformers\nopt = transformers.AdamW(params)\n", True),  # a qualified read
        ("import transformers\nopt = transformers.AdamWeightDecayX\n", False),  # not that name
        ("import transformers\nfrom transformers.onnx import export\n", True),  # a removed module
        ("from transformers import AutoModel, AdamWScheduler\n", False),
    ],
)
def test_the_pre_filter_finds_removed_stack_names_by_whole_words(code, marked) -> None:
    assert stack_marked(code) is marked
