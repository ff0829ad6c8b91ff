"""Train a preset on the tokenized corpus and write an HF checkpoint plus a loss log.

    python -m training.train --out DIR --preset demo|qwen3-twin|olmoe-twin|mixtral-twin \
        [--data .corpus/tokens.npz] [--time-budget S] [--max-steps N] [--traces DIR]

Runs until max_steps or the time budget, whichever comes first; the learning-rate schedule
(linear warm-up, cosine to min_lr_ratio) follows progress = max(step / max_steps,
elapsed / time_budget), so a run always finishes its decay. Batches are seeded; with a
budget the number of steps depends on the GPU's speed (the log records it). The checkpoint
is the one with the lowest held-out code loss among the evaluations.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import time
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from training.export import save_checkpoint
from training.moe_model import MoeLM, init_weights, load_balancing_loss
from training.presets import PRESETS, Preset, TrainSpec


class Batches:
    """Random windows of a token stream; seeded, so a run sees the same batches every time."""

    def __init__(self, tokens: np.ndarray, spec: TrainSpec, seed: int, device: torch.device):
        self.tokens = torch.from_numpy(tokens.astype(np.int64))
        self.spec, self.device = spec, device
        self.rng = np.random.default_rng(seed)

    def next(self) -> torch.Tensor:
        starts = self.rng.integers(0, self.tokens.numel() - self.spec.seq_len - 1, self.spec.batch_size)
        rows = torch.stack([self.tokens[s: s + self.spec.seq_len + 1] for s in starts])
        return rows.to(self.device, non_blocking=True)  # [B, S+1]


def learning_rate(spec: TrainSpec, step: int, progress: float) -> float:
    if step < spec.warmup_steps:
        return spec.lr * (step + 1) / spec.warmup_steps
    cosine = 0.5 * (1 + math.cos(math.pi * min(progress, 1.0)))
    return spec.lr * (spec.min_lr_ratio + (1 - spec.min_lr_ratio) * cosine)


def autocast(device: torch.device):
    return torch.autocast(device.type, dtype=torch.bfloat16, enabled=device.type == "cuda")


def lm_loss(model: MoeLM, rows: torch.Tensor) -> tuple[torch.Tensor, list]:
    logits, routers = model(rows[:, :-1])  # [B, S, V]
    loss = F.cross_entropy(logits.float().reshape(-1, logits.shape[-1]), rows[:, 1:].reshape(-1))
    return loss, routers


@torch.no_grad()
def evaluate(model: MoeLM, tokens: np.ndarray, spec: TrainSpec, device: torch.device) -> float:
    batches = Batches(tokens, spec, seed=1234, device=device)  # same windows at every evaluation
    model.eval()
    with autocast(device):
        losses = [lm_loss(model, batches.next())[0].item() for _ in range(spec.eval_batches)]
    model.train()
    return float(np.mean(losses))


def make_optimizer(model: MoeLM, spec: TrainSpec) -> torch.optim.Optimizer:
    decay = [p for n, p in model.named_parameters() if p.ndim >= 2 and "embed" not in n]
    no_decay = [p for n, p in model.named_parameters() if p.ndim < 2 or "embed" in n]
    groups = [{"params": decay, "weight_decay": spec.weight_decay}, {"params": no_decay, "weight_decay": 0.0}]
    return torch.optim.AdamW(groups, lr=spec.lr, betas=(0.9, 0.95), fused=torch.cuda.is_available())


@dataclasses.dataclass
class RunLog:
    preset: str
    spec: dict
    arch: dict
    num_params: int
    steps: list = dataclasses.field(default_factory=list)
    evals: list = dataclasses.field(default_factory=list)
    best: dict = dataclasses.field(default_factory=dict)

    def save(self, path: Path) -> None:
        path.write_text(json.dumps(dataclasses.asdict(self), indent=1) + "\n")


def run_evaluation(model, data, spec, device, step, elapsed, log: RunLog) -> bool:
    """Evaluate on the held-out streams; returns True when this is the best so far."""
    entry = {"step": step, "elapsed_s": round(elapsed, 1)}
    for name in ("heldout_code", "heldout_chat"):
        if name in data and data[name].size > spec.seq_len + 1:
            entry[name] = round(evaluate(model, data[name], spec, device), 4)
    log.evals.append(entry)
    print(json.dumps(entry), flush=True)
    score = entry.get("heldout_code", -step)
    is_best = not log.best or score < log.best.get("heldout_code", float("inf"))
    if is_best:
        log.best = entry
    return is_best


def train_step(model: MoeLM, optimizer, rows: torch.Tensor, spec: TrainSpec, lr: float, device):
    for group in optimizer.param_groups:
        group["lr"] = lr
    with autocast(device):
        loss, routers = lm_loss(model, rows)
        aux = load_balancing_loss(routers, model.arch.num_experts)
    (loss + spec.aux_loss_coef * aux).backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), spec.grad_clip)
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    return loss, aux


def train(preset: Preset, data: dict[str, np.ndarray], device: torch.device, log_path: Path | None = None):
    spec = preset.train
    torch.manual_seed(spec.seed)
    model = MoeLM(preset.arch, spec.is_checkpointed)
    init_weights(model, spec.seed)
    model.to(device).train()
    optimizer = make_optimizer(model, spec)
    batches = Batches(data["train"], spec, spec.seed, device)
    log = RunLog(preset.name, dataclasses.asdict(spec), dataclasses.asdict(preset.arch),
                 sum(p.numel() for p in model.parameters()))
    best_state, start, step = None, time.time(), 0
    while True:
        elapsed = time.time() - start
        progress = max(step / spec.max_steps, elapsed / spec.time_budget_s)
        is_last = progress >= 1.0
        if step % spec.eval_every == 0 or is_last:
            if run_evaluation(model, data, spec, device, step, elapsed, log):
                best_state = {k: v.detach().to("cpu", copy=True) for k, v in model.state_dict().items()}
            if log_path:
                log.save(log_path)
        if is_last:
            break
        lr = learning_rate(spec, step, progress)
        loss, aux = train_step(model, optimizer, batches.next(), spec, lr, device)
        if step % 25 == 0:
            log.steps.append({"step": step, "loss": round(loss.item(), 4), "aux": round(aux.item(), 4),
                              "lr": lr, "elapsed_s": round(time.time() - start, 1),
                              "tokens": (step + 1) * spec.batch_size * spec.seq_len})
        step += 1
    model.load_state_dict(best_state)
    return model, log


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, type=Path)
    parser.add_argument("--preset", required=True, choices=sorted(PRESETS))
    parser.add_argument("--data", type=Path, default=Path(".corpus/tokens.npz"))
    parser.add_argument("--time-budget", type=float, help="seconds; overrides the preset's")
    parser.add_argument("--max-steps", type=int, help="overrides the preset's")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--traces", type=Path, help="record the routing-trace workloads into this folder")
    parser.add_argument("--workloads", type=Path, default=Path("resources/traces/workloads.json"))
    return parser.parse_args()


def main() -> None:
    args = parse_args()
    preset = PRESETS[args.preset]
    overrides = {k: v for k, v in {"time_budget_s": args.time_budget, "max_steps": args.max_steps}.items() if v}
    preset = dataclasses.replace(preset, train=dataclasses.replace(preset.train, **overrides))
    data = dict(np.load(args.data))
    args.out.mkdir(parents=True, exist_ok=True)
    device = torch.device(args.device)
    model, log = train(preset, data, device, args.out / "train_log.json")
    log.save(args.out / "train_log.json")
    save_checkpoint(model, args.out)
    if args.traces:
        from training.record_traces import record_all
        record_all(model, preset, json.loads(args.workloads.read_text()), args.traces)


if __name__ == "__main__":
    main()
