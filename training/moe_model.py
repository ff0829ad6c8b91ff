"""A plain-torch MoE language model for training, mirroring the HF math of qwen3_moe, olmoe and
mixtral exactly (RMSNorm, q/k norm, RoPE, GQA, softmax router -> top-k -> optional renorm,
SwiGLU experts), with all experts of a layer computed by three batched matmuls.

Shape legend: B batch, S sequence, T = B*S tokens, D hidden, H / G query / kv heads,
Hd head dim, E experts, K top-k, I expert intermediate, C expert capacity (max tokens of one
expert this step), V vocabulary.
"""

from __future__ import annotations

import dataclasses

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.checkpoint import checkpoint

from engine.model.layers import RMSNorm
from training.presets import ArchSpec


@dataclasses.dataclass
class RouterOutput:
    logits: torch.Tensor  # [T, E]
    topk_ids: torch.Tensor  # [T, K]


def rope_cos_sin(arch: ArchSpec, seq_len: int, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    inv_freq = 1.0 / (arch.rope_theta ** (torch.arange(0, arch.head_dim, 2, device=device).float() / arch.head_dim))
    freqs = torch.outer(torch.arange(seq_len, device=device).float(), inv_freq)  # [S, Hd/2]
    emb = torch.cat((freqs, freqs), dim=-1)  # [S, Hd]
    return emb.cos(), emb.sin()


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


class Attention(nn.Module):
    def __init__(self, arch: ArchSpec):
        super().__init__()
        self.arch = arch
        self.q_proj = nn.Linear(arch.hidden_size, arch.num_heads * arch.head_dim, bias=False)
        self.k_proj = nn.Linear(arch.hidden_size, arch.num_kv_heads * arch.head_dim, bias=False)
        self.v_proj = nn.Linear(arch.hidden_size, arch.num_kv_heads * arch.head_dim, bias=False)
        self.o_proj = nn.Linear(arch.num_heads * arch.head_dim, arch.hidden_size, bias=False)
        if arch.qk_norm == "head":
            self.q_norm = RMSNorm(arch.head_dim, arch.rms_norm_eps)
            self.k_norm = RMSNorm(arch.head_dim, arch.rms_norm_eps)
        elif arch.qk_norm == "full":
            self.q_norm = RMSNorm(arch.num_heads * arch.head_dim, arch.rms_norm_eps)
            self.k_norm = RMSNorm(arch.num_kv_heads * arch.head_dim, arch.rms_norm_eps)

    def project(self, x: torch.Tensor, proj: nn.Linear, norm_name: str, num_heads: int) -> torch.Tensor:
        batch, seq, _ = x.shape
        y = proj(x)
        if self.arch.qk_norm == "full" and norm_name:
            y = getattr(self, norm_name)(y)
        y = y.view(batch, seq, num_heads, self.arch.head_dim)
        if self.arch.qk_norm == "head" and norm_name:
            y = getattr(self, norm_name)(y)
        return y.transpose(1, 2)  # [B, heads, S, Hd]

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        batch, seq, _ = x.shape
        q = self.project(x, self.q_proj, "q_norm", self.arch.num_heads)  # [B, H, S, Hd]
        k = self.project(x, self.k_proj, "k_norm", self.arch.num_kv_heads)  # [B, G, S, Hd]
        v = self.project(x, self.v_proj, "", self.arch.num_kv_heads)
        cos, sin = cos.to(q.dtype), sin.to(q.dtype)
        q, k = q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin
        q, k = q.to(v.dtype), k.to(v.dtype)  # under autocast the norms return fp32, v is bf16
        groups = self.arch.num_heads // self.arch.num_kv_heads
        k, v = k.repeat_interleave(groups, dim=1), v.repeat_interleave(groups, dim=1)  # [B, H, S, Hd]
        out = F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=self.arch.head_dim ** -0.5)
        return self.o_proj(out.transpose(1, 2).reshape(batch, seq, -1))


class SparseMoe(nn.Module):
    def __init__(self, arch: ArchSpec):
        super().__init__()
        self.arch = arch
        e, i, d = arch.num_experts, arch.moe_intermediate_size, arch.hidden_size
        self.gate = nn.Linear(d, e, bias=False)
        self.gate_proj = nn.Parameter(torch.empty(e, i, d))  # [E, I, D], HF's per-expert [out, in]
        self.up_proj = nn.Parameter(torch.empty(e, i, d))  # [E, I, D]
        self.down_proj = nn.Parameter(torch.empty(e, d, i))  # [E, D, I]

    def route(self, x: torch.Tensor) -> tuple[RouterOutput, torch.Tensor]:
        logits = self.gate(x)  # [T, E]
        probs = F.softmax(logits, dim=-1, dtype=torch.float)
        weights, ids = torch.topk(probs, self.arch.top_k, dim=-1)  # [T, K]
        if self.arch.norm_topk_prob:
            weights = weights / weights.sum(dim=-1, keepdim=True)
        return RouterOutput(logits, ids), weights.to(x.dtype)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, RouterOutput]:
        shape = x.shape
        x = x.reshape(-1, shape[-1])  # [T, D]
        router, weights = self.route(x)
        num_tokens, top_k = router.topk_ids.shape
        flat_ids = router.topk_ids.reshape(-1)  # [T*K]
        order = torch.argsort(flat_ids, stable=True)
        sorted_ids = flat_ids[order]
        counts = torch.bincount(flat_ids, minlength=self.arch.num_experts)  # [E]
        starts = torch.cumsum(counts, 0) - counts
        slot = torch.arange(flat_ids.numel(), device=x.device) - starts[sorted_ids]  # rank inside expert
        token = order // top_k
        capacity = int(counts.max())
        compute_dtype = torch.bfloat16 if torch.is_autocast_enabled(x.device.type) else x.dtype
        buffer = x.new_zeros(self.arch.num_experts, capacity, shape[-1], dtype=compute_dtype)  # [E, C, D]
        buffer[sorted_ids, slot] = x[token].to(compute_dtype)
        hidden = F.silu(torch.bmm(buffer, self.gate_proj.transpose(1, 2))) * torch.bmm(
            buffer, self.up_proj.transpose(1, 2))  # [E, C, I]
        expert_out = torch.bmm(hidden, self.down_proj.transpose(1, 2))  # [E, C, D]
        contribution = expert_out[sorted_ids, slot] * weights.reshape(-1)[order, None]  # [T*K, D]
        out = torch.zeros_like(x).index_add_(0, token, contribution.to(x.dtype))
        return out.reshape(shape), router


class DecoderLayer(nn.Module):
    def __init__(self, arch: ArchSpec):
        super().__init__()
        self.self_attn = Attention(arch)
        self.mlp = SparseMoe(arch)
        self.input_layernorm = RMSNorm(arch.hidden_size, arch.rms_norm_eps)
        self.post_attention_layernorm = RMSNorm(arch.hidden_size, arch.rms_norm_eps)

    def forward(self, x, cos, sin) -> tuple[torch.Tensor, RouterOutput]:
        x = x + self.self_attn(self.input_layernorm(x), cos, sin)
        moe_out, router = self.mlp(self.post_attention_layernorm(x))
        return x + moe_out, router


class MoeLM(nn.Module):
    def __init__(self, arch: ArchSpec, is_checkpointed: bool = False):
        super().__init__()
        self.arch = arch
        self.is_checkpointed = is_checkpointed  # recompute each layer in backward (saves memory)
        self.embed_tokens = nn.Embedding(arch.vocab_size, arch.hidden_size)
        self.layers = nn.ModuleList(DecoderLayer(arch) for _ in range(arch.num_layers))
        self.norm = RMSNorm(arch.hidden_size, arch.rms_norm_eps)
        self.lm_head = nn.Linear(arch.hidden_size, arch.vocab_size, bias=False)

    def forward(self, input_ids: torch.Tensor) -> tuple[torch.Tensor, list[RouterOutput]]:
        hidden, routers = self.final_hidden(input_ids)
        return self.lm_head(hidden), routers  # [B, S, V]

    def final_hidden(self, input_ids: torch.Tensor) -> tuple[torch.Tensor, list[RouterOutput]]:
        """The last layer's output after the final norm [B, S, D] (what lm_head and a draft layer read)."""
        cos, sin = rope_cos_sin(self.arch, input_ids.shape[1], input_ids.device)
        x = self.embed_tokens(input_ids)  # [B, S, D]
        routers = []
        for layer in self.layers:
            if self.is_checkpointed and self.training:
                x, router = checkpoint(layer, x, cos, sin, use_reentrant=False)
            else:
                x, router = layer(x, cos, sin)
            routers.append(router)
        return self.norm(x), routers


def init_weights(model: MoeLM, seed: int, std: float = 0.02) -> None:
    generator = torch.Generator().manual_seed(seed)
    for name, param in sorted(model.named_parameters()):
        with torch.no_grad():
            if name.endswith("norm.weight") or "layernorm" in name:
                param.fill_(1.0)
            else:
                param.copy_(torch.randn(param.shape, generator=generator) * std)


def load_balancing_loss(routers: list[RouterOutput], num_experts: int) -> torch.Tensor:
    """Switch-style E * sum_e(f_e * P_e) per layer, averaged over layers and divided by top-k
    so that perfectly balanced routing scores 1.0 (HF's load_balancing_loss_func up to that scale)."""
    losses = []
    for router in routers:
        num_tokens, top_k = router.topk_ids.shape
        fraction = torch.bincount(router.topk_ids.reshape(-1), minlength=num_experts).float() / num_tokens
        mean_prob = F.softmax(router.logits, dim=-1, dtype=torch.float).mean(0)  # [E]
        losses.append(num_experts * (fraction * mean_prob).sum() / top_k)
    return torch.stack(losses).mean()
