"""The online controller's decisions on bench.phases's workload, replayed at the routing level on the CPU
(no model, no GPU): the same trace streams, the same plans and KV floor as the H200 run, each layer's LRU
simulated, so a controller rule can be tried in seconds before spending device time on it.

    python bench/phases_replay.py --budget 12      # bench.phases's default workload (4x7000+64, 2x256+128)
    python bench/phases_replay.py --budget 24 --burst 8x6144+16 --chat 3x256+128 --max-len 8192

Prints each re-split (where and why) and the replayed decode hit rate of every phase. Approximations: the burst
is admitted in waves that fit the KV pool (the scheduler admits as blocks free up), the link and compute are
the cost model's H200 estimates, and the engine's warm-up is one short request."""

from __future__ import annotations

import argparse
import itertools
import sys
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from engine.alloc.cost_model import LinkCost  # noqa: E402
from engine.alloc.expert_lru import ExpertLRU  # noqa: E402
from engine.alloc.memory_plan import GiB, kv_floor_bytes  # noqa: E402
from engine.alloc.miss_curve import step_unique  # noqa: E402
from engine.alloc.online_controller import OnlineController  # noqa: E402
from bench.phases import parse_phase  # noqa: E402
from engine.model.shapes import SHAPES, shape  # noqa: E402
from engine.bench.suite import mvwsa_plan  # noqa: E402
from engine.bench.trace_router import replay_streams  # noqa: E402
from engine.experts.pager.calibrate import estimated_compute  # noqa: E402
from engine.model.sizes import model_sizes  # noqa: E402
from engine.traces.format import TraceFormatError, load  # noqa: E402

H2D_BYTES_PER_S = 53e9  # the pager's measured miss rate on the H200
BLOCK = 16


class Replay:
    def __init__(self, args):
        self.model = shape(args.shape)
        self.sizes = model_sizes(self.model, 2)
        self.max_len = args.max_len
        trace = load(args.trace)
        active = self.sizes.num_moe_layers * self.sizes.top_k * self.sizes.expert_bytes
        self.dense_s, prefill_token_s = estimated_compute(self.sizes.dense_bytes, active,
                                                          self.model.num_hidden_layers, torch.device("cuda"))
        link = LinkCost(H2D_BYTES_PER_S, 20e-6, self.dense_s, prefill_token_s)
        count, prompt, tokens = args.burst
        weights = argparse.Namespace(args=self.model, store=argparse.Namespace(expert_bytes=self.sizes.expert_bytes),
                                     dense_bytes=None)
        self.plan = mvwsa_plan(weights, int(args.budget * GiB), trace, link, count, prompt + tokens)
        self.controller = OnlineController(self.sizes.num_experts, self.sizes.top_k,
                                           kv_floor_bytes(self.sizes, 1, args.max_len), link)
        self.controller.min_steps = 8  # as engine.bench.suite.attach_online sets it
        self.streams = replay_streams(trace)
        self.stream_of: dict[str, int] = {}
        self.lrus = [ExpertLRU(slots) for slots in self.plan.layer_slots]
        self.next_slot = itertools.count()  # slot numbers only tell experts apart here
        self.phase_counts: dict[str, list[int]] = {}

    def rows(self, request: str, start: int, count: int, prefill: bool) -> np.ndarray:
        stream = self.stream_of.setdefault(request, len(self.stream_of))
        prompt, decode = self.streams[stream % len(self.streams)]
        source = prompt if prefill else decode
        return source[np.arange(start, start + count) % len(source)]

    def step(self, ids: np.ndarray, prefill: bool, phase: str) -> None:
        """One forward: every layer's unique experts go to the controller and through the layer's LRU, by the
        pager's rule (misses that find no slot this step stay uncached)."""
        hits = misses = 0
        for layer, lru in enumerate(self.lrus):
            needed = [int(e) for e in step_unique(ids[:, layer])]
            self.controller.observe_routing(layer, needed, not prefill)
            found, missed = lru.split(needed)
            for expert in missed:
                if lru.place(expert, set(needed), lambda: next(self.next_slot)) is None:
                    break
            lru.touch(needed)
            hits, misses = hits + len(found), misses + len(missed)
        if not prefill:
            counts = self.phase_counts.setdefault(phase, [0, 0, 0])
            counts[0], counts[1], counts[2] = counts[0] + hits, counts[1] + misses, counts[2] + 1

    def apply(self, decision, where: str) -> None:
        if decision is None:
            return
        slots = np.asarray(decision.plan.layer_slots)
        print(f"  {where}: {decision.reason} | slots {slots.sum()} (per layer {slots.min()}-{slots.max()})")
        self.plan = decision.plan
        for lru, capacity in zip(self.lrus, slots):  # the pager keeps each layer's most recent experts that fit
            lru.shrink_to(int(capacity))

    def blocks(self, tokens: int) -> int:
        return -(-min(tokens, self.max_len) // BLOCK)

    def run(self, requests: list[tuple[str, int, int]], phase: str) -> None:
        """Requests that arrive together, from a drained engine, until it drains again."""
        need = sum(self.blocks(prompt + tokens) for _, prompt, tokens in requests)
        upcoming = max(tokens for _, _, tokens in requests)  # the engine's Scheduler.waiting_decode_steps
        self.apply(self.controller.decide(self.plan, waiting_blocks=need, upcoming_steps=upcoming), "admission")
        for wave in self.waves(requests):
            self.step(np.concatenate([self.rows(r, 0, prompt, True) for r, prompt, _ in wave]), True, phase)
            for position in range(max(tokens for _, _, tokens in wave) - 1):
                running = [r for r, _, tokens in wave if position < tokens - 1]
                self.step(np.concatenate([self.rows(r, position, 1, False) for r in running]), False, phase)
            self.controller.observe_kv(sum(self.blocks(prompt + tokens) for _, prompt, tokens in wave))
        self.apply(self.controller.decide(self.plan), "barrier")

    def waves(self, requests):
        waves, wave, used = [], [], 0
        for request in requests:
            size = self.blocks(request[1] + request[2])
            if wave and used + size > self.plan.kv_blocks:
                waves.append(wave)
                wave, used = [], 0
            wave.append(request)
            used += size
        return waves + [wave]

    def report(self) -> None:
        for phase, (hits, misses, steps) in self.phase_counts.items():
            step_s = self.dense_s + misses / steps * self.sizes.expert_bytes / H2D_BYTES_PER_S
            print(f"{phase}: decode hit rate {hits / (hits + misses):.3f}, {misses / steps:.0f} misses per step, "
                  f"~{1 / step_s:.1f} tok/s by the cost model")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python bench/phases_replay.py")
    parser.add_argument("--shape", default="qwen3-30b-a3b", choices=sorted(SHAPES))
    parser.add_argument("--trace", type=Path, default=Path("resources/traces/qwen3-twin_multi_turn.npz"))
    parser.add_argument("--budget", type=float, default=12.0, help="GiB")
    parser.add_argument("--burst", type=parse_phase, default=parse_phase("4x7000+64"))
    parser.add_argument("--chat", type=parse_phase, default=parse_phase("2x256+128"))
    parser.add_argument("--cycles", type=int, default=2)
    parser.add_argument("--max-len", type=int, default=8192)
    args = parser.parse_args(argv)
    try:
        replay = Replay(args)
    except TraceFormatError as err:
        parser.error(str(err))
    print(f"configured: KV {replay.plan.kv_bytes / GiB:.2f} GiB, {sum(replay.plan.layer_slots)} slots")
    replay.run([("warm-up", 64, 4)], "warm-up")
    for cycle in range(args.cycles):
        (count, prompt, tokens), (chats, chat_prompt, chat_tokens) = args.burst, args.chat
        print(f"burst{cycle}")
        replay.run([(f"burst{cycle}-{i}", prompt, tokens) for i in range(count)], f"burst{cycle}")
        print(f"chat{cycle}")
        for i in range(chats):
            replay.run([(f"chat{cycle}-{i}", chat_prompt, chat_tokens)], f"chat{cycle}")
    replay.report()


if __name__ == "__main__":
    main()
