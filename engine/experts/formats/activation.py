"""What an expert computes between its two projections, and its optional per-expert biases.

A dense expert is down(act(gate_up(x))): every format's kernels (engine.experts.formats.kernel, the quantized formats)
project gate and up as one [2I] row whose first half is gate and second half up, apply the activation, then
project down. Biases are not part of a slot: they are small ([E, 2I] and [E, D] per layer), stay resident on the
compute device beside the dense weights (the plan counts them there) and are indexed by expert id, so a slot
stays a pure weight block and a miss is still one copy.

Shapes: n rows, I expert intermediate size, D hidden size, E experts of a layer."""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F


class SiluGlu:
    """SwiGLU: silu(gate) * up (Qwen MoE, Mixtral, OLMoE)."""

    def __call__(self, gate_up: torch.Tensor) -> torch.Tensor:
        gate, up = gate_up.chunk(2, dim=-1)  # [n, I] x2
        return F.silu(gate) * up


@dataclass(frozen=True)
class ClampedSwiGlu:
    """gpt-oss's SwiGLU: gate clamped above, up clamped both ways, gate * sigmoid(alpha * gate) * (up + 1),
    op for op as transformers' GptOssExperts._apply_gate."""

    alpha: float
    limit: float

    def __call__(self, gate_up: torch.Tensor) -> torch.Tensor:
        gate, up = gate_up.chunk(2, dim=-1)  # [n, I] x2
        gate = gate.clamp(min=None, max=self.limit)
        up = up.clamp(min=-self.limit, max=self.limit)
        glu = gate * torch.sigmoid(gate * self.alpha)
        return (up + 1) * glu


class GeluTanhGlu:
    """GeGLU: gelu(gate, tanh approximation) * up (Gemma 4)."""

    def __call__(self, gate_up: torch.Tensor) -> torch.Tensor:
        gate, up = gate_up.chunk(2, dim=-1)  # [n, I] x2
        return F.gelu(gate, approximate="tanh") * up



class ReluSquared:
    """A non-gated expert's relu(up)² (nemotron_h), its up rows stored as both halves of the gate_up block:
    relu(gate) * relu(up) has the bits of relu(up)² (the same rows, the same product)."""

    def __call__(self, gate_up: torch.Tensor) -> torch.Tensor:
        gate, up = gate_up.chunk(2, dim=-1)  # [n, I] x2, equal
        return F.relu(gate) * F.relu(up)



SILU_GLU = SiluGlu()
GELU_TANH_GLU = GeluTanhGlu()
RELU_SQUARED = ReluSquared()


@dataclass
class ExpertBias:
    """One MoE layer's expert biases, rows indexed by expert id, on the compute device."""

    gate_up: torch.Tensor  # [E, 2I]: gate half then up half, as the block's gate_up rows
    down: torch.Tensor  # [E, D]

    @property
    def nbytes(self) -> int:
        return sum(t.numel() * t.element_size() for t in (self.gate_up, self.down))
