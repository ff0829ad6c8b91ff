"""--dense-quant q8_0 at Qwen3-30B-A3B's width (bench/dense_quant_checkpoint_h200.sh OUT_DIR): a random bf16
checkpoint with 2 of its 48 layers, 8 of its 128 experts (top-8) and its vocabulary, loaded on CUDA with bf16 and
with Q8_0 dense weights. Prints and saves (OUT_DIR/dense_quant.json) per choice: load seconds (Q8_0: the host
quantizer included), dense bytes held and planned, the device peak while loading, TTFT of a 512-token prompt and
decode tok/s of 64 greedy tokens."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import torch
from transformers import Qwen3MoeConfig, Qwen3MoeForCausalLM

from engine.api import Engine, EngineOptions, GenerateRequest, SamplingParams
from engine.quant.quant_modules import weight_bytes
from tests.tiny_models import save_tokenizer

GiB = 1024**3


def write_checkpoint(folder: Path) -> Path:
    config = Qwen3MoeConfig(vocab_size=151936, hidden_size=2048, num_hidden_layers=2, num_attention_heads=32,
                            num_key_value_heads=4, head_dim=128, num_experts=8, num_experts_per_tok=8,
                            moe_intermediate_size=768, intermediate_size=6144, max_position_embeddings=4096,
                            norm_topk_prob=True, tie_word_embeddings=False, eos_token_id=2, pad_token_id=0)
    torch.manual_seed(0)
    with torch.device("cuda"):
        model = Qwen3MoeForCausalLM(config).to(torch.bfloat16)
    model.save_pretrained(folder)
    save_tokenizer(folder)
    del model
    torch.cuda.empty_cache()
    return folder


def measure(folder: Path, dense_quant: str | None) -> dict:
    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats()
    baseline = torch.cuda.memory_allocated()
    start = time.perf_counter()
    options = EngineOptions(model=str(folder), device="cuda", max_model_len=1024, max_num_seqs=1,
                            dense_quant=dense_quant)
    with Engine(options) as engine:
        load_s = time.perf_counter() - start
        load_peak = torch.cuda.max_memory_allocated() - baseline
        model = engine._core.runner.model
        request = GenerateRequest(prompt_token_ids=list(range(10, 522)),
                                  sampling=SamplingParams(max_tokens=64, ignore_eos=True))
        engine.generate(request)  # warm-up: kernels compiled, graphs captured
        result = engine.generate(request)
        return {"dense_quant": dense_quant, "load_s": round(load_s, 2), "dense_held_gib": weight_bytes(model) / GiB,
                "dense_planned_gib": engine.info.plan.dense_bytes / GiB, "load_peak_gib": load_peak / GiB,
                "ttft_ms": result.stats.ttft_s * 1000, "decode_tok_s": result.stats.decode_tok_s,
                "first_tokens": list(result.token_ids[:8])}


def main(out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    folder = write_checkpoint(out / "checkpoint")
    rows = []
    for dense_quant in (None, "q8_0"):
        rows.append(measure(folder, dense_quant))
        print(json.dumps(rows[-1]), flush=True)
    (out / "dense_quant.json").write_text(json.dumps(rows, indent=1))
    for path in sorted((out / "checkpoint").iterdir()):  # the weights stay out of the results
        path.unlink()
    (out / "checkpoint").rmdir()


if __name__ == "__main__":
    main(Path(sys.argv[1]))
