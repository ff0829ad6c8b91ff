import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest
import torch

from training import corpus
from training.chat_samples import render_chat
from training.export import save_checkpoint
from training.presets import PRESETS
from training.train import train

transformers = pytest.importorskip("transformers")
DEMO = Path(__file__).resolve().parents[2] / "resources" / "demo_model"
TOY = PRESETS["toy"]


def toy_data(vocab: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)
    pattern = rng.integers(3, vocab, 50)
    stream = np.tile(pattern, 40).astype(np.uint16)  # learnable: a repeated sequence
    return {"train": stream, "heldout_code": stream[:400].copy()}


@pytest.mark.parametrize("model_type,norm_topk_prob", [("qwen3_moe", True), ("olmoe", False), ("mixtral", True)])
def test_toy_training_saves_a_checkpoint_transformers_reproduces(tmp_path, model_type, norm_topk_prob):
    arch = dataclasses.replace(TOY.arch, model_type=model_type, norm_topk_prob=norm_topk_prob, vocab_size=128)
    preset = dataclasses.replace(TOY, arch=arch, train=dataclasses.replace(TOY.train, max_steps=6, lr=1e-2))
    model, log = train(preset, toy_data(arch.vocab_size), torch.device("cpu"))
    assert log.evals[-1]["heldout_code"] < log.evals[0]["heldout_code"]
    save_checkpoint(model, tmp_path)
    with torch.no_grad():
        for param in model.parameters():
            param.copy_(param.to(torch.bfloat16).float())  # what the bf16 checkpoint holds
    hf = transformers.AutoModelForCausalLM.from_pretrained(tmp_path, dtype=torch.float32).eval()
    ids = torch.randint(0, arch.vocab_size, (2, 20), generator=torch.Generator().manual_seed(1))
    model.eval()
    with torch.no_grad():
        ours, routers = model(ids)
        theirs = hf(ids, output_router_logits=True)
    torch.testing.assert_close(ours, theirs.logits, atol=1e-4, rtol=1e-4)
    torch.testing.assert_close(routers[0].logits, theirs.router_logits[0], atol=1e-5, rtol=1e-5)


def test_checkpoint_uses_per_expert_keys(tmp_path):
    from safetensors import safe_open

    model, _ = train(TOY, toy_data(TOY.arch.vocab_size), torch.device("cpu"))
    save_checkpoint(model, tmp_path)
    keys = set(safe_open(str(tmp_path / "model.safetensors"), "pt").keys())
    assert "model.layers.1.mlp.experts.7.down_proj.weight" in keys
    assert "model.layers.0.mlp.gate.weight" in keys and "lm_head.weight" in keys


def test_heldout_split_depends_only_on_the_file_key():
    a = corpus.SourceFile("stdlib", "json/decoder.py", "x")
    b = corpus.SourceFile("stdlib", "json/decoder.py", "other text")
    assert a.is_heldout == b.is_heldout
    keys = [corpus.SourceFile("stdlib", f"m{i}.py", "").is_heldout for i in range(2000)]
    assert 0.01 < np.mean(keys) < 0.06


def test_chat_samples_render_like_the_shipped_chat_template():
    tokenizer = transformers.AutoTokenizer.from_pretrained(DEMO)
    messages = [{"role": "system", "content": "s"}, {"role": "user", "content": "u"},
                {"role": "assistant", "content": "a"}]
    assert tokenizer.apply_chat_template(messages, tokenize=False) == render_chat(messages)
    assert [tokenizer.convert_tokens_to_ids(t) for t in ("<|endoftext|>", "<|im_start|>", "<|im_end|>")] == [0, 1, 2]


def test_demo_model_folder_is_small_and_consistent():
    size = sum(f.stat().st_size for f in DEMO.iterdir())
    assert size < 40 * 1024 * 1024
    config = json.loads((DEMO / "config.json").read_text())
    assert config["model_type"] == "qwen3_moe" and config["vocab_size"] == 4096


def greedy(model, tokenizer, text: str, max_new_tokens: int) -> str:
    ids = tokenizer(text, return_tensors="pt", add_special_tokens=False).input_ids
    out = model.generate(ids, max_new_tokens=max_new_tokens, do_sample=False)
    return tokenizer.decode(out[0, ids.shape[1]:])


def test_demo_model_continues_code_and_answers_in_chat_format():
    tokenizer = transformers.AutoTokenizer.from_pretrained(DEMO)
    model = transformers.AutoModelForCausalLM.from_pretrained(DEMO, dtype=torch.float32).eval()
    code = greedy(model, tokenizer, "def fib(n):", 30)
    assert "\n    " in code  # an indented body
    prompt = tokenizer.apply_chat_template([{"role": "user", "content": "What is the `json` module for?"}],
                                           add_generation_prompt=True, tokenize=False)
    answer = greedy(model, tokenizer, prompt, 40)
    assert answer.endswith("<|im_end|>") and len(answer) > len("<|im_end|>")
