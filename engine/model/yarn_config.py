"""YaRN's parameters from a config, and the scalars transformers' _compute_yarn_parameters derives from them
(attention factor, correction range), without torch: the catalog and the app parse configs before torch loads.
engine.model.rope_scaling turns them into inverse frequencies."""

from __future__ import annotations

import math
from dataclasses import dataclass

from engine.errors import ModelFormatError


@dataclass(frozen=True)
class Yarn:
    """A config's YaRN parameters, with transformers' defaults filled in (HF field names)."""

    factor: float
    original_max_position_embeddings: int
    beta_fast: float = 32.0
    beta_slow: float = 1.0
    truncate: bool = True
    attention_factor: float | None = None
    mscale: float | None = None
    mscale_all_dim: float | None = None

    rope_type = "yarn"


def parse_yarn(params: dict, config: dict) -> Yarn:
    """rope_parameters / rope_scaling of type yarn -> Yarn. A missing factor is the ratio of the context
    lengths, and a missing original length is max_position_embeddings, as transformers standardises them."""
    max_positions = config.get("max_position_embeddings") or 4096
    original = config.get("original_max_position_embeddings") or params.get("original_max_position_embeddings")
    original = original or max_positions
    factor = params.get("factor")
    if factor is None:
        factor = max_positions / original
    if not isinstance(factor, (int, float)) or isinstance(factor, bool) or factor <= 0:
        raise ModelFormatError(f"config.json: YaRN 'factor' must be a positive number, got {factor!r}")
    return Yarn(
        factor=float(factor),
        original_max_position_embeddings=int(original),
        beta_fast=float(params.get("beta_fast") or 32),
        beta_slow=float(params.get("beta_slow") or 1),
        truncate=bool(params.get("truncate", True)),
        attention_factor=params.get("attention_factor"),
        mscale=params.get("mscale"),
        mscale_all_dim=params.get("mscale_all_dim"),
    )


def yarn_mscale(scale: float, mscale: float = 1) -> float:
    """YaRN's attention temperature for a context scaled by `scale` (1 when not scaled)."""
    if scale <= 1:
        return 1.0
    return 0.1 * mscale * math.log(scale) + 1.0


def attention_factor(yarn: Yarn) -> float:
    """The factor transformers multiplies cos and sin by."""
    if yarn.attention_factor is not None:
        return yarn.attention_factor
    if yarn.mscale and yarn.mscale_all_dim:
        return float(yarn_mscale(yarn.factor, yarn.mscale) / yarn_mscale(yarn.factor, yarn.mscale_all_dim))
    return yarn_mscale(yarn.factor)


def correction_range(yarn: Yarn, dim: int, base: float) -> tuple[float, float]:
    """The rotary dimensions between which YaRN ramps from extrapolation to interpolation."""

    def correction_dim(num_rotations: float) -> float:
        original = yarn.original_max_position_embeddings
        return (dim * math.log(original / (num_rotations * 2 * math.pi))) / (2 * math.log(base))

    low, high = correction_dim(yarn.beta_fast), correction_dim(yarn.beta_slow)
    if yarn.truncate:
        low, high = math.floor(low), math.ceil(high)
    return max(low, 0), min(high, dim - 1)
