"""What a routed expert computes and how its weights are stored (engine.experts.formats.activation,
engine.model.loader)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ExpertArgs:
    activation: str = "silu_glu"  # or "clamped_swiglu" (gpt_oss), with swiglu_alpha and swiglu_limit
    swiglu_alpha: float = 1.702
    swiglu_limit: float = 7.0
    bias: bool = False  # per-expert gate_up and down biases, resident beside the dense weights
    quant: str = ""  # the experts' block type as stored ("MXFP4"), kept so in host memory and slots
