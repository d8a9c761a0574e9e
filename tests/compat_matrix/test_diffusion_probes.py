"""The diffusion family: which pipelines it probes, how a request's compilations are told apart, the verdict a
text-to-image row gets, and the probe itself on a tiny pipeline at a small image size."""

import dataclasses

import pytest
import torch

from compat_matrix import diffusion_probes, pipelines
from compat_matrix.archs import select_architectures, support_of
from compat_matrix.families import TEXT_TO_IMAGE_MODEL_TYPES, family_of, judged_stages
from compat_matrix.generation_runs import OutputsDiffer
from compat_matrix.verdict import decide_verdict


def test_the_diffusion_family_probes_each_stood_in_pipeline_family_for_text_to_image():
    assert pipelines.families() == TEXT_TO_IMAGE_MODEL_TYPES
    assert select_architectures("diffusion") == [
        f"text-to-image/{name}" for name in TEXT_TO_IMAGE_MODEL_TYPES
    ]
    assert (family_of("text-to-image"), judged_stages("text-to-image")) == ("diffusion", ("forward",))
    assert support_of("text-to-image/flux") == (True, None)  # NeuronFluxPipeline
    assert (
        pipelines.family_spec("stable-diffusion").checkpoint == "stable-diffusion-v1-5/stable-diffusion-v1-5"
    )


class _Mark:
    """Dynamo's compilations since a part started (what `CompileStats.compilations` returns)."""

    def __init__(self, since: list):
        self.since = since

    def compilations(self) -> list:
        return self.since


def test_each_part_owns_the_compilations_made_before_the_next_part_started():
    made = ["denoiser", "denoiser-unguided", "decoder"]
    marks = [
        _Mark(made),
        _Mark(made[1:]),
        _Mark(made[1:]),
        _Mark(made[2:]),
    ]  # the second part compiled nothing
    assert diffusion_probes.per_part(marks) == [["denoiser"], [], ["denoiser-unguided"], ["decoder"]]


def _row(**fields) -> dict:
    return {"task": "text-to-image", "stage": None, "forward_failure": None, "denoise_steps": 3, **fields}


def test_the_unguided_batchs_graph_is_said_and_a_recompile_across_steps_or_prompts_is_a_caveat():
    clean = decide_verdict(_row(compile_count=3, recompile_count=0, guidance_recompiles=1, graph_breaks=0))
    assert (clean["verdict"], clean["forward_verdict"]) == ("works", "works")
    assert clean["forward_reason"].startswith("turning classifier-free guidance off compiled 1 more graph(s)")
    caveat = decide_verdict(_row(compile_count=4, recompile_count=1, guidance_recompiles=0, graph_breaks=0))
    assert caveat["verdict"] == "works-with-caveats"
    assert caveat["forward_reason"] == "1 recompile(s) across the denoising steps or for another prompt"


@pytest.fixture
def small_pipelines(monkeypatch):
    """The families' checkpoints at a 64-pixel default image (8 x 8 latents): the same classes and code paths,
    seconds per probe."""
    spec_of = pipelines.family_spec

    def small(family):
        spec = spec_of(family)
        values = {key: 8 if key.endswith(".sample_size") and not key.startswith("vae") else value
                  for key, value in spec.values.items()}  # fmt: skip
        return dataclasses.replace(spec, values=values | {"vae.sample_size": 64})

    monkeypatch.setattr(pipelines, "family_spec", small)


@pytest.mark.slow
@pytest.mark.parametrize(
    ("family", "guidance_graphs"),
    # Stable Diffusion doubles the UNet's batch for classifier-free guidance: the unguided request is another
    # shape. Flux embeds guidance as an input: nothing more to compile.
    [("stable-diffusion", 1), ("flux", 0)],
)
def test_a_pipeline_denoises_every_step_and_prompt_in_one_graph_and_decodes_as_eager(
    small_pipelines, settings, family, guidance_graphs
):
    row = diffusion_probes.probe_diffusion(f"text-to-image/{family}", settings)
    assert row.get("forward_failure") is None and row["outputs_match"] is True, row.get("forward_failure")
    assert (row["recompile_count"], row["guidance_recompiles"], row["graph_breaks"]) == (
        0,
        guidance_graphs,
        0,
    )
    # The denoiser's graph (and its unguided one), the VAE decoder's (its group norm: see test_sim_backend).
    assert row["compile_count"] == 2 + guidance_graphs
    assert row["max_logit_diff"] <= row["logit_tolerance"] == 1e-4
    assert (row["checkpoint"], row["denoise_steps"]) == (pipelines.family_spec(family).checkpoint, 3)


def test_a_raising_op_in_a_pipeline_is_judged_on_the_pipeline_loaded_in_bfloat16():
    from compat_matrix.forward_probes import judge_forward_rules
    from compat_matrix.settings import ProbeSettings

    raising = "operator-coverage: transformers.grouped_mm_fallback (compiled graph)"
    row = {"forward_unsupported_ops": [raising], "stage": None, "error": None}
    ran = []
    judge_forward_rules(row, ProbeSettings(), diffusion_probes.PIPELINE_BFLOAT16, ran.append)
    assert ran == ["bfloat16"] and row["device_raising_ops"] == [raising]
    # That run raised nothing: the load in bfloat16 is the one-line change, and the stage keeps a caveat.
    assert row["avoided_by"] == "DiffusionPipeline.from_pretrained(..., torch_dtype=torch.bfloat16)"
    assert "forward_failure" not in row and row["forward_device_rule_caveat"]


def test_outputs_are_compared_within_the_tolerance_times_their_own_magnitude():
    """PixArt's tiny latents reach about 900, where float32's own step is 6e-5: a few steps of rounding pass,
    a relative error the same tolerance refuses on logits does not, and each output is held to its own scale."""
    latents = torch.full((2, 4), 889.0)
    image = torch.full((2, 3), 0.5)
    references = [{"latents": latents}, {"image": image}]
    rounded = [{"latents": latents + 5.5e-4}, {"image": image}]
    assert diffusion_probes.compare_outputs(references, rounded, 1e-4, "compiled") == pytest.approx(
        5.5e-4, rel=0.1
    )
    with pytest.raises(OutputsDiffer, match=r"latents max diff 0\.889 > 0\.0889"):
        diffusion_probes.compare_outputs(
            references, [{"latents": latents * 1.001}, {"image": image}], 1e-4, "x"
        )
    # The image keeps its own scale (magnitude 1): what passes on the latents fails on it.
    with pytest.raises(OutputsDiffer, match="image max diff"):
        diffusion_probes.compare_outputs(
            references, [{"latents": latents}, {"image": image + 5.5e-4}], 1e-4, "x"
        )
