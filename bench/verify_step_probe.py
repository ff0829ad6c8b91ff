"""Where a speculative decode step's time goes: one engine (resident, or the wisp plan at --budget), its verify row
counts captured first, then

- the GPU ms of each row count's whole-step graphs replayed back to back (no host work): t_gpu(q), q = 1 + drafts;
- decode tok/s of the same requests with drafts off (overlapped host work, as `wisp bench` runs off), drafts off
  and the overlap off (every step waits for its tokens, as a verify step does), a fixed draft count k for each k
  of --fixed (the draft-length rule bypassed), and the rule itself;
- for each setting: the wall ms of its steps by row count, and that less t_gpu(q): the host's share of a step.

Drafts are random ids accepted at --accept-rate (AcceptanceReplay), as `wisp bench --speculative` rows assume. With
--speculative mtp on a shape whose family has a draft layer, that layer (random weights, counted in the plan) runs at
every proposal as `wisp bench` runs it (engine.bench.draft_layer), so the steps' wall time holds the drafter's; each
setting reports its drafts run and their ms (--draft-layer graphs: the drafts after a proposal's first as CUDA graph
replays; --draft-layer skip: the replay alone, as before).

    python bench/verify_step_probe.py --shape qwen3-30b-a3b --trace resources/traces/qwen3-published_chat-carry44.npz \
        --quant Q4_K_M --speculative ngram --accept-rate 0.6 --fixed 1,2,3,4,6 --out /tmp/probe
    (add --budget 12 for the wisp plan at 12 GiB)
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections import defaultdict
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from engine.alloc.cost_model import link_at  # noqa: E402
from engine.bench.copy_rates import copy_loop_rate  # noqa: E402
from engine.bench.graph_timing import replay_ms  # noqa: E402
from engine.bench.suite import (GiB, attach_speculation, bench_weights, decode_once, mvwsa_plan,  # noqa: E402
                                plan_for, resident_weights, session_weights, planned_drafts)
from engine.bench.synthetic import IdOnlyTokenizer  # noqa: E402
from engine.bench.trace_router import TraceRouter  # noqa: E402
from engine.bench.verify_warm_up import warm_verify_rows  # noqa: E402
from engine.bench import suite  # noqa: E402
from engine.config import EngineOptions  # noqa: E402
from engine.generation.speculative.draft_length import DraftLength  # noqa: E402
from engine.runtime.builder import assemble_engine  # noqa: E402
from engine.traces.format import load as load_trace  # noqa: E402


def main() -> None:
    probe = argparse.ArgumentParser(add_help=False)
    probe.add_argument("--budget", type=float, default=None, help="GiB: the wisp plan; none: resident")
    probe.add_argument("--fixed", default="1,2,3,4,6",
                       help="draft counts to run with the rule bypassed (within small_step_drafts' cap: 7 for 8 "
                            "experts a token in Q4_K)")
    own, rest = probe.parse_known_args()
    args = suite.parse_args(rest)
    if args.speculative == "off":
        args.speculative = "ngram"
    device = torch.device(args.device)
    host = session_weights(bench_weights(args, device), args)  # the draft layer counted for --speculative mtp
    router = TraceRouter(load_trace(args.trace), device)
    if own.budget is None:
        weights = resident_weights(host, device)
        plan = plan_for(weights, "resident", None, None, 1, args.max_len, planned_drafts(args))
    else:
        weights = host
        rate = min(copy_loop_rate(host.store, device), args.link_gbps or float("inf"))
        link = link_at(rate)
        plan = mvwsa_plan(host, int(own.budget * GiB), load_trace(args.trace), link, 1, args.max_len,
                          planned_drafts(args))
    options = EngineOptions(device=device.type, experts=plan.mode, max_num_seqs=1, draft_tokens=args.draft_tokens,
                            speculative=args.speculative)
    engine = assemble_engine(weights, IdOnlyTokenizer(), options, plan, device, args.max_len)
    if args.link_gbps and hasattr(engine.runner.experts, "pace_link"):
        from engine.experts.pager.link_pace import LinkPace
        engine.runner.experts.pace_link(LinkPace(args.link_gbps, device))
    router.drive(engine)
    facts = attach_speculation(engine, args, weights, device)
    speculation = engine.speculation
    decode_once(engine, args.prompt, 4, 1, seed=1000)
    warm_verify_rows(engine, lambda tokens: decode_once(engine, args.prompt, tokens, 1, seed=1001),
                     engine.max_draft_tokens)

    steps = record_steps(engine)
    settings = [("off", None, True), ("off-serial", None, False)]
    settings += [(f"k={k}", int(k), True) for k in own.fixed.split(",")]
    settings += [("rule", "rule", True)]
    results = []
    for name, drafts, overlap in settings:
        engine.drafts_by_default = drafts is not None
        engine.overlap = overlap
        speculation.draft_length = DraftLength(engine.max_draft_tokens)
        if isinstance(drafts, int):
            speculation.draft_length.choose = lambda k=drafts: k
        runs, by_rows = [], defaultdict(list)
        before = (speculation.counters.num_proposed, speculation.counters.num_accepted,
                  speculation.counters.num_verify_steps, speculation.counters.verify_misses, *drafted(speculation))
        for run in range(args.runs):
            engine.scheduler.block_manager.hash_to_block.clear()
            steps.clear()
            finishes = decode_once(engine, args.prompt, args.tokens, 1, seed=run)
            decode_s = max(f.stats.total_s - f.stats.ttft_s for f in finishes)
            runs.append((args.tokens - 1) / decode_s)
            for rows, seconds in steps:
                by_rows[rows].append(seconds * 1e3)
        after = (speculation.counters.num_proposed, speculation.counters.num_accepted,
                 speculation.counters.num_verify_steps, speculation.counters.verify_misses, *drafted(speculation))
        proposed, accepted, verify_steps, misses, drafts_run, drafting_s = (a - b for a, b in zip(after, before))
        results.append({"setting": name, "decode_tok_s": statistics.median(runs), "runs": runs,
                        "proposed": proposed, "accepted": accepted, "verify_steps": verify_steps,
                        "verify_misses": misses, "drafts_run": drafts_run,
                        "drafting_ms_per_draft": 1e3 * drafting_s / drafts_run if drafts_run else None,
                        "step_wall_ms": {rows: statistics.median(ms) for rows, ms in sorted(by_rows.items())},
                        "steps": {rows: len(ms) for rows, ms in sorted(by_rows.items())}})
        print("SETTING", json.dumps(results[-1]), flush=True)
    gpu_ms = {}
    padded = engine.runner.padded_decode
    if device.type == "cuda" and padded is not None:
        for rows, static in sorted(padded.by_batch.items()):
            if static.whole is not None:
                gpu_ms[rows] = replay_ms(static)
    print("GPU_MS", json.dumps(gpu_ms), flush=True)
    for result in results:
        result["host_ms"] = {rows: wall - gpu_ms[rows] for rows, wall in result["step_wall_ms"].items()
                             if rows in gpu_ms}
        print(f"{result['setting']:>10} {result['decode_tok_s']:7.1f} tok/s  drafts {result['accepted']}/"
              f"{result['proposed']} in {result['verify_steps']} verify steps, misses {result['verify_misses']}; "
              f"{drafting(result)}"
              f"wall ms by rows {fmt(result['step_wall_ms'])}; host ms {fmt(result['host_ms'])}", flush=True)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "verify_step_probe.json").write_text(json.dumps(
        {"shape": args.shape, "quant": args.quant, "budget_gib": own.budget, "link_gbps": args.link_gbps,
         "accept_rate": args.accept_rate, "drafter": facts.get("drafter"), "gpu_ms_by_rows": gpu_ms,
         "settings": results}))


def drafted(speculation) -> tuple[int, float]:
    """(drafts the draft layer has run, their seconds) so far; (0, 0.0) where no draft layer runs."""
    drafter = speculation.drafter
    return (drafter.num_drafted, drafter.drafting_s) if drafter is not None else (0, 0.0)


def drafting(result: dict) -> str:
    if not result["drafts_run"]:
        return ""
    return f"draft layer {result['drafts_run']} drafts at {result['drafting_ms_per_draft']:.2f} ms; "


def record_steps(engine) -> list:
    """Wrap engine.step: each decode step's (rows its model run computed, wall seconds) appended to the returned
    list (steps that ran a prefill are left out)."""
    steps, step, run = [], engine.step, engine.runner.run
    seen = {}

    def counted_run(seqs, is_prefill, *rest, **kwargs):
        seen["rows"] = None if is_prefill else sum(1 + len(seq.draft_ids) for seq in seqs)
        return run(seqs, is_prefill, *rest, **kwargs)

    def timed():
        seen["rows"] = None
        started = time.perf_counter()
        events = step()
        if seen["rows"] is not None:
            steps.append((seen["rows"], time.perf_counter() - started))
        return events

    engine.step, engine.runner.run = timed, counted_run
    return steps


def fmt(values: dict) -> str:
    return ", ".join(f"{rows}: {ms:.2f}" for rows, ms in values.items())


if __name__ == "__main__":
    main()
