"""A loaded vision tower and what surrounds it: preparing a request's images (decode, preprocess, place their
tokens; any thread) and a prompt step's image inputs (M-RoPE positions, embeddings; the engine thread)."""

from __future__ import annotations

import numpy as np
import torch

from engine.vision.image_input import decode_image, image_parts
from engine.vision.preprocess import ImageProcessing, preprocess
from engine.vision.prompt_images import PromptImages, place_images
from engine.vision.tower import VisionTower
from engine.vision.vision_args import VisionArgs


class VisionModel:
    uses_mrope = True  # a prompt step with images takes M-RoPE positions (Qwen3-VL, Qwen3.5)

    def __init__(self, tower: VisionTower, processing: ImageProcessing, device: torch.device):
        self.tower, self.processing, self.device = tower, processing, device
        self.embeddings: dict[tuple[str, int], torch.Tensor] = {}  # (request id, image) -> [tokens, D], in prefill

    @property
    def args(self) -> VisionArgs:
        return self.tower.args

    def place(self, messages, ids: list[int]) -> tuple[list[int], PromptImages | None]:
        """Any thread (api.Engine's tokenizer worker): decode and preprocess the messages' images and expand their
        placeholder tokens in ids. RequestError naming the image for one that does not decode."""
        images = image_parts(messages)
        if not images:
            return ids, None
        prepared = [preprocess(decode_image(data, index), self.processing) for index, data in enumerate(images)]
        return place_images(ids, [p for p, _ in prepared], [g for _, g in prepared], images,
                            self.args.image_token_id, self.args.spatial_merge_size)

    @torch.inference_mode()
    def step_inputs(self, seqs) -> tuple[torch.Tensor | None, tuple[torch.Tensor, torch.Tensor] | None]:
        """Engine thread, a prompt step: -> (M-RoPE positions [3, T], or None when no sequence has images or the
        model takes plain positions; (rows, embeddings) of the image tokens in the step or None). Runs the tower
        once per image, at its first chunk."""
        if not any(getattr(seq, "images", None) is not None for seq in seqs):
            return None, None
        columns, rows, embeddings, row = [], [], [], 0
        for seq in seqs:
            start, end, images = seq.prefill_start, seq.prefill_end, seq.images
            if images is None:
                columns.append(np.broadcast_to(np.arange(start, end), (3, end - start)))
            else:
                columns.append(images.position_rows(start, end))
                for image, first, at, count in images.rows(start, end):
                    rows.append(torch.arange(row + at - start, row + at - start + count))
                    embeddings.append(self.embedding(seq.request_id, images, image, first + count)[first:first + count])
            row += end - start
        positions = None
        if self.uses_mrope:
            positions = torch.from_numpy(np.concatenate(columns, axis=1).astype(np.int64)).to(self.device)
        if not rows:
            return positions, None
        return positions, (torch.cat(rows).to(self.device), torch.cat(embeddings))

    def embedding(self, request_id: str, images: PromptImages, image: int, used_to: int) -> torch.Tensor:
        """The image's embeddings [tokens, D]; kept while later chunks of the prompt still need them."""
        key = (request_id, image)
        value = self.embeddings.get(key)
        if value is None:
            pixels = torch.from_numpy(images.pixels[image]).to(self.device)
            value = self.tower(pixels, [images.grids[image]])
        if used_to < images.num_tokens[image]:
            self.embeddings[key] = value
        else:
            self.embeddings.pop(key, None)
        return value

    def mark_image_blocks(self, seqs, spans) -> None:
        """Engine thread, a prompt step: each span of a sequence whose images attend both ways gets image_ids, the
        image of each of its context positions (-1 text), for the model's sliding-window layers."""
        for seq, span in zip(seqs, spans):
            images = getattr(seq, "images", None)
            if images is not None and images.is_bidirectional:
                span.image_ids = torch.from_numpy(images.image_ids(span.kv_slots.numel())).to(self.device)

    def forget(self, request_id: str) -> None:
        """A request that ended mid-prompt (cancelled, failed) leaves no embeddings behind."""
        for key in [key for key in self.embeddings if key[0] == request_id]:
            del self.embeddings[key]
