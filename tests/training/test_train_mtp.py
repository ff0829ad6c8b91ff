"""training.train_mtp: a draft layer trained on a frozen toy model learns, and the file it writes is the layer the
engine runs (its logits over a prompt equal the training module's)."""

import dataclasses
import json

import numpy as np
import pytest
import torch

from tests.tiny_models import VOCAB, save_tokenizer
from training.export import save_checkpoint
from training.mtp_model import draft_logits
from training.presets import MTP_PRESETS, PRESETS
from training.train import train
from training.train_mtp import DRAFT_FILE, save_draft_layer, train_mtp

pytest.importorskip("transformers")
TOY = PRESETS["toy"]


def toy_data(vocab: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)
    stream = rng.integers(3, vocab, 3000).astype(np.uint16)  # the draft must learn what follows two tokens on
    return {"train": np.tile(stream[:60], 50), "heldout_code": np.tile(stream[:60], 8)}


def toy_model_and_draft(tmp_path):
    arch = dataclasses.replace(TOY.arch, vocab_size=VOCAB)
    preset = dataclasses.replace(TOY, arch=arch, train=dataclasses.replace(TOY.train, max_steps=6, lr=1e-2))
    data = toy_data(arch.vocab_size)
    model, _ = train(preset, data, torch.device("cpu"))
    model.eval()
    spec = dataclasses.replace(MTP_PRESETS["toy"], max_steps=30, lr=1e-2, eval_every=10)
    mtp, log = train_mtp(model, data, spec)
    return model, mtp, log


def test_the_draft_layer_learns_and_the_engine_reads_it(tmp_path):
    from tests.runtime.test_mtp_layer import TOKENS, wisp_logits

    model, mtp, log = toy_model_and_draft(tmp_path)
    assert log["best"]["heldout_code"] < log["evals"][0]["heldout_code"]
    assert all(not p.requires_grad for p in model.parameters())  # the model stayed frozen
    save_checkpoint(model, tmp_path)
    save_tokenizer(tmp_path)
    save_draft_layer(mtp, tmp_path)
    assert json.loads((tmp_path / "config.json").read_text())["mtp_num_hidden_layers"] == 1
    with torch.no_grad():
        for param in [*model.parameters(), *mtp.parameters()]:
            param.copy_(param.to(torch.bfloat16).float())  # what the bf16 files hold
        mtp.eval()
        ours = draft_logits(mtp, model, torch.tensor([TOKENS]))[0]  # positions 0..T-3
    engine = wisp_logits(tmp_path)  # positions 0..T-2
    assert (tmp_path / DRAFT_FILE).exists()
    torch.testing.assert_close(engine[:-1], ours, atol=1e-4, rtol=1e-4)
