"""model_type -> architecture module; refuses unknown or dense models with the list of supported types."""

from __future__ import annotations

from types import ModuleType

from engine.errors import UnsupportedModelError
from engine.model import gpt_oss, mixtral, olmoe, qwen2_moe, qwen3_moe
from engine.model.args import ModelArgs

ARCHITECTURES: dict[str, ModuleType] = {
    "qwen3_moe": qwen3_moe,
    "qwen2_moe": qwen2_moe,
    "mixtral": mixtral,
    "olmoe": olmoe,
    "gpt_oss": gpt_oss,
}
DENSE_TYPES = {"llama", "mistral", "qwen2", "qwen3", "gemma", "gemma2", "gemma3", "phi3", "olmo", "olmo2", "gpt2"}


def supported_types() -> str:
    return ", ".join(sorted(ARCHITECTURES))


def architecture(model_type: str | None) -> ModuleType:
    if not model_type:
        raise UnsupportedModelError(f"config.json has no 'model_type'; supported: {supported_types()}")
    if model_type in DENSE_TYPES:
        raise UnsupportedModelError(
            f"'{model_type}' is a dense (non-MoE) model; Wisp runs Mixture-of-Experts models: {supported_types()}"
        )
    if model_type not in ARCHITECTURES:
        raise UnsupportedModelError(f"model_type '{model_type}' is not supported; supported: {supported_types()}")
    return ARCHITECTURES[model_type]


def parse_config(config: dict) -> ModelArgs:
    """Normalise a config.json dict; raises UnsupportedModelError / ModelFormatError with the field at fault."""
    args = architecture(config.get("model_type")).model_args(config)
    if args.num_experts <= 1 or args.num_moe_layers == 0:
        raise UnsupportedModelError(
            f"'{args.model_type}' config has no expert layers (num_experts={args.num_experts}); "
            "this is a dense model and Wisp runs Mixture-of-Experts models"
        )
    if not 0 < args.num_experts_per_tok <= args.num_experts:
        raise UnsupportedModelError(
            f"config.json: num_experts_per_tok={args.num_experts_per_tok} must be between 1 and {args.num_experts}"
        )
    return args
