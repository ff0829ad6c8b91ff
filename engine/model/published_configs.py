"""config.json of published models whose geometry the benchmarks use (engine.model.shapes parses them as a
checkpoint's config is parsed, so a shape has every field the architecture reads). The values are those of the
models' Hugging Face repositories, as public code quotes them in full (no hub is reachable here); fields
transformers ignores at inference (initializer_range, router_aux_loss_coef, ...) are left out, and so is
gpt-oss's quantization_config: a shape's experts are bf16 unless a bench asks for a quant type."""

from __future__ import annotations

GPT_OSS_20B = {  # openai/gpt-oss-20b
    "architectures": ["GptOssForCausalLM"], "model_type": "gpt_oss", "vocab_size": 201088, "hidden_size": 2880,
    "num_hidden_layers": 24, "num_attention_heads": 64, "num_key_value_heads": 8, "head_dim": 64,
    "attention_bias": True, "intermediate_size": 2880, "num_local_experts": 32, "num_experts_per_tok": 4,
    "experts_per_token": 4, "swiglu_limit": 7.0, "hidden_act": "silu", "rms_norm_eps": 1e-05,
    "layer_types": ["sliding_attention", "full_attention"] * 12, "sliding_window": 128,
    "max_position_embeddings": 131072, "initial_context_length": 4096, "rope_theta": 150000,
    "rope_scaling": {"beta_fast": 32.0, "beta_slow": 1.0, "factor": 32.0, "original_max_position_embeddings": 4096,
                     "rope_type": "yarn", "truncate": False},
    "tie_word_embeddings": False, "eos_token_id": 200002, "pad_token_id": 199999,
}

GLM_45_AIR = {  # zai-org/GLM-4.5-Air
    "architectures": ["Glm4MoeForCausalLM"], "model_type": "glm4_moe", "vocab_size": 151552, "hidden_size": 4096,
    "num_hidden_layers": 46, "num_attention_heads": 96, "num_key_value_heads": 8, "head_dim": 128,
    "attention_bias": True, "use_qk_norm": False, "partial_rotary_factor": 0.5, "rope_theta": 1000000,
    "rope_scaling": None, "intermediate_size": 10944, "moe_intermediate_size": 1408, "n_routed_experts": 128,
    "n_shared_experts": 1, "num_experts_per_tok": 8, "first_k_dense_replace": 1, "n_group": 1, "topk_group": 1,
    "norm_topk_prob": True, "routed_scaling_factor": 1.0, "num_nextn_predict_layers": 1, "hidden_act": "silu",
    "rms_norm_eps": 1e-05, "max_position_embeddings": 131072, "tie_word_embeddings": False,
    "torch_dtype": "bfloat16", "eos_token_id": [151329, 151336, 151338], "pad_token_id": 151329,
}

QWEN3_NEXT_80B_A3B = {  # Qwen/Qwen3-Next-80B-A3B-Instruct (its geometry is transformers' Qwen3NextConfig default)
    "architectures": ["Qwen3NextForCausalLM"], "model_type": "qwen3_next", "vocab_size": 151936, "hidden_size": 2048,
    "num_hidden_layers": 48, "full_attention_interval": 4, "num_attention_heads": 16, "num_key_value_heads": 2,
    "head_dim": 256, "partial_rotary_factor": 0.25, "rope_theta": 10000000, "rope_scaling": None,
    "attention_bias": False, "linear_conv_kernel_dim": 4, "linear_key_head_dim": 128, "linear_num_key_heads": 16,
    "linear_num_value_heads": 32, "linear_value_head_dim": 128, "num_experts": 512, "num_experts_per_tok": 10,
    "moe_intermediate_size": 512, "shared_expert_intermediate_size": 512, "intermediate_size": 5120,
    "decoder_sparse_step": 1, "mlp_only_layers": [], "norm_topk_prob": True, "hidden_act": "silu",
    "rms_norm_eps": 1e-06, "max_position_embeddings": 262144, "tie_word_embeddings": False,
    "torch_dtype": "bfloat16", "bos_token_id": 151643, "eos_token_id": 151645,
}

QWEN3_5_35B_A3B = {  # Qwen/Qwen3.5-35B-A3B's language model (transformers' Qwen3_5MoeTextConfig default geometry)
    "architectures": ["Qwen3_5MoeForConditionalGeneration"], "model_type": "qwen3_5_moe",
    "text_config": {
        "model_type": "qwen3_5_moe_text", "vocab_size": 248320, "hidden_size": 2048, "num_hidden_layers": 40,
        "full_attention_interval": 4, "num_attention_heads": 16, "num_key_value_heads": 2, "head_dim": 256,
        "rope_parameters": {"rope_type": "default", "rope_theta": 10000000, "partial_rotary_factor": 0.25,
                            "mrope_section": [11, 11, 10], "mrope_interleaved": True},
        "attention_bias": False, "linear_conv_kernel_dim": 4, "linear_key_head_dim": 128, "linear_num_key_heads": 16,
        "linear_num_value_heads": 32, "linear_value_head_dim": 128, "num_experts": 256, "num_experts_per_tok": 8,
        "moe_intermediate_size": 512, "shared_expert_intermediate_size": 512, "hidden_act": "silu",
        "rms_norm_eps": 1e-06, "max_position_embeddings": 262144, "dtype": "bfloat16",
    },
    "tie_word_embeddings": False,
}

QWEN3_5_35B_A3B_VISION = {  # the rest of Qwen/Qwen3.5-35B-A3B's config.json: its vision tower and image tokens
    # (transformers' Qwen3_5MoeVisionConfig default geometry, its output in the language model's hidden size). Kept
    # apart from QWEN3_5_35B_A3B, whose shape plans the language model alone, as its GGUF file without an mmproj is
    # planned; `wisp bench --image` adds the tower (engine.bench.image_prompts).
    "vision_config": {
        "model_type": "qwen3_5_moe_vision", "depth": 27, "hidden_size": 1152, "intermediate_size": 4304,
        "num_heads": 16, "in_channels": 3, "patch_size": 16, "spatial_merge_size": 2, "temporal_patch_size": 2,
        "out_hidden_size": 2048, "hidden_act": "gelu_pytorch_tanh", "num_position_embeddings": 2304,
    },
    "image_token_id": 248056, "video_token_id": 248057, "vision_start_token_id": 248053, "vision_end_token_id": 248054,
}

GLM_47_FLASH = {  # zai-org/GLM-4.7-Flash (its geometry is transformers' Glm4MoeLiteConfig default)
    "architectures": ["Glm4MoeLiteForCausalLM"], "model_type": "glm4_moe_lite", "vocab_size": 154880,
    "hidden_size": 2048, "num_hidden_layers": 47, "num_attention_heads": 20, "num_key_value_heads": 20,
    "q_lora_rank": 768, "kv_lora_rank": 512, "qk_nope_head_dim": 192, "qk_rope_head_dim": 64, "v_head_dim": 256,
    "rope_interleave": True, "partial_rotary_factor": 1.0, "rope_theta": 1000000, "rope_scaling": None,
    "attention_bias": False, "intermediate_size": 10240, "moe_intermediate_size": 1536, "n_routed_experts": 64,
    "n_shared_experts": 1, "num_experts_per_tok": 4, "first_k_dense_replace": 1, "n_group": 1, "topk_group": 1,
    "topk_method": "noaux_tc", "norm_topk_prob": True, "routed_scaling_factor": 1.8, "num_nextn_predict_layers": 1,
    "hidden_act": "silu", "rms_norm_eps": 1e-05, "max_position_embeddings": 202752, "tie_word_embeddings": False,
    "torch_dtype": "bfloat16", "eos_token_id": [154820, 154827, 154829], "pad_token_id": 154820,
}

ERNIE_45_21B_A3B = {  # baidu/ERNIE-4.5-21B-A3B-PT (its geometry is transformers' Ernie4_5_MoeConfig default)
    "architectures": ["Ernie4_5_MoeForCausalLM"], "model_type": "ernie4_5_moe", "vocab_size": 103424,
    "hidden_size": 2560, "num_hidden_layers": 28, "num_attention_heads": 20, "num_key_value_heads": 4,
    "head_dim": 128, "rope_theta": 500000, "use_bias": False, "intermediate_size": 12288, "moe_intermediate_size": 1536,
    "moe_num_experts": 64, "moe_k": 6, "moe_num_shared_experts": 2, "moe_layer_start_index": 1,
    "moe_layer_end_index": 27, "moe_layer_interval": 1, "moe_norm_min": 1e-12, "hidden_act": "silu",
    "rms_norm_eps": 1e-05, "max_position_embeddings": 131072, "tie_word_embeddings": True, "torch_dtype": "bfloat16",
    "bos_token_id": 1, "eos_token_id": 2, "pad_token_id": 0,
}

GEMMA_4_26B_A4B = {  # google/gemma-4-26B-A4B-it: the language model of the vision-language checkpoint
    "architectures": ["Gemma4ForConditionalGeneration"], "model_type": "gemma4", "tie_word_embeddings": True,
    "eos_token_id": [1, 106], "dtype": "bfloat16",
    "text_config": {
        "model_type": "gemma4_text", "vocab_size": 262144, "hidden_size": 2816, "num_hidden_layers": 30,
        "num_attention_heads": 16, "num_key_value_heads": 8, "head_dim": 256, "num_global_key_value_heads": 2,
        "global_head_dim": 512, "attention_k_eq_v": True, "attention_bias": False,
        "layer_types": (["sliding_attention"] * 5 + ["full_attention"]) * 5, "sliding_window": 1024,
        "rope_parameters": {"full_attention": {"partial_rotary_factor": 0.25, "rope_theta": 1000000.0,
                                               "rope_type": "proportional"},
                            "sliding_attention": {"rope_theta": 10000.0, "rope_type": "default"}},
        "intermediate_size": 2112, "enable_moe_block": True, "num_experts": 128, "top_k_experts": 8,
        "moe_intermediate_size": 704, "hidden_activation": "gelu_pytorch_tanh", "final_logit_softcapping": 30.0,
        "hidden_size_per_layer_input": 0, "num_kv_shared_layers": 0, "use_double_wide_mlp": False,
        "use_bidirectional_attention": "vision", "rms_norm_eps": 1e-06, "max_position_embeddings": 262144,
        "tie_word_embeddings": True, "dtype": "bfloat16", "eos_token_id": 1, "pad_token_id": 0,
    },
    "vision_config": {"model_type": "gemma4_vision"},
}

# nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-BF16, its geometry as NVIDIA's Megatron-Bridge Nemotron3NanoProvider states it
NEMOTRON_3_NANO_30B_A3B = {
    "architectures": ["NemotronHForCausalLM"], "model_type": "nemotron_h", "vocab_size": 131072,
    "hidden_size": 2688, "num_hidden_layers": 52,
    "hybrid_override_pattern": "MEMEM*EMEMEM*EMEMEM*EMEMEM*EMEMEM*EMEMEMEM*EMEMEMEME",
    "num_attention_heads": 32, "num_key_value_heads": 2, "head_dim": 128, "attention_bias": False,
    "mamba_num_heads": 64, "mamba_head_dim": 64, "ssm_state_size": 128, "n_groups": 8, "conv_kernel": 4,
    "chunk_size": 128, "use_conv_bias": True, "use_bias": False, "mamba_hidden_act": "silu",
    "intermediate_size": 1856, "mlp_hidden_act": "relu2", "mlp_bias": False,
    "n_routed_experts": 128, "num_experts_per_tok": 6, "moe_intermediate_size": 1856,
    "moe_shared_expert_intermediate_size": 3712, "n_shared_experts": 1, "n_group": 1, "topk_group": 1,
    "norm_topk_prob": True, "routed_scaling_factor": 2.5, "layer_norm_epsilon": 1e-05,
    "max_position_embeddings": 262144, "tie_word_embeddings": False, "torch_dtype": "bfloat16",
}

LFM2_8B_A1B = {  # LiquidAI/LFM2-8B-A1B
    "architectures": ["Lfm2MoeForCausalLM"], "model_type": "lfm2_moe", "vocab_size": 65536, "hidden_size": 2048,
    "intermediate_size": 7168, "moe_intermediate_size": 1792, "num_hidden_layers": 24,
    "layer_types": ["full_attention" if i in (2, 6, 10, 14, 18, 21) else "conv" for i in range(24)],
    "num_attention_heads": 32, "num_key_value_heads": 8, "max_position_embeddings": 128000, "norm_eps": 1e-05,
    "rope_theta": 1000000.0, "conv_L_cache": 3, "conv_bias": False, "num_dense_layers": 2, "num_experts": 32,
    "num_experts_per_tok": 4, "use_expert_bias": True, "routed_scaling_factor": 1.0, "norm_topk_prob": True,
    "tie_embedding": True, "torch_dtype": "bfloat16",
}
