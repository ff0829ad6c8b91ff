"""CPU seconds (process time, one torch thread: robust to other processes on the machine) per generated token of
the bundled demo, --speculative off vs each of MODES (default ngram; the demo's draft layer makes mtp and auto
meaningful too), on the code workload's prompts and a code-editing prompt. Each repeat loads fresh engines, so
ngram's cache across requests starts empty: within a repeat the workload's earlier requests fill it (as a user's
session would), and no repeat drafts from an earlier repeat's replies.
From the repository root: python docs/speculative_measure.py [REPEATS] [WORKLOAD-SETTING,...|all] [MODES]
[GATHER-ENTRIES]  (MODES: comma-separated, e.g. ngram,mtp,auto; GATHER-ENTRIES: an experiment, steps of more expert
entries than this take the per-expert path)."""
import json, statistics, sys, time
import torch
torch.set_num_threads(1)
from engine.api import Engine, EngineOptions, GenerateRequest, SamplingParams

code = json.load(open("resources/traces/workloads.json"))["code"]
source = open("engine/generation/speculative/ngram.py").read().split("class NgramIndex")[1][:900]
edit = "# The file, as it is:\nclass NgramIndex" + source + "\n\n# The same file again, unchanged:\nclass NgramIndex"
workloads = {"code": code, "edit": [edit]}
settings = {"greedy": SamplingParams(max_tokens=128, ignore_eos=True),
            "T0.8": SamplingParams(max_tokens=128, ignore_eos=True, temperature=0.8, seed=0)}
repeats = int(sys.argv[1]) if len(sys.argv) > 1 else 3
only = sys.argv[2].split(",") if len(sys.argv) > 2 and sys.argv[2] != "all" else None
modes = sys.argv[3].split(",") if len(sys.argv) > 3 else ["ngram"]

def run(engine, prompts, sampling):
    tokens, seconds, ids, proposed, accepted = 0, 0.0, [], 0, 0
    for p in prompts:
        start = time.process_time()
        r = engine.generate(GenerateRequest(prompt=p, sampling=sampling))
        seconds += time.process_time() - start
        tokens += r.stats.generated_tokens
        ids.append(r.token_ids); proposed += r.stats.spec_proposed; accepted += r.stats.spec_accepted
    return tokens / seconds, ids, proposed, accepted

if len(sys.argv) > 4:  # an experiment: steps of more than this many expert entries take the per-expert path
    from engine.experts.routing import dispatch
def fresh_engine(mode):
    engine = Engine(EngineOptions(device="cpu", speculative=mode))
    if len(sys.argv) > 4:
        dispatch.GATHER_LIMIT_BYTES = int(sys.argv[4]) * engine.info.plan.expert_bytes
    return engine

for (name, prompts), (setting, sampling) in [(w, s) for w in workloads.items() for s in settings.items()]:
    if only and f"{name}-{setting}" not in only: continue
    rates = {mode: [] for mode in ["off", *modes]}
    counts, same = {mode: [] for mode in modes}, {mode: True for mode in modes}
    for _ in range(repeats):
        for mode in rates:  # interleaved
            with fresh_engine(mode) as engine:  # an empty n-gram cache
                rate, ids, proposed, accepted = run(engine, prompts, sampling)
            rates[mode].append(rate)
            if mode == "off": plain = ids
            else: same[mode] = same[mode] and ids == plain; counts[mode].append(f"{accepted}/{proposed}")
    off = statistics.median(rates["off"])
    print(f"{name} {setting}: off {off:.1f} tok/cpu-s {[round(r, 1) for r in rates['off']]}", flush=True)
    for mode in modes:
        on = statistics.median(rates[mode])
        print(f"  {mode} {on:.1f} tok/cpu-s, x{on/off:.2f}; drafts accepted/proposed per repeat {counts[mode]}; "
              f"ids identical: {same[mode]}; runs {[round(r, 1) for r in rates[mode]]}", flush=True)
