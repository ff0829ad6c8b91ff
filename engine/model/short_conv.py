"""The short-conv token mixer (lfm2_moe's "conv" layers): in_proj splits into B, C and x; the depthwise causal conv
runs over B * x; C gates its output; out_proj. Its state per sequence is the conv's last K-1 inputs [K-1, D].

Shapes: T tokens, D hidden size (the conv's channels), K conv taps, B sequences."""

from __future__ import annotations

import torch
from torch import nn

from engine.model.args import ModelArgs
from engine.model.gated_deltanet import causal_conv
from engine.model.state_mixer import StateMixer


class ShortConv(StateMixer):
    """Parameter names as the checkpoints' conv.*: in_proj [3D, D], conv [D, 1, K] (depthwise), out_proj [D, D]."""

    def __init__(self, args: ModelArgs, state_layer: int):
        super().__init__()
        spec, hidden = args.short_conv, args.hidden_size
        self.state_layer, self.out_tail = state_layer, (hidden,)
        self.in_proj = nn.Linear(hidden, 3 * hidden, bias=spec.bias)
        self.conv = nn.Conv1d(hidden, hidden, spec.conv_kernel_dim, groups=hidden, bias=spec.bias)
        self.out_proj = nn.Linear(hidden, hidden, bias=spec.bias)

    def mix_inputs(self, x: torch.Tensor):
        """x [T, D] -> ((B * x,), C): the conv's input and its output gate, each [T, D]."""
        b, c, h = self.in_proj(x).chunk(3, dim=-1)
        return (b * h,), c

    def convolve(self, gated: torch.Tensor, history: torch.Tensor):
        return causal_conv(gated, history, self.conv.weight[:, 0], self.conv.bias, silu=False)

    def prefill(self, inputs, states):
        out, history = self.convolve(inputs[0], states[0])  # [T, D]
        return out, (history,)

    def step(self, inputs, states):
        out, history = self.convolve(inputs[0][:, None], states[0])  # [B, 1, D]
        return out[:, 0], (history,)

    def output(self, out: torch.Tensor, gate: torch.Tensor) -> torch.Tensor:
        return self.out_proj(gate * out)
