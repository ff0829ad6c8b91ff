"""The Triton kernels of engine.model.deltanet_step_kernels (which documents them and calls them); imported where
they first run, so that the engine imports without Triton. exp and log1p are libdevice's (torch's CUDA kernels call
the same functions); the Triton interpreter has no libdevice, so under it they are numpy's exp and log(1 + x)."""

from __future__ import annotations

import os

import triton
import triton.language as tl

if os.environ.get("TRITON_INTERPRET") == "1":

    @triton.jit
    def exp(x):
        return tl.exp(x)

    @triton.jit
    def log1p(x):
        return tl.log(1.0 + x)

else:
    from triton.language.extra import libdevice

    @triton.jit
    def exp(x):
        return libdevice.exp(x)

    @triton.jit
    def log1p(x):
        return libdevice.log1p(x)


@triton.jit
def silu(x):  # fp32: x / (1 + exp(-x)), as torch's silu
    return tl.math.div_rn(x, 1.0 + exp(-x))


@triton.jit
def chain_input(history, x_ptr, first, index, channels, cols, ok, TAPS: tl.constexpr):
    """Entry `index` of a chain's inputs: the slot's K-1 stored inputs (history points at them), then the chain's
    rows from x's row `first` on."""
    from_history = index < TAPS - 1
    earlier = tl.where(from_history, first, first + index - (TAPS - 1))
    value = tl.load(x_ptr + earlier * channels + cols, mask=ok & ~from_history, other=0.0)
    stored = tl.load(history + tl.where(from_history, index, 0) * channels, mask=ok & from_history, other=0.0)
    return tl.where(from_history, stored.to(value.dtype), value)


@triton.jit
def conv_step_kernel(x_ptr, history_ptr, weight_ptr, slots_ptr, targets_ptr, lengths_ptr, out_ptr, channels,
                     TAPS: tl.constexpr, BLOCK: tl.constexpr, CHAINED: tl.constexpr):
    first = tl.program_id(0).to(tl.int64)
    cols = tl.program_id(1).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    ok = cols < channels
    slot = tl.load(slots_ptr + first).to(tl.int64)
    history = history_ptr + slot * (TAPS - 1) * channels + cols
    num_rows = tl.load(lengths_ptr + first) if CHAINED else 1
    for j in range(0, num_rows):
        row = first + j
        out = (chain_input(history, x_ptr, first, j, channels, cols, ok, TAPS).to(tl.float32)
               * tl.load(weight_ptr + cols * TAPS, mask=ok, other=0.0).to(tl.float32))
        for tap in tl.static_range(1, TAPS):
            value = chain_input(history, x_ptr, first, j + tap, channels, cols, ok, TAPS)
            out = out + value.to(tl.float32) * tl.load(weight_ptr + cols * TAPS + tap, mask=ok, other=0.0).to(
                tl.float32)
        x = tl.load(x_ptr + row * channels + cols, mask=ok, other=0.0)
        out = silu(out.to(x.dtype).to(tl.float32))
        tl.store(out_ptr + row * channels + cols, out.to(out_ptr.dtype.element_ty), mask=ok)
        target = tl.load(targets_ptr + row).to(tl.int64) if CHAINED else slot
        # the stored inputs after this row: entries j+1.. of the chain's inputs; where the target is the slot (the
        # chain's last row), each entry is read before any store reaches it (entry j+1+t is written at t < j+1+t)
        kept = history_ptr + target * (TAPS - 1) * channels + cols
        for tap in tl.static_range(0, TAPS - 1):
            value = chain_input(history, x_ptr, first, j + 1 + tap, channels, cols, ok, TAPS)
            tl.store(kept + tap * channels, value.to(history_ptr.dtype.element_ty), mask=ok)


@triton.jit
def delta_step_kernel(conv_ptr, a_ptr, b_ptr, rate_ptr, dt_bias_ptr, state_ptr, slots_ptr, targets_ptr,
                      lengths_ptr, out_ptr, channels, key_scale, KEY_HEADS: tl.constexpr, HEADS: tl.constexpr,
                      DK: tl.constexpr, DV: tl.constexpr, BK: tl.constexpr, BV: tl.constexpr, TILED: tl.constexpr,
                      STORES_DECAY: tl.constexpr, CHAINED: tl.constexpr):
    first_head = tl.program_id(0).to(tl.int64)
    first, head = first_head // HEADS, first_head % HEADS
    if TILED:  # value head j reads key head j % Hk
        key_head = head % KEY_HEADS
    else:  # each key head serves HEADS / KEY_HEADS consecutive value heads
        key_head = head // (HEADS // KEY_HEADS)
    ks = tl.arange(0, BK)
    cols = tl.program_id(1).to(tl.int64) * BV + tl.arange(0, BV)
    k_ok, v_ok = ks < DK, cols < DV
    cell_ok = k_ok[:, None] & v_ok[None, :]
    cells = head * DK * DV + ks[:, None] * DV + cols[None, :]
    if STORES_DECAY:
        rate = tl.load(rate_ptr + head).to(tl.float32)
    else:
        rate = -exp(tl.load(rate_ptr + head).to(tl.float32))
    slot = tl.load(slots_ptr + first).to(tl.int64)
    if CHAINED:
        num_rows = tl.load(lengths_ptr + first)
        live = ks < tl.where(num_rows > 0, DK, 0)  # the rows after a chain's first read no state
        state = tl.load(state_ptr + slot * HEADS * DK * DV + cells, mask=live[:, None] & v_ok[None, :], other=0.0)
    else:
        num_rows = 1
        state = tl.load(state_ptr + slot * HEADS * DK * DV + cells, mask=cell_ok, other=0.0)
    for j in range(0, num_rows):
        row = first + j
        base = conv_ptr + row * channels
        q = tl.load(base + key_head * DK + ks, mask=k_ok, other=0.0).to(tl.float32)
        k = tl.load(base + (KEY_HEADS + key_head) * DK + ks, mask=k_ok, other=0.0).to(tl.float32)
        v = tl.load(base + 2 * KEY_HEADS * DK + head * DV + cols, mask=v_ok, other=0.0)
        q = q * tl.math.rsqrt(tl.sum(q * q, 0) + 1e-6)
        q = tl.math.div_rn(q, key_scale)
        k = k * tl.math.rsqrt(tl.sum(k * k, 0) + 1e-6)
        a = tl.load(a_ptr + row * HEADS + head).to(tl.float32) + tl.load(dt_bias_ptr + head).to(tl.float32)
        softplus = tl.where(a > 20.0, a, log1p(exp(a)))
        decay = exp(rate * softplus)
        b = tl.load(b_ptr + row * HEADS + head)
        beta = tl.math.div_rn(1.0, 1.0 + exp(-b.to(tl.float32))).to(b.dtype).to(tl.float32)
        state = state * decay
        memory = tl.sum(state * k[:, None], 0)  # [BV]
        delta = (v.to(tl.float32) - memory) * beta
        state = state + k[:, None] * delta[None, :]
        out = tl.sum(state * q[:, None], 0)
        target = tl.load(targets_ptr + row).to(tl.int64) if CHAINED else slot
        tl.store(state_ptr + target * HEADS * DK * DV + cells, state, mask=cell_ok)
        tl.store(out_ptr + (row * HEADS + head) * DV + cols, out.to(out_ptr.dtype.element_ty), mask=v_ok)


@triton.jit
def gated_norm_kernel(x_ptr, gate_ptr, weight_ptr, out_ptr, eps, DV: tl.constexpr, BV: tl.constexpr,
                      ROUND_SCALED: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BV)
    ok = cols < DV
    x = tl.load(x_ptr + row * DV + cols, mask=ok, other=0.0)
    h = x.to(tl.float32)
    h = h * tl.math.rsqrt(tl.sum(h * h, 0) / DV + eps)
    h = tl.load(weight_ptr + cols, mask=ok, other=0.0).to(tl.float32) * h.to(x.dtype).to(tl.float32)
    if ROUND_SCALED:  # weight * h is in the activations' dtype where the weight is (torch's promotion)
        h = h.to(x.dtype).to(tl.float32)
    gate = silu(tl.load(gate_ptr + row * DV + cols, mask=ok, other=0.0).to(tl.float32))
    tl.store(out_ptr + row * DV + cols, (h * gate).to(out_ptr.dtype.element_ty), mask=ok)
