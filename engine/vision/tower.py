"""The Qwen3.5 / Qwen3-VL vision tower: flattened patches [N, C*Tp*P*P] of one or more images -> one embedding per
merged 2x2 patch block [N / merge^2, out_hidden], in the language model's hidden size.

patch embed (a Conv3d whose stride is its kernel: one matmul per patch) + a learned position grid resampled to the
image's grid (bilinear, align_corners) -> blocks of (LayerNorm, bidirectional attention within each image with 2D
axial RoPE, LayerNorm, MLP) -> merger (LayerNorm, concatenate each 2x2 block, MLP). Patches arrive in the
processor's order: merge blocks row-major, the 2x2 patches of a block together (engine.vision.preprocess)."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from engine.vision.vision_args import VisionArgs

ACTIVATIONS = {"gelu_pytorch_tanh": lambda x: F.gelu(x, approximate="tanh"), "gelu": F.gelu, "silu": F.silu}


class VisionAttention(nn.Module):
    def __init__(self, args: VisionArgs):
        super().__init__()
        self.num_heads = args.num_heads
        self.qkv = nn.Linear(args.hidden_size, 3 * args.hidden_size)
        self.proj = nn.Linear(args.hidden_size, args.hidden_size)

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, lengths: list[int]) -> torch.Tensor:
        N = x.shape[0]
        q, k, v = self.qkv(x).reshape(N, 3, self.num_heads, -1).unbind(1)  # each [N, H, hd]
        q, k = rotate(q, cos, sin), rotate(k, cos, sin)
        outputs = [F.scaled_dot_product_attention(*(t.transpose(0, 1)[None] for t in parts))[0].transpose(0, 1)
                   for parts in zip(q.split(lengths), k.split(lengths), v.split(lengths))]  # attention within an image
        return self.proj(torch.cat(outputs).reshape(N, -1))


def rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """x [N, H, hd] turned in fp32 by cos/sin [N, hd] (rotate_half layout), back in x's dtype."""
    xf, cos, sin = x.float(), cos[:, None, :], sin[:, None, :]
    half = x.shape[-1] // 2
    return (xf * cos + torch.cat((-xf[..., half:], xf[..., :half]), -1) * sin).to(x.dtype)


class VisionBlock(nn.Module):
    def __init__(self, args: VisionArgs):
        super().__init__()
        self.norm1 = nn.LayerNorm(args.hidden_size, eps=1e-6)
        self.norm2 = nn.LayerNorm(args.hidden_size, eps=1e-6)
        self.attn = VisionAttention(args)
        self.mlp = nn.Module()
        self.mlp.linear_fc1 = nn.Linear(args.hidden_size, args.intermediate_size)
        self.mlp.linear_fc2 = nn.Linear(args.intermediate_size, args.hidden_size)
        self.act = ACTIVATIONS[args.hidden_act]

    def forward(self, x, cos, sin, lengths):
        x = x + self.attn(self.norm1(x), cos, sin, lengths)
        return x + self.mlp.linear_fc2(self.act(self.mlp.linear_fc1(self.norm2(x))))


class PatchMerger(nn.Module):
    """Each 2x2 block of patches -> one language-model embedding; the norm before the blocks are concatenated, or
    after (a deepstack merger's)."""

    def __init__(self, args: VisionArgs, norm_after_merge: bool = False):
        super().__init__()
        merged = args.hidden_size * args.merge_unit
        self.norm = nn.LayerNorm(merged if norm_after_merge else args.hidden_size, eps=1e-6)
        self.linear_fc1 = nn.Linear(merged, merged)
        self.linear_fc2 = nn.Linear(merged, args.out_hidden_size)
        self.merged, self.norm_after_merge = merged, norm_after_merge

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.norm_after_merge:
            x = self.norm(x.view(-1, self.merged))
        else:
            x = self.norm(x).view(-1, self.merged)  # [N / merge^2, hidden * merge^2]
        return self.linear_fc2(F.gelu(self.linear_fc1(x)))


class VisionTower(nn.Module):
    def __init__(self, args: VisionArgs):
        super().__init__()
        self.args = args
        self.patch_embed = nn.Module()
        kernel = (args.temporal_patch_size, args.patch_size, args.patch_size)
        self.patch_embed.proj = nn.Conv3d(args.in_channels, args.hidden_size, kernel, stride=kernel)
        self.pos_embed = nn.Embedding(args.num_position_embeddings, args.hidden_size)
        self.blocks = nn.ModuleList(VisionBlock(args) for _ in range(args.depth))
        self.merger = PatchMerger(args)
        self.deepstack_merger_list = nn.ModuleList(PatchMerger(args, norm_after_merge=True)
                                                   for _ in args.deepstack_visual_indexes)
        self.register_buffer("inv_freq", self.rotary_frequencies(args), persistent=False)

    @staticmethod
    def rotary_frequencies(args: VisionArgs) -> torch.Tensor:
        """[head_dim / 4] fp32: one frequency per rotary pair of each half of a head."""
        spatial = args.hidden_size // args.num_heads // 2
        return 1.0 / args.rope_theta ** (torch.arange(0, spatial, 2, device="cpu").float() / spatial)

    @property
    def dtype(self) -> torch.dtype:
        return self.pos_embed.weight.dtype

    def forward(self, pixels: torch.Tensor, grids: list[tuple[int, int, int]]) -> torch.Tensor:
        """pixels [N, patch_dim] (fp32, the processor's); grids: each image's (t, h, w) in patches. -> [N / merge^2,
        out_hidden], or with deepstack mergers [N / merge^2, 1 + mergers, out_hidden]: the embeddings, then the
        features each deepstack merger adds after the language model's layer of its index."""
        a = self.args
        weight = self.patch_embed.proj.weight
        x = pixels.to(weight.dtype).view(-1, a.in_channels, a.temporal_patch_size, a.patch_size, a.patch_size)
        x = self.patch_embed.proj(x).view(-1, a.hidden_size)  # [N, hidden]
        indices, weights = grid_interpolation(grids, int(a.num_position_embeddings**0.5), a.spatial_merge_size,
                                              x.device)
        x = x + (self.pos_embed(indices) * weights[:, :, None]).sum(1).to(x.dtype)
        cos, sin = self.rotary(grids, x.device)
        lengths = [h * w for t, h, w in grids for _ in range(t)]
        deepstack = []
        for index, block in enumerate(self.blocks):
            x = block(x, cos, sin, lengths)
            if index in a.deepstack_visual_indexes:
                deepstack.append(self.deepstack_merger_list[a.deepstack_visual_indexes.index(index)](x))
        merged = self.merger(x)
        return torch.stack([merged, *deepstack], dim=1) if deepstack else merged

    def rotary(self, grids, device) -> tuple[torch.Tensor, torch.Tensor]:
        """fp32 cos, sin [N, head_dim]: the first half of each head turned by the patch's row, the second by its
        column (the same frequencies), each half in rotate_half's layout."""
        positions = patch_rows_cols(grids, self.args.spatial_merge_size, device)  # [N, 2]
        freqs = positions[..., None].float() * self.inv_freq  # [N, 2, hd/4]
        freqs = torch.cat((freqs[:, 0], freqs[:, 1]), -1)  # [N, hd/2]
        emb = torch.cat((freqs, freqs), -1)
        return emb.cos(), emb.sin()


def patch_rows_cols(grids, merge: int, device) -> torch.Tensor:
    """[N, 2]: each patch's (row, column) in its image, in the processor's merge-block order."""
    out = []
    for t, h, w in grids:
        rows, cols = torch.meshgrid(torch.arange(h, device=device), torch.arange(w, device=device), indexing="ij")
        shape = (h // merge, merge, w // merge, merge)
        in_blocks = [grid.reshape(shape).transpose(1, 2).flatten() for grid in (rows, cols)]
        pairs = torch.stack(in_blocks, -1)
        out.append(pairs.repeat(t, 1))
    return torch.cat(out)


def grid_interpolation(grids, side: int, merge: int, device) -> tuple[torch.Tensor, torch.Tensor]:
    """Bilinear (align_corners) taps into the learned side x side position table for each patch: indices and
    weights [N, 4], as F.interpolate would resample the table to the image's grid."""
    positions = patch_rows_cols(grids, merge, device)
    sizes = torch.cat([torch.tensor([[h, w]], device=device).expand(t * h * w, 2) for t, h, w in grids])
    taps, tap_weights = [], []
    for axis in (0, 1):
        source = positions[:, axis].float() * (side - 1) / torch.clamp(sizes[:, axis] - 1, min=1)
        floor = torch.floor(source)
        offsets = torch.arange(2, device=device)
        taps.append((floor.long()[:, None] + offsets).clamp(0, side - 1))  # [N, 2]
        tap_weights.append((1 - (source[:, None] - floor[:, None] - offsets).abs()).clamp(min=0))
    indices = (taps[0][:, :, None] * side + taps[1][:, None, :]).reshape(-1, 4)
    weights = (tap_weights[0][:, :, None] * tap_weights[1][:, None, :]).reshape(-1, 4)
    return indices, weights
