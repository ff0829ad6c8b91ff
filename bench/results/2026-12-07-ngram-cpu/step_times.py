"""CPU milliseconds (process time, one torch thread) of the bundled demo's decode steps by positions per sequence
q = 1 + drafts: each step verifies the next k tokens of the plain greedy run (all accepted), so every step has
q = k + 1. From the repository root: python bench/results/2026-12-07-ngram-cpu/step_times.py [K,...]"""
import gc, json, statistics, sys, time
import torch
torch.set_num_threads(1)
from engine.api import Engine, EngineOptions, GenerateRequest, SamplingParams
from engine.runtime.model_runner import ModelRunner

prompt = json.load(open("resources/traces/workloads.json"))["code"][0]
sampling = SamplingParams(max_tokens=96, ignore_eos=True)
ks = [int(k) for k in sys.argv[1].split(",")] if len(sys.argv) > 1 else [0, 1, 2, 4, 8]
with Engine(EngineOptions(device="cpu", speculative="off")) as plain:
    reference = list(plain.generate(GenerateRequest(prompt=prompt, sampling=sampling)).token_ids)
with Engine(EngineOptions(device="cpu", speculative="ngram", draft_tokens=max(max(ks), 1))) as engine:
    core = engine._core
    runner = next(o for o in gc.get_objects() if isinstance(o, ModelRunner) and o is core.runner)
    times, forward = {}, runner.run

    def timed(seqs, is_prefill, ahead=None):
        start = time.process_time()
        logits = forward(seqs, is_prefill, ahead)
        if not is_prefill:
            times.setdefault(logits.shape[0], []).append(time.process_time() - start)
        return logits

    runner.run = timed
    for k in ks:
        def propose(request_id, token_ids, max_tokens, k=k):
            done = len(token_ids) - core.active[request_id].seq.num_prompt_tokens
            return reference[done : done + min(k, max_tokens)]
        core.speculation.propose = propose
        times.clear()
        for _ in range(2):
            ids = list(engine.generate(GenerateRequest(prompt=prompt, sampling=sampling)).token_ids)
            assert ids == reference
        q = k + 1
        print(f"q {q}: {1000 * statistics.median(times[q]):.2f} ms (median of {len(times[q])} steps)", flush=True)
