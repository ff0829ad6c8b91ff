"""A tiny random-weight vision-language checkpoint (qwen3_5_moe as published: a vision tower beside the hybrid MoE
language model), saved with a tokenizer whose chat template writes the vision tokens and with transformers' image
processor config; and a few small test images."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import torch
from PIL import Image

from tests.tiny_models import VOCAB, hybrid_model, save_tokenizer

VISION_SPECIALS = ["<|vision_start|>", "<|vision_end|>", "<|image_pad|>", "<|video_pad|>"]
SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", *VISION_SPECIALS]
CHAT_TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n"
    "{% if m['content'] is string %}{{ m['content'] }}{% else %}{% for p in m['content'] %}"
    "{% if p['type'] == 'image' %}<|vision_start|><|image_pad|><|vision_end|>{% else %}{{ p['text'] }}{% endif %}"
    "{% endfor %}{% endif %}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
TOKEN_IDS = dict(vision_start_token_id=3, vision_end_token_id=4, image_token_id=5, video_token_id=6)
MIN_PIXELS, MAX_PIXELS = 32 * 32, 96 * 96  # small grids: a few tokens per image


def save_vl_tokenizer(folder: Path):
    fast = save_tokenizer(folder, SPECIALS, CHAT_TEMPLATE)
    assert [fast.convert_tokens_to_ids(t) for t in VISION_SPECIALS] == list(TOKEN_IDS.values())
    return fast


def qwen3_vl_moe_model(common: dict):
    """Qwen3-VL-MoE: a qwen3_moe language model (experts narrower than half the hidden size, so that the stacked
    experts' two layouts differ in shape) and a tower whose blocks 0 and 2 feed deepstack features."""
    from transformers import Qwen3VLMoeConfig, Qwen3VLMoeForConditionalGeneration

    rope = {**common["rope_parameters"], "partial_rotary_factor": 1.0, "mrope_section": [3, 3, 2]}
    text = dict(common, rope_parameters=rope, num_hidden_layers=3, num_experts=8, num_experts_per_tok=2,
                moe_intermediate_size=16, intermediate_size=96, head_dim=16)
    vision = dict(depth=3, hidden_size=32, intermediate_size=64, num_heads=2, out_hidden_size=64,
                  deepstack_visual_indexes=[0, 2])
    return Qwen3VLMoeForConditionalGeneration(Qwen3VLMoeConfig(text_config=text, vision_config=vision))


def write_tiny_vl(folder: Path, seed: int = 0, model_type: str = "qwen3_5_moe") -> Path:
    torch.manual_seed(seed)
    # half the head turns, in four pairs: one by time, one by row, one by column, the last by time again
    rope = {"rope_type": "default", "rope_theta": 10000.0, "partial_rotary_factor": 0.5, "mrope_section": [1, 1, 1],
            "mrope_interleaved": True}
    common = dict(vocab_size=VOCAB, hidden_size=64, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                  max_position_embeddings=512, eos_token_id=2, bos_token_id=None, pad_token_id=0,
                  tie_word_embeddings=False, rope_parameters=rope)
    model = hybrid_model("qwen3_5_moe", common) if model_type == "qwen3_5_moe" else qwen3_vl_moe_model(common)
    for key, value in TOKEN_IDS.items():
        setattr(model.config, key, value)
    with torch.no_grad():
        for name, param in model.named_parameters():
            if "norm" not in name:
                param.normal_(0.0, 0.15)
            else:
                param.normal_(float(name.endswith("linear_attn.norm.weight") or "visual" in name), 0.1)
    model.save_pretrained(folder)
    save_vl_tokenizer(folder)
    reference_image_processor().save_pretrained(folder)
    return folder


def reference_image_processor():
    """transformers' image processor as the Qwen3-VL / Qwen3.5 processor builds it (the PIL one: no torchvision)."""
    from transformers import Qwen2VLImageProcessorPil

    return Qwen2VLImageProcessorPil(patch_size=16, temporal_patch_size=2, merge_size=2,
                                    size={"shortest_edge": MIN_PIXELS, "longest_edge": MAX_PIXELS},
                                    image_mean=[0.5, 0.5, 0.5], image_std=[0.5, 0.5, 0.5])


def reference_inputs(folder: Path, messages: list[dict], images: list[bytes]) -> dict:
    """What Qwen3VLProcessor gives the model: the template's ids with each <|image_pad|> repeated once per merged
    patch block, mm_token_type_ids marking them, pixel_values and image_grid_thw."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(folder)
    pictures = [Image.open(io.BytesIO(data)) for data in images]
    vision = reference_image_processor()(pictures, return_tensors="pt") if pictures else {}
    ids = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=True, return_dict=False)
    ids = list(ids["input_ids"] if isinstance(ids, dict) else ids)
    counts = iter((vision["image_grid_thw"].prod(-1) // 4).tolist() if pictures else [])
    expanded = []
    for token in ids:
        expanded += [token] * (next(counts) if token == TOKEN_IDS["image_token_id"] else 1)
    input_ids = torch.tensor([expanded])
    return dict(input_ids=input_ids, mm_token_type_ids=(input_ids == TOKEN_IDS["image_token_id"]).int(), **vision)


def encoded_image(width: int, height: int, seed: int, mode: str = "RGB", fmt: str = "PNG") -> bytes:
    """A smooth random picture (gradients and a few blocks), encoded."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:height, 0:width]
    pixels = np.stack([(x * rng.uniform(0.5, 3) + y * rng.uniform(0, 2)) % 256 for _ in range(3)], -1)
    pixels[rng.integers(0, height // 2):, : rng.integers(1, width)] //= 2
    image = Image.fromarray(pixels.astype(np.uint8)).convert(mode)
    out = io.BytesIO()
    image.save(out, format=fmt)
    return out.getvalue()
