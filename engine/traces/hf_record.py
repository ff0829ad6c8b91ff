"""Record a routing trace with Hugging Face transformers (what `wisp trace record` runs for now).

Each prompt is one request, run alone: a prefill step, then greedy decode steps with the KV
cache; each forward's expert ids are read from the routers' outputs (RouterTap); the recording
itself is the engine's (engine.traces.recorder). Imports torch/transformers lazily, so the traces package stays
torch-free for callers that only read traces.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from engine.errors import ModelFormatError
from engine.traces.format import Trace, TraceHeader
from engine.traces.recorder import TraceRecorder


def read_prompts(path: Path) -> list[str | list[dict]]:
    """A JSON list (as resources/traces/workloads.json's lists), JSONL of {"prompt": str} or
    {"messages": [...]}, or plain text with one prompt per line."""
    text = path.read_text(encoding="utf-8")
    if text.lstrip().startswith("["):
        return json.loads(text)
    prompts = []
    for line in filter(str.strip, text.splitlines()):
        if line.lstrip().startswith("{"):
            item = json.loads(line)
            prompts.append(item.get("messages") or item["prompt"])
        else:
            prompts.append(line.replace("\\n", "\n"))
    return prompts


def moe_topology(config, num_moe_layers: int) -> tuple[int, int, int]:
    num_experts = getattr(config, "num_experts", None) or getattr(config, "num_local_experts", None)
    if not num_experts or not num_moe_layers:
        raise ModelFormatError(f"{config.model_type}: config.json names no experts; not an MoE model")
    return num_moe_layers, int(num_experts), int(config.num_experts_per_tok)


class RouterTap:
    """The expert ids each MoE layer's router chose in the last forward, in layer order. transformers' routers
    return (logits, weights, ids): the ids are the model's own choice, whatever its scoring (a softmax top-k, or
    DeepSeek's biased, grouped top-k that the logits alone do not give). A trace lists MoE layers only."""

    def __init__(self, model):
        self.routers = [module for name, module in model.named_modules() if name.endswith("mlp.gate")]
        self.ids: dict[int, np.ndarray] = {}
        for index, router in enumerate(self.routers):
            router.register_forward_hook(lambda module, inputs, output, index=index: self.take(index, output))

    def take(self, index: int, output) -> None:
        self.ids[index] = output[2].cpu().numpy()  # [T, K]

    def layer_ids(self) -> list[np.ndarray]:
        return [self.ids.pop(index) for index in range(len(self.routers))]


def record_request(model, tap: RouterTap, input_ids, recorder: TraceRecorder, seq_id: int, max_tokens: int,
                   stop_ids: set) -> list[int]:
    import torch

    generated, past = [], None
    step_input, is_prefill = input_ids, True
    with torch.no_grad():
        for _ in range(max_tokens):
            out = model(input_ids=step_input, past_key_values=past, use_cache=True)
            recorder.record_step(tap.layer_ids(), is_prefill, [seq_id] * step_input.shape[1])
            token = int(out.logits[0, -1].argmax())
            generated.append(token)
            if token in stop_ids:
                break
            past, step_input, is_prefill = out.past_key_values, torch.tensor([[token]]), False
    return generated


def record(model_dir: Path, prompts: list, workload: str, max_tokens: int = 64) -> Trace:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32).eval()
    tap = RouterTap(model)
    num_layers, num_experts, top_k = moe_topology(model.config, len(tap.routers))
    header = TraceHeader(model_dir.name, model.config.model_type, num_layers, num_experts, top_k, workload,
                         {"recorded_by": "wisp trace record (transformers, greedy)", "max_tokens": max_tokens})
    recorder = TraceRecorder(header)
    eos = model.generation_config.eos_token_id
    stop_ids = set(eos if isinstance(eos, list) else [eos] if eos is not None else [])
    for seq_id, prompt in enumerate(prompts):
        text = prompt if isinstance(prompt, str) else tokenizer.apply_chat_template(
            prompt, add_generation_prompt=True, tokenize=False)
        input_ids = tokenizer(text, return_tensors="pt", add_special_tokens=False).input_ids
        record_request(model, tap, input_ids, recorder, seq_id, max_tokens, stop_ids)
    return recorder.to_trace()
