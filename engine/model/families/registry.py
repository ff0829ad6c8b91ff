"""The one registry of architectures: a Hugging Face model_type or a GGUF general.architecture -> its Family.
Refuses unknown or dense models with the list of supported ones."""

from __future__ import annotations

from engine.errors import UnsupportedModelError
from engine.model.args import ModelArgs
from engine.model.families import (deepseek_v2, deepseek_v3, gemma4, gemma4_text, glm4_moe, gpt_oss, mixtral, olmoe,
                                   qwen2_moe, qwen3_5_moe, qwen3_moe, qwen3_next,
                                   qwen3_vl_moe)
from engine.model.families import ernie4_5_moe, glm4_moe_lite, minimax_m2, qwen3_5_moe_text
from engine.model.families import lfm2_moe, nemotron_h
from engine.model.families.family import Family

FAMILIES: dict[str, Family] = {family.model_type: family for family in (
    qwen3_moe.FAMILY,
    qwen2_moe.FAMILY,
    mixtral.FAMILY,
    olmoe.FAMILY,
    glm4_moe.FAMILY,
    gpt_oss.FAMILY,
    deepseek_v2.FAMILY,
    deepseek_v3.FAMILY,
    qwen3_next.FAMILY,
    qwen3_5_moe.FAMILY,
    qwen3_5_moe_text.FAMILY,
    ernie4_5_moe.FAMILY,
    glm4_moe_lite.FAMILY,
    minimax_m2.FAMILY,
    gemma4.FAMILY,
    gemma4_text.FAMILY,
    lfm2_moe.FAMILY,
    nemotron_h.FAMILY,
    qwen3_vl_moe.FAMILY,
)}
GGUF_ARCHITECTURES: dict[str, Family] = {family.gguf.arch: family for family in FAMILIES.values() if family.gguf}
DENSE_TYPES = {"llama", "mistral", "qwen2", "qwen3", "gemma", "gemma2", "gemma3", "phi3", "olmo", "olmo2", "gpt2"}


def supported_types() -> str:
    return ", ".join(sorted(FAMILIES))


def supported_gguf_architectures() -> str:
    return ", ".join(f"{arch} ({family.model_type})" for arch, family in sorted(GGUF_ARCHITECTURES.items()))


def family(model_type: str | None) -> Family:
    """The family of a config.json's model_type."""
    if not model_type:
        raise UnsupportedModelError(f"config.json has no 'model_type'; supported: {supported_types()}")
    if model_type in DENSE_TYPES:
        raise UnsupportedModelError(
            f"'{model_type}' is a dense (non-MoE) model; Wisp runs Mixture-of-Experts models: {supported_types()}"
        )
    if model_type not in FAMILIES:
        raise UnsupportedModelError(f"model_type '{model_type}' is not supported; supported: {supported_types()}")
    return FAMILIES[model_type]


def gguf_family(arch: str) -> Family | None:
    """The family of a GGUF file's general.architecture, or None when Wisp's engine runs no such file."""
    return GGUF_ARCHITECTURES.get(arch)


def check_not_quantized(config: dict) -> None:
    """Other quantized checkpoints (FP8, GPTQ, AWQ, ...) store scaled integers or floats as their weights: read as
    plain tensors they would give wrong outputs, so they are refused by name (a family whose reader reads
    quantization_config, gpt_oss's MXFP4 experts, says so with reads_quantization)."""
    quantization = config.get("quantization_config")
    if quantization is None or FAMILIES[config["model_type"]].reads_quantization:
        return
    method = quantization.get("quant_method") if isinstance(quantization, dict) else quantization
    raise UnsupportedModelError(f"config.json: '{config.get('model_type')}' checkpoints quantized with '{method}' "
                                "are not supported; use the bf16 release of this model (or its GGUF file)")


def parse_config(config: dict) -> ModelArgs:
    """Normalise a config.json dict; raises UnsupportedModelError / ModelFormatError with the field at fault."""
    chosen = family(config.get("model_type"))
    check_not_quantized(config)
    return checked_moe(chosen.read_config(config))


def checked_moe(args: ModelArgs) -> ModelArgs:
    """args, when they describe a Mixture-of-Experts model Wisp can route."""
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
