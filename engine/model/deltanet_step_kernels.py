"""A Gated DeltaNet decode step in three Triton kernels (CUDA; the Triton interpreter runs them on the CPU for tests):

- `conv_step`: the short causal conv over each sequence's K-1 stored inputs and its new row (the taps summed in
  fp32 in causal_conv's order, rounded once, then silu), the stored inputs shifted in place in the state cache;
- `delta_step`: the gates (g = decay rate * softplus(a + dt_bias), beta = sigmoid(b)), the l2norm of q and k and the
  gated delta rule, the fp32 state read and written in place in its cache row: no gather or scatter of the states;
- `gated_norm`: the output's per-head RMSNorm in fp32, its weight, times silu(z).

The unfused path (GatedDeltaNet.inputs, gated_deltanet.causal_conv, the delta rule kernels, GatedRMSNorm, and the
state cache's gather and scatter) is the reference. One program never reads another sequence's data: each conv program
owns one sequence's block of channels, each delta program one (sequence, value head, block of value columns) with its
reductions over Dk inside it (no atomics, no split reductions), each norm program one (token, head). So a row's bits
do not depend on the other rows of the batch. A verify step's rows of one sequence (chains, engine.model.state_chains)
run in order inside its first row's programs, each row computing what a one-row step from the state before it
computes; the programs of the rows after it have nothing to do. No host sync and no shape depends on data: a CUDA
graph may hold them. FP contraction is off (a * b + c rounds twice, as torch's separate kernels do); exp and log1p
are libdevice's and divisions round to nearest, as torch's CUDA kernels compute them."""

from __future__ import annotations

import torch

from engine.system.triton_support import fused_step

CONV_BLOCK = 256
VALUE_BLOCK = 8  # value columns per delta program (fla's fused_recurrent blocking)
_built: dict = {}


def applies(x: torch.Tensor) -> bool:
    """Whether GatedDeltaNet's decode steps on x's device run the fused kernels: on CUDA wherever Triton is
    installed; the CPU keeps the unfused torch path (tests run the kernels there under Triton's interpreter)."""
    return x.is_cuda and fused_step()


def _kernels():
    if not _built:
        import triton

        from engine.model import deltanet_step_triton as kernels

        _built.update(conv=kernels.conv_step_kernel, delta=kernels.delta_step_kernel, norm=kernels.gated_norm_kernel,
                      cdiv=triton.cdiv, next_power_of_2=triton.next_power_of_2)
    return _built


NO_FUSION = {"enable_fp_fusion": False}


def conv_step(x: torch.Tensor, history: torch.Tensor, weight: torch.Tensor, slots: torch.Tensor,
              targets: torch.Tensor | None = None, chain_lengths: torch.Tensor | None = None) -> torch.Tensor:
    """x [B, C] new rows; history [N, K-1, C] the state cache's stored inputs (contiguous), rows slots [B] (distinct);
    weight [C, K]. -> silu(conv) [B, C] in x's dtype; history[slots] shifted to end with x, in place. With chains
    (engine.model.state_chains: targets [B], chain_lengths [B]) a sequence's rows are consecutive: its first row's
    program convolves them in order, each over the slot's stored inputs and the rows before it, and writes the
    stored inputs after each row at its target row."""
    k = _kernels()
    batch, channels = x.shape
    out = torch.empty_like(x)
    is_chained = targets is not None
    if batch:
        k["conv"][(batch, k["cdiv"](channels, CONV_BLOCK))](
            x.contiguous(), history, weight.contiguous(), slots, targets if is_chained else slots,
            chain_lengths if is_chained else slots, out, channels, TAPS=weight.shape[1], BLOCK=CONV_BLOCK,
            CHAINED=is_chained, num_warps=4, **NO_FUSION)
    return out


def delta_step(mixer, conv_out: torch.Tensor, a: torch.Tensor, b: torch.Tensor, state: torch.Tensor,
               slots: torch.Tensor, targets: torch.Tensor | None = None,
               chain_lengths: torch.Tensor | None = None) -> torch.Tensor:
    """One token of B sequences through `mixer`'s (a GatedDeltaNet) gates and delta rule. conv_out [B, C] (q | k | v);
    a, b [B, H] the gate projections; state [N, H, Dk, Dv] fp32 (contiguous), rows slots [B] updated in place.
    -> out [B, H, Dv] in conv_out's dtype. With chains (as conv_step's) a sequence's first row's programs step its
    rows in order, the state carried between them in registers and written after each row at its target row."""
    k = _kernels()
    batch, heads, dk, dv = conv_out.shape[0], mixer.num_v_heads, mixer.head_k_dim, mixer.head_v_dim
    out = conv_out.new_empty(batch, heads, dv)
    block = min(VALUE_BLOCK, k["next_power_of_2"](dv))
    rate = mixer.A if mixer.stores_decay else mixer.A_log
    tiled = mixer.tiled and heads != mixer.num_k_heads
    is_chained = targets is not None
    if batch:
        k["delta"][(batch * heads, k["cdiv"](dv, block))](
            conv_out.contiguous(), a.contiguous(), b.contiguous(), rate, mixer.dt_bias, state, slots,
            targets if is_chained else slots, chain_lengths if is_chained else slots, out, conv_out.shape[1],
            float(dk**0.5), KEY_HEADS=mixer.num_k_heads, HEADS=heads, DK=dk, DV=dv, BK=k["next_power_of_2"](dk),
            BV=block, TILED=tiled, STORES_DECAY=mixer.stores_decay, CHAINED=is_chained, num_warps=1, **NO_FUSION)
    return out


def gated_norm(x: torch.Tensor, gate: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    """GatedRMSNorm's forward: x, gate [R, Dv] -> [R, Dv] in x's dtype."""
    k = _kernels()
    rows, dv = x.shape
    out = torch.empty_like(x)
    if rows:
        k["norm"][(rows,)](x.contiguous(), gate.contiguous(), weight, out, eps, DV=dv,
                           BV=k["next_power_of_2"](dv),
                           ROUND_SCALED=torch.promote_types(weight.dtype, x.dtype) == x.dtype, num_warps=1,
                           **NO_FUSION)
    return out
