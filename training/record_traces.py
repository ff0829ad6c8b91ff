"""Record the routing-trace workloads from a freshly trained MoeLM (on the GPU, after training).

Each step is one forward pass as the engine would run it: a prefill step routes every new
prompt token, a decode step one token per running request. The model here has no KV cache,
so it recomputes the whole context and records only the new positions' routing (the same
routing up to float rounding). Tokens are sampled at temperature 0.8 with a fixed seed:
greedy decoding of small models falls into loops, which would overstate locality.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch
from tokenizers import Tokenizer

from engine.traces.format import TraceHeader, save
from engine.traces.recorder import TraceRecorder
from training.chat_samples import render_chat
from training.moe_model import MoeLM
from training.presets import Preset

MAX_NEW_TOKENS = 128
TEMPERATURE = 0.8
STOP_IDS = (0, 2)  # <|endoftext|>, <|im_end|>
TOKENIZER = Path("resources/demo_model/tokenizer.json")


class Session:
    """One request's growing context on the device."""

    def __init__(self, ids: list[int]):
        self.ids = list(ids)
        self.is_done = False


@torch.no_grad()
def route_last(model: MoeLM, ids: list[int], num_new: int, device) -> tuple[list[np.ndarray], torch.Tensor]:
    """Top-k ids of the last num_new positions per layer ([num_new, K] each) and the last logits."""
    with torch.autocast(device.type, dtype=torch.bfloat16, enabled=device.type == "cuda"):
        logits, routers = model(torch.tensor([ids], device=device))
    layer_topk = [r.topk_ids[-num_new:].cpu().numpy() for r in routers]
    return layer_topk, logits[0, -1].float()


def sample(logits: torch.Tensor, generator: torch.Generator) -> int:
    probs = torch.softmax(logits / TEMPERATURE, dim=-1)
    return int(torch.multinomial(probs.cpu(), 1, generator=generator))


def run_requests(model, sessions: list[Session], new_tokens: list[int], recorder: TraceRecorder,
                 generator, device, seq_base: int = 0) -> list[list[int]]:
    """Prefill the last new_tokens[i] tokens of every session in one step, then decode together."""
    outputs = [[] for _ in sessions]
    topks, seq_ids, last = [], [], []
    for i, (session, count) in enumerate(zip(sessions, new_tokens)):
        layer_topk, logits = route_last(model, session.ids, count, device)
        topks.append(layer_topk)
        seq_ids += [seq_base + i] * count
        last.append(logits)
    recorder.record_step([np.concatenate(layers) for layers in zip(*topks)], True, seq_ids)
    for _ in range(MAX_NEW_TOKENS):
        live = [i for i, s in enumerate(sessions) if not s.is_done]
        for i in live:
            token = sample(last[i], generator)
            sessions[i].ids.append(token)
            outputs[i].append(token)
            sessions[i].is_done = token in STOP_IDS or len(outputs[i]) >= MAX_NEW_TOKENS
        live = [i for i in live if not sessions[i].is_done]
        if not live:
            break
        topks = []
        for i in live:
            layer_topk, last[i] = route_last(model, sessions[i].ids, 1, device)
            topks.append(layer_topk)
        recorder.record_step([np.concatenate(layers) for layers in zip(*topks)], False,
                             [seq_base + i for i in live])
    return outputs


def multi_turn(model, tokenizer, turns, recorder, generator, device) -> None:
    session = Session([])
    for turn in turns:
        new = tokenizer.encode(render_chat([{"role": "user", "content": turn}]) + "<|im_start|>assistant\n").ids
        session.ids += new
        session.is_done = False
        run_requests(model, [session], [len(new)], recorder, generator, device)
        if session.ids[-1] != 2:
            session.ids.append(2)
        session.ids += tokenizer.encode("\n").ids


def record_workload(model, preset: Preset, tag: str, prompts: list, tokenizer, device):
    arch = preset.arch
    header = TraceHeader(preset.model_name, arch.model_type, arch.num_layers, arch.num_experts, arch.top_k, tag,
                         {"recorded_by": "training.record_traces", "twin_preset": preset.name,
                          "hidden_size": arch.hidden_size, "temperature": TEMPERATURE,
                          "max_new_tokens": MAX_NEW_TOKENS})
    recorder = TraceRecorder(header)
    generator = torch.Generator().manual_seed(0)
    if tag == "multi_turn":
        multi_turn(model, tokenizer, prompts, recorder, generator, device)
    elif tag == "batched":
        sessions = [Session(tokenizer.encode(p).ids) for p in prompts]
        run_requests(model, sessions, [len(s.ids) for s in sessions], recorder, generator, device)
    else:
        for i, prompt in enumerate(prompts):
            session = Session(tokenizer.encode(prompt).ids)
            run_requests(model, [session], [len(session.ids)], recorder, generator, device, seq_base=i)
    return recorder.to_trace()


def record_all(model: MoeLM, preset: Preset, workloads: dict, out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    tokenizer = Tokenizer.from_file(str(TOKENIZER))
    device = next(model.parameters()).device
    model.eval()
    for tag, prompts in workloads.items():
        trace = record_workload(model, preset, tag, prompts, tokenizer, device)
        save(trace, out / f"{preset.name}_{tag}.npz")
        print(f"trace {preset.name} {tag}: {trace.num_steps} steps, {int(trace.num_tokens.sum())} tokens", flush=True)
