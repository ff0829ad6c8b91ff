"""Tiny checkpoints sized for llama.cpp's k-quants (rows of 256), their GGUF files, and llama.cpp's quantizer."""

from __future__ import annotations

import ctypes
from pathlib import Path

import torch

from tests.tiny_glm4_moe import randomize_correction_bias
from tests.tiny_models import save_tokenizer

K_ROW = 256  # k-quant super-block: shorter rows make llama.cpp fall back to other types


def hf_config(model_type: str):
    """Shapes whose every weight row is a whole number of k-quant super-blocks."""
    from transformers import MixtralConfig, OlmoeConfig, Qwen2MoeConfig, Qwen3MoeConfig

    common = dict(vocab_size=384, hidden_size=K_ROW, num_hidden_layers=2, num_attention_heads=4,
                  num_key_value_heads=2, max_position_embeddings=512, eos_token_id=2, bos_token_id=None,
                  pad_token_id=0, tie_word_embeddings=False, num_experts_per_tok=2)
    if model_type == "qwen3_moe":
        return Qwen3MoeConfig(**common, num_experts=4, moe_intermediate_size=K_ROW, intermediate_size=512,
                              head_dim=64, norm_topk_prob=True)
    if model_type == "qwen2_moe":
        return Qwen2MoeConfig(**common, num_experts=4, moe_intermediate_size=K_ROW, intermediate_size=512,
                              shared_expert_intermediate_size=K_ROW)
    if model_type == "mixtral":
        return MixtralConfig(**common, num_local_experts=4, intermediate_size=K_ROW)
    if model_type == "olmoe":  # llama.cpp's olmoe runs only as many KV heads as heads
        return OlmoeConfig(**{**common, "num_key_value_heads": 4}, num_experts=4, intermediate_size=K_ROW)
    if model_type == "gpt_oss":  # llama.cpp's fixed SwiGLU limit (7) and YaRN truncated as ggml computes it
        from transformers import GptOssConfig

        yarn = {"rope_type": "yarn", "factor": 32.0, "beta_fast": 32.0, "beta_slow": 1.0, "truncate": True,
                "original_max_position_embeddings": 4096, "rope_theta": 150000.0}
        return GptOssConfig(**common, num_local_experts=4, intermediate_size=128, head_dim=64, sliding_window=8,
                            swiglu_limit=7.0, attention_bias=True, rope_parameters=yarn,
                            layer_types=["sliding_attention", "full_attention"])
    if model_type == "glm4_moe":  # a dense first layer, then experts with a shared one; ungrouped routing, as
        from transformers import Glm4MoeConfig  # GLM-4.5's own config and llama.cpp's graph have it

        return Glm4MoeConfig(**{**common, "num_hidden_layers": 3}, n_routed_experts=4, moe_intermediate_size=K_ROW,
                             intermediate_size=512, head_dim=64, partial_rotary_factor=0.5, first_k_dense_replace=1,
                             n_shared_experts=1, n_group=1, topk_group=1, routed_scaling_factor=2.5,
                             norm_topk_prob=True, attention_bias=True)
    if model_type == "minimax_m2":  # half of each head turned, as published (64 of 128); the factor too, which
        from transformers import MiniMaxM2Config  # transformers 5.17 reads where it ignores rotary_dim

        return MiniMaxM2Config(**common, num_local_experts=4, intermediate_size=K_ROW, head_dim=64, rotary_dim=32,
                               partial_rotary_factor=0.5)
    if model_type == "ernie4_5_moe":  # a dense first layer, then experts with shared ones, as published
        from transformers import Ernie4_5_MoeConfig

        return Ernie4_5_MoeConfig(**{**common, "num_hidden_layers": 3}, moe_num_experts=4, moe_intermediate_size=K_ROW,
                                  intermediate_size=512, moe_num_shared_experts=2, moe_layer_start_index=1)
    if model_type == "glm4_moe_lite":  # GLM-4.7-Flash's layers: MLA with a q LoRA, a dense first layer, one
        from transformers import Glm4MoeLiteConfig  # routing group; rms_norm_eps transformers' LoRA norms use

        return Glm4MoeLiteConfig(**{**common, "num_hidden_layers": 3, "num_key_value_heads": 4}, n_routed_experts=4,
                                 moe_intermediate_size=K_ROW, intermediate_size=512, kv_lora_rank=K_ROW,
                                 q_lora_rank=K_ROW, qk_nope_head_dim=64, qk_rope_head_dim=32, v_head_dim=64,
                                 n_shared_experts=1, routed_scaling_factor=1.8, rms_norm_eps=1e-6,
                                 mlp_layer_types=["dense", "sparse", "sparse"])
    if model_type == "lfm2_moe":  # short-conv and attention layers (conv first, as published), a dense first layer
        from transformers import Lfm2MoeConfig

        return Lfm2MoeConfig(**{**common, "num_hidden_layers": 4}, num_experts=4, moe_intermediate_size=K_ROW,
                             intermediate_size=512, num_dense_layers=1, conv_L_cache=3, routed_scaling_factor=1.0,
                             layer_types=["conv", "full_attention", "conv", "conv"])
    if model_type == "gemma4_text":  # two sliding layers (a window the prompts cross), then a full one with wider
        from transformers import Gemma4TextConfig  # heads, one KV head and keys as values; soft-capped, tied logits

        return Gemma4TextConfig(**{**common, "num_hidden_layers": 3, "tie_word_embeddings": True}, head_dim=64,
                                global_head_dim=128, num_global_key_value_heads=1, attention_k_eq_v=True,
                                sliding_window=8, intermediate_size=512, moe_intermediate_size=K_ROW, num_experts=4,
                                top_k_experts=2, enable_moe_block=True, hidden_size_per_layer_input=0,
                                final_logit_softcapping=30.0,
                                layer_types=["sliding_attention", "sliding_attention", "full_attention"])
    if model_type == "nemotron_h":  # Mamba-2, latent MoE and attention blocks (no dense MLP: llama.cpp's loader
        from transformers import NemotronHConfig  # builds experts in every feed-forward block), two Mamba groups,
        # Mamba chunks shorter than the prompts, grouped sigmoid routing

        fields = {k: v for k, v in common.items() if k != "num_hidden_layers"}
        return NemotronHConfig(**fields, head_dim=64, hybrid_override_pattern="ME*ME", mamba_num_heads=8,
                               mamba_head_dim=32, ssm_state_size=16, n_groups=2, conv_kernel=4, chunk_size=8,
                               n_routed_experts=4, moe_intermediate_size=K_ROW,
                               moe_shared_expert_intermediate_size=K_ROW, moe_latent_size=K_ROW, intermediate_size=512,
                               n_group=2, topk_group=1, routed_scaling_factor=1.5)
    if model_type in ("qwen3_next", "qwen3_5_moe"):
        return hybrid_config(model_type, common)
    raise ValueError(model_type)


def hybrid_config(model_type: str, common: dict):
    """Three Gated DeltaNet layers and one gated full attention, twice as many value heads as key heads (so the
    grouped-to-tiled reordering of qwen35moe files counts); qwen3_5_moe with a vision tower, as published."""
    from transformers import Qwen3_5MoeConfig, Qwen3NextConfig

    hybrid = dict(common, num_hidden_layers=4, num_experts=4, moe_intermediate_size=K_ROW,
                  shared_expert_intermediate_size=K_ROW, head_dim=64, linear_num_key_heads=2,
                  linear_num_value_heads=4, linear_key_head_dim=64, linear_value_head_dim=64, linear_conv_kernel_dim=4)
    if model_type == "qwen3_next":
        return Qwen3NextConfig(**hybrid, intermediate_size=512, norm_topk_prob=True)
    vision = dict(depth=1, hidden_size=32, intermediate_size=64, num_heads=2, out_hidden_size=K_ROW)
    return Qwen3_5MoeConfig(text_config=hybrid, vision_config=vision, tie_word_embeddings=False)


def write_model(folder: Path, model_type: str, tie: bool = False, seed: int = 0, peak: float = 0.0, std: float = 0.15,
                **config_changes) -> Path:
    """A random checkpoint (f32) with tests/tiny_models' byte-level BPE tokenizer and ChatML template.
    peak > 0 (untied only): the token embeddings are scaled by `peak`, so the current token dominates the residual
    stream, and lm_head's row of a successor of every token v (one cycle through the vocabulary) also points along
    v's embedding: each position's logits get a favourite whose margin grows with peak while attention and the
    experts still shift every logit. Greedy decoding is then well defined under rounding that flips the argmax
    of a flat random model (llama.cpp's activation quantization, bf16). `std`: the other weights' spread."""
    from transformers import AutoModelForCausalLM

    torch.manual_seed(seed)
    config = hf_config(model_type)
    config.tie_word_embeddings = tie or config.tie_word_embeddings  # gemma4_text ties them, as published
    for key, value in config_changes.items():
        setattr(config, key, value)
    if model_type == "qwen3_5_moe":  # the vision-language model the hub publishes, not its text-only class
        from transformers import Qwen3_5MoeForConditionalGeneration

        model = Qwen3_5MoeForConditionalGeneration(config)
    else:
        model = AutoModelForCausalLM.from_config(config)
    randomize_correction_bias(model)  # glm4_moe's router bias (a buffer, zero at init)
    with torch.no_grad():
        for name, param in model.named_parameters():
            if "norm" not in name:
                param.normal_(0.0, std)
            else:
                param.uniform_(0.5, 1.5)  # norms too, so a wrongly mapped norm cannot go unnoticed
        if peak:
            embed = model.get_input_embeddings().weight
            order = torch.randperm(embed.shape[0])  # one cycle through the vocabulary: no token follows itself
            successor = order.roll(-1)[order.argsort()]
            model.get_output_embeddings().weight[successor] += 8 * embed / embed.norm(dim=-1, keepdim=True)
            embed.mul_(peak)
    model.save_pretrained(folder)
    save_tokenizer(folder)
    return folder


def quantize(source: Path, out: Path, ftype_name: str) -> Path:
    """llama.cpp's own quantizer (llama-cpp-python's llama_model_quantize), e.g. ftype_name "Q4_K_M"."""
    import llama_cpp

    params = llama_cpp.llama_model_quantize_default_params()
    params.ftype = getattr(llama_cpp, f"LLAMA_FTYPE_MOSTLY_{ftype_name}")
    params.nthread = 2
    status = llama_cpp.llama_model_quantize(str(source).encode(), str(out).encode(), ctypes.byref(params))
    assert status == 0 and out.exists(), f"llama_model_quantize failed ({status}) for {out}"
    return out


def llama_cpp_tokenize(path: Path, text: str, add_special: bool = True) -> list[int]:
    """llama.cpp's tokenization of `text` with the file's vocabulary, special-token text parsed."""
    vocab = _vocab_only(path)
    return vocab.tokenize(text.encode("utf-8"), add_bos=add_special, special=True)


_LOADED: dict[Path, object] = {}


def _vocab_only(path: Path):
    if path not in _LOADED:
        from llama_cpp import Llama

        _LOADED[path] = Llama(str(path), vocab_only=True, verbose=False)
    return _LOADED[path]


def llama_cpp_end_of_generation(path: Path) -> set[int]:
    """The ids llama.cpp stops generation on (llama_vocab_is_eog)."""
    import llama_cpp

    model = _vocab_only(path)
    vocab = llama_cpp.llama_model_get_vocab(model._model.model)
    return {i for i in range(llama_cpp.llama_vocab_n_tokens(vocab)) if llama_cpp.llama_vocab_is_eog(vocab, i)}


def write_f32_gguf_by_names(folder: Path, out: Path) -> Path:
    """An f32 GGUF of a Qwen-style checkpoint Wisp loads, written under llama.cpp's tensor names
    (engine.gguf.param_names) with convert's metadata: for layouts llama.cpp's converter refuses, such as
    leading dense layers (mlp_only_layers)."""
    import gguf

    from engine.gguf.convert import write_metadata
    from engine.gguf.param_names import gguf_name
    from engine.model.families.tensor_spec import EXPERTS, stacked_experts
    from engine.gguf.vocab import read_vocab
    from engine.model.checkpoint import Checkpoint
    from engine.model.loader import hf_name, read_args
    from engine.model.families import family
    from engine.model.model_tree import meta_model

    args = read_args(folder)
    assert args.model_type != "mixtral", "llama's q/k rows would need llama.cpp's permutation"
    names, ckpt = family(args.model_type).weight_names, Checkpoint(folder)
    arch = family(args.model_type).gguf.arch
    writer = gguf.GGUFWriter(out, arch)
    write_metadata(writer, args, arch, read_vocab(folder, args.vocab_size), folder.name, "f32")
    for param, _ in meta_model(args).named_parameters():
        if param != "lm_head.weight" or ckpt.has(param):
            weight = ckpt.get(hf_name(param, names)).float().numpy()
            writer.add_tensor(gguf_name(param), weight.reshape(-1) if "shared_expert_gate" in param else weight)
    for layer, is_moe in enumerate(args.moe_layers):
        for projection in ("gate", "up", "down") if is_moe else ():
            stacked = stacked_experts(args, ckpt, names, layer, projection)
            writer.add_tensor(f"blk.{layer}.{EXPERTS[projection]}.weight", stacked)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return out
