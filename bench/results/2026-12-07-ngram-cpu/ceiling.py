"""What prompt lookup can give on the code workload, whatever the draft-length rule: the bundled demo's greedy
replies to resources/traces' code prompts, replayed through engine.generation.speculative.ngram.NgramIndex step by
step (the drafts accepted up to the first that differs from the reply, plus one token), against the measured
CPU step time t(q) of q positions (step_times.py; linear between the measured q). The `shared` rows also look
the text's suffix up in the earlier requests' prompts and replies (an n-gram cache across requests, as
engine/generation/speculative/ngram_cache.py: the longest suffix wins, this request's text first). From the repository root:
python bench/results/2026-12-07-ngram-cpu/ceiling.py [q:ms,...]"""
import json, sys
import numpy as np
import torch
torch.set_num_threads(1)
from engine.api import Engine, EngineOptions, GenerateRequest, SamplingParams
from engine.generation.prompt import prompt_token_ids
from engine.generation.speculative.ngram import MAX_NGRAM, MIN_NGRAM, NgramIndex

measured = sys.argv[1] if len(sys.argv) > 1 else "1:6.98,2:9.31,3:10.54,5:12.95,9:17.03"
qs, ms = zip(*[(int(q), float(t)) for q, t in (pair.split(":") for pair in measured.split(","))])
step_ms = lambda q: float(np.interp(q, qs, ms))
sampling = SamplingParams(max_tokens=128, ignore_eos=True)
runs = []
with Engine(EngineOptions(device="cpu")) as engine:
    for prompt in json.load(open("resources/traces/workloads.json"))["code"]:
        request = GenerateRequest(prompt=prompt, sampling=sampling)
        reply = list(engine.generate(request).token_ids)
        runs.append((prompt_token_ids(request, engine.tokenizer, 1 << 30), reply))


def lookup(indexes, texts, token_ids, k):
    for n in range(min(MAX_NGRAM, len(token_ids)), MIN_NGRAM - 1, -1):
        for index, text in zip(indexes, texts):
            start = index.next_position.get(tuple(token_ids[-n:]))
            if start is not None:
                return text[start : start + k]
    return []


def replay(k, shared=False, oracle=False, free=False):
    """-> (speed-up over one token a step, drafts proposed, accepted). oracle: each step verifies only the drafts
    that will be accepted (the best any rule could pick with these drafts); free: verify positions cost nothing.
    every-step: each step verifies up to k drafts, whatever the lookup finds."""
    steps_ms = tokens = proposed = accepted = 0
    earlier, earlier_index = [], NgramIndex()
    for prompt, reply in runs:
        text, index, done = list(prompt), NgramIndex(), 0
        while done < len(reply):
            index.update(text)
            indexes, texts = ([index, earlier_index], [text, earlier]) if shared else ([index], [text])
            drafts = lookup(indexes, texts, text, min(k, len(reply) - done - 1))
            taken = 0
            while taken < len(drafts) and drafts[taken] == reply[done + taken]:
                taken += 1
            if oracle:
                drafts = drafts[:taken]
            proposed, accepted = proposed + len(drafts), accepted + taken
            steps_ms += step_ms(1) if free else step_ms(1 + len(drafts))
            text += reply[done : done + taken + 1]
            done += taken + 1
            tokens += taken + 1
        earlier += text
        earlier_index.update(earlier)
    return tokens * step_ms(1) / steps_ms, proposed, accepted


print(f"t(q) ms: {measured}; {sum(len(r) for _, r in runs)} reply tokens")
for shared in (False, True):
    for k in (1, 2, 4, 8):
        rows = {name: replay(k, shared, **flags) for name, flags in
                (("every-step", {}), ("oracle", {"oracle": True}), ("free", {"free": True}))}
        print(f"{'shared' if shared else 'own   '} K={k}: " + "; ".join(
            f"{name} x{s:.2f} ({a}/{p})" for name, (s, p, a) in rows.items()), flush=True)
