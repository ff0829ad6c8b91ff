"""model_type -> architecture module; refuses unknown or dense models with the list of supported types."""

from __future__ import annotations

from types import ModuleType

from engine.errors import UnsupportedModelError
from engine.model import (deepseek_v2, deepseek_v3, glm4_moe, gpt_oss, mixtral, olmoe, qwen2_moe, qwen3_5_moe, qwen3_moe,
                          qwen3_next)
from engine.model.args import ModelArgs

ARCHITECTURES: dict[str, ModuleType] = {
    "qwen3_moe": qwen3_moe,
    "qwen2_moe": qwen2_moe,
    "mixtral": mixtral,
    "olmoe": olmoe,
    "glm4_moe": glm4_moe,
    "gpt_oss": gpt_oss,
    "deepseek_v2": deepseek_v2,
    "deepseek_v3": deepseek_v3,
    "qwen3_next": qwen3_next,
    "qwen3_5_moe": qwen3_5_moe,
    "qwen3_5_moe_text": qwen3_5_moe,  # the language model saved alone (Qwen3_5MoeForCausalLM)
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


# model_types whose module reads config.json's quantization_config itself (gpt-oss publishes MXFP4 experts)
READS_QUANTIZATION = {"gpt_oss"}


def check_not_quantized(config: dict) -> None:
    """Other quantized checkpoints (FP8, GPTQ, AWQ, ...) store scaled integers or floats as their weights: read as
    plain tensors they would give wrong outputs, so they are refused by name."""
    quantization = config.get("quantization_config")
    if quantization is None or config.get("model_type") in READS_QUANTIZATION:
        return
    method = quantization.get("quant_method") if isinstance(quantization, dict) else quantization
    raise UnsupportedModelError(f"config.json: '{config.get('model_type')}' checkpoints quantized with '{method}' "
                                "are not supported; use the bf16 release of this model (or its GGUF file)")


def parse_config(config: dict) -> ModelArgs:
    """Normalise a config.json dict; raises UnsupportedModelError / ModelFormatError with the field at fault."""
    module = architecture(config.get("model_type"))
    check_not_quantized(config)
    args = module.model_args(config)
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
