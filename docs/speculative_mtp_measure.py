"""CPU seconds (process time, one torch thread) per generated token, --speculative off vs mtp, on a tiny random
checkpoint of MODEL_TYPE with a draft layer added (tests/mtp_checkpoints.py): one whose draft layer copies the
model's prediction (acceptance by construction) and one with a random draft layer. Tiny models say nothing about a
real model's acceptance; they show the drafter's overhead and the lossless output.
From the repository root: python docs/speculative_mtp_measure.py MODEL_TYPE [REPEATS]"""
import statistics, sys, tempfile, time
from pathlib import Path
import torch
torch.set_num_threads(1)
from engine.api import Engine, EngineOptions, GenerateRequest, SamplingParams
from tests.mtp_checkpoints import write_mtp_model
from tests.tiny_models import write_tiny_model

model_type = sys.argv[1]
repeats = int(sys.argv[2]) if len(sys.argv) > 2 else 3
greedy = SamplingParams(max_tokens=128, ignore_eos=True)
base = write_tiny_model(Path(tempfile.mkdtemp()), model_type)
for copying in (True, False):
    folder = write_mtp_model(base, Path(tempfile.mkdtemp()), model_type, copying)
    rates, drafts, ids = {"off": [], "mtp": []}, {}, {}
    for _ in range(repeats):  # off and mtp interleaved
        for mode in rates:
            with Engine(EngineOptions(model=str(folder), device="cpu", speculative=mode)) as engine:
                engine.generate(GenerateRequest(prompt="warm up", sampling=SamplingParams(max_tokens=4)))
                start = time.process_time()
                r = engine.generate(GenerateRequest(prompt="def fib(n):\n    return n", sampling=greedy))
                rates[mode].append(r.stats.generated_tokens / (time.process_time() - start))
                drafts.setdefault(mode, []).append((r.stats.spec_accepted, r.stats.spec_proposed))
                ids.setdefault(mode, set()).add(tuple(r.token_ids))
    off, mtp = statistics.median(rates["off"]), statistics.median(rates["mtp"])
    print(f"{model_type} {'copying' if copying else 'random'} draft layer: off {off:.1f} tok/cpu-s, mtp {mtp:.1f} "
          f"({mtp / off:.2f}x), accepted/proposed per run {drafts['mtp']}, ids equal {ids['off'] == ids['mtp']}")
