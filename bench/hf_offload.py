"""The Hugging Face arm of `wisp bench`: transformers + accelerate offload of the same shape (random bf16
weights), the way people run a model that does not fit: `device_map` inferred under `max_memory` = the budget,
the layers that do not fit stay in host memory and accelerate copies their weights to the GPU at every
forward. Greedy `generate` on a random prompt; no traces (transformers routes with its own router).

    python -m bench.hf_offload --shape qwen3-30b-a3b --layers 24 --budgets 12,22 --out DIR

A whole copy of the model lives in host memory, so on the H200 host the Qwen3 shape runs cut to its first
layers (--layers); per-token time scales with the offloaded layers. Writes DIR/hf-offload-<shape>-l<L>.json."""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import torch

from engine.alloc.memory_plan import GiB
from engine.bench.shapes import add_shape_options, shape_of
from engine.system.hardware import device_name
from engine.model.args import ModelArgs

ACTIVATION_RESERVE = GiB  # of the budget kept free for activations and the KV cache transformers grows


def hf_config(args: ModelArgs):
    """The transformers config of a bench shape (qwen3_moe, olmoe, mixtral)."""
    from transformers import MixtralConfig, OlmoeConfig, Qwen3MoeConfig

    common = dict(vocab_size=args.vocab_size, hidden_size=args.hidden_size, num_hidden_layers=args.num_hidden_layers,
                  num_attention_heads=args.num_attention_heads, num_key_value_heads=args.num_key_value_heads,
                  rms_norm_eps=args.rms_norm_eps, rope_theta=args.rope_theta, tie_word_embeddings=False,
                  max_position_embeddings=args.max_position_embeddings, num_experts_per_tok=args.num_experts_per_tok)
    if args.model_type == "qwen3_moe":
        return Qwen3MoeConfig(**common, head_dim=args.head_dim, num_experts=args.num_experts,
                              moe_intermediate_size=args.moe_intermediate_size,
                              norm_topk_prob=args.router.norm_topk_prob,
                              intermediate_size=args.moe_intermediate_size * args.num_experts_per_tok)
    if args.model_type == "olmoe":
        return OlmoeConfig(**common, num_experts=args.num_experts, intermediate_size=args.moe_intermediate_size)
    if args.model_type == "mixtral":
        return MixtralConfig(**common, num_local_experts=args.num_experts, intermediate_size=args.moe_intermediate_size)
    raise ValueError(f"no transformers config for {args.model_type}")


def random_model(args: ModelArgs, fill_device: torch.device):
    """The model in host memory with N(0, 0.02) bf16 weights drawn on fill_device (the CPU is too slow for 57 GiB)."""
    from transformers import AutoModelForCausalLM

    config = hf_config(args)
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(config, dtype=torch.bfloat16)
    model.to_empty(device="cpu")
    generator = torch.Generator(device=fill_device).manual_seed(0)
    with torch.no_grad():
        for name, param in model.named_parameters():
            if name.endswith("norm.weight"):
                param.fill_(1.0)
            else:
                param.copy_(torch.randn(param.shape, generator=generator, dtype=param.dtype, device=fill_device) * 0.02)
        rotary = model.model.rotary_emb
        model.model.rotary_emb = type(rotary)(config=config)  # its inv_freq buffer was left empty by to_empty
    return model.eval()


def placement(model, budget_bytes: int, gpu: int = 0) -> dict:
    """accelerate's device_map under the budget (whole decoder layers): module name -> gpu index or "cpu"."""
    from accelerate import infer_auto_device_map

    layer_class = type(model.model.layers[0]).__name__
    return infer_auto_device_map(model, max_memory={gpu: budget_bytes - ACTIVATION_RESERVE, "cpu": 10**15},
                                 no_split_module_classes=[layer_class], dtype=torch.bfloat16)


def offload(model, budget_bytes: int, device: torch.device):
    """-> (the dispatched model, modules kept on the host); on the CPU the model as it is."""
    if device.type != "cuda":
        return model, 0
    from accelerate import dispatch_model

    device_map = placement(model, budget_bytes, device.index or 0)
    return dispatch_model(model, device_map=device_map), sum(1 for where in device_map.values() if where == "cpu")


def timed_generate(model, ids: torch.Tensor, tokens: int, device: torch.device) -> float:
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    start = time.perf_counter()
    with torch.inference_mode():
        out = model.generate(ids, max_new_tokens=tokens, min_new_tokens=tokens, do_sample=False,
                             pad_token_id=0, eos_token_id=None)
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    assert out.shape[1] == ids.shape[1] + tokens
    return time.perf_counter() - start


def measure(args: ModelArgs, budget_gib: float, prompt: int, tokens: int, device: torch.device) -> dict:
    model = random_model(args, device)
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    model, host_modules = offload(model, int(budget_gib * GiB), device)
    first = model.get_input_embeddings().weight.device if device.type == "cuda" else device
    ids = torch.randint(0, args.vocab_size, (1, prompt), generator=torch.Generator().manual_seed(0)).to(first)
    timed_generate(model, ids, 2, device)  # warm-up
    ttft = timed_generate(model, ids, 1, device)
    total = timed_generate(model, ids, tokens, device)
    decode_s = (total - ttft) / (tokens - 1)
    peak = torch.cuda.max_memory_allocated(device) / GiB if device.type == "cuda" else None
    del model
    return {"arm": "hf-accelerate", "budget_gib": budget_gib, "layers": args.num_hidden_layers,
            "host_modules": host_modules, "prompt": prompt, "num_tokens": tokens, "ttft_s": ttft,
            "s_per_token": decode_s, "decode_tok_s": 1.0 / decode_s, "peak_gib": peak}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.hf_offload")
    add_shape_options(parser)
    parser.add_argument("--budgets", default="12,22")
    parser.add_argument("--prompt", type=int, default=512)
    parser.add_argument("--tokens", type=int, default=8)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    device = torch.device(args.device)
    model_args = shape_of(args)
    import transformers

    facts = {"shape": args.shape, "layers": model_args.num_hidden_layers, "transformers": transformers.__version__,
             "torch": torch.__version__, "gpu": device_name(device)}
    rows = []
    for budget in (float(b) for b in args.budgets.split(",")):
        try:
            rows.append(measure(model_args, budget, args.prompt, args.tokens, device))
        except Exception as err:  # noqa: BLE001 - a benchmark row: the next budget still runs
            rows.append({"arm": "hf-accelerate", "budget_gib": budget, "error": f"{type(err).__name__}: {err}"})
        print(json.dumps(rows[-1]), flush=True)
    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / f"hf-offload-{args.shape}-l{model_args.num_hidden_layers}.json"
    path.write_text(json.dumps({"facts": facts, "rows": rows}))
    print(f"results: {path}")


if __name__ == "__main__":
    main()
