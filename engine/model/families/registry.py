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


def _by_architecture(families) -> dict[str, tuple[Family, ...]]:
    """GGUF architecture -> the families that read its files, in the order gguf_family tries them. Families that
    share an architecture name its tensors alike (a file's names do not depend on which family reads it)."""
    by_arch: dict[str, tuple[Family, ...]] = {}
    for known in families:
        if known.gguf is not None:
            by_arch[known.gguf.arch] = (*by_arch.get(known.gguf.arch, ()), known)
    for arch, sharing in by_arch.items():
        layouts = {_layout(known.gguf) for known in sharing}
        assert len(layouts) == 1, f"the families of GGUF architecture '{arch}' name its tensors differently"
    return by_arch


def _layout(gguf) -> tuple:
    return (tuple(sorted(gguf.layer_modules.items())), tuple(sorted(gguf.layer_params.items())),
            tuple(sorted(gguf.global_params.items())), tuple(sorted(gguf.joined)), gguf.rotary_permuted)


GGUF_ARCHITECTURES: dict[str, tuple[Family, ...]] = _by_architecture(FAMILIES.values())
DENSE_TYPES = {"llama", "mistral", "qwen2", "qwen3", "gemma", "gemma2", "gemma3", "phi3", "olmo", "olmo2", "gpt2"}


def supported_types() -> str:
    return ", ".join(sorted(FAMILIES))


def supported_gguf_architectures() -> str:
    return ", ".join(f"{arch} ({', '.join(known.model_type for known in sharing)})"
                     for arch, sharing in sorted(GGUF_ARCHITECTURES.items()))


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


def gguf_family(arch: str, key=None) -> Family | None:
    """The family of a GGUF file's general.architecture, or None when Wisp's engine runs no such file. `key`: the
    file's GgufKeys, which pick the family where several share the architecture (the first whose GgufFormat.reads
    it; None when none does); without it, the family that names the architecture's tensors (the first)."""
    sharing = GGUF_ARCHITECTURES.get(arch, ())
    if key is not None:
        sharing = tuple(known for known in sharing if known.gguf.reads(key))
    return sharing[0] if sharing else None


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
