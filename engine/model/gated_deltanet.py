"""The Gated DeltaNet token mixer's math in plain torch (the CPU path and the reference for CUDA kernels): a short
causal depthwise conv, and the gated delta rule in its chunked form (prefill) and its recurrent form (decode),
written to match transformers' torch fallback (qwen3_next, qwen3_5) op for op.

Shapes: T tokens, C conv channels (q | k | v of every head), K conv taps, H value heads, Dk/Dv key/value head dims.
The recurrent state of one sequence is [H, Dk, Dv] in fp32, as transformers keeps it."""

from __future__ import annotations

import torch
import torch.nn.functional as F

CHUNK_SIZE = 64


def l2norm(x: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    return x * torch.rsqrt((x * x).sum(dim=-1, keepdim=True) + eps)


def causal_conv(x: torch.Tensor, history: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None,
                silu: bool = True) -> tuple[torch.Tensor, torch.Tensor]:
    """x [..., T, C] new inputs; history [..., K-1, C] the inputs before them (zeros at a sequence's start);
    weight [C, K]; bias [C] or None. -> (silu(conv) [..., T, C] (the conv alone without silu), the new history
    [..., K-1, C]). The taps are summed in one fixed order in fp32 and rounded once, so a token's output has the
    same bits whether it is computed in a prefill or in a decode step, alone or in a batch."""
    num_taps, T = weight.shape[1], x.shape[-2]
    full = torch.cat((history.to(x.dtype), x), dim=-2)  # [..., K-1+T, C]
    wide, taps = full.float(), weight.float()
    out = wide[..., 0:T, :] * taps[:, 0]
    for tap in range(1, num_taps):
        out = out + wide[..., tap : tap + T, :] * taps[:, tap]
    if bias is not None:
        out = out + bias.float()
    out = out.to(x.dtype)
    return F.silu(out) if silu else out, full[..., T:, :]


def expand_heads(x: torch.Tensor, num_value_heads: int) -> torch.Tensor:
    """[..., Hk, D] -> [..., H, D]: each key head serves H / Hk consecutive value heads. An expand and one copy (what
    repeat_interleave computes), with no host sync, so a CUDA graph may hold it."""
    *lead, key_heads, dim = x.shape
    if key_heads == num_value_heads:
        return x
    return x[..., None, :].expand(*lead, key_heads, num_value_heads // key_heads, dim).reshape(*lead, -1, dim)


def recurrent_step(q, k, v, g, beta, state: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """One token of B sequences. q, k [B, Hk, Dk]; v [B, H, Dv]; g, beta [B, H]; state [B, H, Dk, Dv] fp32.
    -> (out [B, H, Dv] in v's dtype, new state)."""
    dtype, heads = v.dtype, v.shape[-2]
    q, k = (l2norm(expand_heads(t, heads).float()) for t in (q, k))
    q = q / (q.shape[-1] ** 0.5)
    v, g, beta = v.float(), g.float(), beta.float()
    state = state * g.exp()[..., None, None]
    memory = (state * k[..., None]).sum(dim=-2)  # [B, H, Dv]
    delta = (v - memory) * beta[..., None]
    state = state + k[..., None] * delta[..., None, :]
    out = (state * q[..., None]).sum(dim=-2)  # [B, H, Dv]
    return out.to(dtype), state


def chunked(q, k, v, g, beta, state: torch.Tensor, chunk_size: int = CHUNK_SIZE) -> tuple[torch.Tensor, torch.Tensor]:
    """T tokens of one sequence. q, k [T, Hk, Dk]; v [T, H, Dv]; g, beta [T, H]; state [H, Dk, Dv] fp32.
    -> (out [T, H, Dv] in v's dtype, final state). The UT-transform form: within a chunk the delta rule's updates
    are solved as one triangular system; chunks run in order."""
    dtype, (T, heads) = v.dtype, v.shape[:2]
    q, k = (l2norm(expand_heads(t, heads).transpose(0, 1).float()) for t in (q, k))  # [H, T, Dk]
    q = q * q.shape[-1] ** -0.5
    v, beta, g = (t.transpose(0, 1).float() for t in (v, beta, g))  # [H, T, Dv], [H, T] x2
    pad = (chunk_size - T % chunk_size) % chunk_size
    q, k, v = (F.pad(t, (0, 0, 0, pad)) for t in (q, k, v))
    beta, g = F.pad(beta, (0, pad)), F.pad(g, (0, pad))
    v_beta, k_beta = v * beta[..., None], k * beta[..., None]
    # [H, N, C, D]: N chunks of C tokens
    q, k, k_beta, v_beta = (t.reshape(heads, -1, chunk_size, t.shape[-1]) for t in (q, k, k_beta, v_beta))
    decay = g.reshape(heads, -1, chunk_size).cumsum(dim=-1)  # [H, N, C] log decay since the chunk's start
    upper = torch.ones(chunk_size, chunk_size, dtype=torch.bool, device=q.device).triu(1)
    pairwise = (decay[..., :, None] - decay[..., None, :]).masked_fill(upper, float("-inf")).exp()  # [H, N, C, C]
    system = (k_beta @ k.transpose(-1, -2)) * pairwise
    intra = (q @ k.transpose(-1, -2)) * pairwise
    values = torch.linalg.solve_triangular(system, v_beta, upper=False, unitriangular=True)
    k_decayed = torch.linalg.solve_triangular(system, k_beta * decay.exp()[..., None], upper=False, unitriangular=True)
    q = q * decay.exp()[..., None]
    k = k * (decay[..., -1:] - decay).exp()[..., None]
    chunk_decay = decay[..., -1].exp()[..., None, None]  # [H, N, 1, 1]
    state = state.float()
    out = torch.zeros_like(values)
    for i in range(values.shape[1]):
        v_new = values[:, i] - k_decayed[:, i] @ state
        out[:, i] = q[:, i] @ state + intra[:, i] @ v_new
        state = state * chunk_decay[:, i] + k[:, i].transpose(-1, -2) @ v_new
    out = out.reshape(heads, -1, out.shape[-1])[:, :T]  # [H, T, Dv]
    return out.transpose(0, 1).to(dtype).contiguous(), state
