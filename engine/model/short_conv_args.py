"""The numbers of a hybrid model's short-conv layers (lfm2_moe's "conv" layers), and what their state costs."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ShortConvArgs:
    conv_kernel_dim: int  # taps of the depthwise causal conv (config.json's conv_L_cache)
    bias: bool = False  # in_proj, conv and out_proj biases (conv_bias)

    def params(self, hidden_size: int) -> int:
        """One layer's weights: in_proj (B | C | x), the depthwise conv, out_proj, and their biases."""
        biases = (3 * hidden_size + 2 * hidden_size) if self.bias else 0
        return 4 * hidden_size * hidden_size + hidden_size * self.conv_kernel_dim + biases

    def state_shapes(self, hidden_size: int) -> tuple[tuple[tuple[int, ...], bool], ...]:
        """One sequence's state in one layer, (shape, kept fp32): the conv's last K-1 inputs [K-1, D]."""
        return (((self.conv_kernel_dim - 1, hidden_size), False),)
