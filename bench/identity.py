"""Are the expert arms bitwise identical at a real shape? Runs each arm of `wisp bench` on the same synthetic
weights, prompts and trace-driven routing, and compares its token ids and logprobs with the first arm's
(resident by default), with CUDA graphs and on the eager (dynamic) decode path. On the eager path every layer
part (norms, attention, router, MoE block) of every step gets a checksum, so the first (step, layer, part)
that differs is named. "resident-again" (a second resident engine) checks that a run repeats itself at all,
and the dense weights' checksums after every arm catch a stray write into them.

    python -m bench.identity --shape qwen3-30b-a3b --layers 8 --trace resources/traces/qwen3-twin_code.npz

Prints one JSON line per arm and exits 1 if any arm differs or the weights changed."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import torch

from engine.alloc.memory_plan import GiB
from engine.bench.shapes import add_shape_options, shape_of
from engine.bench.suite import plan_for, reset_peak, resident_weights
from engine.bench.synthetic import IdOnlyTokenizer, synthetic_weights
from engine.bench.trace_router import TraceRouter
from engine.config import EngineOptions
from engine.experts.providers.paged import PagedExperts
from engine.experts.providers.touched_copy import TouchedCopyExperts
from engine.requests import GenerateRequest
from engine.runtime.builder import assemble_engine
from engine.sampling import SamplingParams
from engine.traces.format import load as load_trace


def checksum(t: torch.Tensor) -> int:
    """Sum of the raw 16-bit patterns, position-weighted: any one-ulp change shows."""
    bits = t.detach().contiguous().view(torch.int16).reshape(-1).to(torch.int64)
    return int((bits * (torch.arange(bits.numel(), device=bits.device) % 9973 + 1)).sum())


PARTS = ("input_layernorm", "self_attn.kv_cache", "self_attn.weights", "self_attn", "post_attention_layernorm",
         "mlp.gate", "mlp")  # in execution order; the two self_attn.* entries are what attention reads besides its input


class PartChecksums:
    """Forward hooks on each layer's parts: (step, layer, part index) -> checksum (eager paths only). Before each
    attention call, the cached K/V of the step's contexts and the attention weights get a checksum too: a
    difference there and not in the layer's input means something wrote into memory attention reads."""

    def __init__(self, model):
        self.step, self.sums = 0, {}
        self.handles = []
        for index, layer in enumerate(model.layers):
            for number, part in enumerate(PARTS):
                if part.startswith("self_attn."):
                    continue
                module = layer.get_submodule(part) if layer.is_moe or not part.startswith("mlp.") else None
                if module is not None:
                    self.handles.append(module.register_forward_hook(self._hook(index, number)))
            self.handles.append(layer.self_attn.register_forward_pre_hook(self._attention_reads(index)))

    def next_step(self, seqs, is_prefill) -> None:
        self.step += 1

    def _hook(self, layer: int, part: int):
        def record(module, inputs, output):
            self.sums[(self.step, layer, part)] = checksum(output)
        return record

    def _attention_reads(self, layer: int):
        kv_part, weights_part = PARTS.index("self_attn.kv_cache"), PARTS.index("self_attn.weights")

        def record(module, inputs):
            _, _, meta, cache = inputs
            # only what earlier steps wrote: the step's own tokens are stored inside forward, after this hook
            slots = torch.cat([span.kv_slots[:span.kv_slots.numel() - span.q_len] for span in meta.spans])
            self.sums[(self.step, layer, kv_part)] = sum(checksum(pool[layer][slots]) for pool in cache.pools())
            self.sums[(self.step, layer, weights_part)] = sum(checksum(p) for p in module.parameters())
        return record

    def remove(self) -> None:
        for handle in self.handles:
            handle.remove()


def arm_outputs(weights, plan, device, router, args, decode: str, provider=None, host_pager=False, hooks=False):
    """-> ([(token ids, logprobs) per seed], part checksums or None) for one arm."""
    options = EngineOptions(device=device.type, experts=plan.mode, max_num_seqs=1, decode=decode,
                            deterministic=not args.nondeterministic, attention=args.attention)
    engine = assemble_engine(weights, IdOnlyTokenizer(), options, plan, device, args.max_len,
                             provider=provider() if provider else None)
    if args.fill_uninitialized:  # after the engine chose its kernels (it turns filling off)
        torch.utils.deterministic.fill_uninitialized_memory = True
        cache = engine.runner.cache
        provider = engine.runner.experts
        slots = [provider.host_pager.pool.tensor] if isinstance(provider, PagedExperts) else []
        for pool in [*(t for layers in cache.pools() for t in layers), *slots]:
            pool.fill_(float("nan"))
    if host_pager:
        engine.runner.experts.page_on_host()
    parts = PartChecksums(weights.model) if hooks else None
    router.drive(engine, parts.next_step if parts is not None else None)
    outputs = []
    vocab = weights.args.vocab_size
    if args.warmup:  # as `wisp bench` does: a short request first (graph capture), then no prefix reuse
        engine.add(GenerateRequest(prompt_token_ids=tuple(range(1, args.prompt + 1)), request_id="warm-up",
                                   sampling=SamplingParams(max_tokens=4, ignore_eos=True)))
        while engine.has_work:
            engine.step()
        engine.scheduler.block_manager.hash_to_block.clear()
    for seed in range(args.seeds):
        ids = torch.randint(0, vocab, (args.prompt,), generator=torch.Generator().manual_seed(seed)).tolist()
        engine.add(GenerateRequest(prompt_token_ids=tuple(ids), request_id=f"s{seed}",
                                   sampling=SamplingParams(max_tokens=args.tokens, ignore_eos=True)))
        while engine.has_work:
            for event in engine.step():
                if hasattr(event, "stats"):
                    outputs.append((list(event.token_ids), list(event.logprobs)))
    if parts is not None:
        parts.remove()
    engine.close()
    del engine
    reset_peak(device)  # frees the engine's CUDA graphs and KV pools before the next arm's (48 layers: 139 GB)
    return outputs, (parts.sums if parts else None)


def weight_sums(model) -> dict[str, int]:
    """A checksum of every dense parameter (on the device): did anything write into the model's weights?"""
    return {name: checksum(param) for name, param in model.state_dict().items() if param.is_floating_point()}


def first_difference(reference, outputs) -> dict | None:
    for seed, ((ref_ids, ref_lp), (ids, lp)) in enumerate(zip(reference, outputs)):
        for i, (a, b, la, lb) in enumerate(zip(ref_ids, ids, ref_lp, lp)):
            if a != b or la != lb:
                return {"seed": seed, "token": i, "ids": [a, b], "logprobs": [la, lb]}
    return None


def first_part_difference(reference: dict, sums: dict) -> dict | None:
    for key in sorted(reference):
        if sums.get(key) != reference[key]:
            step, layer, part = key
            return {"step": step, "layer": layer, "part": PARTS[part]}
    return None


def arms(host, resident, device, budget: int, names: list[str]):
    """(name, weights, plan, provider factory, host pager) of each arm, as `wisp bench` builds them."""
    paged_all = plan_for(host, "paged", None, host.args.num_experts, 1, 4096)
    paged = plan_for(host, "paged", budget, None, 1, 4096)
    static = plan_for(host, "static", budget, None, 1, 4096)
    uva = lambda: TouchedCopyExperts(host.store, device, static.offloaded_layers)  # noqa: E731
    resident_plan = plan_for(resident, "resident", None, None, 1, 4096)
    every = {"resident": (resident, resident_plan, None, False), "resident-again": (resident, resident_plan, None, False),
             "paged-all": (host, paged_all, None, False), "wisp": (host, paged, None, False),
             "wisp-host": (host, paged, None, True), "static-uva": (host, static, uva, False)}
    unknown = set(names) - set(every)
    if unknown:
        raise SystemExit(f"unknown arms: {', '.join(sorted(unknown))}; choose from {', '.join(every)}")
    return [(name, *every[name]) for name in names]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.identity")
    add_shape_options(parser, layers=8)
    parser.add_argument("--trace", type=Path, required=True)
    parser.add_argument("--budget", type=float, default=4.0, help="GiB for the paged and static arms")
    parser.add_argument("--prompt", type=int, default=512)
    parser.add_argument("--tokens", type=int, default=48)
    parser.add_argument("--seeds", type=int, default=2)
    parser.add_argument("--max-len", type=int, default=4096)
    parser.add_argument("--warmup", action="store_true", help="a 4-token request before the compared ones")
    parser.add_argument("--arms", default="resident,resident-again,paged-all,wisp,wisp-host,static-uva",
                        help="in the order they run; the first is the reference the others are compared with "
                             "(e.g. paged-all,resident,resident-again: is the first arm of a process the odd one?)")
    parser.add_argument("--decodes", default="graphs,dynamic", help="graphs (static on the CPU) and/or dynamic")
    parser.add_argument("--nondeterministic", action="store_true",
                        help="without torch's deterministic algorithms (the engine turns them on by default)")
    parser.add_argument("--no-reduced-precision", action="store_true",
                        help="no reduced-precision (split-K) reductions in bf16/fp16 cuBLAS GEMMs")
    parser.add_argument("--fill-uninitialized", action="store_true",
                        help="NaN in the KV cache, the expert slots and every new tensor: shows reads of unwritten memory")
    parser.add_argument("--attention", default="auto", choices=["auto", "sdpa", "triton"],
                        help="decode attention: the engine's choice, SDPA, or engine.model.decode_attention")
    parser.add_argument("--sdpa", default=None, choices=["math", "flash", "efficient"], help="only this SDPA backend")
    args = parser.parse_args(argv)
    if args.no_reduced_precision:
        torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction = False
        torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction = False
    if args.sdpa:
        for backend in ("math", "flash", "mem_efficient"):
            getattr(torch.backends.cuda, f"enable_{backend}_sdp")(backend.startswith(args.sdpa[:3]))
    device = torch.device(args.device)
    model_args = shape_of(args)
    host = synthetic_weights(model_args, device, experts_on_host=True)
    router = TraceRouter(load_trace(args.trace), device)
    differ, reference_by_decode = False, []
    weights_at_start = weight_sums(host.model)
    decodes = [d if d != "graphs" or device.type == "cuda" else "static" for d in args.decodes.split(",")]
    resident = resident_weights(host, device)  # once: two copies of a whole model's experts may not fit
    for decode in decodes:
        reference, reference_parts = None, None
        for name, weights, plan, provider, host_pager in arms(host, resident, device, int(args.budget * GiB),
                                                               args.arms.split(",")):
            outputs, parts = arm_outputs(weights, plan, device, router, args, decode, provider, host_pager,
                                         hooks=decode == "dynamic")
            now = weight_sums(host.model)
            changed = sorted(name for name, value in now.items() if value != weights_at_start[name])
            if changed:  # a stray write: every later arm computes with other weights than the reference did
                print(json.dumps({"decode": decode, "after_arm": name, "dense_weights_changed": changed[:20]}))
                differ = True
            if reference is None:
                reference, reference_parts = outputs, parts
                reference_by_decode.append(outputs)
                continue
            row = {"decode": decode, "arm": name, "first_difference": first_difference(reference, outputs)}
            if parts is not None:
                row["first_part_difference"] = first_part_difference(reference_parts, parts)
            differ = differ or row["first_difference"] is not None
            print(json.dumps(row), flush=True)
    # Not a failure: the static-shape and dynamic decode paths may legitimately round differently.
    if len(reference_by_decode) == 2:
        print(json.dumps({"decode": "static-shape vs dynamic", "arm": args.arms.split(",")[0],
                          "first_difference": first_difference(*reference_by_decode)}), flush=True)
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
