"""`wisp convert-gguf` of a glm4_moe checkpoint: llama.cpp's "glm4moe" tensors (engine.gguf.glm4_moe says which),
Wisp's dense parameters under llama.cpp's names and each MoE layer's experts stacked."""

from __future__ import annotations

from engine.errors import UnsupportedModelError
from engine.gguf.glm4_moe import ARCH
from engine.gguf.param_names import gguf_name
from engine.gguf.tensor_map import TensorSpec, as_f32, stacked_expert_specs
from engine.model.args import ModelArgs


def glm4_moe_specs(args: ModelArgs, ckpt, names) -> list[TensorSpec]:
    """Every tensor of the file: Wisp's dense parameters under llama.cpp's names, then each MoE layer's stacked
    experts. Refuses grouped routing that drops groups: llama.cpp's glm4moe graph picks the top-k over all experts."""
    from engine.model.loader import hf_name
    from engine.model.transformer import meta_model

    if args.topk_group < args.n_group:
        raise UnsupportedModelError(
            f"glm4_moe with n_group={args.n_group}, topk_group={args.topk_group}: llama.cpp's glm4moe graph does not "
            "limit the experts to the best groups, so its GGUF would compute a different model")
    specs = []
    for param, value in meta_model(args).named_parameters():
        if param == "lm_head.weight" and not ckpt.has(param):
            continue  # tied: llama.cpp reads token_embd
        name, shape = gguf_name(param, ARCH), tuple(value.shape)
        keep = len(shape) == 1 or name.endswith("ffn_gate_inp.weight")
        specs.append(TensorSpec(name, shape, _loader(ckpt, hf_name(param, names)), keep))
    for layer, is_moe in enumerate(args.moe_layers):
        specs += stacked_expert_specs(args, ckpt, names, layer) if is_moe else []
    return specs


def _loader(ckpt, hf: str):
    return lambda: as_f32(ckpt.get(hf))
