"""The weights of a GGUF MoE file as Wisp's engine loads them: dense parameters dequantized into a state dict
under Wisp's names, routed experts left as raw block views of the memory-mapped file."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import torch

from engine.gguf.model_file import GgufModel
from engine.gguf.tensors import DenseTensor, ExpertLayer
from engine.model.args import ModelArgs

Progress = Callable[[float, str], None]
Dequantize = Callable[[DenseTensor, torch.dtype, torch.device | str], torch.Tensor]


@dataclass
class GgufWeights:
    """`state_dict` fits MoeTransformer.load_state_dict(strict=True, assign=True) (lm_head is the embedding
    tensor itself when the file ties them); `experts` maps each MoE layer to its stacked raw tensors."""

    args: ModelArgs
    state_dict: dict[str, torch.Tensor]
    experts: dict[int, ExpertLayer]
    model: GgufModel


def load_gguf_weights(path: Path | str, dtype: torch.dtype, device: torch.device | str = "cpu",
                      progress: Progress | None = None, dequantize: Dequantize | None = None) -> GgufWeights:
    """Open `path`, dequantize every dense tensor to `dtype` on `device`; experts are not read (their views
    page in from the file when copied). `dequantize(tensor, dtype, device)` replaces the gguf package's numpy
    reference (DenseTensor.dequantize), e.g. with a GPU kernel. Raises UnsupportedModelError / ModelFormatError
    with the reason."""
    from engine.model.deepseek_moe import fp32_parameter_names
    from engine.model.model_tree import meta_model

    model = GgufModel(path)
    model.check()
    dense = model.dense_tensors()
    fp32 = fp32_parameter_names(meta_model(model.args))  # DeepSeek-style routers stay fp32, as in a checkpoint
    state = {}
    for done, (param, tensor) in enumerate(dense.items()):
        target = torch.float32 if param in fp32 else dtype
        state[param] = dequantize(tensor, target, device) if dequantize else tensor.dequantize(target, device)
        if progress:
            progress((done + 1) / len(dense), param)
    if "lm_head.weight" not in state:
        state["lm_head.weight"] = state["embed_tokens.weight"]
    return GgufWeights(model.args, state, model.expert_layers(), model)
