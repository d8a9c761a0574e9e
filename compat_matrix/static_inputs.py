"""The inputs of a model exported at static shapes, as optimum-neuron compiles it: two batches of one shape,
other content in each. Text is padded to a fixed length (each row's padding masked), images come at the
checkpoint's image size, audio as log-mel features at the encoder's fixed length. The kind follows the model's
main input (``input_ids``, ``pixel_values``, ``input_features``)."""

from __future__ import annotations

import torch

PADDED_LENGTH = 32  # the static sequence length the batches are padded to
# Real tokens per row of each batch: one full row and one padded row, then other lengths for the second batch.
REAL_LENGTHS = ((PADDED_LENGTH, 19), (11, PADDED_LENGTH))
FIRST_TOKEN_ID = 5  # random ids above the usual special-token ids
# A vision config without image_size (CvT): its checkpoints' image processors crop to ImageNet's 224.
IMAGE_SIZE_WITHOUT_FIELD = 224
# Whisper's two encoder convolutions take the log-mel frames to positions at stride 2: its encoder accepts
# exactly 2 x max_source_positions frames (3000, the 30 s window its feature extractor pads every clip to).
LOG_MEL_FRAMES_PER_POSITION = 2


def batches(model: torch.nn.Module, seed: int) -> list[dict[str, torch.Tensor]]:
    """Two batches of the model's static shape, on CPU; images and log-mel features in the model's dtype, as a
    user casts a processor's float32 output for a bfloat16 model."""
    generator = torch.Generator().manual_seed(seed)
    config = model.config
    rows = len(REAL_LENGTHS[0])
    if model.main_input_name == "pixel_values":
        vision = getattr(config, "vision_config", config)
        side = getattr(vision, "image_size", IMAGE_SIZE_WITHOUT_FIELD)
        side = side if isinstance(side, int) else side[0]
        shape = (rows, vision.num_channels, side, side)
        return [
            {"pixel_values": torch.randn(shape, generator=generator).to(model.dtype)} for _ in REAL_LENGTHS
        ]
    if model.main_input_name == "input_features":
        shape = (rows, config.num_mel_bins, LOG_MEL_FRAMES_PER_POSITION * config.max_source_positions)
        return [
            {"input_features": torch.randn(shape, generator=generator).to(model.dtype)} for _ in REAL_LENGTHS
        ]
    found = []
    for lengths in REAL_LENGTHS:
        ids = torch.randint(
            FIRST_TOKEN_ID, config.vocab_size, (len(lengths), PADDED_LENGTH), generator=generator
        )
        mask = (torch.arange(PADDED_LENGTH) < torch.tensor(lengths)[:, None]).long()
        found.append(
            {"input_ids": ids * mask + (config.pad_token_id or 0) * (1 - mask), "attention_mask": mask}
        )
    return found
