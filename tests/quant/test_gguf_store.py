"""Experts of GGUF files quantized by llama.cpp's own quantizer, packed into a quantized ExpertStore: every
matrix in the store dequantizes to the file's weights (the gguf package's reference)."""

from __future__ import annotations

import pytest
import torch

from engine.gguf.model_file import GgufModel
from engine.quant.gguf_store import quant_store_from_gguf
from engine.quant.reference import dequantize_reference
from tests.gguf.conftest import gguf_files  # noqa: F401  (the session's tiny GGUF files)

pytest.importorskip("llama_cpp")


@pytest.mark.parametrize("ftype", ["Q4_K_M", "Q8_0"])
def test_store_holds_the_files_experts(gguf_files, ftype):  # noqa: F811
    model = GgufModel(gguf_files.quantized("qwen3_moe", ftype))
    experts = model.expert_layers()
    store = quant_store_from_gguf(experts, "cpu", pin=False)
    for layer, tensors in experts.items():
        fmt = store.layout.for_layer(layer)
        assert [s.qtype.ggml_id for s in (fmt.gate, fmt.up, fmt.down)] == [
            tensors.gate.qtype, tensors.up.qtype, tensors.down.qtype]
        for expert in (0, tensors.gate.shape[0] - 1):
            for spec, tensor in ((fmt.gate, tensors.gate), (fmt.up, tensors.up), (fmt.down, tensors.down)):
                got = dequantize_reference(spec.raw(store.blocks[layer][expert]), spec.qtype)
                assert torch.equal(got, tensor.dequantize_expert(expert))
