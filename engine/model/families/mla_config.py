"""config.json fields of multi-head latent attention (deepseek_v2, deepseek_v3) -> ModelArgs fields."""

from __future__ import annotations

from engine.errors import ModelFormatError
from engine.model.args import require
from engine.model.attention_args import AttentionArgs
from engine.model.latent_attention_args import LatentAttentionArgs
from engine.model.yarn_config import Yarn, yarn_mscale


def attention_scale(qk_head_dim: int, yarn: Yarn | None) -> float:
    """qk_head_dim ** -0.5, times mscale(factor, mscale_all_dim) squared under YaRN (DeepSeek's correction:
    the longer context's softmax is sharpened along with the RoPE scaling)."""
    scale = qk_head_dim**-0.5
    if yarn is not None and yarn.mscale_all_dim:
        mscale = yarn_mscale(yarn.factor, yarn.mscale_all_dim)
        scale = scale * mscale * mscale
    return scale


def mla_args(config: dict, rope_layout: str, yarn: Yarn | None) -> dict:
    """The attention fields; head_dim is the RoPE part of a query (the rotary embedding's size). yarn: the
    config's parsed RoPE scaling."""
    rank, rope_dim = require(config, "kv_lora_rank"), require(config, "qk_rope_head_dim")
    nope_dim, v_dim = require(config, "qk_nope_head_dim"), require(config, "v_head_dim")
    q_lora_rank = config.get("q_lora_rank")
    if q_lora_rank is not None:
        q_lora_rank = require(config, "q_lora_rank")
    if rank <= 0 or rope_dim <= 0 or rope_dim % 2 or nope_dim < 0 or v_dim <= 0:
        raise ModelFormatError("config.json: kv_lora_rank, v_head_dim and an even qk_rope_head_dim must be positive")
    bias = bool(config.get("attention_bias", False))
    return dict(
        mla=LatentAttentionArgs(kv_lora_rank=rank, q_lora_rank=q_lora_rank or None, qk_nope_head_dim=nope_dim,
                                v_head_dim=v_dim),
        head_dim=rope_dim,
        num_key_value_heads=config.get("num_attention_heads"),
        attention=AttentionArgs(rope_layout=rope_layout, attention_scale=attention_scale(nope_dim + rope_dim, yarn),
                                attention_bias=bias, o_proj_bias=bias),
    )

