"""Train a draft (MTP) layer for a trained model, the model frozen, and write it beside the model as mtp.safetensors.

    python -m training.train_mtp --model resources/demo_model [--data .corpus/tokens.npz] [--out DIR]
        [--preset demo] [--time-budget S] [--max-steps N] [--threads N]

The objective is DeepSeek-V3's / Qwen3.5's: from the frozen model's final hidden state at position t and the
embedding of token t+1, predict token t+2 (cross-entropy through the model's own frozen lm_head). Only the layer
(two input norms, fc, one MoE decoder layer, the output norm) trains. Without --data's file the corpus is rebuilt
from the installed packages (training.corpus, training.dataset). The learning-rate schedule follows
training.train's (progress = max(step / max_steps, elapsed / time_budget)). Evaluations report the held-out loss
and how often the draft's argmax equals the model's own greedy token at t+2 (the first draft's greedy acceptance).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import time
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from safetensors.torch import save_file

from training.hf_import import load_moe_lm
from training.moe_model import MoeLM
from training.mtp_model import MtpLayer, draft_logits, init_from_model, mtp_state_dict
from training.presets import MTP_PRESETS, TrainSpec
from training.train import Batches, learning_rate

DRAFT_FILE = "mtp.safetensors"


def load_tokens(path: Path, model_folder: Path) -> dict[str, np.ndarray]:
    if path.exists():
        return dict(np.load(path))
    from tokenizers import Tokenizer

    from training import corpus, dataset

    tokenizer = Tokenizer.from_file(str(model_folder / "tokenizer.json"))
    arrays = dataset.build(tokenizer, corpus.collect())
    path.parent.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(path, **arrays)
    return arrays


def mtp_loss(mtp: MtpLayer, model: MoeLM, rows: torch.Tensor) -> torch.Tensor:
    logits = draft_logits(mtp, model, rows)  # [B, S-1, V]
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), rows[:, 2:].reshape(-1))


@torch.no_grad()
def evaluate(mtp: MtpLayer, model: MoeLM, tokens: np.ndarray, spec: TrainSpec) -> dict[str, float]:
    """Held-out loss, and the share of positions where the draft's argmax is the model's greedy token at t+2."""
    batches = Batches(tokens, spec, seed=1234, device=torch.device("cpu"))  # the same windows every time
    mtp.eval()
    losses, agreed, total = [], 0, 0
    for _ in range(spec.eval_batches):
        rows = batches.next()
        logits = draft_logits(mtp, model, rows)  # [B, S-1, V]
        losses.append(F.cross_entropy(logits.reshape(-1, logits.shape[-1]), rows[:, 2:].reshape(-1)).item())
        model_next, _ = model(rows[:, 1:-1])  # [B, S-1, V]: at t+1, the model's prediction of t+2
        agreed += int((logits.argmax(-1) == model_next.argmax(-1)).sum())
        total += logits.shape[0] * logits.shape[1]
    mtp.train()
    return {"heldout_code": round(float(np.mean(losses)), 4), "agrees_with_model": round(agreed / total, 4)}


def make_optimizer(mtp: MtpLayer, spec: TrainSpec) -> torch.optim.Optimizer:
    decay = [p for p in mtp.parameters() if p.ndim >= 2]
    no_decay = [p for p in mtp.parameters() if p.ndim < 2]
    groups = [{"params": decay, "weight_decay": spec.weight_decay}, {"params": no_decay, "weight_decay": 0.0}]
    return torch.optim.AdamW(groups, lr=spec.lr, betas=(0.9, 0.95))


def train_mtp(model: MoeLM, data: dict[str, np.ndarray], spec: TrainSpec) -> tuple[MtpLayer, dict]:
    """The trained layer (the state of its best held-out evaluation) and the run's log."""
    torch.manual_seed(spec.seed)
    for param in model.parameters():
        param.requires_grad_(False)
    mtp = MtpLayer(model)
    init_from_model(mtp, model, spec.seed)
    optimizer = make_optimizer(mtp, spec)
    batches = Batches(data["train"], spec, spec.seed, torch.device("cpu"))
    log = {"spec": dataclasses.asdict(spec), "num_params": sum(p.numel() for p in mtp.parameters()),
           "steps": [], "evals": [], "best": {}}
    best_state, start, step = None, time.time(), 0
    while True:
        elapsed = time.time() - start
        progress = max(step / spec.max_steps, elapsed / spec.time_budget_s)
        is_last = progress >= 1.0
        if step % spec.eval_every == 0 or is_last:
            entry = {"step": step, "elapsed_s": round(elapsed, 1)} | evaluate(mtp, model, data["heldout_code"], spec)
            log["evals"].append(entry)
            print(json.dumps(entry), flush=True)
            if not log["best"] or entry["heldout_code"] < log["best"]["heldout_code"]:
                log["best"], best_state = entry, {k: v.clone() for k, v in mtp.state_dict().items()}
        if is_last:
            break
        for group in optimizer.param_groups:
            group["lr"] = learning_rate(spec, step, progress)
        loss = mtp_loss(mtp, model, batches.next())
        loss.backward()
        torch.nn.utils.clip_grad_norm_(mtp.parameters(), spec.grad_clip)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        if step % 25 == 0:
            log["steps"].append({"step": step, "loss": round(loss.item(), 4), "elapsed_s": round(time.time() - start, 1),
                                 "tokens": (step + 1) * spec.batch_size * (spec.seq_len - 1)})
        step += 1
    mtp.load_state_dict(best_state)
    return mtp, log


def save_draft_layer(mtp: MtpLayer, out: Path, dtype: torch.dtype = torch.bfloat16) -> None:
    """mtp.safetensors beside the model's files, and `mtp_num_hidden_layers: 1` in its config.json."""
    save_file(mtp_state_dict(mtp, dtype), str(out / DRAFT_FILE), metadata={"format": "pt"})
    config_path = out / "config.json"
    config = json.loads(config_path.read_text())
    if config.get("mtp_num_hidden_layers") != 1:
        config["mtp_num_hidden_layers"] = 1
        config_path.write_text(json.dumps(config, indent=2) + "\n")


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", type=Path, default=Path("resources/demo_model"))
    parser.add_argument("--out", type=Path, help="where mtp.safetensors goes (default: the model's folder)")
    parser.add_argument("--preset", default="demo", choices=sorted(MTP_PRESETS))
    parser.add_argument("--data", type=Path, default=Path(".corpus/tokens.npz"))
    parser.add_argument("--time-budget", type=float, help="seconds; overrides the preset's")
    parser.add_argument("--max-steps", type=int, help="overrides the preset's")
    parser.add_argument("--threads", type=int, help="torch CPU threads (1 is fastest on a machine others share)")
    return parser.parse_args()


def main() -> None:
    args = parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    overrides = {k: v for k, v in {"time_budget_s": args.time_budget, "max_steps": args.max_steps}.items() if v}
    spec = dataclasses.replace(MTP_PRESETS[args.preset], **overrides)
    out = args.out or args.model
    data = load_tokens(args.data, args.model)
    model = load_moe_lm(args.model)
    mtp, log = train_mtp(model, data, spec)
    out.mkdir(parents=True, exist_ok=True)
    if out != args.model:
        for name in ("config.json",):
            (out / name).write_text((args.model / name).read_text())
    save_draft_layer(mtp, out)
    (out / "mtp_train_log.json").write_text(json.dumps(log, indent=1) + "\n")


if __name__ == "__main__":
    main()
