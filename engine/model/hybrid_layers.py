"""The layers of the hybrid linear-attention models (qwen3_next, qwen3_5_moe): zero-centred RMSNorm, the Gated
DeltaNet token mixer over the per-sequence state cache, and gated full attention over the paged KV cache."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from engine.model import centred_norm_kernels, deltanet_step_kernels, gate_kernels
from engine.model.args import ModelArgs
from engine.model.attention import Attention, AttentionMetadata, PaddedDecodeMetadata
from engine.model.delta_rule_kernels import kernels_for
from engine.model.gated_deltanet import causal_conv
from engine.model.layers import apply_rope
from engine.model.state_cache import HybridCache
from engine.model.state_mixer import StateMixer


class ZeroCenteredRMSNorm(nn.Module):
    """x * rsqrt(mean(x^2) + eps) * (1 + weight), in fp32 and cast once (the weight is stored centred on zero).
    `one_added`: the weight is stored as 1 + weight already (llama.cpp's files), kept fp32 as stored, so the scale
    has the bits 1 + weight has in fp32."""

    def __init__(self, size: int, eps: float, one_added: bool = False):
        super().__init__()
        self.weight = nn.Parameter(torch.zeros(size))
        self.eps = eps
        self.offset = 0.0 if one_added else 1.0
        self.keeps_fp32 = one_added  # engine.model.fp32_parameters

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.is_fusable(x):
            return centred_norm_kernels.centred_rms_norm(x, self.weight, self.eps, self.offset)
        h = x.float()
        h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + self.eps)
        return (h * (self.offset + self.weight.float())).type_as(x)

    def add_forward(self, x: torch.Tensor, delta: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """A residual add and this norm of the sum -> (x + delta, norm(x + delta)); one kernel on CUDA."""
        if self.is_fusable(x) and delta.is_contiguous() and delta.dtype == x.dtype and delta.shape == x.shape:
            return centred_norm_kernels.add_centred_rms_norm(x, delta, self.weight, self.eps, self.offset)
        x = x + delta
        return x, self(x)

    def is_fusable(self, x: torch.Tensor) -> bool:
        """The kernels have no backward: training (grad enabled) keeps the torch ops."""
        return (centred_norm_kernels.applies(x) and x.is_contiguous()
                and not (torch.is_grad_enabled() and (self.weight.requires_grad or x.requires_grad)))


def centred_norm(args: ModelArgs, size: int) -> ZeroCenteredRMSNorm:
    return ZeroCenteredRMSNorm(size, args.rms_norm_eps, args.linear.llama_cpp_values)


class GatedRMSNorm(nn.Module):
    """The DeltaNet output's per-head norm, then scaled by silu(z)."""

    def __init__(self, size: int, eps: float):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(size))
        self.eps = eps

    def forward(self, x: torch.Tensor, gate: torch.Tensor) -> torch.Tensor:
        dtype = x.dtype
        h = x.float()
        h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + self.eps)
        h = self.weight * h.to(dtype)
        return (h * F.silu(gate.float())).to(dtype)


class GatedDeltaNet(StateMixer):
    """Linear attention with a fixed-size state per sequence. Parameter names as the checkpoints' linear_attn.*, the
    input projections as LinearAttentionArgs.projections names them; with llama_cpp_values the decay rate A itself
    (-exp(A_log)) instead of A_log. The gated delta rule runs on the kernels engine.model.delta_rule_kernels picks
    for the device (torch, or fla's on CUDA); the conv is the torch one everywhere. Where
    engine.model.deltanet_step_kernels applies, a decode step's conv, gates, delta rule and output norm run its fused
    kernels on the state cache in place instead, and the per-token inputs carry the gate projections a, b (the gates
    are computed where they are used)."""

    def __init__(self, args: ModelArgs, state_layer: int):
        super().__init__()
        linear = args.linear
        self.state_layer = state_layer
        self.num_k_heads, self.num_v_heads = linear.num_key_heads, linear.num_value_heads
        self.head_k_dim, self.head_v_dim = linear.key_head_dim, linear.value_head_dim
        self.out_tail = (self.num_v_heads, self.head_v_dim)
        key_dim, value_dim = self.num_k_heads * self.head_k_dim, self.num_v_heads * self.head_v_dim
        self.split = (key_dim, key_dim, value_dim)
        conv_dim, hidden = linear.conv_dim, args.hidden_size
        self.projections, self.tiled = linear.projections.split("+"), linear.tiled_value_heads
        widths = {"in_proj_qkvz": 2 * key_dim + 2 * value_dim, "in_proj_ba": 2 * self.num_v_heads,
                  "in_proj_qkv": conv_dim, "in_proj_z": value_dim, "in_proj_b": self.num_v_heads,
                  "in_proj_a": self.num_v_heads}
        for name in self.projections:
            setattr(self, name, nn.Linear(hidden, widths[name], bias=False))
        self.fused_qkvz, self.fused_ba = "in_proj_qkvz" in self.projections, "in_proj_ba" in self.projections
        self.conv1d = nn.Conv1d(conv_dim, conv_dim, linear.conv_kernel_dim, groups=conv_dim, bias=False)
        self.dt_bias = nn.Parameter(torch.ones(self.num_v_heads))
        self.stores_decay = linear.llama_cpp_values
        if self.stores_decay:
            self.A = nn.Parameter(torch.full((self.num_v_heads,), -1.0))
        else:
            self.A_log = nn.Parameter(torch.zeros(self.num_v_heads))
        self.norm = GatedRMSNorm(self.head_v_dim, args.rms_norm_eps)
        self.out_proj = nn.Linear(value_dim, hidden, bias=False)

    def project(self, x: torch.Tensor):
        """x [T, D] -> (mixed q|k|v [T, C], z [T, H, Dv], b [T, H], a [T, H])."""
        T, ratio = x.shape[0], self.num_v_heads // self.num_k_heads
        heads = (T, self.num_v_heads)
        if self.fused_qkvz:
            qkvz = self.in_proj_qkvz(x).view(T, self.num_k_heads, -1)  # [T, Hk, 2Dk + 2*ratio*Dv]
            value_width = ratio * self.head_v_dim
            q, k, v, z = qkvz.split([self.head_k_dim, self.head_k_dim, value_width, value_width], -1)
            mixed = torch.cat((q.reshape(T, -1), k.reshape(T, -1), v.reshape(T, -1)), dim=-1)
        else:
            mixed, z = self.in_proj_qkv(x), self.in_proj_z(x)
        if self.fused_ba:
            b, a = self.in_proj_ba(x).view(T, self.num_k_heads, 2 * ratio).split([ratio, ratio], -1)
        else:
            b, a = self.in_proj_b(x), self.in_proj_a(x)
        return mixed, z.reshape(*heads, self.head_v_dim), b.reshape(heads), a.reshape(heads)

    def gates(self, a: torch.Tensor, b: torch.Tensor):
        """a, b [T, H] -> (g [T, H] log decay per token (fp32), beta [T, H])."""
        decay_rate = self.A.float() if self.stores_decay else -self.A_log.float().exp()
        return decay_rate * F.softplus(a.float() + self.dt_bias), b.sigmoid()

    def inputs(self, x: torch.Tensor):
        """x [T, D] -> (mixed q|k|v [T, C], z [T, H, Dv], g [T, H] log decay per token, beta [T, H])."""
        mixed, z, b, a = self.project(x)
        return mixed, z, *self.gates(a, b)

    def output(self, out: torch.Tensor, z: torch.Tensor) -> torch.Tensor:
        """out [T, H, Dv] of the delta rule -> the layer's output [T, D]."""
        out, z = out.reshape(-1, self.head_v_dim), z.reshape(-1, self.head_v_dim)
        if deltanet_step_kernels.applies(out):
            out = deltanet_step_kernels.gated_norm(out, z, self.norm.weight, self.norm.eps)
        else:
            out = self.norm(out, z)
        return self.out_proj(out.view(-1, self.num_v_heads * self.head_v_dim))

    def split_heads(self, mixed: torch.Tensor):
        q, k, v = mixed.split(self.split, dim=-1)
        lead = mixed.shape[:-1]
        key_heads = (*lead, self.num_k_heads, self.head_k_dim)
        q, k = q.reshape(key_heads), k.reshape(key_heads)
        if self.tiled and self.num_v_heads != self.num_k_heads:  # value head j reads key head j % Hk
            tiles = (1,) * len(lead) + (self.num_v_heads // self.num_k_heads, 1)
            q, k = q.repeat(tiles), k.repeat(tiles)
        return q, k, v.reshape(*lead, self.num_v_heads, self.head_v_dim)

    def mix_inputs(self, x: torch.Tensor):
        if deltanet_step_kernels.applies(x):
            mixed, z, b, a = self.project(x)
            return (mixed, a, b), z
        mixed, z, g, beta = self.inputs(x)
        return (mixed, g, beta), z

    def prefill(self, inputs, states):
        """One sequence's new tokens, its conv history [K-1, C] and recurrent state [H, Dk, Dv]: the chunked form."""
        mixed, g, beta = inputs
        if deltanet_step_kernels.applies(mixed):  # the inputs carry a, b (mix_inputs)
            g, beta = self.gates(g, beta)
        history, state = states
        conv_out, history = causal_conv(mixed, history, self.conv1d.weight[:, 0])
        q, k, v = self.split_heads(conv_out)
        out, state = kernels_for(mixed.device.type).chunked(q, k, v, g, beta, state)
        return out, (history, state)

    def step(self, inputs, states):
        """One new token of each of B sequences: the recurrent form. -> out [B, H, Dv]."""
        mixed, g, beta = inputs
        history, state = states
        conv_out, history = causal_conv(mixed[:, None], history, self.conv1d.weight[:, 0])
        q, k, v = self.split_heads(conv_out[:, 0])
        out, state = kernels_for(v.device.type).recurrent_step(q, k, v, g, beta, state)
        return out, (history, state)

    def decode(self, slots: torch.Tensor, inputs, cache: HybridCache) -> torch.Tensor:
        """StateMixer.decode, or where deltanet_step_kernels applies its fused kernels on the cache rows in place:
        the conv (with its history shift), then the gates and the delta rule."""
        if not deltanet_step_kernels.applies(inputs[0]):
            return super().decode(slots, inputs, cache)
        mixed, a, b = inputs
        history, state = cache.states[self.state_layer]
        conv_out = deltanet_step_kernels.conv_step(mixed, history, self.conv1d.weight[:, 0], slots)
        return deltanet_step_kernels.delta_step(self, conv_out, a, b, state, slots)

    def decode_padded(self, meta: PaddedDecodeMetadata, inputs, cache: HybridCache) -> torch.Tensor:
        """StateMixer.decode_padded, or where deltanet_step_kernels applies its fused kernels over the chains: one
        program per sequence steps its rows in order (a plain decode step's sequences are chains of one row), so
        the same kernels, and a CUDA graph of them, serve decode and verify steps."""
        if not deltanet_step_kernels.applies(inputs[0]):
            return super().decode_padded(meta, inputs, cache)
        mixed, a, b = inputs
        history, state = cache.states[self.state_layer]
        chains = (meta.state_slots, meta.state_targets, meta.chain_lengths)
        conv_out = deltanet_step_kernels.conv_step(mixed, history, self.conv1d.weight[:, 0], *chains)
        return deltanet_step_kernels.delta_step(self, conv_out, a, b, state, *chains)


class GatedAttention(Attention):
    """Full attention whose q_proj also yields a per-channel output gate (sigmoid), with zero-centred per-head
    q/k norms and partial RoPE. `kv_layer`: this layer's index among the full-attention layers (the KV cache's)."""

    def __init__(self, args: ModelArgs, kv_layer: int):
        super().__init__(args, kv_layer)
        self.q_proj = nn.Linear(args.hidden_size, 2 * self.num_heads * self.head_dim,
                                bias=args.attention.attention_bias)
        self.q_norm = centred_norm(args, self.head_dim)
        self.k_norm = centred_norm(args, self.head_dim)

    def gated_turn_and_store(self, x, rope: tuple[torch.Tensor, torch.Tensor], slots: torch.Tensor,
                             cache: HybridCache):
        """x [T, D] -> q [T, H, hd] normed and turned, gate [T, H, hd]; k (normed, turned) and v written at slots [T].
        Where centred_norm_kernels applies, after the projections one kernel (engine.model.fused_qk_rope)."""
        T = x.shape[0]
        q, k, v = self.project_qkv(x)
        if self.is_fused_step(x, rope):
            from engine.model.fused_qk_rope import fused_qk_rope_store

            q, gate = q.view(T, self.num_heads, 2 * self.head_dim).chunk(2, dim=-1)  # views: q's heads at 2 hd
            k, v = k.view(T, self.num_kv_heads, self.head_dim), v.view(T, self.num_kv_heads, self.head_dim)
            q = fused_qk_rope_store(q, k, v, self.q_norm.weight, self.k_norm.weight, self.q_norm.eps, *rope, slots,
                                    cache.k[self.layer], cache.v[self.layer], centred_offset=self.q_norm.offset)
            return q, gate
        q, k, v = (t.contiguous() for t in (q, k, v))
        q, gate = q.view(T, self.num_heads, 2 * self.head_dim).chunk(2, dim=-1)
        k = k.view(T, self.num_kv_heads, self.head_dim)
        v = v.view(T, self.num_kv_heads, self.head_dim)
        cache.store(self.layer, slots, apply_rope(self.k_norm(k), *rope), v)
        return apply_rope(self.q_norm(q), *rope), gate

    def is_fused_step(self, x: torch.Tensor, rope: tuple[torch.Tensor, torch.Tensor]) -> bool:
        """Whether the one kernel computes what the torch ops compute here: the norms alike, one cos/sin row per
        token in x's dtype, no gradients."""
        cos, sin = rope
        norms = (self.q_norm, self.k_norm)
        return (centred_norm_kernels.applies(x) and cos.dim() == 2 and cos.shape == sin.shape
                and cos.shape[0] == x.shape[0] and cos.shape[1] % 2 == 0 and cos.shape[1] <= self.head_dim
                and cos.dtype == sin.dtype == x.dtype and self.q_norm.offset == self.k_norm.offset
                and self.q_norm.eps == self.k_norm.eps
                and not (torch.is_grad_enabled() and any(norm.weight.requires_grad for norm in norms)))

    def gated_output(self, out: torch.Tensor, gate: torch.Tensor) -> torch.Tensor:
        """out [T, H, hd] of the attention, gate [T, H, hd] -> o_proj(out * sigmoid(gate)) [T, D]."""
        T = out.shape[0]
        if gate_kernels.applies(out) and out.is_contiguous():
            return self.o_proj(gate_kernels.sigmoid_gate(out, gate).view(T, -1))
        return self.o_proj(out.reshape(T, -1) * torch.sigmoid(gate.reshape(T, -1)))

    def forward(self, x, rope: tuple[torch.Tensor, torch.Tensor], meta: AttentionMetadata, cache: HybridCache):
        q, gate = self.gated_turn_and_store(x, rope, meta.slot_mapping, cache)
        return self.gated_output(self.attend_spans(q, meta, cache), gate)  # attention [T, H, hd]

    def forward_padded(self, x, rope, meta: PaddedDecodeMetadata, cache: HybridCache) -> torch.Tensor:
        q, gate = self.gated_turn_and_store(x, rope, meta.slot_mapping, cache)
        return self.gated_output(self.attend_padded(q, meta, cache), gate)


class UnrotatedAttention(Attention):
    """GQA without RoPE (nemotron_h's attention layers: its Mamba-2 layers carry the order of the tokens)."""

    def turn_and_store(self, x, rope, slots: torch.Tensor, cache: HybridCache) -> torch.Tensor:
        q, k, v = self.project(x)
        cache.store(self.layer, slots, k, v)
        return q
