"""An image's place in a prompt: the chat template writes one placeholder token per image (between
<|vision_start|> and <|vision_end|>); it becomes as many placeholders as the image has tokens, their M-RoPE
positions (time, row, column) follow the image's grid, and the text after it continues from the largest position
+ 1. The prefix cache keys those placeholders by the image's bytes (a hash), so another image never hits."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import numpy as np

from engine.errors import RequestError


@dataclass
class PromptImages:
    """The images of one prompt, torch-free (the engine thread runs the tower on `pixels` at prefill)."""

    pixels: list[np.ndarray]  # each image's patches [t*h*w, patch_dim], fp32
    grids: list[tuple[int, int, int]]  # each image's (t, h, w) in patches
    starts: list[int]  # each image's first token in the prompt
    num_tokens: list[int]  # each image's tokens (t*h*w / merge^2)
    positions: np.ndarray  # [3, prompt length]: time, row and column positions of every prompt token
    rope_delta: int  # a position after the prompt is its index + rope_delta
    cache_keys: list  # the prompt's tokens with each image token replaced by (image digest, index in the image)
    # an image's tokens attend to each other both ways in the model's sliding-window layers (Gemma 4): a prompt chunk
    # never ends inside an image, and each prompt step marks them (image_ids)
    is_bidirectional: bool = False

    def rows(self, start: int, end: int) -> list[tuple[int, int, int, int]]:
        """(image, first of its tokens, first prompt position, count) of image tokens in positions start..end-1."""
        out = []
        for image, (first, count) in enumerate(zip(self.starts, self.num_tokens)):
            low, high = max(start, first), min(end, first + count)
            if low < high:
                out.append((image, low - first, low, high - low))
        return out

    def chunk_end(self, start: int, end: int) -> int:
        """A prompt chunk start..end-1 moved to end after the image it would cut (bidirectional images only)."""
        for first, count in zip(self.starts, self.num_tokens):
            if first < end < first + count and self.is_bidirectional:
                return first + count
        return end

    def image_ids(self, length: int) -> np.ndarray:
        """[length]: the image each of the first `length` positions belongs to, -1 for text."""
        ids = np.full(length, -1, dtype=np.int64)
        for image, (first, count) in enumerate(zip(self.starts, self.num_tokens)):
            ids[first:min(length, first + count)] = image
        return ids

    def position_rows(self, start: int, end: int) -> np.ndarray:
        """[3, end - start]: the M-RoPE positions of start..end-1 (after the prompt: index + rope_delta)."""
        prompt = self.positions.shape[1]
        inside = self.positions[:, start:min(end, prompt)]
        after = np.arange(max(start, prompt), end) + self.rope_delta
        return np.concatenate([inside, np.broadcast_to(after, (3, after.size))], axis=1)


def place_images(ids: list[int], pixels: list[np.ndarray], grids: list[tuple[int, int, int]], images: list[bytes],
                 image_token_id: int, merge_size: int) -> tuple[list[int], PromptImages]:
    """ids with one image_token_id per image (the template's) -> (the expanded ids, their PromptImages)."""
    found = [i for i, token in enumerate(ids) if token == image_token_id]
    if len(found) != len(grids):
        raise RequestError(f"the chat template placed {len(found)} image tokens for {len(grids)} images; this "
                           "model's template does not take image parts", "messages")
    counts = [t * h * w // merge_size**2 for t, h, w in grids]
    expanded, keys, starts, columns = [], [], [], []
    position = 0
    previous = 0
    for image, (at, count, grid) in enumerate(zip(found, counts, grids)):
        text = ids[previous:at]
        expanded += text
        keys += text
        columns.append(np.broadcast_to(np.arange(position, position + len(text)), (3, len(text))))
        position += len(text)
        starts.append(len(expanded))
        digest = hashlib.sha256(bytes(images[image])).hexdigest()
        expanded += [image_token_id] * count
        keys += [(digest, j) for j in range(count)]
        columns.append(grid_positions(grid, merge_size, position))
        position += max(grid[1], grid[2]) // merge_size
        previous = at + 1
    text = ids[previous:]
    expanded += text
    keys += text
    columns.append(np.broadcast_to(np.arange(position, position + len(text)), (3, len(text))))
    positions = np.concatenate(columns, axis=1).astype(np.int64)
    delta = int(positions.max()) + 1 - len(expanded)
    return expanded, PromptImages(pixels, grids, starts, counts, positions, delta, keys)


def grid_positions(grid: tuple[int, int, int], merge_size: int, start: int) -> np.ndarray:
    """[3, t*h*w/merge^2]: (time, row, column) + start of each merged block, row-major."""
    t, h, w = grid[0], grid[1] // merge_size, grid[2] // merge_size
    times, rows, cols = np.meshgrid(np.arange(t), np.arange(h), np.arange(w), indexing="ij")
    return np.stack([times, rows, cols]).reshape(3, -1) + start
