"""References for a GGUF file's weights as Wisp reads them: a transformers model holding them (dequantized), and
llama.cpp's logits on a copy of the file with every tensor dequantized to f32 (so that llama.cpp multiplies in
f32 instead of quantizing activations for its quantized kernels)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from engine.gguf.weights import load_gguf_weights
from tests.gguf.models import hf_config
from tests.gguf.vocabs import rewrite_gguf


def hf_model_from_gguf(path: Path, config):
    """transformers' model of `config` (a model_type of tests/gguf/models, or a transformers config) holding the
    file's weights under Wisp's mapping: dense tensors from load_gguf_weights, experts dequantized one by one
    from their raw rows."""
    from transformers import AutoModelForCausalLM

    weights = load_gguf_weights(path, torch.float32)
    model = AutoModelForCausalLM.from_config(hf_config(config) if isinstance(config, str) else config).eval()
    state = {}
    for key, value in model.state_dict().items():
        if ".experts." in key:
            experts = weights.experts[int(key.split(".")[2])]
            count = experts.gate.shape[0]
            if key.endswith("gate_up_proj"):  # [E, 2I, D]
                state[key] = torch.stack([torch.cat([experts.gate.dequantize_expert(e),
                                                     experts.up.dequantize_expert(e)]) for e in range(count)])
            else:
                state[key] = torch.stack([experts.down.dequantize_expert(e) for e in range(count)])
        else:
            name = key.removeprefix("model.").replace("mlp.shared_expert", "mlp.shared.shared_expert")
            state[key] = weights.state_dict[name].reshape(value.shape)
    model.load_state_dict(state, strict=True)
    return model


def dequantized_copy(path: Path, out: Path) -> Path:
    """The GGUF file with every tensor dequantized to F32 by gguf's numpy reference (rows stay where llama.cpp
    put them: q/k of llama files stay permuted)."""
    from gguf.quants import dequantize

    def tensors(reader):
        for tensor in reader.tensors:
            yield tensor.name, dequantize(np.asarray(tensor.data), tensor.tensor_type).astype(np.float32), 0

    return rewrite_gguf(path, out, tensors=tensors)


def llama_cpp_logits(path: Path, token_ids: list[int]) -> np.ndarray:
    """llama.cpp's logits [len(token_ids), vocab] on the CPU with an f32 KV cache."""
    from llama_cpp import GGML_TYPE_F32, Llama

    model = Llama(str(path), n_ctx=2 * len(token_ids), logits_all=True, verbose=False, type_k=GGML_TYPE_F32,
                  type_v=GGML_TYPE_F32, n_threads=2)
    model.eval(token_ids)
    return np.array(model.scores[:len(token_ids)])
