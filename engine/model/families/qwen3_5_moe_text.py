"""Qwen3.5 / 3.6 MoE text-only checkpoints (model_type "qwen3_5_moe_text"): what `Qwen3_5MoeForCausalLM.save_pretrained`
writes (fine-tunes of the language model alone). The layers are qwen3_5_moe's (engine.model.hybrid: Gated DeltaNet
with separate in_proj_qkv / _z / _b / _a, gated full attention, zero-centred norms, renormalised top-k softmax router,
a gated shared expert); the config is the text config itself and the tensors sit under model.layers.* (no vision
tower, no model.language_model. prefix). Its RoPE is the multimodal one, which on text turns every rotary pair by the
token's position as the plain one does. llama.cpp writes such a checkpoint as a `qwen35moe` file, which the
qwen3_5_moe family reads; this family has no GGUF format of its own."""

from engine.model.args import ModelArgs
from engine.model.families.family import Family
from engine.model.families.hybrid_config import hybrid_args
from engine.model.linear_args import QKV_Z_B_A
from engine.model.weight_names import QWEN_STYLE

MODEL_TYPE = "qwen3_5_moe_text"


def read_config(config: dict) -> ModelArgs:
    return hybrid_args(config, MODEL_TYPE, QKV_Z_B_A, norm_topk_prob=True)


FAMILY = Family(
    model_type=MODEL_TYPE,
    read_config=read_config,
    weight_names=QWEN_STYLE,
    examples=("Qwen3.5-35B-A3B fine-tunes saved text-only",),
    layers="as qwen3_5_moe (its language model saved alone)",
)
