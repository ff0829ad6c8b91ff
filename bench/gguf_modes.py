"""GGUF files on Wisp's engine in every expert mode, one process: greedy token ids, the last logprob, misses and
peak device memory per (file, mode), and whether every mode gave the same bits as resident.

    python bench/gguf_modes.py FILE.gguf [FILE.gguf ...] [--device cuda] [--slots 2] [--tokens 24]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from engine.api import Engine, EngineOptions, GenerateRequest, SamplingParams  # noqa: E402

MODES = (("resident", None), ("paged", "slots"), ("static", None), ("paged", "budget"))


def run(path: str, device: str, mode: str, slots: int | None, budget: int | None, tokens: int):
    options = EngineOptions(model=path, device=device, backend="wisp", experts=mode, expert_slots=slots,
                            budget_bytes=budget)
    request = GenerateRequest(prompt="def fib(n):", sampling=SamplingParams(max_tokens=tokens, ignore_eos=True))
    import torch

    baseline = 0
    if device == "cuda":
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()
        baseline = torch.cuda.memory_allocated()  # what earlier engines of this process left behind
    with Engine(options) as engine:
        done = engine.generate(request)
        plan = engine.info.plan
    peak = torch.cuda.max_memory_allocated() - baseline if device == "cuda" else None
    if baseline:
        print(f"  ({baseline} bytes were still allocated before this engine loaded)")
    return done, plan, peak


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("files", nargs="+")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--slots", type=int, default=2)
    parser.add_argument("--tokens", type=int, default=24)
    args = parser.parse_args()
    same = True
    for path in args.files:
        reference = None
        for mode, how in MODES:
            slots = args.slots if how == "slots" else None
            budget = None
            if how == "budget":  # the smallest budget that loads: top_k slots per layer
                from engine.api import budget_marks

                budget = budget_marks(EngineOptions(model=path, device=args.device, experts="paged")).minimum
            done, plan, peak = run(path, args.device, mode, slots, budget, args.tokens)
            key = (done.token_ids, done.logprobs)
            reference = reference or key
            same &= key == reference
            same &= budget is None or peak is None or peak <= budget
            print(f"{Path(path).name} {mode}/{how or '-'}: slots/layer {plan.min_layer_slots}, budget {budget}, "
                  f"tokens {list(done.token_ids[:8])}, last logprob {done.logprobs[-1]!r}, "
                  f"same as resident {key == reference}, plan {plan.total_bytes}, peak {peak}", flush=True)
    print("ALL MODES IDENTICAL, PEAK WITHIN BUDGET" if same else "MODES DIFFER OR PEAK OVER BUDGET")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
