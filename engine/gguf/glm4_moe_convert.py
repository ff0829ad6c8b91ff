"""`wisp convert-gguf` of a glm4_moe checkpoint: llama.cpp's "glm4moe" tensors (engine.gguf.glm4_moe says which),
Wisp's dense parameters under llama.cpp's names and each MoE layer's experts stacked."""

from __future__ import annotations

from engine.errors import UnsupportedModelError
from engine.gguf.glm4_moe import ARCH
from engine.gguf.named_specs import dense_specs
from engine.gguf.tensor_map import TensorSpec, stacked_expert_specs
from engine.model.args import ModelArgs

ROUTER = "ffn_gate_inp.weight"  # llama.cpp keeps routers f32, as it does every 1-D tensor


def glm4_moe_specs(args: ModelArgs, ckpt, names) -> list[TensorSpec]:
    """Every tensor of the file: Wisp's dense parameters under llama.cpp's names, then each MoE layer's stacked
    experts. Refuses grouped routing that drops groups: llama.cpp's glm4moe graph picks the top-k over all experts."""
    if args.topk_group < args.n_group:
        raise UnsupportedModelError(
            f"glm4_moe with n_group={args.n_group}, topk_group={args.topk_group}: llama.cpp's glm4moe graph does not "
            "limit the experts to the best groups, so its GGUF would compute a different model")
    specs = dense_specs(args, ckpt, names, ARCH, lambda name, shape: len(shape) == 1 or name.endswith(ROUTER))
    for layer, is_moe in enumerate(args.moe_layers):
        specs += stacked_expert_specs(args, ckpt, names, layer) if is_moe else []
    return specs
