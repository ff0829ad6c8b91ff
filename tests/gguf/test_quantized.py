"""Files quantized by llama.cpp's own quantizer: the expert tensors really are k-quants, read back under Wisp's
names they dequantize (bit-exact with gguf's numpy reference) close to the original weights, and the support
check accepts the types Wisp's engine runs and names the ones it does not."""

import numpy as np
import pytest
import torch
from gguf.quants import dequantize as gguf_dequantize

from engine.gguf.model_file import GgufModel, check_supported
from engine.gguf.weights import load_gguf_weights
from engine.model.checkpoint import Checkpoint
from engine.model.loader import hf_name
from engine.model.families import family
from tests.gguf.test_model_file import hf_experts

# llama.cpp's choice per file type for the routed experts of a 2-layer model: gate/up, and down per layer
# (Q4_K_M / Q5_K_M give ffn_down more bits in the last eighth of the layers).
EXPERT_TYPES = {"Q4_K_M": ("Q4_K", ("Q4_K", "Q6_K")), "Q5_K_M": ("Q5_K", ("Q5_K", "Q6_K")),
                "Q6_K": ("Q6_K", ("Q6_K", "Q6_K")), "Q8_0": ("Q8_0", ("Q8_0", "Q8_0"))}


@pytest.mark.parametrize("ftype", list(EXPERT_TYPES))
def test_llama_cpp_quantized_experts_have_the_expected_types(ftype, gguf_files):
    model = GgufModel(gguf_files.quantized("qwen3_moe", ftype))
    gate_up, downs = EXPERT_TYPES[ftype]
    layers = model.expert_layers()
    assert [(layers[i].gate.type_name, layers[i].up.type_name) for i in (0, 1)] == [(gate_up, gate_up)] * 2
    assert tuple(layers[i].down.type_name for i in (0, 1)) == downs
    assert check_supported(model.path) == (True, model.support()[1])


@pytest.mark.parametrize("model_type", ["qwen3_moe", "qwen2_moe", "olmoe", "mixtral"])
def test_q4_k_m_weights_dequantize_close_to_the_checkpoint(model_type, gguf_files):
    folder = gguf_files.folder(model_type)
    weights = load_gguf_weights(gguf_files.quantized(model_type, "Q4_K_M"), torch.float32)
    names, ckpt = family(model_type).weight_names, Checkpoint(folder)
    for param, tensor in weights.state_dict.items():
        reference = ckpt.get(hf_name(param, names))
        error = (tensor - reference).norm() / reference.norm()
        assert error < 0.1, (param, float(error))  # 4-6 bit blocks: a few percent; a misplaced row: over 100%
    down = weights.experts[1].down
    reference = hf_experts(folder, weights.args, 1, "down")
    for e in range(weights.args.num_experts):
        assert (down.dequantize_expert(e) - reference[e]).norm() / reference[e].norm() < 0.1


@pytest.mark.parametrize("ftype", ["Q4_K_M", "Q5_K_M", "Q6_K"])
def test_expert_rows_dequantize_bit_exact_with_gguf(ftype, gguf_files):
    model = GgufModel(gguf_files.quantized("mixtral", ftype))
    for layer in model.expert_layers().values():
        for stacked in (layer.gate, layer.up, layer.down):
            info = model.file.tensors[stacked.name]
            whole = np.fromfile(model.path, np.uint8, info.num_bytes, offset=info.offset)
            reference = gguf_dequantize(whole.reshape(stacked.shape[0] * stacked.shape[1], -1), stacked.qtype)
            reference = reference.reshape(stacked.shape)
            for e in range(stacked.shape[0]):
                assert torch.equal(stacked.dequantize_expert(e), torch.from_numpy(reference[e]))


def test_a_file_with_types_wisp_does_not_run_is_sent_elsewhere_with_the_reason(gguf_files):
    path = gguf_files.quantized("qwen3_moe", "TQ1_0")
    supported, reason = check_supported(path)
    assert not supported and "TQ1_0" in reason and "Q4_K" in reason
    assert GgufModel(path).tensor_types()["blk.0.ffn_gate_exps.weight"] == "TQ1_0"
