"""A tiny random-weight Gemma 4 vision-language checkpoint (gemma4 as published: a vision tower beside the MoE
language model, image tokens attending to each other both ways in the sliding layers), saved with a tokenizer whose
chat template writes the image token and with transformers' Gemma 4 image processor config; and transformers' inputs
for a conversation, as Gemma4Processor makes them."""

from __future__ import annotations

import io
from pathlib import Path

import torch
from PIL import Image

from tests.tiny_models import VOCAB, gemma4_model, save_tokenizer

SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|image|>", "<|image>", "<image|>"]  # Gemma 4's names
CHAT_TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n"
    "{% if m['content'] is string %}{{ m['content'] }}{% else %}{% for p in m['content'] %}"
    "{% if p['type'] == 'image' %}<|image|>{% else %}{{ p['text'] }}{% endif %}"
    "{% endfor %}{% endif %}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
TOKEN_IDS = dict(image_token_id=3, boi_token_id=4, eoi_token_id=5)
MAX_SOFT_TOKENS = 70  # the smallest budget transformers' processor takes: at most 70 tokens per image


def write_tiny_gemma4_vl(folder: Path, seed: int = 0) -> Path:
    torch.manual_seed(seed)
    common = dict(vocab_size=VOCAB, hidden_size=64, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                  max_position_embeddings=512, eos_token_id=2, bos_token_id=None, pad_token_id=0,
                  tie_word_embeddings=False)
    model = gemma4_model("gemma4", common)
    model.config.text_config.use_bidirectional_attention = "vision"  # as the published 26B-A4B
    for key, value in TOKEN_IDS.items():
        setattr(model.config, key, value)
    with torch.no_grad():
        for name, param in model.named_parameters():
            param.normal_(1.0, 0.1) if "norm" in name else param.normal_(0.0, 0.15)
        for name, buffer in model.named_buffers():
            if name.endswith("layer_scalar"):
                buffer.uniform_(0.5, 1.5)
    model.save_pretrained(folder)
    fast = save_tokenizer(folder, SPECIALS, CHAT_TEMPLATE)
    assert [fast.convert_tokens_to_ids(t) for t in SPECIALS[3:]] == list(TOKEN_IDS.values())
    reference_image_processor().save_pretrained(folder)
    return folder


def reference_image_processor():
    from transformers.models.gemma4.image_processing_pil_gemma4 import Gemma4ImageProcessorPil

    return Gemma4ImageProcessorPil(max_soft_tokens=MAX_SOFT_TOKENS)


def reference_inputs(folder: Path, messages: list[dict], images: list[bytes]) -> dict:
    """What Gemma4Processor gives the model: the template's ids with each image token as <|image>, one image token per
    soft token, <image|>; mm_token_type_ids marking the image tokens; pixel_values and image_position_ids."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(folder)
    pictures = [Image.open(io.BytesIO(data)) for data in images]
    vision = reference_image_processor()(pictures, return_tensors="pt") if pictures else {}
    ids = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=True, return_dict=False)
    ids = list(ids["input_ids"] if isinstance(ids, dict) else ids)
    counts = iter(list(vision.pop("num_soft_tokens_per_image", [])))
    expanded = []
    for token in ids:
        if token == TOKEN_IDS["image_token_id"]:
            expanded += [TOKEN_IDS["boi_token_id"], *[token] * int(next(counts)), TOKEN_IDS["eoi_token_id"]]
        else:
            expanded.append(token)
    input_ids = torch.tensor([expanded])
    return dict(input_ids=input_ids, mm_token_type_ids=(input_ids == TOKEN_IDS["image_token_id"]).long(), **vision)
