"""NM106's helper, `_from_neuron_export`, as a migrated file runs it: it loads the checkpoint a compiled model's record
names, as it was compiled, from the records optimum-neuron writes (0.4.x's neuron_config.json, earlier releases'
`neuron` entry of config.json), and a folder without a record as it is."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest
import torch

from migrator.engine import migrate_python
from migrator.families.inference.loads import FROM_NEURON_EXPORT_SOURCE


class _Loaded:
    """A model class whose from_pretrained records what it was asked for."""

    calls: list = []

    @classmethod
    def from_pretrained(cls, model_id, **kwargs):
        cls.calls.append((model_id, kwargs))
        text_config = SimpleNamespace(max_position_embeddings=8192)
        model = SimpleNamespace(
            generation_config=SimpleNamespace(cache_implementation=None, max_cache_len=None),
            config=SimpleNamespace(get_text_config=lambda: text_config),
        )
        model.can_generate = lambda: True
        return model


@pytest.fixture
def from_neuron_export():
    namespace: dict = {}
    exec(FROM_NEURON_EXPORT_SOURCE, namespace)
    _Loaded.calls = []
    return namespace["_from_neuron_export"]


def _folder(tmp_path, name: str, record: dict) -> str:
    (tmp_path / name).write_text(json.dumps(record))
    return str(tmp_path)


def test_a_0_4_record_names_the_checkpoint_its_revision_dtype_and_cache_length(tmp_path, from_neuron_export):
    record = {
        "checkpoint_id": "meta-llama/Llama-3.2-1B",
        "checkpoint_revision": "4e20de3",
        "sequence_length": 256,
        "batch_size": 4,
        "tp_degree": 2,
        "torch_dtype": "bfloat16",
    }
    model = from_neuron_export(_Loaded, _folder(tmp_path, "neuron_config.json", record), device_map="neuron")
    assert _Loaded.calls == [
        ("meta-llama/Llama-3.2-1B", {"device_map": "neuron", "dtype": torch.bfloat16, "revision": "4e20de3"})
    ]
    assert (model.generation_config.cache_implementation, model.generation_config.max_cache_len) == (
        "static",
        256,
    )
    assert model.neuron_export == record  # what `model.neuron_config` held (NM121)


def test_an_earlier_record_in_config_json_and_the_callers_dtype_first(tmp_path, from_neuron_export):
    config = {
        "model_type": "llama",
        "neuron": {"checkpoint_id": "x/y", "auto_cast_type": "fp16", "sequence_length": 2048},
    }
    folder = _folder(tmp_path, "config.json", config)
    from_neuron_export(_Loaded, folder)
    from_neuron_export(_Loaded, folder, dtype=torch.float32)
    assert [(model_id, kwargs.get("dtype")) for model_id, kwargs in _Loaded.calls] == [
        ("x/y", torch.float16),
        ("x/y", torch.float32),
    ]


def test_a_folder_without_a_record_and_an_id_offline_are_loaded_as_they_are(
    tmp_path, from_neuron_export, monkeypatch
):
    folder = _folder(tmp_path, "config.json", {"model_type": "llama"})  # what a migrated export's save wrote
    from_neuron_export(_Loaded, folder)
    import huggingface_hub.constants

    monkeypatch.setattr(
        huggingface_hub.constants, "HF_HUB_OFFLINE", True
    )  # (read when the module is imported)
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(tmp_path / "empty-cache"))
    model = from_neuron_export(_Loaded, "acme/never-downloaded")
    assert _Loaded.calls == [(folder, {}), ("acme/never-downloaded", {})]
    # the shapes optimum-neuron 0.4.5's export of a checkpoint defaults to (`get_neuron_config`)
    assert model.neuron_export == {"batch_size": 1, "sequence_length": 4096}


def test_a_record_without_its_checkpoint_stops_the_load_saying_so(tmp_path, from_neuron_export):
    folder = _folder(tmp_path, "neuron_config.json", {"sequence_length": 128})
    with pytest.raises(ValueError, match="did not record the checkpoint"):
        from_neuron_export(_Loaded, folder)
    assert not _Loaded.calls


def test_compiled_decoder_loads_and_pipelines_become_the_helper_once_and_other_compiled_models_keep_the_todo():
    source = (
        "from optimum.neuron import NeuronModelForCausalLM, NeuronModelForSequenceClassification, pipeline\n"
        'model = NeuronModelForCausalLM.from_pretrained("./llama-neuron", low_cpu_mem_usage=True)\n'
        'chat = pipeline("text-generation", "aws-neuron/Mistral-7B-Instruct-v0.1-neuron-1x2048-2-cores")\n'
        'classifier = NeuronModelForSequenceClassification.from_pretrained("./bert-neuron")\n'
    )
    output, findings = migrate_python(source)
    assert output.count("def _from_neuron_export(") == 1
    assert (
        'model = _from_neuron_export(AutoModelForCausalLM, "./llama-neuron", device_map="neuron")' in output
    )
    assert (
        (
            'chat = transformers.pipeline("text-generation", _from_neuron_export(AutoModelForCausalLM, '
            '"aws-neuron/Mistral-7B-Instruct-v0.1-neuron-1x2048-2-cores", device_map="neuron"), '
            'tokenizer="aws-neuron/Mistral-7B-Instruct-v0.1-neuron-1x2048-2-cores")'
        )
        in output
    )  # Transformers' pipeline does not guess a model object's tokenizer; optimum's loaded the saved one
    assert [(f.code, f.line, f.fixed) for f in findings if f.code in ("NM105", "NM106")] == [
        ("NM106", 2, True),
        ("NM105", 2, True),
        ("NM106", 3, True),
        ("NM106", 4, False),
    ]
    assert migrate_python(output)[0] == output
