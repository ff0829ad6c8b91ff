"""Where Wisp's greedy tokens part from transformers' on a tiny checkpoint, and by how much transformers rates the
two choices apart there: python bench/greedy_margin.py [--device cuda] [--dtype bfloat16] MODEL_TYPE ...
(bench/results/2026-12-01-h200-arch/NOTES.md: the deepseek bf16 ties on the H200)."""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def main() -> None:
    import torch
    from transformers import AutoModelForCausalLM

    from engine.api import Engine, EngineOptions, GenerateRequest, SamplingParams
    from tests.experts.test_expert_modes import PROMPTS
    from tests.tiny_models import write_tiny_model

    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("model_types", nargs="+")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--dtype", default="bfloat16")
    parser.add_argument("--long", action="store_true",
                        help="tests/gpu/test_gpt_oss.py's long prompt (past a sliding window) instead of PROMPTS[0]")
    args = parser.parse_args()
    if args.long:
        from tests.gpu.test_gpt_oss import LONG_PROMPT as prompt
    else:
        prompt = PROMPTS[0]
    dtype = getattr(torch, args.dtype)
    for model_type in args.model_types:
        folder = write_tiny_model(Path(tempfile.mkdtemp()), model_type, dtype=dtype)
        with Engine(EngineOptions(model=str(folder), device=args.device)) as engine:
            ids = engine._core.tokenizer.encode(prompt)
            ours = list(engine.generate(GenerateRequest(prompt=prompt, sampling=SamplingParams(
                max_tokens=32, ignore_eos=True))).token_ids)
        for reference_dtype in (dtype, torch.float32):
            model = AutoModelForCausalLM.from_pretrained(folder, dtype=reference_dtype).to(args.device).eval()
            with torch.inference_mode():
                out = model.generate(torch.tensor([ids], device=args.device), max_new_tokens=32, min_new_tokens=32,
                                     do_sample=False, eos_token_id=None, pad_token_id=0)
                theirs = out[0, len(ids):].tolist()
                at = next((i for i, (a, b) in enumerate(zip(ours, theirs)) if a != b), 32)
                line = f"{model_type} vs transformers {reference_dtype}: {at}/32 equal"
                if at < 32:
                    logits = model(torch.tensor([ids + ours[:at]], device=args.device)).logits[0, -1]
                    logprobs = logits.float().log_softmax(-1)
                    line += f", margin {(logprobs[theirs[at]] - logprobs[ours[at]]).item():.4f} nats"
            print(line)


if __name__ == "__main__":
    main()
