"""Picker / doctor facts of a GGUF file and the planner's sizes use the file's real bytes per expert."""

import torch

from engine.gguf.facts import gguf_facts
from engine.gguf.model_file import GgufModel
from engine.gguf.sizes import gguf_model_sizes
from engine.model.sizes import model_sizes


def test_facts_of_a_q4_k_m_file(gguf_files):
    path = gguf_files.quantized("qwen3_moe", "Q4_K_M")
    facts = gguf_facts(path)
    args = GgufModel(path).args
    D, I = args.hidden_size, args.moe_intermediate_size
    q4_k, q6_k = I * D // 256 * 144, I * D // 256 * 210  # bytes of one [I, D] matrix per type
    assert (facts.architecture, facts.file_type, facts.num_experts, facts.top_k) == ("qwen3moe", "q4_k_m", 4, 2)
    assert facts.bytes_per_expert == {0: 3 * q4_k, 1: 2 * q4_k + q6_k}  # layer 1's ffn_down has more bits
    assert facts.max_bytes_per_expert == 2 * q4_k + q6_k
    assert facts.expert_types == {"Q4_K": 5, "Q6_K": 1}
    assert sum(facts.tensor_types.values()) == len(GgufModel(path).file.tensors)
    stored = sum(tensor.num_bytes for tensor in GgufModel(path).file.tensors.values())
    assert facts.dense_bytes + facts.expert_bytes_total == stored
    assert facts.supported and facts.backend == "wisp"
    lines = "\n".join(facts.summary_lines())
    assert "q4_k_m" in lines and "engine (--backend auto): wisp" in lines


def test_facts_of_a_file_wisp_does_not_run(gguf_files):
    facts = gguf_facts(gguf_files.quantized("qwen3_moe", "TQ1_0"))
    assert not facts.supported and facts.backend == "llama.cpp" and "TQ1_0" in facts.reason
    assert facts.max_bytes_per_expert == 3 * 256 * 256 // 256 * 54  # TQ1_0: 54 bytes per 256 weights


def test_planner_sizes_count_experts_at_their_stored_bytes(gguf_files):
    model = GgufModel(gguf_files.quantized("mixtral", "Q6_K"))
    sizes = gguf_model_sizes(model, dtype_bytes=2)
    reference = model_sizes(model.args, 2)
    assert sizes.expert_bytes == 3 * 256 * 256 // 256 * 210 < reference.expert_bytes
    assert (sizes.dense_bytes, sizes.kv_bytes_per_token) == (reference.dense_bytes, reference.kv_bytes_per_token)
    dense = sum(t.numel() for name, t in _unique(model))
    assert sizes.dense_bytes == dense * 2


def _unique(model):
    from engine.gguf.weights import load_gguf_weights

    state = load_gguf_weights(model.path, torch.float16).state_dict
    seen = set()
    for name, tensor in state.items():
        if id(tensor) not in seen:
            seen.add(id(tensor))
            yield name, tensor


def test_facts_of_an_architecture_wisp_does_not_run(gguf_files, tmp_path):
    from tests.gguf.vocabs import rewrite_gguf

    source = gguf_files.converted("olmoe", "f32")
    foreign = rewrite_gguf(source, tmp_path / "deepseek.gguf", lambda key: not key.startswith("olmoe."),
                           lambda writer, fields: writer.add_expert_count(4), architecture="deepseek2")
    facts = gguf_facts(foreign)
    assert (facts.architecture, facts.backend, facts.supported) == ("deepseek2", "llama.cpp", False)
    assert "deepseek2" in facts.reason and facts.bytes_per_expert == gguf_facts(source).bytes_per_expert
