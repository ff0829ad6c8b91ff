"""The gated delta rule on fla's Triton kernels (fla-core, CUDA): the same contract as engine.model.gated_deltanet's
chunked and recurrent_step, called as transformers' qwen3_next / qwen3_5 call them: heads [B, T, H, D], q and k
expanded to the value heads first, l2norm of q and k in the kernel, scale 1/sqrt(Dk), fp32 states [B, H, Dk, Dv].

Determinism (read from fla 0.6.0's forward kernels): no atomics and no split reductions in either form. The
recurrent kernel runs one program per (sequence, value head, block of 8 value columns) and reduces over Dk inside
it, so a sequence's row does not depend on the others in the batch; it has no autotuning, allocates outputs of the
batch's shape and syncs nothing, so a CUDA graph may hold it. The chunked form runs one sequence per call; fla
autotunes its six kernels by timing (a launch configuration may change a reduction's blocking, so bits could differ
between processes, and tuning stalls the first prompt of a shape for tens of seconds and allocates outside the
memory plan): engine/model/fla_configs pins one configuration per kernel instead, unless FLA_CACHE_MODE is set."""

from __future__ import annotations

import os
from pathlib import Path

import torch

from engine.model.gated_deltanet import expand_heads

# fla routes chunk_gated_delta_rule to the FlashQLA package when it is installed; the determinism read above is of
# the Triton kernels, so they are the ones used unless the user asks otherwise.
os.environ.setdefault("FLA_FLASH_QLA", "0")

from fla.ops.gated_delta_rule import chunk_gated_delta_rule, fused_recurrent_gated_delta_rule  # noqa: E402
from fla.ops.utils import cache as fla_config_cache  # noqa: E402

PINNED_CONFIGS = Path(__file__).with_name("fla_configs")


def pin_launch_configs() -> bool:
    """Point fla's config cache at PINNED_CONFIGS (its "full" mode: an exact-key entry, else the kernel's default) so
    that the chunked form's kernels run fixed configurations and nothing is timed. fla reads FLA_CACHE_MODE when it
    is first imported (perhaps by transformers, before this module), so the mode is set on its module. A user's
    FLA_CACHE_MODE (e.g. "disabled": autotune) is left alone. -> whether the pinned configurations are in force."""
    if "FLA_CACHE_MODE" in os.environ:
        return False
    os.environ["FLA_CONFIG_DIR"] = str(PINNED_CONFIGS)
    fla_config_cache.FLA_CACHE_MODE = fla_config_cache.FlaCacheMode.FULL
    return True


IS_PINNED = pin_launch_configs()


def chunked(q, k, v, g, beta, state: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """T tokens of one sequence. q, k [T, Hk, Dk]; v [T, H, Dv]; g, beta [T, H]; state [H, Dk, Dv] fp32.
    -> (out [T, H, Dv] in v's dtype, final state [H, Dk, Dv] fp32)."""
    heads = v.shape[1]
    q, k = (expand_heads(t, heads) for t in (q, k))
    out, final = chunk_gated_delta_rule(q[None], k[None], v[None], g=g[None], beta=beta[None],
                                        initial_state=state[None].float(), output_final_state=True,
                                        use_qk_l2norm_in_kernel=True)
    return out[0].to(v.dtype), final[0]


def recurrent_step(q, k, v, g, beta, state: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """One token of B sequences. q, k [B, Hk, Dk]; v [B, H, Dv]; g, beta [B, H]; state [B, H, Dk, Dv] fp32.
    -> (out [B, H, Dv] in v's dtype, new state)."""
    heads = v.shape[1]
    q, k = (expand_heads(t, heads) for t in (q, k))
    out, final = fused_recurrent_gated_delta_rule(q[:, None], k[:, None], v[:, None], g=g[:, None],
                                                  beta=beta[:, None], initial_state=state.float(),
                                                  output_final_state=True, use_qk_l2norm_in_kernel=True)
    return out[:, 0].to(v.dtype), final
