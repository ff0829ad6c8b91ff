"""Tiny gpt-oss checkpoints with MXFP4 experts, as OpenAI publishes gpt-oss: a dense checkpoint's experts quantized
by the gguf package's MXFP4 quantizer and written in Hugging Face's layout (`*_blocks`, `*_scales`, quantization_config
"mxfp4"), plus the same model with those experts written back dense (their exact values: every MXFP4 value is a
bf16), the reference it must match."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import torch
from safetensors.torch import load_file, save_file

from engine.quant.reference import dequantize_reference
from engine.quant.types import MXFP4

EXPERT_WEIGHT = "mlp.experts."  # gate_up_proj [E, D, 2I] and down_proj [E, I, D]: x @ W, HF's gpt-oss layout


def ggml_mxfp4(weight: torch.Tensor) -> torch.Tensor:
    """[..., rows, cols] float -> ggml MXFP4 rows uint8 [..., rows, cols / 32 * 17] (the gguf package's quantizer)."""
    from gguf import GGMLQuantizationType
    from gguf.quants import quantize

    flat = weight.float().reshape(-1, weight.shape[-1]).numpy()
    raw = quantize(flat, GGMLQuantizationType.MXFP4).view(np.uint8)
    return torch.from_numpy(raw.reshape(*weight.shape[:-1], -1).copy())


def hf_blocks(ggml_rows: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """ggml MXFP4 rows [..., G * 17] -> Hugging Face (blocks [..., G, 16], scales [..., G]): byte b of a block holds
    element 2b low and 2b + 1 high (the inverse of engine.quant.mxfp4_hf.ggml_rows)."""
    blocks = ggml_rows.reshape(*ggml_rows.shape[:-1], -1, 17)
    scales, qs = blocks[..., 0], blocks[..., 1:]
    elements = torch.cat([qs & 0x0F, qs >> 4], dim=-1)  # [..., G, 32] in element order
    return elements[..., 0::2] | (elements[..., 1::2] << 4), scales.contiguous()


def write_mxfp4_pair(dense: Path, mxfp4: Path, reference: Path) -> tuple[Path, Path]:
    """From a dense gpt_oss folder: `mxfp4` (experts as blocks and scales) and `reference` (experts dense, their
    MXFP4 values). Both keep the tokenizer and every other tensor of `dense`."""
    for folder in (mxfp4, reference):
        shutil.copytree(dense, folder)
        for shard in folder.glob("*.safetensors"):
            shard.unlink()
        (folder / "model.safetensors.index.json").unlink(missing_ok=True)
    tensors = {}
    for shard in sorted(dense.glob("*.safetensors")):
        tensors |= load_file(shard)
    quantized, exact = {}, {}
    for name, tensor in tensors.items():
        if EXPERT_WEIGHT in name and name.endswith(("gate_up_proj", "down_proj")):
            rows = ggml_mxfp4(tensor.transpose(1, 2))  # [E, out, in]: a row of blocks per output feature
            quantized[name + "_blocks"], quantized[name + "_scales"] = hf_blocks(rows)
            values = dequantize_reference(rows, MXFP4)  # [E, out, in] fp32, exact in bf16
            exact[name] = values.transpose(1, 2).to(tensor.dtype).contiguous()
        else:
            quantized[name] = exact[name] = tensor
    save_file(quantized, mxfp4 / "model.safetensors", metadata={"format": "pt"})
    save_file(exact, reference / "model.safetensors", metadata={"format": "pt"})
    config = json.loads((dense / "config.json").read_text())
    config["quantization_config"] = {"quant_method": "mxfp4", "modules_to_not_convert": [
        "model.layers.*.self_attn", "model.layers.*.mlp.router", "model.embed_tokens", "lm_head"]}
    (mxfp4 / "config.json").write_text(json.dumps(config, indent=2))
    return mxfp4, reference
