"""MiniMax-M2 GGUF files (llama.cpp's minimax-m2), written by `wisp convert-gguf` from a tiny checkpoint that
transformers' own class wrote: llama.cpp loads them and Wisp's engine computes llama.cpp's logits at f32 (partial
NEOX RoPE, q/k norms over the full projections, the sigmoid router's correction bias as exp_probs_b) and the
checkpoint's own logits; a file that llama.cpp's quantizer made Q4_K_M reads as llama.cpp computes its weights.
(test_model_file and test_convert_gguf cover minimax_m2 with the other architectures.) The logits and tokens against
llama.cpp and the checkpoint: test_gguf_agreement.py."""

from engine.gguf.model_file import GgufModel


def test_the_file_holds_what_llama_cpp_reads(gguf_files):
    model = GgufModel(gguf_files.converted("minimax_m2", "f32"))
    assert model.architecture == "minimax-m2" and model.support()[0]
    assert model.file.get("minimax-m2.rope.dimension_count") == 32
    assert model.file.get("minimax-m2.expert_gating_func") == 2
    assert "blk.1.exp_probs_b.bias" in model.file.tensors and "blk.0.attn_q_norm.weight" in model.file.tensors
    assert model.args.rotary_dim == 32 and model.args.attention.qk_norm == "full" and model.args.router.topk_method == "noaux_tc"
