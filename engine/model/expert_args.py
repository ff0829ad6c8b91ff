"""What a routed expert computes and how its weights are stored (engine.experts.formats.activation,
engine.model.loader)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ExpertArgs:
    activation: str = "silu_glu"  # "clamped_swiglu" (gpt_oss: swiglu_alpha, swiglu_limit), "gelu_tanh_glu", "relu_squared"
    swiglu_alpha: float = 1.702
    swiglu_limit: float = 7.0
    bias: bool = False  # per-expert gate_up and down biases, resident beside the dense weights
    quant: str = ""  # the experts' block type as stored ("MXFP4"), kept so in host memory and slots
    latent_size: int = 0  # > 0: the experts compute in a latent space of this size (engine.model.latent_moe)
