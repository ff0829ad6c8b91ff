"""Qwen3-Next (model_type "qwen3_next"; llama.cpp "qwen3next"): Gated DeltaNet in three of every four layers, gated
full attention with partial RoPE in the fourth, routed experts plus a gated shared expert (engine.model.hybrid); its
DeltaNet projections are fused per key head (in_proj_qkvz, in_proj_ba). In GGUF files (engine.model.families.
hybrid_gguf) q|k|v and z are two tensors (one, ssm_in, in older files), b|a stays fused per key head, and the value
heads keep their order."""

from functools import partial

from engine.model.args import ModelArgs
from engine.model.families import hybrid_gguf
from engine.model.families.family import Family, GgufFormat
from engine.model.families.gguf_keys import GgufKeys
from engine.model.families.hybrid_config import hybrid_args
from engine.model.linear_args import QKVZ_BA, QKV_Z_BA
from engine.model.published_configs import QWEN3_NEXT_80B_A3B
from engine.model.mtp_names import MTP
from engine.model.weight_names import QWEN_STYLE

MODEL_TYPE, ARCH = "qwen3_next", "qwen3next"


def read_config(config: dict) -> ModelArgs:
    return hybrid_args(config, MODEL_TYPE, QKVZ_BA, norm_topk_prob=bool(config.get("norm_topk_prob", True)))


def read_gguf(key: GgufKeys) -> ModelArgs:
    """Files of llama.cpp's converter before it split q|k|v from z keep the checkpoint's fused in_proj_qkvz as
    ssm_in (its graph reads both layouts)."""
    fused = any(name.endswith(".ssm_in.weight") for name in key.file.tensors)
    return hybrid_gguf.read_gguf(key, MODEL_TYPE, QKVZ_BA if fused else QKV_Z_BA, tiled=False)


FAMILY = Family(
    model_type=MODEL_TYPE,
    read_config=read_config,
    weight_names=QWEN_STYLE,
    draft_layer=MTP,  # its multi-token-prediction layer, read for --speculative mtp/auto
    gguf=GgufFormat(arch=ARCH, read_metadata=read_gguf,
                    layer_modules=hybrid_gguf.LAYER_MODULES, layer_params=hybrid_gguf.LAYER_PARAMS,
                    check_convertible=partial(hybrid_gguf.check_convertible, arch=ARCH),
                    write_metadata=hybrid_gguf.write_metadata, module_order=True, trailing_layers=True, nextn=True,
                    file_args=partial(hybrid_gguf.file_args, projections=QKV_Z_BA, tiled=False)),
    examples=("Qwen3-Next-80B-A3B",),
    layers=(
        "hybrid: three Gated DeltaNet layers to one gated GQA (partial RoPE, zero-centred q/k norm); softmax "
        "router; gated shared expert"),
    shapes={"qwen3-next-80b-a3b": QWEN3_NEXT_80B_A3B},
)
