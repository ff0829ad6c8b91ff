"""Qwen3.5 / 3.6 MoE (model_type "qwen3_5_moe"; llama.cpp "qwen35moe"): Qwen3-Next's hybrid stack
(engine.model.hybrid) with separate DeltaNet projections (in_proj_qkv, _z, _b, _a) and always-renormalised top-k
weights. The published checkpoints are vision-language models: the language model reads config's text_config and the
tensors under model.language_model.* (engine.model.checkpoint); the vision tower beside it (vision_config,
model.visual.*) is engine.vision's, and image tokens take M-RoPE positions (mrope_section; engine.model.mrope).
In GGUF files (engine.model.families.hybrid_gguf) the value heads are tiled, the RoPE is llama.cpp's multimodal one
(rope.dimension_sections; on text it turns every rotary pair by the token's position, as the plain one does), and
multi-token-prediction blocks may follow the layers Wisp runs (nextn_predict_layers; left unread)."""

from dataclasses import replace
from functools import partial

from engine.model.args import ModelArgs
from engine.model.families import hybrid_gguf
from engine.model.families.family import Family, GgufFormat
from engine.model.families.hybrid_config import hybrid_args
from engine.model.families.vision_language import text_config
from engine.model.linear_args import QKV_Z_B_A
from engine.model.published_configs import QWEN3_5_35B_A3B
from engine.model.mtp_names import MTP
from engine.model.weight_names import QWEN_STYLE
from engine.vision.vision_args import vision_sizes

MODEL_TYPE, ARCH = "qwen3_5_moe", "qwen35moe"


def read_config(config: dict) -> ModelArgs:
    text = text_config(config)
    args = hybrid_args(text, MODEL_TYPE, QKV_Z_B_A, norm_topk_prob=True)
    extra = {"mrope_section": list((text.get("rope_parameters") or text.get("rope_scaling") or {}).get(
        "mrope_section") or [])}
    extra.update(vision_sizes(config, args.vocab_size))
    return replace(args, extra=extra)


def rope_sections(args: ModelArgs) -> list[int]:
    """llama.cpp's rope.dimension_sections: the checkpoint's mrope_section (rotary pairs turned by time, height and
    width positions, interleaved), padded to four; split evenly over the rotary pairs when the config has none that
    covers them (Qwen3.5's published [11, 11, 10] is that split of its 32 pairs)."""
    pairs = args.rotary_dim // 2
    sections = args.extra.get("mrope_section") or []
    if len(sections) != 3 or sum(sections) != pairs:
        sections = [(pairs + 2) // 3, (pairs + 1) // 3, pairs // 3]
    return [*sections, 0]


def read_gguf(key) -> ModelArgs:
    """The file's args, with rope.dimension_sections as the mrope_section image tokens take (engine.model.mrope)."""
    args = hybrid_gguf.read_gguf(key, model_type=MODEL_TYPE, projections=QKV_Z_B_A, tiled=True)
    sections = [int(n) for n in list(key.get("rope.dimension_sections") or [])[:3]]
    return replace(args, extra={**args.extra, "mrope_section": sections}) if len(sections) == 3 else args


def write_gguf_metadata(writer, args: ModelArgs) -> None:
    hybrid_gguf.write_metadata(writer, args)
    writer.add_rope_dimension_sections(rope_sections(args))


FAMILY = Family(
    model_type=MODEL_TYPE,
    read_config=read_config,
    weight_names=QWEN_STYLE,
    draft_layer=MTP,  # its multi-token-prediction layer, read for --speculative mtp/auto
    gguf=GgufFormat(arch=ARCH, read_metadata=read_gguf,
                    layer_modules=hybrid_gguf.LAYER_MODULES, layer_params=hybrid_gguf.LAYER_PARAMS,
                    check_convertible=partial(hybrid_gguf.check_convertible, arch=ARCH),
                    write_metadata=write_gguf_metadata, module_order=True, trailing_layers=True, nextn=True,
                    file_args=partial(hybrid_gguf.file_args, projections=QKV_Z_B_A, tiled=True),
                    mmproj_projector="qwen3vl_merger"),
    examples=("Qwen3.5-35B-A3B", "Qwen3.6-35B-A3B"),
    layers="as qwen3_next, with separate DeltaNet projections (the language model of the vision-language checkpoint)",
    shapes={"qwen3.5-35b-a3b": QWEN3_5_35B_A3B},
)
