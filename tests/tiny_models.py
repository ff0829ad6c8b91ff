"""Tiny random checkpoints of every supported model_type, written by transformers (the reference), with a
trained byte-level BPE tokenizer and a ChatML template saved beside them."""

from __future__ import annotations

import json
from functools import partial
from pathlib import Path

import torch

from tests.tiny_glm4_moe import hf_glm4_moe, randomize_correction_bias
from tests.tiny_glm4_moe import hub_style_config as glm4_moe_hub_config

CHAT_TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
CORPUS = [
    "def fib(n):\n    return n if n < 2 else fib(n - 1) + fib(n - 2)\n",
    "The quick brown fox jumps over the lazy dog. héllo wörld 你好 🙂\n",
    "class Stack:\n    def push(self, item):\n        self.items.append(item)\n",
] * 40
SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
VOCAB = 384
HYBRID_TYPES = ("qwen3_next", "qwen3_5_moe")
ZERO_CENTRED_NORM_TYPES = (*HYBRID_TYPES, "qwen3_5_moe_text")
# those engine.gguf.convert writes as the checkpoint's tensors (gpt_oss and HYBRID_TYPES: in layouts of their own)
GGUF_MODEL_TYPES = ["qwen3_moe", "qwen2_moe", "mixtral", "olmoe", "glm4_moe", "minimax_m2", "ernie4_5_moe"]
# gpt-oss-20b's published RoPE; a window and a SwiGLU limit small enough that the tiny model's prompts cross the
# window and its activations reach the clamp
GPT_OSS_YARN = {"rope_type": "yarn", "factor": 32.0, "beta_fast": 32.0, "beta_slow": 1.0, "truncate": False,
                "original_max_position_embeddings": 4096}
GPT_OSS_WINDOW, GPT_OSS_SWIGLU_LIMIT = 8, 1.5


def save_tokenizer(folder: Path, specials: list[str] = SPECIALS, chat_template: str = CHAT_TEMPLATE):
    """A byte-level BPE tokenizer trained on CORPUS, with the special tokens and chat template given; saved to folder."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=VOCAB, special_tokens=specials,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(CORPUS, trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|im_end|>", pad_token="<|endoftext|>")
    fast.chat_template = chat_template
    fast.save_pretrained(folder)
    return fast


def qwen3_moe_model(common: dict):
    from transformers import Qwen3MoeConfig, Qwen3MoeForCausalLM

    return Qwen3MoeForCausalLM(Qwen3MoeConfig(**common, num_experts=8, num_experts_per_tok=2, moe_intermediate_size=32,
                                              intermediate_size=96, head_dim=16, norm_topk_prob=True))


def qwen2_moe_model(common: dict):
    from transformers import Qwen2MoeConfig, Qwen2MoeForCausalLM

    return Qwen2MoeForCausalLM(Qwen2MoeConfig(**common, num_experts=8, num_experts_per_tok=2, moe_intermediate_size=32,
                                              intermediate_size=96, shared_expert_intermediate_size=48))


def mixtral_model(common: dict):
    from transformers import MixtralConfig, MixtralForCausalLM

    return MixtralForCausalLM(MixtralConfig(**common, num_local_experts=6, num_experts_per_tok=2, intermediate_size=48))


def olmoe_model(common: dict):
    from transformers import OlmoeConfig, OlmoeForCausalLM

    return OlmoeForCausalLM(OlmoeConfig(**common, num_experts=8, num_experts_per_tok=2, intermediate_size=32))


def hf_model(model_type: str, num_layers: int = 2, **glm4_moe_config):
    """The tiny transformers model of a model_type (TINY_MODELS); glm4_moe_config: glm4_moe's config values that
    differ from tests/tiny_glm4_moe's (the other builders take none)."""
    common = dict(vocab_size=VOCAB, hidden_size=64, num_hidden_layers=num_layers, num_attention_heads=4,
                  num_key_value_heads=2, max_position_embeddings=512, eos_token_id=2, bos_token_id=None,
                  pad_token_id=0, tie_word_embeddings=False)
    if model_type not in TINY_MODELS:
        raise ValueError(model_type)
    return TINY_MODELS[model_type](common, **glm4_moe_config)


def hybrid_model(model_type: str, common: dict):
    """Four layers (three Gated DeltaNet, one gated full attention, as published), twice as many value heads as
    key heads, and prompts long enough to cross the chunked form's 64-token chunks. qwen3_5_moe as the hub
    publishes it: a vision-language model with a (tiny) vision tower."""
    from transformers import (Qwen3_5MoeConfig, Qwen3_5MoeForCausalLM, Qwen3_5MoeForConditionalGeneration,
                              Qwen3_5MoeTextConfig, Qwen3NextConfig, Qwen3NextForCausalLM)

    hybrid = dict(common, num_hidden_layers=4, num_experts=8, num_experts_per_tok=2, moe_intermediate_size=32,
                  shared_expert_intermediate_size=48, head_dim=16, linear_num_key_heads=2, linear_num_value_heads=4,
                  linear_key_head_dim=16, linear_value_head_dim=16, linear_conv_kernel_dim=4)
    if model_type == "qwen3_next":
        return Qwen3NextForCausalLM(Qwen3NextConfig(**hybrid, intermediate_size=96, norm_topk_prob=True))
    if model_type == "qwen3_5_moe_text":  # the language model alone, as Qwen3_5MoeForCausalLM saves it
        return Qwen3_5MoeForCausalLM(Qwen3_5MoeTextConfig(**hybrid))
    vision = dict(depth=1, hidden_size=32, intermediate_size=64, num_heads=2, out_hidden_size=64)
    return Qwen3_5MoeForConditionalGeneration(Qwen3_5MoeConfig(text_config=hybrid, vision_config=vision))


def gpt_oss_swiglu_limit() -> float:
    """GPT_OSS_SWIGLU_LIMIT where transformers' GptOssExperts reads the config's limit; the published 7.0 where it
    hard-codes it (transformers 5.17, the H200's), so the reference computes what the config says."""
    import inspect

    from transformers.models.gpt_oss import modeling_gpt_oss

    honoured = "config.swiglu_limit" in inspect.getsource(modeling_gpt_oss.GptOssExperts.__init__)
    return GPT_OSS_SWIGLU_LIMIT if honoured else 7.0


def gpt_oss_model(common: dict):
    from transformers import GptOssConfig, GptOssForCausalLM

    layers = common["num_hidden_layers"]
    config = GptOssConfig(**common, num_local_experts=8, num_experts_per_tok=2, intermediate_size=32, head_dim=16,
                          sliding_window=GPT_OSS_WINDOW, swiglu_limit=gpt_oss_swiglu_limit(), attention_bias=True,
                          layer_types=[("sliding_attention", "full_attention")[i % 2] for i in range(layers)],
                          rope_parameters={**GPT_OSS_YARN, "rope_theta": 150000.0})
    return GptOssForCausalLM(config)


def gpt_oss_hub_config(folder: Path) -> None:
    """Rewrite a gpt_oss config.json as openai/gpt-oss-20b publishes it: rope_theta beside rope_scaling, and
    experts_per_token beside num_experts_per_tok."""
    path = folder / "config.json"
    config = json.loads(path.read_text())
    rope = config.pop("rope_parameters")
    config["rope_theta"] = rope.pop("rope_theta")
    config["rope_scaling"] = rope
    config["experts_per_token"] = config["num_experts_per_tok"]
    config["initial_context_length"] = rope["original_max_position_embeddings"]
    path.write_text(json.dumps(config, indent=2))


DEEPSEEK_TYPES = ("deepseek_v2", "deepseek_v3")


def deepseek_model(model_type: str, common: dict):
    """Multi-head latent attention (num_key_value_heads = heads, as published), shared experts and a first dense
    layer. deepseek_v2 as V2-Lite: no q LoRA, greedy softmax routing. deepseek_v3 with a q LoRA, and grouped
    routing with a scaling factor so that every step of noaux_tc counts."""
    from transformers import DeepseekV2Config, DeepseekV2ForCausalLM, DeepseekV3Config, DeepseekV3ForCausalLM

    mla = dict(common, num_key_value_heads=common["num_attention_heads"], kv_lora_rank=32, qk_nope_head_dim=16,
               qk_rope_head_dim=8, v_head_dim=12, first_k_dense_replace=1, intermediate_size=96,
               n_routed_experts=8, num_experts_per_tok=2, moe_intermediate_size=32)
    if model_type == "deepseek_v2":
        return DeepseekV2ForCausalLM(DeepseekV2Config(**mla, q_lora_rank=None, topk_method="greedy", n_shared_experts=2))
    return DeepseekV3ForCausalLM(DeepseekV3Config(**mla, q_lora_rank=24, n_shared_experts=1, n_group=2, topk_group=1,
                                                  routed_scaling_factor=2.5, norm_topk_prob=True))


def ernie4_5_moe_model(common: dict):
    """Three layers, MoE from the second on (as published), shared experts."""
    from transformers import Ernie4_5_MoeConfig, Ernie4_5_MoeForCausalLM

    config = dict(common, num_hidden_layers=3, moe_num_experts=8, moe_k=2, moe_intermediate_size=32,
                  intermediate_size=96, moe_num_shared_experts=2, moe_layer_start_index=1)
    return Ernie4_5_MoeForCausalLM(Ernie4_5_MoeConfig(**config))


def glm4_moe_lite_model(common: dict):
    """GLM-4.7-Flash's layers at toy width: MLA with a q LoRA, a dense first layer, one routing group as published,
    its routed_scaling_factor."""
    from transformers import Glm4MoeLiteConfig, Glm4MoeLiteForCausalLM

    config = dict(common, num_key_value_heads=common["num_attention_heads"], kv_lora_rank=32, q_lora_rank=24,
                  qk_nope_head_dim=16, qk_rope_head_dim=8, v_head_dim=12, intermediate_size=96, n_routed_experts=8,
                  num_experts_per_tok=2, moe_intermediate_size=32, n_shared_experts=1, routed_scaling_factor=1.8,
                  mlp_layer_types=["dense"] + ["sparse"] * (common["num_hidden_layers"] - 1))
    return Glm4MoeLiteForCausalLM(Glm4MoeLiteConfig(**config))


def minimax_m2_model(common: dict):
    """Partial RoPE (half of each head) given as the published rotary_dim and as partial_rotary_factor: transformers
    5.17 (the GPU machines') ignores rotary_dim and turns whole heads, so the reference would not compute what the
    config says (the published config's rotary_dim alone: tests/model/test_minimax_m2.py). q/k norms over the full
    projections."""
    from transformers import MiniMaxM2Config, MiniMaxM2ForCausalLM

    return MiniMaxM2ForCausalLM(MiniMaxM2Config(**common, num_local_experts=8, num_experts_per_tok=2,
                                                intermediate_size=32, head_dim=16, rotary_dim=8,
                                                partial_rotary_factor=0.5))


def gemma4_model(model_type: str, common: dict):
    """Gemma 4 as the hub publishes the 26B-A4B (gemma4): a vision-language model (a tiny vision tower) whose language
    model has MoE blocks; gemma4_text: that language model alone, as Gemma4ForCausalLM saves it. Two sliding layers (a
    window the prompts cross) then a full one with wider heads, one key/value head and keys as values; soft-capped
    logits, tied embeddings."""
    from transformers import Gemma4Config, Gemma4ForCausalLM, Gemma4ForConditionalGeneration, Gemma4TextConfig

    text = dict(common, num_hidden_layers=3, head_dim=16, global_head_dim=32, num_global_key_value_heads=1,
                attention_k_eq_v=True, sliding_window=8, intermediate_size=96, moe_intermediate_size=32,
                num_experts=8, top_k_experts=2, enable_moe_block=True, hidden_size_per_layer_input=0,
                final_logit_softcapping=30.0, tie_word_embeddings=True,
                layer_types=["sliding_attention", "sliding_attention", "full_attention"])
    if model_type == "gemma4_text":
        return Gemma4ForCausalLM(Gemma4TextConfig(**text))
    vision = dict(hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2,
                  num_key_value_heads=2, head_dim=16)
    return Gemma4ForConditionalGeneration(Gemma4Config(text_config=text, vision_config=vision, audio_config=None,
                                                       tie_word_embeddings=True))


def lfm2_moe_model(common: dict):
    """Short-conv and attention layers as published (conv first), one dense layer, sigmoid routing with a random
    expert bias (a buffer: write_tiny_model randomises parameters only)."""
    from transformers import Lfm2MoeConfig, Lfm2MoeForCausalLM

    config = Lfm2MoeConfig(**dict(common, num_hidden_layers=4), num_experts=8, num_experts_per_tok=2,
                           moe_intermediate_size=32, intermediate_size=96, num_dense_layers=1, conv_L_cache=3,
                           layer_types=["conv", "full_attention", "conv", "conv"], routed_scaling_factor=1.5)
    model = Lfm2MoeForCausalLM(config)
    for layer in model.model.layers[config.num_dense_layers:]:
        layer.feed_forward.expert_bias.normal_(0.0, 0.3)
    return model


def nemotron_h_model(common: dict):
    """Every block kind (Mamba-2, attention, latent MoE, dense MLP), Mamba chunks shorter than the prompts, two
    Mamba groups, grouped sigmoid routing with a random correction bias (write_tiny_model randomises it)."""
    from transformers import NemotronHConfig, NemotronHForCausalLM

    fields = {k: v for k, v in common.items() if k != "num_hidden_layers"}
    return NemotronHForCausalLM(NemotronHConfig(
        **fields, head_dim=16, hybrid_override_pattern="ME*-ME", mamba_num_heads=8, mamba_head_dim=8,
        ssm_state_size=16, n_groups=2, conv_kernel=4, chunk_size=8, n_routed_experts=8, num_experts_per_tok=2,
        moe_intermediate_size=32, moe_shared_expert_intermediate_size=48, moe_latent_size=32, intermediate_size=96,
        n_group=2, topk_group=1, routed_scaling_factor=1.5))


def qwen3_vl_moe_model(common: dict):
    """Qwen3-VL-MoE as the hub publishes it: a vision-language model (a tiny tower with one deepstack merger)
    around a qwen3_moe language model; tests/vision runs it with images."""
    from transformers import Qwen3VLMoeConfig, Qwen3VLMoeForConditionalGeneration

    text = dict(common, num_experts=8, num_experts_per_tok=2, moe_intermediate_size=16, intermediate_size=96,
                head_dim=16)
    vision = dict(depth=2, hidden_size=32, intermediate_size=64, num_heads=2, out_hidden_size=64,
                  deepstack_visual_indexes=[0])
    return Qwen3VLMoeForConditionalGeneration(Qwen3VLMoeConfig(text_config=text, vision_config=vision))


# model_type -> its tiny model's builder (transformers' class, a config of the shared `common` fields): one entry
# per family puts it in every parametrised test (tests/model/test_models.py: token-exact against transformers)
TINY_MODELS = {
    "qwen3_moe": qwen3_moe_model,
    "qwen2_moe": qwen2_moe_model,
    "mixtral": mixtral_model,
    "olmoe": olmoe_model,
    "glm4_moe": hf_glm4_moe,
    "gpt_oss": gpt_oss_model,
    "deepseek_v2": partial(deepseek_model, "deepseek_v2"),
    "deepseek_v3": partial(deepseek_model, "deepseek_v3"),
    "qwen3_next": partial(hybrid_model, "qwen3_next"),
    "qwen3_5_moe": partial(hybrid_model, "qwen3_5_moe"),
    "qwen3_5_moe_text": partial(hybrid_model, "qwen3_5_moe_text"),
    "ernie4_5_moe": ernie4_5_moe_model,
    "glm4_moe_lite": glm4_moe_lite_model,
    "minimax_m2": minimax_m2_model,
    "gemma4": partial(gemma4_model, "gemma4"),
    "gemma4_text": partial(gemma4_model, "gemma4_text"),
    "lfm2_moe": lfm2_moe_model,
    "nemotron_h": nemotron_h_model,
    "qwen3_vl_moe": qwen3_vl_moe_model,
}
MODEL_TYPES = list(TINY_MODELS)


def write_tiny_model(folder: Path, model_type: str, seed: int = 0, dtype=torch.float32, **glm4_moe_config) -> Path:
    """glm4_moe_config: config values that differ from tests/tiny_glm4_moe's (other types take none)."""
    torch.manual_seed(seed)
    model = hf_model(model_type, **glm4_moe_config).to(dtype)
    with torch.no_grad():
        for name, param in model.named_parameters():
            if "norm" not in name:
                param.normal_(0.0, 0.15)  # larger than the init default so the tiny model has decisive logits
            elif model_type in ZERO_CENTRED_NORM_TYPES:
                # zero-centred norms: a weight of zeros would not test the (1 + w); the gated norm's is centred on 1
                param.normal_(float(name.endswith("linear_attn.norm.weight")), 0.1)
            elif model_type in ("gemma4", "gemma4_text"):
                param.normal_(1.0, 0.1)  # norms multiply by their weight: a weight of ones would not test it
        for name, buffer in model.named_buffers():
            if name.endswith("layer_scalar"):  # gemma4's learned per-layer output scale, a saved buffer
                buffer.uniform_(0.5, 1.5)
    randomize_correction_bias(model)
    model.save_pretrained(folder)
    if model_type == "glm4_moe":
        glm4_moe_hub_config(folder)
    if model_type == "gpt_oss":
        gpt_oss_hub_config(folder)
    save_tokenizer(folder)
    return folder
