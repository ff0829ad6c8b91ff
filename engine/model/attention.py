"""Attention over the paged KV cache. One code path for prefill (with or without a cached prefix) and decode."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import torch
import torch.nn.functional as F
from torch import nn

from engine.model.args import ModelArgs
from engine.model.decode_attention import decode_attention
from engine.model.kv_store import store_kv
from engine.model.layers import RMSNorm
from engine.model.rope_layouts import ROTATIONS
from engine.model.sink_attention import eager_attention, padded_eager_attention
from engine.model.sink_flash import is_sink_flash_on, sink_flash_attention
from engine.system.triton_support import HAS_TRITON, fused_step


@dataclass
class SeqSpan:
    """One sequence's rows in a step: q rows [q_start, q_start+q_len) attend to kv_slots (its whole context)."""

    q_start: int
    q_len: int
    kv_slots: torch.Tensor  # [kv_len] flat cache slots, oldest first
    state_slot: int = -1  # the sequence's row in a linear-attention state cache (engine.model.state_cache)
    # A decode step verifying drafts: its rows step the linear-attention state one position at a time and keep the
    # state after each, so the state can be rolled back to the last accepted position (HybridCache.roll_back).
    is_verify: bool = False
    # A prompt step of a model whose image tokens attend both ways in its sliding layers (Gemma 4): the image of each
    # context position, -1 for text [kv_len] (engine.vision.vision_model.VisionModel.mark_image_blocks)
    image_ids: torch.Tensor | None = None

    @property
    def is_decode(self) -> bool:
        """Whether each row computes one position after a cached context, as a decode step does: a one-token span
        or a verify step's. The Triton decode kernels compute such rows one position each, so a verify step's row
        has the bits of the plain decode step at its position."""
        return self.q_len == 1 or self.is_verify

    @cached_property
    def decode_index(self) -> tuple[torch.Tensor, torch.Tensor]:
        """The Triton decode kernels' inputs for the span's rows: kv_slots zero-padded to [q_len, 2^n >= 64] (the
        same row for each) and each row's context length [q_len], its position + 1 (built once per step, read by
        every layer). A power of two: the kernel's loop length is compiled in, so a handful of variants, not one per
        length."""
        length = self.kv_slots.numel()
        index = self.kv_slots.new_zeros(1, max(64, 1 << (length - 1).bit_length()))
        index[0, :length] = self.kv_slots
        lengths = torch.arange(length - self.q_len + 1, length + 1, dtype=torch.int32, device=self.kv_slots.device)
        return index.expand(self.q_len, -1).contiguous(), lengths


@dataclass
class AttentionMetadata:
    slot_mapping: torch.Tensor  # [T] flat cache slot of each new token's k/v
    spans: list[SeqSpan]

    @cached_property
    def state_steps(self) -> tuple[list[SeqSpan], torch.Tensor, torch.Tensor, list[SeqSpan]]:
        """The spans that add one token to a sequence already begun, their rows [B] and their state slots [B]:
        what linear-attention layers step in their recurrent form; then the other spans, which those layers run in
        their chunked form (built once per step, read by every layer)."""
        steps, prompts = [], []
        for span in self.spans:
            (steps if span.q_len == 1 and span.kv_slots.numel() > 1 else prompts).append(span)
        device = self.slot_mapping.device
        rows = torch.tensor([span.q_start for span in steps], dtype=torch.long, device=device)
        slots = torch.tensor([span.state_slot for span in steps], dtype=torch.long, device=device)
        return steps, rows, slots, prompts


@dataclass
class PaddedDecodeMetadata:
    """Static-shape decode metadata (one new token per sequence), so the step can be a CUDA graph."""

    slot_mapping: torch.Tensor  # [B]
    kv_index: torch.Tensor  # [B, L] flat cache slots of each sequence's context, padded (masked) to L
    lengths: torch.Tensor  # [B] context length including the new token
    state_slots: torch.Tensor | None = None  # [B] each sequence's linear-attention state row (hybrid models)
    # A sequence's rows in a verify step step its states one after another (engine.model.state_chains): each row
    # reads its states at state_sources [B] and writes them at state_targets [B]; chain_lengths [B] holds at a
    # sequence's first row its number of rows, 0 at the rows after it.
    state_sources: torch.Tensor | None = None
    state_targets: torch.Tensor | None = None
    chain_lengths: torch.Tensor | None = None
    is_chained: bool = False  # host side: some sequence has more than one row in this step


class KVCache:
    """Per-layer K and V pools, flat over slots: [num_blocks * block_size, kv_heads, head_dim]."""

    def __init__(self, num_layers: int, num_slots: int, kv_heads: int, head_dim: int, dtype, device):
        shape = (num_slots, kv_heads, head_dim)
        self.row_kernel = HAS_TRITON and torch.device(device).type == "cuda"  # engine.model.kv_store
        # Uninitialised on purpose: attention only ever reads slots that a step has written.
        self.k = [torch.empty(shape, dtype=dtype, device=device) for _ in range(num_layers)]
        self.v = [torch.empty(shape, dtype=dtype, device=device) for _ in range(num_layers)]

    def resize(self, num_slots: int, block_moves: dict[int, int], block_size: int) -> None:
        """New pool size; blocks in block_moves (old id -> new id) keep their contents. One layer at a time,
        so the pool never exists twice."""
        device = self.pools()[0][0].device
        old_ids = torch.tensor(list(block_moves), dtype=torch.long, device=device)
        new_ids = torch.tensor(list(block_moves.values()), dtype=torch.long, device=device)
        for pool in self.pools():
            for layer, tensor in enumerate(pool):
                shape = (num_slots // block_size, block_size, *tensor.shape[1:])
                resized = torch.empty(shape, dtype=tensor.dtype, device=tensor.device)
                if block_moves:
                    resized[new_ids] = tensor.view(-1, block_size, *tensor.shape[1:])[old_ids]
                pool[layer] = resized.view(num_slots, *tensor.shape[1:])
                del tensor

    def pools(self) -> tuple[list[torch.Tensor], ...]:
        """Every per-layer pool list, each tensor [slots, heads, dim]."""
        return self.k, self.v

    def store(self, layer: int, slots: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> None:
        if self.row_kernel:  # index_copy_ sorts its indices under deterministic kernels
            store_kv(self.k[layer], self.v[layer], slots, k, v)
        else:
            self.k[layer].index_copy_(0, slots, k)
            self.v[layer].index_copy_(0, slots, v)


class Attention(nn.Module):
    # The layers that compute q, k and v, in order: engine.quant.merged_projections may replace consecutive ones by
    # one layer (qkv_proj, qk_proj, kv_proj) whose forward(x, split=True) gives their outputs.
    projection_names: tuple[str, ...] = ("q_proj", "k_proj", "v_proj")

    def __init__(self, args: ModelArgs, layer: int):
        super().__init__()
        self.layer = layer
        self.decode_kernel = "sdpa"  # or "triton": decode reads the KV cache in place (set by the engine builder)
        self.num_heads, self.num_kv_heads, self.head_dim = args.num_attention_heads, args.num_key_value_heads, args.head_dim
        self.scale = self.head_dim**-0.5  # the softmax's
        q_size, kv_size = self.num_heads * self.head_dim, self.num_kv_heads * self.head_dim
        options = args.attention
        self.q_proj = nn.Linear(args.hidden_size, q_size, bias=options.attention_bias)
        self.k_proj = nn.Linear(args.hidden_size, kv_size, bias=options.attention_bias)
        self.v_proj = nn.Linear(args.hidden_size, kv_size, bias=options.attention_bias)
        self.o_proj = nn.Linear(q_size, args.hidden_size, bias=options.o_proj_bias)
        self.qk_norm, self.clip_qkv = options.qk_norm, options.clip_qkv
        # q and k turn alike, so a layout that writes its rotated pairs in another order leaves q.k as it is
        self.rope_layout, self.rotate = options.rope_layout, ROTATIONS[options.rope_layout]
        if options.qk_norm == "per_head":
            self.q_norm = RMSNorm(self.head_dim, args.rms_norm_eps)
            self.k_norm = RMSNorm(self.head_dim, args.rms_norm_eps)
        elif options.qk_norm == "full":
            self.q_norm = RMSNorm(q_size, args.rms_norm_eps)
            self.k_norm = RMSNorm(kv_size, args.rms_norm_eps)
        # gpt_oss: SDPA has neither sinks nor sliding windows; these layers run in engine.model.sink_flash (prompts
        # on CUDA), engine.model.decode_attention (decode on CUDA) or engine.model.sink_attention (elsewhere)
        self.window = args.window(layer)
        self.sinks = nn.Parameter(torch.empty(self.num_heads)) if options.attention_sinks else None
        self.is_eager = self.sinks is not None or self.window is not None

    def project_qkv(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """x [T, D] -> q_proj's, k_proj's and v_proj's outputs [T, H*hd], [T, KVH*hd] x2; a merged layer's are views
        of its one output (rows not contiguous when T > 1)."""
        outputs = []
        for name in self.projection_names:
            layer = getattr(self, name)
            outputs += layer(x, split=True) if name not in Attention.projection_names else [layer(x)]
        return tuple(outputs)

    def project(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        q, k, v = (t.contiguous() for t in self.project_qkv(x))  # [T, H*hd], [T, KVH*hd] x2
        if self.qk_norm == "full":
            q, k = self.q_norm(q), self.k_norm(k)
        if self.clip_qkv is not None:
            q, k, v = (t.clamp(-self.clip_qkv, self.clip_qkv) for t in (q, k, v))
        T = x.shape[0]
        q = q.view(T, self.num_heads, self.head_dim)
        k = k.view(T, self.num_kv_heads, self.head_dim)
        v = v.view(T, self.num_kv_heads, self.head_dim)
        if self.qk_norm == "per_head":
            q, k = self.q_norm(q), self.k_norm(k)
        return q, k, v

    def forward(self, x, rope: tuple[torch.Tensor, torch.Tensor], meta: AttentionMetadata, cache: KVCache):
        q = self.turn_and_store(x, rope, meta.slot_mapping, cache)
        return self.o_proj(self.attend_spans(q, meta, cache).view(x.shape[0], -1))

    def turn_and_store(self, x, rope: tuple[torch.Tensor, torch.Tensor], slots: torch.Tensor,
                       cache: KVCache) -> torch.Tensor:
        """x [T, D] -> q [T, H, hd] normed and turned; k (normed, turned) and v written at slots [T]. On CUDA
        with a per-head or no q/k norm, after the projections one kernel (engine.model.fused_qk_rope)."""
        if self.is_fusable(x, rope, cache):
            from engine.model.fused_qk_rope import fused_qk_rope_store

            T = x.shape[0]
            q, k, v = self.project_qkv(x)
            q = q.view(T, self.num_heads, self.head_dim)
            k = k.view(T, self.num_kv_heads, self.head_dim)
            v = v.view(T, self.num_kv_heads, self.head_dim)
            norm = self.qk_norm == "per_head"
            return fused_qk_rope_store(q, k, v, self.q_norm.weight if norm else None,
                                       self.k_norm.weight if norm else None, self.q_norm.eps if norm else 0.0,
                                       *rope, slots, cache.k[self.layer], cache.v[self.layer])
        q, k, v = self.project(x)
        q, k = self.rotate(q, *rope), self.rotate(k, *rope)
        cache.store(self.layer, slots, k, v)
        return q

    def is_fusable(self, x: torch.Tensor, rope: tuple[torch.Tensor, torch.Tensor], cache: KVCache) -> bool:
        """Whether turn_and_store's one kernel computes what the op-by-op path computes here."""
        if not (cache.row_kernel and x.is_cuda and fused_step() and self.clip_qkv is None
                and self.qk_norm in (None, "per_head") and self.rope_layout == "half"):
            return False
        cos, sin = rope
        if not (cos.dim() == 2 and cos.shape == sin.shape and cos.shape[0] == x.shape[0] and cos.shape[1] % 2 == 0
                and cos.shape[1] <= self.head_dim and cos.dtype == sin.dtype == x.dtype):
            return False
        if self.qk_norm is None:
            return True
        norms = (self.q_norm, self.k_norm)
        return all(norm.weight.dtype == x.dtype and not norm.weight_fp32 and norm.eps == self.q_norm.eps
                   and not (torch.is_grad_enabled() and norm.weight.requires_grad) for norm in norms)

    def attend_spans(self, q: torch.Tensor, meta: AttentionMetadata, cache: KVCache) -> torch.Tensor:
        """q [T, H, hd] of every span over its cached keys and values -> [T, H, hd]."""
        out = torch.empty_like(q)  # [T, H, hd]
        for span in meta.spans:
            rows = slice(span.q_start, span.q_start + span.q_len)
            if span.is_decode and self.decode_kernel == "triton":  # the same kernel (and bits) as static decode
                index, lengths = span.decode_index
                out[rows] = decode_attention(q[rows], cache.k[self.layer], cache.v[self.layer], index, lengths,
                                             self.scale, self.window, self.sinks)
                continue
            slots = span.kv_slots
            if self.window is not None:  # a sliding layer gathers only the keys its window reaches
                first = max(0, slots.numel() - span.q_len - self.window + 1)
                slots = slots[first:]
                if span.image_ids is not None:  # images attend both ways: the op-by-op path, on every device
                    out[rows] = eager_attention(q[rows], cache.k[self.layer][slots], cache.v[self.layer][slots],
                                                self.scale, self.sinks, self.window, span.image_ids[first:])
                    continue
            out[rows] = self.attend(q[rows], cache.k[self.layer][slots], cache.v[self.layer][slots])
        return out

    def forward_padded(self, x, rope, meta: PaddedDecodeMetadata, cache: KVCache) -> torch.Tensor:
        """Decode for B sequences at once over contexts padded to a fixed length: no shape depends on data."""
        q = self.turn_and_store(x, rope, meta.slot_mapping, cache)  # [B, H, hd]
        return self.o_proj(self.attend_padded(q, meta, cache).reshape(x.shape[0], -1))

    def attend_padded(self, q: torch.Tensor, meta: PaddedDecodeMetadata, cache: KVCache) -> torch.Tensor:
        """q [B, H, hd], one new token per sequence, over its cached context (padded) -> [B, H, hd]."""
        if self.decode_kernel == "triton":  # the cache read in place (engine.model.decode_attention)
            return decode_attention(q, cache.k[self.layer], cache.v[self.layer], meta.kv_index, meta.lengths,
                                    self.scale, self.window, self.sinks)
        keys = cache.k[self.layer][meta.kv_index].transpose(1, 2)  # [B, KVH, L, hd]
        values = cache.v[self.layer][meta.kv_index].transpose(1, 2)
        if self.is_eager:
            return padded_eager_attention(q, keys, values, meta.lengths, self.scale, self.sinks, self.window)
        positions = torch.arange(meta.kv_index.shape[1], device=q.device)
        mask = (positions[None, :] < meta.lengths[:, None])[:, None, None, :]  # [B, 1, 1, L]
        o = F.scaled_dot_product_attention(q[:, :, None, :], keys, values, attn_mask=mask,
                                           scale=self.scale, enable_gqa=True)  # [B, H, 1, hd]
        return o[:, :, 0]

    def is_sink_flash(self, q: torch.Tensor) -> bool:
        """Whether a sink/window layer's prompt rows q [q, H, hd] take engine.model.sink_flash's kernel: wherever
        decode takes the Triton kernel (CUDA, Ampere on, Triton installed). The kernel has no backward, so not where
        autograd records."""
        records = torch.is_grad_enabled() and (q.requires_grad or (self.sinks is not None and self.sinks.requires_grad))
        return (q.shape[0] > 1 and self.decode_kernel == "triton" and q.is_cuda and is_sink_flash_on()
                and not records)

    def attend(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        """q [q, H, hd] are the last q positions of a context whose keys/values are k, v [L, KVH, hd]."""
        if self.is_eager:
            if self.is_sink_flash(q):
                return sink_flash_attention(q, k, v, self.scale, self.sinks, self.window)
            return eager_attention(q, k, v, self.scale, self.sinks, self.window)
        q_len, kv_len = q.shape[0], k.shape[0]
        mask, is_causal = None, False
        if q_len > 1 and q_len == kv_len:
            is_causal = True
        elif q_len > 1:
            offset = kv_len - q_len
            mask = torch.ones(q_len, kv_len, dtype=torch.bool, device=q.device).tril(diagonal=offset)
        k, v = k.transpose(0, 1)[None], v.transpose(0, 1)[None]  # [1, KVH, L, hd]
        if q_len > 1:
            # Prefill: repeat K/V heads (as transformers does) so that the flash kernel, whose memory does not
            # grow with q_len x kv_len, can run; GQA inside SDPA may fall back to the math kernel.
            groups = self.num_heads // self.num_kv_heads
            k, v = k.repeat_interleave(groups, dim=1), v.repeat_interleave(groups, dim=1)
        o = F.scaled_dot_product_attention(q.transpose(0, 1)[None], k, v, attn_mask=mask, is_causal=is_causal,
                                           scale=self.scale, enable_gqa=q_len == 1)  # [1, H, q, hd]
        return o[0].transpose(0, 1)
