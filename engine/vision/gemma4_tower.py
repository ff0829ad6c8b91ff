"""Gemma 4's vision tower (transformers' Gemma4VisionModel and the embed_vision projector): patches [N, P*P*3] of one
or more images, each with its (x, y) patch position -> one language-model embedding per pooling x pooling block of
patches [N / k^2, out_hidden].

patch embed (pixels mapped to [-1, 1], a linear without bias) + learned x and y position rows -> blocks of (RMSNorm,
bidirectional attention within each image: q/k RMSNorm with scale, v without, 2D RoPE whose first half of a head turns
by x and second by y, no 1/sqrt(d) scaling; RMSNorm; residual; RMSNorm, gated MLP, RMSNorm; residual) -> average of
each k x k block, times sqrt(hidden), in fp32 -> standardised (some checkpoints) -> RMSNorm without scale -> linear
into the language model's hidden size. Parameter names are the checkpoint's (model.vision_tower.*,
model.embed_vision.*). RMSNorm is Gemma 4's: x * (mean(x^2) + eps)^-0.5 * weight, in fp32."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from engine.vision.gemma4_args import Gemma4VisionArgs
from engine.vision.tower import ACTIVATIONS


class Gemma4Norm(nn.Module):
    def __init__(self, size: int, eps: float, with_scale: bool = True):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(size)) if with_scale else None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        xf = x.float()
        out = xf * torch.pow(xf.pow(2).mean(-1, keepdim=True) + self.eps, -0.5)
        return (out * self.weight.float() if self.weight is not None else out).type_as(x)


class ClippableLinear(nn.Module):
    """A linear without bias (`.linear`), with its input and output clamped to stored bounds when the checkpoint
    has them (use_clipped_linears)."""

    def __init__(self, in_features: int, out_features: int, clipped: bool):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features, bias=False)
        self.clipped = clipped
        if clipped:
            for name in ("input_min", "input_max", "output_min", "output_max"):
                self.register_buffer(name, torch.tensor(float("inf") if name.endswith("max") else -float("inf")))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not self.clipped:
            return self.linear(x)
        return self.linear(x.clamp(self.input_min, self.input_max)).clamp(self.output_min, self.output_max)


class Gemma4VisionAttention(nn.Module):
    def __init__(self, args: Gemma4VisionArgs):
        super().__init__()
        a, clip = args, args.use_clipped_linears
        self.num_heads, self.num_kv_heads, self.head_dim = a.num_heads, a.num_kv_heads, a.head_dim
        self.q_proj = ClippableLinear(a.hidden_size, a.num_heads * a.head_dim, clip)
        self.k_proj = ClippableLinear(a.hidden_size, a.num_kv_heads * a.head_dim, clip)
        self.v_proj = ClippableLinear(a.hidden_size, a.num_kv_heads * a.head_dim, clip)
        self.o_proj = ClippableLinear(a.num_heads * a.head_dim, a.hidden_size, clip)
        self.q_norm = Gemma4Norm(a.head_dim, a.rms_norm_eps)
        self.k_norm = Gemma4Norm(a.head_dim, a.rms_norm_eps)
        self.v_norm = Gemma4Norm(a.head_dim, a.rms_norm_eps, with_scale=False)

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, lengths: list[int]) -> torch.Tensor:
        N = x.shape[0]
        q = rotate_axes(self.q_norm(self.q_proj(x).view(N, self.num_heads, -1)), cos, sin)  # [N, H, hd]
        k = rotate_axes(self.k_norm(self.k_proj(x).view(N, self.num_kv_heads, -1)), cos, sin)
        v = self.v_norm(self.v_proj(x).view(N, self.num_kv_heads, -1))
        outputs = [F.scaled_dot_product_attention(*(t.transpose(0, 1)[None] for t in parts), scale=1.0,
                                                  enable_gqa=True)[0].transpose(0, 1)
                   for parts in zip(q.split(lengths), k.split(lengths), v.split(lengths))]  # within an image
        return self.o_proj(torch.cat(outputs).reshape(N, -1))


def rotate_axes(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """x [N, H, hd]: each half of a head turned (rotate_half within the half) by cos/sin [N, hd], in x's dtype."""
    cos, sin = cos[:, None, :].to(x.dtype), sin[:, None, :].to(x.dtype)
    halves = []
    for part, c, s in zip(x.chunk(2, -1), cos.chunk(2, -1), sin.chunk(2, -1)):
        first, second = part.chunk(2, -1)
        halves.append(part * c + torch.cat((-second, first), -1) * s)
    return torch.cat(halves, -1)


class Gemma4VisionLayer(nn.Module):
    def __init__(self, args: Gemma4VisionArgs):
        super().__init__()
        h, eps, clip = args.hidden_size, args.rms_norm_eps, args.use_clipped_linears
        self.self_attn = Gemma4VisionAttention(args)
        self.mlp = nn.Module()
        self.mlp.gate_proj = ClippableLinear(h, args.intermediate_size, clip)
        self.mlp.up_proj = ClippableLinear(h, args.intermediate_size, clip)
        self.mlp.down_proj = ClippableLinear(args.intermediate_size, h, clip)
        self.act = ACTIVATIONS[args.hidden_act]
        for name in ("input_layernorm", "post_attention_layernorm", "pre_feedforward_layernorm",
                     "post_feedforward_layernorm"):
            setattr(self, name, Gemma4Norm(h, eps))

    def forward(self, x, cos, sin, lengths):
        x = x + self.post_attention_layernorm(self.self_attn(self.input_layernorm(x), cos, sin, lengths))
        h = self.pre_feedforward_layernorm(x)
        h = self.mlp.down_proj(self.act(self.mlp.gate_proj(h)) * self.mlp.up_proj(h))
        return x + self.post_feedforward_layernorm(h)


class Gemma4VisionTower(nn.Module):
    """Holds `vision_tower` and `embed_vision` as the checkpoint names them under model.*."""

    def __init__(self, args: Gemma4VisionArgs):
        super().__init__()
        self.args = args
        tower = self.vision_tower = nn.Module()
        tower.patch_embedder = nn.Module()
        tower.patch_embedder.input_proj = nn.Linear(args.patch_dim, args.hidden_size, bias=False)
        tower.patch_embedder.position_embedding_table = nn.Parameter(
            torch.ones(2, args.position_embedding_size, args.hidden_size))
        tower.encoder = nn.Module()
        tower.encoder.layers = nn.ModuleList(Gemma4VisionLayer(args) for _ in range(args.depth))
        if args.standardize:
            tower.register_buffer("std_bias", torch.zeros(args.hidden_size))
            tower.register_buffer("std_scale", torch.ones(args.hidden_size))
        self.embed_vision = nn.Module()
        self.embed_vision.embedding_projection = nn.Linear(args.hidden_size, args.out_hidden_size, bias=False)
        self.embed_vision.embedding_pre_projection_norm = Gemma4Norm(args.hidden_size, args.rms_norm_eps,
                                                                     with_scale=False)
        self.register_buffer("inv_freq", self.rotary_frequencies(args), persistent=False)

    @staticmethod
    def rotary_frequencies(args: Gemma4VisionArgs) -> torch.Tensor:
        """[head_dim / 4] fp32: one frequency per rotary pair of each half of a head."""
        spatial = args.head_dim // 2
        return 1.0 / args.rope_theta ** (torch.arange(0, spatial, 2, device="cpu").float() / spatial)

    @property
    def dtype(self) -> torch.dtype:
        return self.vision_tower.patch_embedder.input_proj.weight.dtype

    def forward(self, pixels: torch.Tensor, grids: list[tuple[int, int, int]]) -> torch.Tensor:
        """pixels [N, P*P*3] in [0, 1] (fp32, the processor's), row-major patches of images whose grids are (1, rows,
        columns) -> [N / k^2, out_hidden]."""
        positions = torch.cat([patch_positions(rows, cols, pixels.device) for _, rows, cols in grids])
        return self.encode(pixels, positions, [rows * cols for _, rows, cols in grids])

    def encode(self, pixels: torch.Tensor, positions: torch.Tensor, lengths: list[int]) -> torch.Tensor:
        """forward with each patch's (x, y) position given: positions [N, 2], lengths: each image's patches."""
        embedder = self.vision_tower.patch_embedder
        x = embedder.input_proj((2 * (pixels - 0.5)).to(self.dtype))  # [N, hidden]
        table = embedder.position_embedding_table
        x = x + (F.embedding(positions[:, 0], table[0]) + F.embedding(positions[:, 1], table[1]))
        cos, sin = self.rotary(positions)
        for layer in self.vision_tower.encoder.layers:
            x = layer(x, cos, sin, lengths)
        pooled = torch.cat([self.pool(part, where) for part, where in zip(x.split(lengths), positions.split(lengths))])
        if self.args.standardize:
            pooled = (pooled - self.vision_tower.std_bias.float()) * self.vision_tower.std_scale.float()
        pooled = pooled.to(self.dtype)
        return self.embed_vision.embedding_projection(self.embed_vision.embedding_pre_projection_norm(pooled))

    def rotary(self, positions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """fp32 cos, sin [N, head_dim]: the first half of a head turned by x (rotate_half layout within the half), the
        second by y."""
        freqs = positions[..., None].float() * self.inv_freq  # [N, 2, hd/4]
        angles = torch.cat((freqs[:, 0], freqs[:, 0], freqs[:, 1], freqs[:, 1]), -1)
        return angles.cos(), angles.sin()

    def pool(self, x: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        """One image's patches [n, hidden] -> the mean of each k x k block, row-major, times sqrt(hidden) (fp32)."""
        k = self.args.pooling_kernel_size
        cols = int(positions[:, 0].max()) + 1
        blocks = (positions[:, 0] // k) + (cols // k) * (positions[:, 1] // k)  # [n]
        weights = F.one_hot(blocks, x.shape[0] // k**2).float() / k**2  # [n, n / k^2]
        return (weights.T @ x.float()).to(x.dtype).float() * self.args.hidden_size**0.5


def patch_positions(rows: int, cols: int, device) -> torch.Tensor:
    """[rows * cols, 2]: each patch's (x, y), row-major (engine.vision.gemma4_preprocess's order)."""
    y, x = torch.meshgrid(torch.arange(rows, device=device), torch.arange(cols, device=device), indexing="ij")
    return torch.stack([x.flatten(), y.flatten()], -1)
