"""Gemma 4's images in a prompt, as its processor places them: each image token the chat template writes becomes
<boi>, one image token per soft token, <eoi>; positions stay plain (no M-RoPE); the soft tokens of one image attend
to each other both ways in the sliding-window layers (use_bidirectional_attention "vision"), so a prompt chunk never
ends inside an image and each prompt step marks them (PromptImages.image_ids)."""

from __future__ import annotations

import hashlib

import numpy as np
import torch

from engine.errors import RequestError
from engine.vision.gemma4_args import Gemma4VisionArgs
from engine.vision.gemma4_preprocess import Gemma4ImageProcessing, gemma4_preprocess
from engine.vision.gemma4_tower import Gemma4VisionTower
from engine.vision.image_input import decode_image, image_parts
from engine.vision.prompt_images import PromptImages
from engine.vision.vision_model import VisionModel


class Gemma4VisionModel(VisionModel):
    uses_mrope = False

    def __init__(self, tower: Gemma4VisionTower, processing: Gemma4ImageProcessing, device: torch.device,
                 boi_token_id: int, eoi_token_id: int, is_bidirectional: bool):
        super().__init__(tower, processing, device)
        self.boi_token_id, self.eoi_token_id, self.is_bidirectional = boi_token_id, eoi_token_id, is_bidirectional

    @property
    def args(self) -> Gemma4VisionArgs:
        return self.tower.args

    def place(self, messages, ids: list[int]) -> tuple[list[int], PromptImages | None]:
        """Any thread: decode and preprocess the messages' images and expand their image tokens in ids."""
        images = image_parts(messages)
        if not images:
            return ids, None
        pixels, grids = [], []
        for index, data in enumerate(images):
            patches, positions = gemma4_preprocess(decode_image(data, index), self.processing)
            pixels.append(patches)
            grids.append((1, int(positions[:, 1].max()) + 1, int(positions[:, 0].max()) + 1))
        return self.place_tokens(ids, pixels, grids, images)

    def place_tokens(self, ids: list[int], pixels: list[np.ndarray], grids: list[tuple[int, int, int]],
                     images: list[bytes]) -> tuple[list[int], PromptImages]:
        image_token = self.args.image_token_id
        found = [i for i, token in enumerate(ids) if token == image_token]
        if len(found) != len(grids):
            raise RequestError(f"the chat template placed {len(found)} image tokens for {len(grids)} images; this "
                               "model's template does not take image parts", "messages")
        counts = [rows * cols // self.args.pooling_kernel_size**2 for _, rows, cols in grids]
        expanded, keys, starts, previous = [], [], [], 0
        for image, (at, count) in enumerate(zip(found, counts)):
            text = ids[previous:at] + [self.boi_token_id]
            expanded += text
            keys += text
            starts.append(len(expanded))
            digest = hashlib.sha256(bytes(images[image])).hexdigest()
            expanded += [image_token] * count
            keys += [(digest, j) for j in range(count)]
            expanded.append(self.eoi_token_id)
            keys.append(self.eoi_token_id)
            previous = at + 1
        expanded += ids[previous:]
        keys += ids[previous:]
        positions = np.broadcast_to(np.arange(len(expanded), dtype=np.int64), (3, len(expanded)))
        return expanded, PromptImages(pixels, grids, starts, counts, positions, 0, keys, self.is_bidirectional)
