"""Which GGUF tensor each Hugging Face tensor becomes, in llama.cpp's names and layouts shared by its MoE
architectures; a family's own names and checks are in its GgufFormat (engine.model.families).

llama.cpp stores a layer's experts stacked: ffn_gate_exps / ffn_up_exps [E, I, D] and ffn_down_exps [E, D, I]
(torch order; GGUF lists the dimensions reversed). Routers, norms and biases stay f32 whatever the file type.
"""

from __future__ import annotations

import numpy as np

from engine.errors import UnsupportedModelError
from engine.model.args import ModelArgs
from engine.model.checkpoint import Checkpoint
from engine.model.families import FAMILIES, family
from engine.model.families.tensor_spec import EXPERTS, TensorSpec, as_f32, stacked_experts
from engine.model.weight_names import MoeWeightNames

ATTENTION = {"q_proj": "attn_q", "k_proj": "attn_k", "v_proj": "attn_v", "o_proj": "attn_output"}
QK_NORMS = {"q_norm": "attn_q_norm", "k_norm": "attn_k_norm"}
SHARED_EXPERT = {"shared_expert.gate_proj": "ffn_gate_shexp", "shared_expert.up_proj": "ffn_up_shexp",
                 "shared_expert.down_proj": "ffn_down_shexp", "shared_expert_gate": "ffn_gate_inp_shexp"}
LAYER_NORMS = {"input_layernorm": "attn_norm", "post_attention_layernorm": "ffn_norm"}
DENSE_MLP = {"gate_proj": "ffn_gate", "up_proj": "ffn_up", "down_proj": "ffn_down"}  # layers without experts
EXPERT_BIASES = {"gate": "ffn_gate_exps.bias", "up": "ffn_up_exps.bias", "down": "ffn_down_exps.bias"}  # [E, out]
GLOBAL = {"model.embed_tokens.weight": "token_embd.weight", "model.norm.weight": "output_norm.weight",
          "lm_head.weight": "output.weight"}


def gguf_architecture(args: ModelArgs) -> str:
    """llama.cpp's architecture name; refuses checkpoints whose GGUF would compute a different model."""
    gguf = family(args.model_type).gguf
    if gguf is None:
        raise UnsupportedModelError(f"convert-gguf does not know model_type '{args.model_type}' "
                                    f"(it converts {', '.join(convertible_types())})")
    gguf.check_convertible(args)
    return gguf.arch


def convertible_types() -> list[str]:
    return sorted(model_type for model_type, known in FAMILIES.items() if known.gguf is not None)


def expert_bias_names(layer: int) -> dict[str, str]:
    """The GGUF tensors of one layer's expert biases (ModelArgs.experts.bias), by projection."""
    return {projection: f"blk.{layer}.{name}" for projection, name in EXPERT_BIASES.items()}


def permute_rotary(weight: np.ndarray, num_heads: int) -> np.ndarray:
    """HF's q/k rows use rotate-half RoPE pairs; llama.cpp's `llama` arch rotates adjacent pairs (as Meta's
    original weights). The inverse of transformers' conversion permute, as llama.cpp's convert_hf_to_gguf does."""
    rows = weight.shape[0]
    return weight.reshape(num_heads, 2, rows // num_heads // 2, *weight.shape[1:]).swapaxes(1, 2).reshape(weight.shape)


def unpermute_rotary(weight: np.ndarray, num_heads: int) -> np.ndarray:
    """The inverse of `permute_rotary`: a `llama` GGUF's q/k rows back in HF's rotate-half order. Rows move
    whole, so it applies to quantized rows (one row of blocks per output feature) as well."""
    rows = weight.shape[0]
    return weight.reshape(num_heads, rows // num_heads // 2, 2, *weight.shape[1:]).swapaxes(1, 2).reshape(weight.shape)


def tensor_specs(args: ModelArgs, ckpt: Checkpoint, names: MoeWeightNames) -> list[TensorSpec]:
    """Every tensor of the GGUF file, in the order llama.cpp's converter writes them."""
    embed, norm, head = GLOBAL
    specs = [_plain(ckpt, embed, GLOBAL[embed])]
    for layer in range(args.num_hidden_layers):
        specs += _layer_specs(args, ckpt, names, layer)
    specs.append(_plain(ckpt, norm, GLOBAL[norm], keep_f32=True))
    if ckpt.has(head):  # llama.cpp reuses token_embd when output is absent (tied embeddings)
        specs.append(_plain(ckpt, head, GLOBAL[head]))
    return specs


def _plain(ckpt: Checkpoint, hf: str, gguf: str, keep_f32: bool = False, transform=None) -> TensorSpec:
    shape = _shape(ckpt, hf)
    if gguf.endswith("ffn_gate_inp_shexp.weight"):
        shape, transform = (int(np.prod(shape)),), _flatten  # [1, D] -> [D]: llama.cpp's shared-expert gate
    load = (lambda: as_f32(ckpt.get(hf))) if transform is None else (lambda: transform(as_f32(ckpt.get(hf))))
    return TensorSpec(gguf, shape, load, keep_f32 or len(shape) == 1)


def _shape(ckpt: Checkpoint, name: str) -> tuple[int, ...]:
    """The shape from the safetensors header, without reading the tensor."""
    if not ckpt.has(name):
        ckpt.get(name)  # raises ModelFormatError naming the missing tensor
    return tuple(ckpt._open(ckpt.weight_map[name]).get_slice(name).get_shape())


def _flatten(weight: np.ndarray) -> np.ndarray:
    return weight.reshape(-1)


def _layer_specs(args: ModelArgs, ckpt: Checkpoint, names: MoeWeightNames, layer: int) -> list[TensorSpec]:
    prefix, blk = f"model.layers.{layer}.", f"blk.{layer}."
    norm = "input_layernorm"
    specs = [_plain(ckpt, f"{prefix}{norm}.weight", f"{blk}{LAYER_NORMS[norm]}.weight", keep_f32=True)]
    for hf, gguf in ATTENTION.items():
        for kind in ("weight", "bias"):
            name = f"{prefix}self_attn.{hf}.{kind}"
            if ckpt.has(name):
                specs.append(_plain(ckpt, name, f"{blk}{gguf}.{kind}", transform=_rotary_permute(args, hf)))
    for hf, gguf in QK_NORMS.items():
        if ckpt.has(f"{prefix}self_attn.{hf}.weight"):
            specs.append(_plain(ckpt, f"{prefix}self_attn.{hf}.weight", f"{blk}{gguf}.weight", keep_f32=True))
    norm = "post_attention_layernorm"
    specs.append(_plain(ckpt, f"{prefix}{norm}.weight", f"{blk}{LAYER_NORMS[norm]}.weight", keep_f32=True))
    specs.append(_plain(ckpt, names.router_weight(layer), blk + "ffn_gate_inp.weight", keep_f32=True))
    specs += layer_expert_specs(args, ckpt, names, layer)
    for hf, gguf in SHARED_EXPERT.items():
        if ckpt.has(f"{prefix}mlp.{hf}.weight"):
            specs.append(_plain(ckpt, f"{prefix}mlp.{hf}.weight", f"{blk}{gguf}.weight"))
    return specs


def _rotary_permute(args: ModelArgs, hf: str):
    if not family(args.model_type).gguf.rotary_permuted or hf not in ("q_proj", "k_proj"):
        return None
    heads = args.num_attention_heads if hf == "q_proj" else args.num_key_value_heads
    return lambda weight: permute_rotary(weight, heads)


def layer_expert_specs(args: ModelArgs, ckpt: Checkpoint, names: MoeWeightNames, layer: int) -> list[TensorSpec]:
    """One MoE layer's expert tensors: the family's own (GgufFormat.expert_specs), or stacked as llama.cpp's."""
    own = family(args.model_type).gguf.expert_specs
    return (own or stacked_expert_specs)(args, ckpt, names, layer)


def stacked_expert_specs(args: ModelArgs, ckpt: Checkpoint, names: MoeWeightNames, layer: int) -> list[TensorSpec]:
    E, D, I = args.num_experts, args.hidden_size, args.moe_intermediate_size
    blk = f"blk.{layer}."
    return [
        TensorSpec(f"{blk}{EXPERTS['gate']}.weight", (E, I, D), lambda: stacked_experts(args, ckpt, names, layer, "gate")),
        TensorSpec(f"{blk}{EXPERTS['up']}.weight", (E, I, D), lambda: stacked_experts(args, ckpt, names, layer, "up")),
        TensorSpec(f"{blk}{EXPERTS['down']}.weight", (E, D, I), lambda: stacked_experts(args, ckpt, names, layer, "down")),
    ]
