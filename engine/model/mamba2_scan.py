"""The Mamba-2 selective scan in plain torch (the CPU path and the reference for CUDA kernels), written to match
transformers' torch path (nemotron_h's mamba2_chunk_scan and mamba2_selective_state_update) op for op: the chunked
form (state space duality) for a prompt, the recurrent form for one new token.

Shapes: T tokens, B sequences, H heads, P head dim, G groups (each shared by H / G heads), N state size, Q chunk
length. A sequence's SSM state is [H, P, N], fp32."""

from __future__ import annotations

import torch
import torch.nn.functional as F


def segment_sum(x: torch.Tensor) -> torch.Tensor:
    """x [..., Q] -> [..., Q, Q]: entry (i, j) the sum of x[j+1 .. i] for j <= i, -inf above the diagonal."""
    size = x.size(-1)
    x = x[..., None].expand(*x.size(), size)
    below = torch.tril(torch.ones(size, size, device=x.device, dtype=torch.bool), diagonal=-1)
    sums = torch.cumsum(x.masked_fill(~below, 0), dim=-2)
    keep = torch.tril(torch.ones(size, size, device=x.device, dtype=torch.bool), diagonal=0)
    return sums.masked_fill(~keep, -torch.inf)


def chunks(x: torch.Tensor, pad: int, chunk_size: int) -> torch.Tensor:
    """[1, T, ...] -> [1, T/Q, Q, ...], zero-padded to whole chunks."""
    x = F.pad(x, (0, 0) * (x.dim() - 2) + (0, pad))
    return x.reshape(x.shape[0], -1, chunk_size, *x.shape[2:])


def discretised_dt(dt: torch.Tensor, dt_bias: torch.Tensor) -> torch.Tensor:
    return F.softplus(dt + dt_bias.to(dt.dtype))


def chunk_scan(x, dt, A, B, C, D, dt_bias, state: torch.Tensor, chunk_size: int,
               dt_limit: tuple[float, float]) -> tuple[torch.Tensor, torch.Tensor]:
    """One sequence's T tokens. x [T, H, P]; dt [T, H] (before dt_bias and softplus); A [H] (negative); B, C
    [T, G, N]; D, dt_bias [H]; state [H, P, N]. -> (y [T, H, P] fp32 with the D skip, final state [H, P, N] fp32)."""
    x, dt, B, C = x[None], dt[None], B[None], C[None]  # a batch of one, as transformers computes it
    T, heads = x.shape[1], x.shape[2]
    dt = torch.clamp(discretised_dt(dt, dt_bias), min=dt_limit[0], max=dt_limit[1])
    x = x.float()
    B = B.float().repeat_interleave(heads // B.shape[2], dim=2, output_size=heads)
    C = C.float().repeat_interleave(heads // C.shape[2], dim=2, output_size=heads)
    pad = (chunk_size - T % chunk_size) % chunk_size
    skip = D[..., None] * F.pad(x, (0, 0, 0, 0, 0, pad))
    x = x * dt[..., None].float()
    A = A.to(x.dtype) * dt.float()  # [1, T, H]
    x, A, B, C = (chunks(t, pad, chunk_size) for t in (x, A, B, C))
    A = A.permute(0, 3, 1, 2)  # [1, H, T/Q, Q]
    A_cumsum = torch.cumsum(A, dim=-1)
    L = torch.exp(segment_sum(A))
    G = torch.einsum("bclhn,bcshn->bclsh", C, B)
    M = G * L.permute(0, 2, 3, 4, 1)
    y_diag = torch.einsum("bclsh,bcshp->bclhp", M, x)
    decay_states = torch.exp(A_cumsum[:, :, :, -1:] - A_cumsum)
    B_decay = B * decay_states.permute(0, -2, -1, 1)[..., None]
    states = torch.einsum("bclhn,bclhp->bchpn", B_decay, x)
    states = torch.cat([state[None, None].to(states.dtype), states], dim=1)
    decay_chunk = torch.exp(segment_sum(F.pad(A_cumsum[:, :, :, -1], (1, 0)))).transpose(1, 3)
    new_states = torch.einsum("bzch,bzhpn->bchpn", decay_chunk, states)
    states, final = new_states[:, :-1], new_states[:, -1]
    state_decay_out = torch.exp(A_cumsum)
    y_off = torch.einsum("bclhn,bchpn->bclhp", C, states) * state_decay_out.permute(0, 2, 3, 1)[..., None]
    y = (y_diag + y_off).reshape(1, -1, heads, x.shape[-1]) + skip
    return y[0, :T], final[0]


def state_step(x, dt, A, B, C, D, dt_bias, state: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """One new token of each of B sequences. x [B, H, P]; dt [B, H]; B, C [B, G, N]; state [B, H, P, N] fp32.
    -> (y [B, H, P] in C's dtype with the D skip, new state)."""
    batch, heads, head_dim = x.shape
    groups, size = B.shape[1], B.shape[2]
    dt = discretised_dt(dt, dt_bias)[..., None, None]  # [B, H, 1, 1]
    dA = torch.exp(dt.float() * A.float()[:, None, None])  # [B, H, 1, 1]
    B = B[:, :, None].expand(batch, groups, heads // groups, size).reshape(batch, heads, 1, size)
    dBx = (dt * B) * x[..., None]  # [B, H, P, N]
    state = state * dA + dBx
    C = C[:, :, None].expand(batch, groups, heads // groups, size).reshape(batch * heads, size, 1)
    y = torch.bmm(state.to(C.dtype).view(batch * heads, head_dim, size), C).view(batch, heads, head_dim)
    return (y + x * D[:, None]).to(y.dtype), state
