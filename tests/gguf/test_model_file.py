"""GGUF files read back for Wisp's engine: ModelArgs and every weight equal the Hugging Face checkpoint the file
was converted from (exactly for f32/f16), experts as contiguous per-expert block rows."""

import numpy as np
import pytest
import torch
from gguf.quants import dequantize as gguf_dequantize

from engine.gguf.model_file import GgufModel
from engine.gguf.weights import load_gguf_weights
from engine.model.checkpoint import Checkpoint
from engine.model.loader import hf_name, read_args
from engine.model.families import family
from tests.tiny_models import GGUF_MODEL_TYPES


def hf_experts(folder, args, layer: int, projection: str) -> torch.Tensor:
    """[E, out, in] of one projection, from the HF checkpoint."""
    names, ckpt = family(args.model_type).weight_names, Checkpoint(folder)
    hf = {"gate": names.gate, "up": names.up, "down": names.down}[projection]
    return torch.stack([ckpt.get(names.expert_weight(layer, e, hf)) for e in range(args.num_experts)])


@pytest.mark.parametrize("model_type", GGUF_MODEL_TYPES)
def test_args_and_weights_of_an_f32_file_equal_the_checkpoint(model_type, gguf_files):
    folder = gguf_files.folder(model_type)
    weights = load_gguf_weights(gguf_files.converted(model_type, "f32"), torch.float32)
    args = read_args(folder)
    assert weights.args == args  # ModelArgs compares every field but `extra`
    names, ckpt = family(args.model_type).weight_names, Checkpoint(folder)
    assert set(weights.state_dict) == {name for name, _ in _meta_params(args)}
    for param, tensor in weights.state_dict.items():
        assert torch.equal(tensor, ckpt.get(hf_name(param, names))), param
    for layer, experts in weights.experts.items():
        for projection in ("gate", "up", "down"):
            stacked = getattr(experts, projection)
            reference = hf_experts(folder, args, layer, projection)
            assert stacked.shape == tuple(reference.shape) and stacked.raw.shape[0] == args.num_experts
            for e in (0, args.num_experts - 1):
                assert torch.equal(stacked.dequantize_expert(e), reference[e]), (layer, projection, e)


def _meta_params(args):
    from engine.model.model_tree import meta_model

    return meta_model(args).named_parameters()


@pytest.mark.parametrize("model_type", ["qwen2_moe", "mixtral"])
def test_f16_weights_are_the_checkpoints_rounded_to_f16(model_type, gguf_files):
    model = GgufModel(gguf_files.converted(model_type, "f16"))
    assert_rounded_checkpoint(model, gguf_files.folder(model_type), torch.float16, "F16", 1, "down", 2)


def test_tied_embeddings_reuse_the_embedding(gguf_files, tmp_path):
    from engine.gguf.convert import convert
    from tests.gguf.models import write_model

    folder = write_model(tmp_path / "tied", "qwen3_moe", tie=True)
    weights = load_gguf_weights(convert(folder, tmp_path / "tied.gguf", "f32").path, torch.float32)
    assert weights.args.tie_word_embeddings and "output.weight" not in weights.model.file.tensors
    assert weights.state_dict["lm_head.weight"] is weights.state_dict["embed_tokens.weight"]


@pytest.mark.parametrize("model_type", ["qwen3_moe", "mixtral"])
def test_q8_0_experts_are_contiguous_block_rows_of_the_file(model_type, gguf_files):
    model = GgufModel(gguf_files.converted(model_type, "q8_0"))
    args = model.args
    layer = model.expert_layers()[0]
    gate = layer.gate
    assert gate.type_name == "Q8_0"
    # Q8_0: 34 bytes per 32 weights; one expert's gate is I rows of D
    assert gate.bytes_per_expert == args.moe_intermediate_size * args.hidden_size // 32 * 34
    assert layer.bytes_per_expert == 3 * gate.bytes_per_expert
    info = model.file.tensors[gate.name]
    file_bytes = np.fromfile(model.path, np.uint8, info.num_bytes, offset=info.offset)
    assert np.array_equal(gate.raw.reshape(-1), file_bytes)  # the view is the file's bytes, expert after expert
    assert np.shares_memory(gate.raw, model.file.raw(gate.name))  # no copy
    whole = gguf_dequantize(file_bytes.reshape(-1, gate.shape[-1] // 32 * 34), gate.qtype).reshape(gate.shape)
    assert torch.equal(gate.dequantize_expert(3), torch.from_numpy(whole[3]))


def test_experts_stored_one_tensor_each_read_as_strided_views(gguf_files, tmp_path):
    from tests.gguf.vocabs import rewrite_gguf, split_experts

    stacked = GgufModel(gguf_files.quantized("mixtral", "Q4_K_M"))
    split = GgufModel(rewrite_gguf(stacked.path, tmp_path / "split.gguf", tensors=split_experts))
    assert "blk.0.ffn_gate.3.weight" in split.file.tensors and "blk.0.ffn_gate_exps.weight" not in split.file.tensors
    assert split.args == stacked.args
    for layer, experts in split.expert_layers().items():
        for projection in ("gate", "up", "down"):
            view, reference = getattr(experts, projection), getattr(stacked.expert_layers()[layer], projection)
            assert (view.type_name, view.shape, view.raw.shape) == (reference.type_name, reference.shape,
                                                                    reference.raw.shape)
            assert np.array_equal(view.raw, reference.raw) and np.shares_memory(view.raw, split.file.span(0, 1 << 40))
    assert split.support()[0]


@pytest.mark.parametrize("model_type", ["qwen3_moe", "qwen2_moe"])
def test_a_leading_dense_layer_maps_to_wisps_dense_mlp(model_type, tmp_path):
    from tests.gguf.models import write_f32_gguf_by_names, write_model

    folder = write_model(tmp_path / model_type, model_type, mlp_only_layers=[0])
    args = read_args(folder)
    assert args.moe_layers == (False, True)
    weights = load_gguf_weights(write_f32_gguf_by_names(folder, tmp_path / "dense0.gguf"), torch.float32)
    assert weights.args == args and list(weights.experts) == [1]
    names, ckpt = family(model_type).weight_names, Checkpoint(folder)
    assert weights.state_dict["layers.0.mlp.down_proj.weight"].shape == (args.hidden_size, args.intermediate_size)
    for param, tensor in weights.state_dict.items():
        assert torch.equal(tensor, ckpt.get(hf_name(param, names))), param


def test_the_state_dict_loads_into_wisps_model(gguf_files):
    from engine.model.model_tree import meta_model

    weights = load_gguf_weights(gguf_files.quantized("qwen2_moe", "Q4_K_M"), torch.bfloat16)
    model = meta_model(weights.args)
    model.load_state_dict(weights.state_dict, strict=True, assign=True)
    assert model.layers[1].mlp.shared.shared_expert_gate.weight.dtype == torch.bfloat16


def test_bf16_weights_are_the_checkpoints_rounded_to_bf16(gguf_files):
    model = GgufModel(gguf_files.converted("olmoe", "bf16"))
    assert model.support()[0] and model.args.torch_dtype == "bfloat16"
    assert_rounded_checkpoint(model, gguf_files.folder("olmoe"), torch.bfloat16, "BF16", 0, "up", 1)


def assert_rounded_checkpoint(model, folder, dtype, type_name: str, layer: int, projection: str, expert: int):
    """Every dense tensor (F32 ones exact) and one expert equal the checkpoint rounded to dtype."""
    names, ckpt = family(model.args.model_type).weight_names, Checkpoint(folder)
    for param, tensor in model.dense_tensors().items():
        reference = ckpt.get(hf_name(param, names))
        expected = reference if tensor.type_name == "F32" else reference.to(dtype).float()
        assert torch.equal(tensor.dequantize(), expected), param
    stacked = getattr(model.expert_layers()[layer], projection)
    assert stacked.type_name == type_name
    reference = hf_experts(folder, model.args, layer, projection)[expert].to(dtype).float()
    assert torch.equal(stacked.dequantize_expert(expert), reference)


def test_a_dequantizer_can_replace_the_numpy_reference(gguf_files):
    seen = []

    def dequantize(tensor, dtype, device):
        seen.append(tensor.type_name)
        return tensor.dequantize(dtype, device) * 2

    path = gguf_files.converted("qwen3_moe", "q8_0")
    doubled = load_gguf_weights(path, torch.float32, dequantize=dequantize).state_dict
    plain = load_gguf_weights(path, torch.float32).state_dict
    assert set(seen) == {"F32", "Q8_0"} and torch.equal(doubled["norm.weight"], 2 * plain["norm.weight"])
