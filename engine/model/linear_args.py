"""The numbers of a hybrid model's linear-attention (Gated DeltaNet) layers, and what their state costs."""

from __future__ import annotations

from dataclasses import dataclass

# The input projections' layouts (GatedDeltaNet's modules, joined by "+"):
QKVZ_BA = "in_proj_qkvz+in_proj_ba"  # qwen3_next checkpoints (and older qwen3next files): both fused per key head
QKV_Z_B_A = "in_proj_qkv+in_proj_z+in_proj_b+in_proj_a"  # qwen3_5 checkpoints, qwen35moe files
QKV_Z_BA = "in_proj_qkv+in_proj_z+in_proj_ba"  # qwen3next files: q|k|v of all heads, z, and b|a per key head


@dataclass(frozen=True)
class LinearAttentionArgs:
    num_key_heads: int
    num_value_heads: int
    key_head_dim: int
    value_head_dim: int
    conv_kernel_dim: int
    projections: str  # QKVZ_BA | QKV_Z_B_A | QKV_Z_BA
    # value head j reads key head j % num_key_heads (llama.cpp's qwen35moe files); else key head j // (H / Hk)
    tiled_value_heads: bool = False
    # llama.cpp's stored values: the decay rate A = -exp(A_log) (ssm_a), and zero-centred norm weights with their 1
    # added (engine.model.hybrid_layers.ZeroCenteredRMSNorm's offset)
    llama_cpp_values: bool = False

    @property
    def conv_dim(self) -> int:
        """Channels of the short conv: q and k of every key head, v of every value head."""
        return 2 * self.num_key_heads * self.key_head_dim + self.num_value_heads * self.value_head_dim

    def params(self, hidden_size: int) -> int:
        """One layer's weights: input projections (q|k|v, z, b, a), conv, dt_bias and A_log, norm, out_proj."""
        value_dim = self.num_value_heads * self.value_head_dim
        projections = hidden_size * (self.conv_dim + value_dim + 2 * self.num_value_heads)
        conv = self.conv_dim * self.conv_kernel_dim
        return projections + conv + 2 * self.num_value_heads + self.value_head_dim + value_dim * hidden_size

    def state_shapes(self, hidden_size: int) -> tuple[tuple[tuple[int, ...], bool], ...]:
        """One sequence's states in one layer, (shape, kept fp32): the conv's last K-1 inputs [K-1, C] and the
        recurrent state [H, Dk, Dv]."""
        recurrent = (self.num_value_heads, self.key_head_dim, self.value_head_dim)
        return ((self.conv_kernel_dim - 1, self.conv_dim), False), (recurrent, True)
