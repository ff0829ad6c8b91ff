"""Byte-identity on the CPU through the engine for llama.cpp-quantized files: token ids and logprobs of greedy and
seeded generations, alone and batched, are bitwise equal whether experts are resident, statically offloaded, or
paged through top_k, top_k + 1 or all slots, or under a budget (the quantized expert kernel is batch invariant)."""

import pytest

from tests.gguf.engine_runs import assert_every_mode_is_bitwise_resident

CASES = [(model_type, ftype) for model_type in ("qwen3_moe", "qwen2_moe", "olmoe", "mixtral", "glm4_moe")
         for ftype in ("Q4_K_M", "Q8_0")] + [("qwen3_moe", "Q5_K_M"), ("mixtral", "Q6_K")]
CASES += [("qwen3_next", "Q4_K_M"), ("qwen3_5_moe", "Q8_0")]  # the hybrids: their DeltaNet states in every mode
# MLA with its kv_b_proj joined back, short-conv states, Gemma 4's fused gate/up experts, Mamba-2 states and ungated
# latent experts
CASES += [(model_type, "Q4_K_M") for model_type in ("glm4_moe_lite", "lfm2_moe", "gemma4_text", "nemotron_h")]
# In the slow step: olmoe's experts run qwen3_moe's code, qwen3_5_moe's qwen3_next's and glm4_moe_lite's glm4_moe's
# (EXPERT_PATH_TWIN_OF in tests/experts/test_expert_modes.py; the lite's MLA file: test_glm4_moe_lite_gguf.py),
# and a second block type of an architecture whose first runs here (each block type stays through another one).
SLOW = {("olmoe", "Q4_K_M"), ("olmoe", "Q8_0"), ("qwen3_5_moe", "Q8_0"), ("glm4_moe_lite", "Q4_K_M"),
        ("qwen2_moe", "Q4_K_M"), ("mixtral", "Q8_0"), ("glm4_moe", "Q8_0")}


@pytest.mark.parametrize("model_type,ftype", [pytest.param(*case, marks=[pytest.mark.slow] if case in SLOW else [])
                                              for case in CASES])
def test_every_expert_mode_is_bitwise_resident(model_type, ftype, gguf_files):
    path = gguf_files.quantized(model_type, ftype)
    assert_every_mode_is_bitwise_resident(path)
