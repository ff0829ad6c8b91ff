"""The numbers of a hybrid model's Mamba-2 layers (nemotron_h's "M" layers), and what their state costs."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Mamba2Args:
    num_heads: int
    head_dim: int
    state_size: int  # N: the SSM state per head is [head_dim, N]
    n_groups: int  # B and C are shared by num_heads / n_groups heads each
    conv_kernel_dim: int
    chunk_size: int
    conv_bias: bool = True
    proj_bias: bool = False
    time_step_limit: tuple[float, float] = (0.0, float("inf"))

    @property
    def inner_size(self) -> int:
        return self.num_heads * self.head_dim

    @property
    def conv_dim(self) -> int:
        """Channels of the conv: x of every head, then B and C of every group."""
        return self.inner_size + 2 * self.n_groups * self.state_size

    def params(self, hidden_size: int) -> int:
        """One layer's weights: in_proj (z | x | B | C | dt), conv, dt_bias, A_log, D, the gated norm, out_proj."""
        in_width = self.inner_size + self.conv_dim + self.num_heads
        biases = (in_width + hidden_size) if self.proj_bias else 0
        conv = self.conv_dim * self.conv_kernel_dim + (self.conv_dim if self.conv_bias else 0)
        return hidden_size * in_width + conv + 3 * self.num_heads + self.inner_size * (1 + hidden_size) + biases

    def state_shapes(self, hidden_size: int) -> tuple[tuple[tuple[int, ...], bool], ...]:
        """One sequence's states in one layer, (shape, kept fp32): the conv's last K-1 inputs [K-1, C] and the SSM
        state [H, head_dim, N], fp32 (nemotron_h's mamba_ssm_cache_dtype)."""
        ssm = (self.num_heads, self.head_dim, self.state_size)
        return ((self.conv_kernel_dim - 1, self.conv_dim), False), (ssm, True)
