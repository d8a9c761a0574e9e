import pytest

from compat_matrix.tiny import HIDDEN, LAYER_KNOBS, LAYERS, VOCAB, build_tiny_config, causal_lm_model_types


def test_all_causal_lm_types_of_the_installed_transformers():
    types = causal_lm_model_types()
    assert len(types) == len(set(types)) and {"llama", "gpt2", "gemma3", "mamba"} <= set(types)


@pytest.mark.parametrize("model_type", ["llama", "gpt2", "qwen3_moe", "deepseek_v3", "qwen3_5", "gemma2"])
def test_sizes_are_shrunk_consistently(model_type):
    config = build_tiny_config(model_type).get_text_config()
    assert config.vocab_size == VOCAB
    assert config.hidden_size == HIDDEN
    assert config.num_hidden_layers <= 2 * LAYERS
    heads = config.num_attention_heads
    assert heads <= 4 and heads % getattr(config, "num_key_value_heads", heads) == 0
    for value in vars(config).values():
        if (
            isinstance(value, list) and value and isinstance(value[0], str)
        ):  # per-layer lists follow the layer count
            assert len(value) == config.num_hidden_layers


def test_one_layer_of_each_kind_is_kept():
    config = build_tiny_config("qwen3_5").get_text_config()
    assert {"linear_attention", "full_attention"} <= set(config.layer_types)


def test_composite_models_shrink_their_towers():
    config = build_tiny_config("gemma3")
    assert config.text_config.hidden_size == HIDDEN
    assert config.vision_config.hidden_size <= HIDDEN and config.vision_config.num_hidden_layers == 1


def test_dual_encoders_keep_both_towers_at_the_model_width():
    # SigLIP multiplies text and image embeddings without a projection: a minimal vision tower could not run.
    config = build_tiny_config("siglip")
    assert config.text_config.hidden_size == config.vision_config.hidden_size == HIDDEN


# HRM's layer count is derived: cycles x layers per stack (2 per stack here).
DERIVED_LAYER_COUNT = {"hrm_text"}


def test_every_architecture_keeps_few_layers():
    """Index lists such as `moe_layers=[0..47]` must not keep every layer (Llama 4 once built 48)."""
    too_deep = {}
    for model_type in causal_lm_model_types():
        if model_type in DERIVED_LAYER_COUNT:
            continue
        try:
            config = build_tiny_config(model_type).get_text_config()
        except Exception:  # configs the harness cannot build are harness-error rows, tested elsewhere
            continue
        layers = max(
            (getattr(config, name) for name in LAYER_KNOBS if isinstance(getattr(config, name, None), int)),
            default=0,
        )
        if layers > 2 * LAYERS:
            too_deep[model_type] = layers
    assert not too_deep


@pytest.mark.parametrize("model_type", ["llama4_text", "lfm2", "zamba2"])
def test_layer_index_lists_are_renumbered_to_the_kept_layers(model_type):
    config = build_tiny_config(model_type).get_text_config()
    for name in ("moe_layers", "full_attn_idxs", "hybrid_layer_ids"):
        indices = getattr(config, name, None)
        if indices:
            assert indices == sorted(set(indices)) and indices[-1] < config.num_hidden_layers
    if model_type == "llama4_text":  # one chunked and one full-attention (no-rope) layer
        assert config.layer_types == ["chunked_attention", "full_attention"] and config.no_rope_layers == [
            1,
            0,
        ]
